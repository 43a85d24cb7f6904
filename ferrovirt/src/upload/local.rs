//! Uploads on one machine: the CAs CDI's operator would keep (kept under DIR/upload), the
//! upload proxy on loopback with its address and CA published in CDIConfig `config`
//! `status.uploadProxyURL` and `status.uploadProxyCA` (where `image-upload` looks for them;
//! virtctl reads the URL there), and what the
//! DataVolume controller needs to give each upload server its certificates.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Patch, PatchParams};
use operators::PublishedUploadProxy;
use operators::cdi::datavolume::pod::{CDI_NAMESPACE, UPLOAD_CLIENT_NAME};
use operators::certs::{CertificateAuthority, UploadCertificates};
use tokio::net::TcpListener;
use uploadproxy::proxy::DEFAULT_READY_TIMEOUT;
use uploadproxy::tls::{self, Identity};
use uploadproxy::{UploadProxy, UploadProxyConfig, UploadTokenIssuer};

use crate::upload::resolver::{ClusterUploadResolver, PodAddresses};

/// The CA of the proxy's serving certificate, kept as DIR/upload/proxy-ca.crt and published
/// in ConfigMap `cdi/cdi-uploadproxy-signer-bundle`.
const PROXY_CA: &str = "proxy-ca";

/// The running proxy and what the controllers need.
pub struct LocalUploads {
    pub certificates: Arc<UploadCertificates>,
    /// The proxy, as CDIConfig's status names it.
    pub proxy: PublishedUploadProxy,
}

/// Starts the upload proxy on `listen` and publishes its URL in CDIConfig `config`.
pub async fn start(
    client: &Client,
    data_dir: &Path,
    listen: SocketAddr,
    cdi_config: &str,
) -> anyhow::Result<LocalUploads> {
    let dir = data_dir.join("upload");
    let server_ca =
        CertificateAuthority::load_or_create(&dir, "server-ca", "cdi-uploadserver-signer")?;
    let client_ca =
        CertificateAuthority::load_or_create(&dir, "client-ca", "cdi-uploadserver-client-signer")?;
    let proxy_ca = CertificateAuthority::load_or_create(&dir, PROXY_CA, "cdi-uploadproxy-signer")?;

    let client_cert = client_ca.issue_client(UPLOAD_CLIENT_NAME)?;
    let client_identity = Identity::from_pem(
        client_cert.cert_pem.as_bytes(),
        client_cert.key_pem.as_bytes(),
    )?;
    let upstream_tls = tls::client_config(
        tls::roots_from_pem(server_ca.cert_pem().as_bytes())?,
        &client_identity,
    )?;
    let issuer = UploadTokenIssuer::load_or_create(data_dir)?;
    let addresses = Arc::new(PodAddresses::default());
    let proxy = UploadProxy::with_name_resolver(
        UploadProxyConfig {
            validator: issuer.validator(),
            resolver: Arc::new(ClusterUploadResolver::local(
                client.clone(),
                addresses.clone(),
            )),
            upstream_tls,
            ready_timeout: DEFAULT_READY_TIMEOUT,
        },
        addresses,
    )?;

    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen} for the upload proxy"))?;
    let address = listener.local_addr()?;
    let serving = proxy_ca.issue_server(
        "cdi-uploadproxy",
        &["localhost".to_string(), address.ip().to_string()],
    )?;
    let serving = Identity::from_pem(serving.cert_pem.as_bytes(), serving.key_pem.as_bytes())?;
    let _serving = proxy.serve(listener, tls::server_config(&serving, None)?);
    let proxy = PublishedUploadProxy {
        url: format!("https://{address}"),
        ca_pem: proxy_ca.cert_pem().to_string(),
    };
    publish_proxy_ca(client, &proxy.ca_pem).await?;
    publish_proxy(client, cdi_config, &proxy).await?;
    tracing::info!(proxy_url = %proxy.url, "upload proxy running");
    Ok(LocalUploads {
        certificates: Arc::new(UploadCertificates {
            server_ca,
            client_ca_bundle: client_ca.cert_pem().to_string(),
            client_ca: Some(client_ca),
        }),
        proxy,
    })
}

/// Keeps the proxy's CA where CDI's operator keeps it (ConfigMap
/// `cdi/cdi-uploadproxy-signer-bundle`), where `image-upload` finds it, making the
/// namespace first.
async fn publish_proxy_ca(client: &Client, ca_pem: &str) -> anyhow::Result<()> {
    let apply = PatchParams::apply("ferrovirt-up").force();
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    let namespace = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": CDI_NAMESPACE},
    });
    namespaces
        .patch(CDI_NAMESPACE, &apply, &Patch::Apply(&namespace))
        .await
        .with_context(|| format!("creating namespace {CDI_NAMESPACE}"))?;
    crate::upload::cas::publish_proxy_ca(client, CDI_NAMESPACE, ca_pem).await
}

/// The proxy's URL and CA in CDIConfig's status at once, so that `image-upload` finds them
/// before the CDIConfig controller (which keeps them there) first runs.
async fn publish_proxy(
    client: &Client,
    name: &str,
    proxy: &PublishedUploadProxy,
) -> anyhow::Result<()> {
    let configs: kube::Api<api::cdi::CDIConfig> = kube::Api::all(client.clone());
    let patch =
        serde_json::json!({"status": {"uploadProxyURL": proxy.url, "uploadProxyCA": proxy.ca_pem}});
    configs
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("publishing the upload proxy's URL in CDIConfig")?;
    Ok(())
}
