//! `ferrovirt upload-proxy`: the public HTTPS endpoint of uploads (CDI's `cdi-uploadproxy`).
//! Tokens are checked with the issuer's public key; upload servers are reached with mTLS.
//!
//! With `--in-cluster`, as `deploy/operators/uploadproxy.yaml` runs it, everything comes
//! from CDI's namespace: the signing key of Secret `cdi-api-signing-key`, the upload CAs'
//! Secrets (`upload_cas.rs`), and each upload target from its PVC, reached through its
//! Service as CDI's proxy does; its own CA is published in ConfigMap
//! `cdi-uploadproxy-signer-bundle`. Otherwise the certificates and keys are files and the
//! upload servers come from `--upload-server` flags.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use importer::ContentType;
use tokio::net::TcpListener;
use uploadproxy::tls::{self, Identity};
use uploadproxy::{
    StaticResolver, UploadProxy, UploadProxyConfig, UploadTarget, UploadTokenIssuer,
    UploadTokenValidator,
};

#[derive(clap::Args)]
pub struct UploadProxyArgs {
    /// Address to serve HTTPS on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: String,
    /// Take the keys, the CAs and the upload targets from the cluster (CDI's namespace).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "token_public_key", "token_key_dir", "client_cert", "client_key", "server_ca", "upload_servers"])]
    in_cluster: bool,
    /// CDI's namespace, with `--in-cluster`.
    #[arg(long, env = "POD_NAMESPACE", default_value = "cdi")]
    namespace: String,
    /// The Service in front of the proxy, with `--in-cluster` (its certificate names it).
    #[arg(long, default_value = "cdi-uploadproxy")]
    service: String,
    /// More names the serving certificate holds, with `--in-cluster` (an ingress's host).
    #[arg(long = "server-name", value_name = "NAME")]
    server_names: Vec<String>,
    /// The proxy's serving certificate (PEM, with its chain).
    #[arg(long, required_unless_present = "in_cluster")]
    tls_cert: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long, required_unless_present = "in_cluster")]
    tls_key: Option<PathBuf>,
    /// The token issuer's public key (PEM), as the API server publishes it.
    #[arg(
        long,
        conflicts_with = "token_key_dir",
        required_unless_present_any = ["token_key_dir", "in_cluster"]
    )]
    token_public_key: Option<PathBuf>,
    /// Or the directory holding the issuer's signing key (standalone: the data dir).
    #[arg(long)]
    token_key_dir: Option<PathBuf>,
    /// The client certificate presented to upload servers (PEM).
    #[arg(long, required_unless_present = "in_cluster")]
    client_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, required_unless_present = "in_cluster")]
    client_key: Option<PathBuf>,
    /// The CA that signs upload servers' certificates (PEM).
    #[arg(long, required_unless_present = "in_cluster")]
    server_ca: Option<PathBuf>,
    /// An upload server: NAMESPACE/PVC=https://host:port, with `,archive` for a PVC whose
    /// content type is archive. Repeat for more.
    #[arg(long = "upload-server", value_name = "NAMESPACE/PVC=URL")]
    upload_servers: Vec<String>,
    /// How long to wait for a PVC's upload server to be ready before answering 503.
    #[arg(long, default_value_t = 10)]
    ready_timeout_secs: u64,
}

pub async fn run(args: UploadProxyArgs) -> Result<()> {
    let ready_timeout = Duration::from_secs(args.ready_timeout_secs);
    let (proxy, serving) = if args.in_cluster {
        from_cluster(&args, ready_timeout).await?
    } else {
        from_files(&args, ready_timeout)?
    };
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    println!("upload proxy listening on {}", listener.local_addr()?);
    let serving = proxy.serve(listener, serving);
    tokio::select! {
        _ = serving => bail!("the upload proxy stopped"),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// A flag's path, which clap requires unless `--in-cluster` is given.
fn given<'a>(path: &'a Option<PathBuf>, flag: &str) -> Result<&'a PathBuf> {
    path.as_ref()
        .with_context(|| format!("--{flag} is required without --in-cluster"))
}

