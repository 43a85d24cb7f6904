//! The upload CAs on a cluster, kept as CDI's operator keeps them: Secrets in CDI's
//! namespace holding `tls.crt` and `tls.key`. The first component to start makes each, the
//! others read it, so the controller (which signs each upload server's certificate and
//! hands it the client CA's bundle) and the upload proxy (which trusts the server CA and
//! presents a client certificate) agree. On `ferrovirt up` the same CAs live in the data
//! directory instead (`local_uploads.rs`).

use std::sync::Arc;

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Patch, PatchParams};
use operators::cdi::datavolume::pod::{CA_BUNDLE_KEY, UPLOAD_PROXY_CA_CONFIG_MAP};
use operators::certs::UploadCertificates;

/// Signs the upload servers' serving certificates.
pub const SERVER_SIGNER: &str = "cdi-uploadserver-signer";
/// Signs the certificate the proxy (and a host-assisted clone's source) presents to them.
pub const CLIENT_SIGNER: &str = "cdi-uploadserver-client-signer";
/// Signs the upload proxy's serving certificate.
pub const PROXY_SIGNER: &str = "cdi-uploadproxy-signer";

/// What the DataVolume controller needs on a cluster to give upload servers and clone
/// sources their certificates.
pub async fn upload_certificates(
    client: &Client,
    namespace: &str,
) -> anyhow::Result<Arc<UploadCertificates>> {
    let server_ca = crate::cluster::shared_ca(client, namespace, SERVER_SIGNER).await?;
    let client_ca = crate::cluster::shared_ca(client, namespace, CLIENT_SIGNER).await?;
    Ok(Arc::new(UploadCertificates {
        server_ca,
        client_ca_bundle: client_ca.cert_pem().to_owned(),
        client_ca: Some(client_ca),
    }))
}

/// Publishes the proxy's CA where CDI's operator does (ConfigMap
/// `cdi-uploadproxy-signer-bundle` of CDI's namespace), where clients such as
/// `image-upload` find it.
pub async fn publish_proxy_ca(
    client: &Client,
    namespace: &str,
    ca_pem: &str,
) -> anyhow::Result<()> {
    let maps: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), namespace);
    let map = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": UPLOAD_PROXY_CA_CONFIG_MAP, "namespace": namespace},
        "data": {CA_BUNDLE_KEY: ca_pem},
    });
    let apply = PatchParams::apply("ferrovirt-uploadproxy").force();
    maps.patch(UPLOAD_PROXY_CA_CONFIG_MAP, &apply, &Patch::Apply(&map))
        .await
        .context("publishing the upload proxy's CA")?;
    Ok(())
}
