//! The certificate authorities of uploads, as CDI's operator keeps them: one signs each upload
//! server's serving certificate (a Secret per upload pod), one signs the upload proxy's client
//! certificate (its bundle is what upload servers trust). Kept as PEM files so they survive a
//! restart; on a cluster the same PEM lives in Secrets.

use std::path::{Path, PathBuf};

use ferrovirt_hostpath::persist::{Readers, write_file};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// Why a certificate could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused the parameters or the key.
    #[error("certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A PEM file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// A CA that issues leaf certificates.
pub struct CertificateAuthority {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct IssuedCertificate {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl CertificateAuthority {
    /// Loads `DIR/NAME.crt` and `DIR/NAME.key`, or makes a CA called `common_name` and
    /// writes them (the key mode 0600).
    pub fn load_or_create(dir: &Path, name: &str, common_name: &str) -> Result<Self, CertError> {
        let cert_path = dir.join(format!("{name}.crt"));
        let key_path = dir.join(format!("{name}.key"));
        if let (Ok(cert), Ok(key)) = (
            std::fs::read_to_string(&cert_path),
            std::fs::read_to_string(&key_path),
        ) {
            return Self::from_pem(common_name, &cert, &key);
        }
        let ca = Self::generate(common_name)?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CertError::Io { path, source }
        };
        write_file(&key_path, ca.key_pem().as_bytes(), Readers::Owner).map_err(io(&key_path))?;
        write_file(&cert_path, ca.cert_pem.as_bytes(), Readers::Anyone).map_err(io(&cert_path))?;
        Ok(ca)
    }

    /// A new self-signed CA.
    pub fn generate(common_name: &str) -> Result<Self, CertError> {
        let key = KeyPair::generate()?;
        let params = ca_params(common_name)?;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// A CA this module made, from its common name, certificate and key. Leaves name their
    /// issuer by the CA's subject and key, both of which come back unchanged, so this needs
    /// no certificate parser.
    pub fn from_pem(common_name: &str, cert_pem: &str, key_pem: &str) -> Result<Self, CertError> {
        let key = KeyPair::from_pem(key_pem)?;
        Ok(Self {
            cert_pem: cert_pem.to_string(),
            issuer: Issuer::new(ca_params(common_name)?, key),
        })
    }

    /// The CA certificate (what peers trust).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key (PKCS#8 PEM), for storing it where its other users read it.
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    pub fn issue_server(
        &self,
        common_name: &str,
        names: &[String],
    ) -> Result<IssuedCertificate, CertError> {
        self.issue(common_name, names, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate called `common_name`.
    pub fn issue_client(&self, common_name: &str) -> Result<IssuedCertificate, CertError> {
        self.issue(common_name, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A client certificate called `common_name`, valid from yesterday (clock skew) until
    /// `days` from today: a clone source's, which is of no use after its clone.
    pub fn issue_short_lived_client(
        &self,
        common_name: &str,
        days: i64,
    ) -> Result<IssuedCertificate, CertError> {
        self.issue_valid(
            common_name,
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
            Some(days),
        )
    }

    fn issue(
        &self,
        common_name: &str,
        names: &[String],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<IssuedCertificate, CertError> {
        self.issue_valid(common_name, names, usage, None)
    }

    /// Issues a leaf; `valid_days` limits it to yesterday .. today + `valid_days`.
    fn issue_valid(
        &self,
        common_name: &str,
        names: &[String],
        usage: ExtendedKeyUsagePurpose,
        valid_days: Option<i64>,
    ) -> Result<IssuedCertificate, CertError> {
        use chrono::Datelike;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![usage];
        if let Some(days) = valid_days {
            let date = |d: chrono::DateTime<chrono::Utc>| {
                rcgen::date_time_ymd(d.year(), d.month() as u8, d.day() as u8)
            };
            let now = chrono::Utc::now();
            params.not_before = date(now - chrono::Duration::days(1));
            params.not_after = date(now + chrono::Duration::days(days));
        }
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn ca_params(common_name: &str) -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    Ok(params)
}

/// What the DataVolume controller needs to give each upload server its certificates: the CA
/// that signs their serving certificates and the bundle of CAs their clients chain to.
pub struct UploadCertificates {
    /// Signs `cdi-upload-<pvc>` serving certificates.
    pub server_ca: CertificateAuthority,
    /// PEM bundle the upload servers trust for the proxy's client certificate.
    pub client_ca_bundle: String,
    /// Signs the client certificates of host-assisted clone sources (the bundle's CA);
    /// without it such clones cannot run.
    pub client_ca: Option<CertificateAuthority>,
}

impl std::fmt::Debug for UploadCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadCertificates").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_is_created_once_and_reloaded_and_issues_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let first =
            CertificateAuthority::load_or_create(dir.path(), "server-ca", "test CA").unwrap();
        let again =
            CertificateAuthority::load_or_create(dir.path(), "server-ca", "test CA").unwrap();
        assert_eq!(first.cert_pem(), again.cert_pem());
        let leaf = again
            .issue_server(
                "cdi-upload-disk",
                &["cdi-upload-disk.default.svc".to_string()],
            )
            .unwrap();
        assert!(leaf.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(leaf.key_pem.contains("PRIVATE KEY"));
        let mode = std::fs::metadata(dir.path().join("server-ca.key")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o600);
    }
}
