//! Certificate authorities for tests of TLS endpoints (the upload proxy and servers): a CA
//! made with rcgen, and leaf certificates for loopback signed by it.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A CA and what it signs.
pub struct Ca {
    /// The CA certificate, PEM.
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    /// A self-signed CA with common name `name`.
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("a self-signed CA");
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf certificate for `localhost` and 127.0.0.1 with common name `cn`: (cert, key),
    /// PEM.
    pub fn leaf(&self, cn: &str) -> (String, String) {
        let key = KeyPair::generate().expect("a key");
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let mut params = CertificateParams::new(names).expect("leaf parameters");
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.issuer).expect("a signed leaf");
        (cert.pem(), key.serialize_pem())
    }
}
