//! The TLS client settings of the proxy to one APIService's backend: trust `spec.caBundle`
//! (or, with `spec.insecureSkipTLSVerify`, nothing), present the front-proxy client
//! certificate.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::apiserver::front_proxy::FrontProxyIdentity;

/// How the backend's serving certificate is checked.
pub enum ServerTrust<'a> {
    /// Chains to one of the CAs of this PEM bundle.
    CaBundle(&'a [u8]),
    /// Not checked at all (`insecureSkipTLSVerify: true`).
    Anything,
}

/// The client settings for one backend, or what is wrong with the APIService's.
pub fn client_config(
    identity: &FrontProxyIdentity,
    trust: ServerTrust<'_>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match trust {
        ServerTrust::Anything => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider))),
        ServerTrust::CaBundle(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("spec.caBundle: {e}"))?;
                roots.add(cert).map_err(|e| format!("spec.caBundle: {e}"))?;
            }
            builder.with_root_certificates(roots)
        }
    };
    let (certs, key) = identity.client_auth().map_err(|e| e.to_string())?;
    let mut config = builder
        .with_client_auth_cert(certs, key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts any server certificate; signatures are still checked, so the handshake is sound
/// with whoever answered.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
