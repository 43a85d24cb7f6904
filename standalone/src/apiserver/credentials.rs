//! The server's credentials in its data directory: a self-signed CA, a serving certificate
//! for loopback signed by it, and the bearer token of the admin user, created at first start
//! and kept; and the kubeconfig that hands all of it to kubectl and client libraries.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ferrovirt_hostpath::persist::{Readers, write_file};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("loading {path}: {message}")]
    Load { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

pub struct Credentials {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub token: String,
}

const CA: &str = "ca.crt";
const CERT: &str = "apiserver.crt";
const KEY: &str = "apiserver.key";
const TOKEN: &str = "admin.token";

impl Credentials {
    /// Loads the credentials from `dir`, creating them the first time.
    pub fn load_or_create(dir: &Path) -> Result<Self, CredentialsError> {
        let exists = [CA, CERT, KEY, TOKEN].iter().all(|f| dir.join(f).exists());
        if !exists {
            Self::generate()?.save(dir)?;
        }
        let read = |name: &str| {
            let path = dir.join(name);
            fs::read_to_string(&path).map_err(|source| CredentialsError::Read { path, source })
        };
        Ok(Credentials {
            ca_pem: read(CA)?,
            cert_pem: read(CERT)?,
            key_pem: read(KEY)?,
            token: read(TOKEN)?.trim().to_string(),
        })
    }

    fn generate() -> Result<Self, CredentialsError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "ferrovirt-ca");
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let names = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
        let mut params = CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "ferrovirt-apiserver");
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Credentials {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            token: uuid::Uuid::new_v4().simple().to_string(),
        })
    }

    fn save(&self, dir: &Path) -> Result<(), CredentialsError> {
        write_private(&dir.join(CA), &self.ca_pem)?;
        write_private(&dir.join(CERT), &self.cert_pem)?;
        write_private(&dir.join(KEY), &self.key_pem)?;
        write_private(&dir.join(TOKEN), &self.token)
    }

    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, CredentialsError> {
        let load = |what: &str, message: String| CredentialsError::Load {
            path: PathBuf::from(what),
            message,
        };
        let certs = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| load(CERT, e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| load(KEY, e.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// A kubeconfig for the admin user against `server` ("https://127.0.0.1:PORT").
    pub fn kubeconfig(&self, server: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: ferrovirt\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: ferrovirt\n  context:\n    cluster: ferrovirt\n    user: admin\n    namespace: default\ncurrent-context: ferrovirt\n",
            ca = STANDARD.encode(&self.ca_pem),
            token = self.token,
        )
    }
}

/// Writes a file readable by its owner only, replacing it atomically and durably.
pub fn write_private(path: &Path, content: &str) -> Result<(), CredentialsError> {
    write_file(path, content.as_bytes(), Readers::Owner).map_err(|source| CredentialsError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = Credentials::load_or_create(dir.path()).unwrap();
        let second = Credentials::load_or_create(dir.path()).unwrap();
        assert_eq!(first.token, second.token);
        assert_eq!(first.ca_pem, second.ca_pem);
        assert!(first.server_config().is_ok());
        let kubeconfig = first.kubeconfig("https://127.0.0.1:1");
        assert!(kubeconfig.contains(&first.token));
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join(KEY))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
