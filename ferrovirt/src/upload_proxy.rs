//! `ferrovirt upload-proxy`: the public HTTPS endpoint of uploads (CDI's `cdi-uploadproxy`).
//! Tokens are checked with the issuer's public key; upload servers are reached with mTLS and,
//! until the control plane provides its resolver, found from `--upload-server` flags.

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
    /// The proxy's serving certificate (PEM, with its chain).
    #[arg(long)]
    tls_cert: PathBuf,
    /// The serving certificate's private key (PEM).
    #[arg(long)]
    tls_key: PathBuf,
    /// The token issuer's public key (PEM), as the API server publishes it.
    #[arg(
        long,
        conflicts_with = "token_key_dir",
        required_unless_present = "token_key_dir"
    )]
    token_public_key: Option<PathBuf>,
    /// Or the directory holding the issuer's signing key (standalone: the data dir).
    #[arg(long)]
    token_key_dir: Option<PathBuf>,
    /// The client certificate presented to upload servers (PEM).
    #[arg(long)]
    client_cert: PathBuf,
    /// Its private key (PEM).
    #[arg(long)]
    client_key: PathBuf,
    /// The CA that signs upload servers' certificates (PEM).
    #[arg(long)]
    server_ca: PathBuf,
    /// An upload server: NAMESPACE/PVC=https://host:port, with `,archive` for a PVC whose
    /// content type is archive. Repeat for more.
    #[arg(long = "upload-server", value_name = "NAMESPACE/PVC=URL")]
    upload_servers: Vec<String>,
    /// How long to wait for a PVC's upload server to be ready before answering 503.
    #[arg(long, default_value_t = 10)]
    ready_timeout_secs: u64,
}

pub async fn run(args: UploadProxyArgs) -> Result<()> {
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
    let client_identity = Identity::from_files(&args.client_cert, &args.client_key)?;
    let upstream_tls =
        tls::client_config(tls::roots_from_file(&args.server_ca)?, &client_identity)?;
    let proxy = UploadProxy::new(UploadProxyConfig {
        validator,
        resolver,
        upstream_tls,
        ready_timeout: Duration::from_secs(args.ready_timeout_secs),
    })?;
    let serving = tls::server_config(&Identity::from_files(&args.tls_cert, &args.tls_key)?, None)?;
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
