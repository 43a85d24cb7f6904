//! The certificates of virt-api and virt-handler on a cluster. They share one CA, kept in
//! Secret `kubevirt-virt-ca` of their namespace and made by whichever starts first (upstream's
//! virt-operator makes it before it deploys them): virt-handler serves with a
//! certificate from it and requires one from it of its clients, virt-api presents one and
//! trusts no other, and virt-api's own serving certificate (for its APIService and
//! webhooks) comes from it too.

use operators::certs::CertificateAuthority;
use uploadproxy::tls::Identity;

use crate::cluster;

/// The Secret holding the CA.
pub const CA_SECRET: &str = "kubevirt-virt-ca";
/// The common name of virt-api's client certificate towards virt-handler.
pub const API_CLIENT_NAME: &str = "virt-api";

/// The CA of `namespace`, from its Secret (made there the first time).
pub async fn shared_ca(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<CertificateAuthority> {
    cluster::shared_ca(client, namespace, CA_SECRET).await
}

/// A serving identity from `ca` for `names`, the first also its common name.
pub fn server_identity(ca: &CertificateAuthority, names: &[String]) -> anyhow::Result<Identity> {
    let common_name = names.first().map(String::as_str).unwrap_or(CA_SECRET);
    let cert = ca.issue_server(common_name, names)?;
    Ok(Identity::from_pem(
        cert.cert_pem.as_bytes(),
        cert.key_pem.as_bytes(),
    )?)
}

/// A client identity from `ca` called `common_name`.
pub fn client_identity(ca: &CertificateAuthority, common_name: &str) -> anyhow::Result<Identity> {
    let cert = ca.issue_client(common_name)?;
    Ok(Identity::from_pem(
        cert.cert_pem.as_bytes(),
        cert.key_pem.as_bytes(),
    )?)
}

/// `ca` as the only trust anchor.
pub fn trusting(ca: &CertificateAuthority) -> anyhow::Result<rustls::RootCertStore> {
    Ok(uploadproxy::tls::roots_from_pem(ca.cert_pem().as_bytes())?)
}