/// The proxy of files and `--upload-server` flags, and its serving configuration.
fn from_files(
    args: &UploadProxyArgs,
    ready_timeout: Duration,
) -> Result<(Arc<UploadProxy>, Arc<rustls::ServerConfig>)> {
    let validator = match (&args.token_public_key, &args.token_key_dir) {
        (Some(path), _) => {
            let pem = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            UploadTokenValidator::from_public_key_pem(&pem)?
        }
        (None, Some(dir)) => UploadTokenIssuer::load_or_create(dir)?.validator(),
        (None, None) => bail!("--token-public-key or --token-key-dir is required"),
    };
    let resolver = Arc::new(StaticResolver::new());
    for flag in &args.upload_servers {
        let (namespace, pvc, target) = parse_upload_server(flag)?;
        resolver.insert(&namespace, &pvc, target);
    }
    let client_identity = Identity::from_files(
        given(&args.client_cert, "client-cert")?,
        given(&args.client_key, "client-key")?,
    )?;
    let server_roots = tls::roots_from_file(given(&args.server_ca, "server-ca")?)?;
    let proxy = UploadProxy::new(UploadProxyConfig {
        validator,
        resolver,
        upstream_tls: tls::client_config(server_roots, &client_identity)?,
        ready_timeout,
    })?;
    let identity = Identity::from_files(
        given(&args.tls_cert, "tls-cert")?,
        given(&args.tls_key, "tls-key")?,
    )?;
    Ok((proxy, tls::server_config(&identity, None)?))
}

/// The proxy of CDI's namespace on a cluster, and its serving configuration.
async fn from_cluster(
    args: &UploadProxyArgs,
    ready_timeout: Duration,
) -> Result<(Arc<UploadProxy>, Arc<rustls::ServerConfig>)> {
    use crate::upload::cas::{self, CLIENT_SIGNER, PROXY_SIGNER, SERVER_SIGNER};
    let client = crate::cluster::component_client().await?;
    let namespace = &args.namespace;
    let validator = crate::webhooks::cdi::signing_key(&client, namespace)
        .await?
        .validator();
    let server_ca = crate::cluster::shared_ca(&client, namespace, SERVER_SIGNER).await?;
    let client_ca = crate::cluster::shared_ca(&client, namespace, CLIENT_SIGNER).await?;
    let proxy_ca = crate::cluster::shared_ca(&client, namespace, PROXY_SIGNER).await?;
    let client_cert =
        client_ca.issue_client(operators::cdi::datavolume::pod::UPLOAD_CLIENT_NAME)?;
    let client_identity = Identity::from_pem(
        client_cert.cert_pem.as_bytes(),
        client_cert.key_pem.as_bytes(),
    )?;
    let server_roots = tls::roots_from_pem(server_ca.cert_pem().as_bytes())?;
    let proxy = UploadProxy::new(UploadProxyConfig {
        validator,
        resolver: Arc::new(crate::upload::resolver::ClusterUploadResolver::new(
            client.clone(),
        )),
        upstream_tls: tls::client_config(server_roots, &client_identity)?,
        ready_timeout,
    })?;
    let service = &args.service;
    let mut names = vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}"),
        service.clone(),
    ];
    names.extend(args.server_names.iter().cloned());
    let identity = crate::kubevirt::certs::server_identity(&proxy_ca, &names)?;
    cas::publish_proxy_ca(&client, namespace, proxy_ca.cert_pem()).await?;
    Ok((proxy, tls::server_config(&identity, None)?))
}

/// `NAMESPACE/PVC=URL[,archive]`.
fn parse_upload_server(flag: &str) -> Result<(String, String, UploadTarget)> {
    let usage =
        || format!("--upload-server {flag:?}: expected NAMESPACE/PVC=https://host:port[,archive]");
    let (key, value) = flag.split_once('=').with_context(usage)?;
    let (namespace, pvc) = key.split_once('/').with_context(usage)?;
    let (url, content_type) = match value.strip_suffix(",archive") {
        Some(url) => (url, ContentType::Archive),
        None => (value, ContentType::Kubevirt),
    };
    if namespace.is_empty() || pvc.is_empty() || !url.starts_with("https://") {
        bail!(usage());
    }
    Ok((
        namespace.into(),
        pvc.into(),
        UploadTarget {
            base_url: url.into(),
            content_type,
        },
    ))
}

#[derive(clap::Args)]
pub struct UploadTokenArgs {
    /// The directory holding the issuer's signing key (created there if missing).
    #[arg(long)]
    key_dir: PathBuf,
    /// The PVC's namespace.
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// The PVC to upload to.
    pvc: String,
}

/// `ferrovirt upload-token`: prints an upload token for a PVC, signed with the key in
/// `--key-dir` (what the API server answers an UploadTokenRequest with).
pub fn run_token(args: UploadTokenArgs) -> Result<()> {
    let issuer = UploadTokenIssuer::load_or_create(&args.key_dir)?;
    println!("{}", issuer.issue(&args.namespace, &args.pvc)?);
    Ok(())
}
