//! The front-proxy identity kube-apiserver publishes for extension API servers: a
//! request-header CA, the `front-proxy-client` certificate it issued (which the proxy to an
//! APIService's backend presents), and the ConfigMap `kube-system/extension-apiserver-
//! authentication` that tells a backend to trust that certificate's `X-Remote-*` headers.

use std::fs;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

use super::credentials::{CredentialsError, write_private};

/// The common name of the proxy's client certificate, the only name backends allow.
pub const CLIENT_NAME: &str = "front-proxy-client";
/// Where kube-apiserver publishes the front-proxy settings.
pub const CONFIGMAP_NAMESPACE: &str = "kube-system";
pub const CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

const CA_CERT: &str = "front-proxy-ca.crt";
const CA_KEY: &str = "front-proxy-ca.key";
const CLIENT_CERT: &str = "front-proxy-client.crt";
const CLIENT_KEY: &str = "front-proxy-client.key";

/// The request-header CA and the client certificate it issued, all PEM.
#[derive(Clone)]
pub struct FrontProxyIdentity {
    pub ca_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

impl std::fmt::Debug for FrontProxyIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontProxyIdentity").finish_non_exhaustive()
    }
}

impl FrontProxyIdentity {
    /// Loads the identity from `dir`, creating it the first time (or when a file is gone).
    pub fn load_or_create(dir: &Path) -> Result<Self, CredentialsError> {
        let files = [CA_CERT, CA_KEY, CLIENT_CERT, CLIENT_KEY];
        if !files.iter().all(|f| dir.join(f).exists()) {
            Self::generate(dir)?;
        }
        let read = |name: &str| {
            let path = dir.join(name);
            fs::read_to_string(&path).map_err(|source| CredentialsError::Read { path, source })
        };
        Ok(FrontProxyIdentity {
            ca_pem: read(CA_CERT)?,
            client_cert_pem: read(CLIENT_CERT)?,
            client_key_pem: read(CLIENT_KEY)?,
        })
    }

    /// Makes a new CA and client certificate and writes them to `dir`.
    fn generate(dir: &Path) -> Result<(), CredentialsError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "front-proxy-ca");
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let ca_key_pem = ca_key.serialize_pem();
        let issuer = Issuer::new(ca_params, ca_key);
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, CLIENT_NAME);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        write_private(&dir.join(CA_KEY), &ca_key_pem)?;
        write_private(&dir.join(CLIENT_KEY), &key.serialize_pem())?;
        write_private(&dir.join(CLIENT_CERT), &cert.pem())?;
        // Written last: its presence says the others are complete.
        write_private(&dir.join(CA_CERT), &ca_cert.pem())
    }

    /// The client certificate chain and key, as rustls presents them.
    pub fn client_auth(
        &self,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), CredentialsError> {
        let load = |what: &str, message: String| CredentialsError::Load {
            path: what.into(),
            message,
        };
        let certs = CertificateDer::pem_slice_iter(self.client_cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| load(CLIENT_CERT, e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(self.client_key_pem.as_bytes())
            .map_err(|e| load(CLIENT_KEY, e.to_string()))?;
        Ok((certs, key))
    }

    /// The ConfigMap `kube-system/extension-apiserver-authentication`, with the keys and
    /// JSON-array values kube-apiserver writes. `client_ca` is the CA of client
    /// certificates this server accepts, if it has one.
    pub fn configmap(&self, client_ca: Option<&str>) -> Value {
        let mut data = json!({
            "requestheader-client-ca-file": self.ca_pem,
            "requestheader-allowed-names": json!([CLIENT_NAME]).to_string(),
            "requestheader-username-headers": json!(["X-Remote-User"]).to_string(),
            "requestheader-group-headers": json!(["X-Remote-Group"]).to_string(),
            "requestheader-extra-headers-prefix": json!(["X-Remote-Extra-"]).to_string(),
        });
        if let Some(ca) = client_ca {
            data["client-ca-file"] = json!(ca);
        }
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP_NAME, "namespace": CONFIGMAP_NAMESPACE},
            "data": data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = FrontProxyIdentity::load_or_create(dir.path()).unwrap();
        let second = FrontProxyIdentity::load_or_create(dir.path()).unwrap();
        assert_eq!(first.ca_pem, second.ca_pem);
        assert_eq!(first.client_cert_pem, second.client_cert_pem);
        let (certs, _) = first.client_auth().unwrap();
        assert_eq!(certs.len(), 1);
    }

    #[test]
    fn configmap_has_kube_apiservers_keys() {
        let dir = tempfile::tempdir().unwrap();
        let identity = FrontProxyIdentity::load_or_create(dir.path()).unwrap();
        let cm = identity.configmap(None);
        let data = &cm["data"];
        assert_eq!(
            data["requestheader-allowed-names"],
            r#"["front-proxy-client"]"#
        );
        assert_eq!(
            data["requestheader-username-headers"],
            r#"["X-Remote-User"]"#
        );
        assert_eq!(data["requestheader-group-headers"], r#"["X-Remote-Group"]"#);
        assert_eq!(
            data["requestheader-extra-headers-prefix"],
            r#"["X-Remote-Extra-"]"#
        );
        assert!(
            data["requestheader-client-ca-file"]
                .as_str()
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert!(data.get("client-ca-file").is_none());
        assert_eq!(
            identity.configmap(Some("CA"))["data"]["client-ca-file"],
            "CA"
        );
    }
}
