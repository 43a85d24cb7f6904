//! The serving certificate of a webhook's Service: one configuration, from the CA its
//! configurations' caBundle names, for every name the API server may call the Service by.

use std::sync::Arc;

use uploadproxy::tls::ClientCerts;

/// A serving configuration with a certificate from `ca` for Service `service` of
/// `namespace` (by each name the API server may call it).
pub fn service_tls(
    ca: &operators::certs::CertificateAuthority,
    service: &str,
    namespace: &str,
    client_certs: ClientCerts,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let names = [
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}"),
        service.to_owned(),
    ];
    let identity = crate::kubevirt::certs::server_identity(ca, &names)?;
    Ok(uploadproxy::tls::server_config_with(
        &identity,
        client_certs,
    )?)
}
