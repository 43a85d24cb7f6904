//! TLS for the upload path: PEM loading, the proxy's and the server's rustls configurations
//! (the server requires a client certificate from the CA it shares with the proxy), and one
//! accept loop that serves HTTP/1.1 over TLS with hyper.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// Why TLS material could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// A certificate chain and its private key, in PEM.
#[derive(Clone)]
pub struct Identity {
    pub cert_chain: Vec<CertificateDer<'static>>,
    pub key: Arc<PrivateKeyDer<'static>>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("certificates", &self.cert_chain.len())
            .finish_non_exhaustive()
    }
}

impl Identity {
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        let cert_chain = certs_from_pem(cert_pem)
            .map_err(|reason| TlsError::Config(format!("certificate: {reason}")))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| TlsError::Config(format!("private key: {e}")))?;
        Ok(Self {
            cert_chain,
            key: Arc::new(key),
        })
    }

    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Self::from_pem(&read(cert)?, &read(key)?)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

fn certs_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate in PEM".into());
    }
    Ok(certs)
}

/// Trust anchors from a PEM bundle.
pub fn roots_from_pem(pem: &[u8]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certs_from_pem(pem).map_err(|r| TlsError::Config(format!("CA bundle: {r}")))? {
        roots
            .add(cert)
            .map_err(|e| TlsError::Config(format!("CA bundle: {e}")))?;
    }
    Ok(roots)
}

pub fn roots_from_file(path: &Path) -> Result<RootCertStore, TlsError> {
    roots_from_pem(&read(path)?).map_err(|e| TlsError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// ring's suites with AES-128-GCM preferred: as safe, and a third cheaper per byte than
/// AES-256-GCM, which matters when every uploaded byte is decrypted and encrypted again.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::ring::cipher_suite::*;
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![
        TLS13_AES_128_GCM_SHA256,
        TLS13_AES_256_GCM_SHA384,
        TLS13_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    Arc::new(provider)
}

/// The configuration of an HTTPS endpoint; with `client_ca`, clients must present a
/// certificate issued by it (the upload server's mTLS).
pub fn server_config(
    identity: &Identity,
    client_ca: Option<RootCertStore>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let client_certs = match client_ca {
        Some(roots) => ClientCerts::Required(roots),
        None => ClientCerts::None,
    };
    server_config_with(identity, client_certs)
}

/// What an HTTPS endpoint asks of its clients' certificates.
pub enum ClientCerts {
    /// Nothing.
    None,
    /// One issued by these CAs.
    Required(RootCertStore),
    /// One issued by these CAs when the client presents one (an extension API server:
    /// kube-aggregator presents its front-proxy certificate, webhook callers none).
    Optional(RootCertStore),
}

/// The configuration of an HTTPS endpoint with `identity` and `client_certs`.
pub fn server_config_with(
    identity: &Identity,
    client_certs: ClientCerts,
) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let verifier = |roots: RootCertStore| {
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
    };
    let builder = match client_certs {
        ClientCerts::None => builder.with_no_client_auth(),
        ClientCerts::Required(roots) => builder.with_client_cert_verifier(
            verifier(roots)
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?,
        ),
        ClientCerts::Optional(roots) => builder.with_client_cert_verifier(
            verifier(roots)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?,
        ),
    };
    let mut config = builder
        .with_single_cert(identity.cert_chain.clone(), identity.key.clone_key())
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Our preference (AES-128-GCM first), not the client's.
    config.ignore_client_order = true;
    Ok(Arc::new(config))
}

/// The proxy's client configuration towards upload servers: trusts `server_ca`, presents
/// `identity`.
pub fn client_config(
    server_ca: RootCertStore,
    identity: &Identity,
) -> Result<ClientConfig, TlsError> {
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(server_ca)
        .with_client_auth_cert(identity.cert_chain.clone(), identity.key.clone_key())
        .map_err(|e| TlsError::Config(e.to_string()))
}

/// What a handler learns about the connection a request came on.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The common name of the client certificate, when one was presented.
    pub common_name: Option<String>,
}

/// The common name (CN) of a DER certificate's subject.
pub fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_cert::der::Decode;
    use x509_cert::der::asn1::{PrintableStringRef, Utf8StringRef};
    const CN: x509_cert::der::asn1::ObjectIdentifier =
        x509_cert::der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3");
    let cert = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
    cert.tbs_certificate
        .subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .find(|atv| atv.oid == CN)
        .and_then(|atv| {
            atv.value
                .decode_as::<Utf8StringRef<'_>>()
                .map(|s| s.as_str().to_string())
                .or_else(|_| {
                    atv.value
                        .decode_as::<PrintableStringRef<'_>>()
                        .map(|s| s.as_str().to_string())
                })
                .ok()
        })
}

/// Serves HTTPS on `listener` until the returned task is aborted: every connection is
/// handshaken, then each request goes to `handler` with what is known about the peer.
pub fn serve<H, F, B>(listener: TcpListener, tls: Arc<ServerConfig>, handler: H) -> JoinHandle<()>
where
    H: Fn(Request<Incoming>, Peer) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let acceptor = TlsAcceptor::from(tls);
    let handler = Arc::new(handler);
    tokio::spawn(async move {
        loop {
            let (stream, addr) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            let handler = handler.clone();
            tokio::spawn(async move {
                let tls = match acceptor.accept(stream).await {
                    Ok(tls) => tls,
                    Err(err) => {
                        tracing::debug!(%addr, %err, "TLS handshake failed");
                        return;
                    }
                };
                let common_name = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|certs| certs.first())
                    .and_then(common_name);
                let peer = Peer { addr, common_name };
                let service = service_fn(move |request| {
                    let response = handler(request, peer.clone());
                    async move { Ok::<_, std::convert::Infallible>(response.await) }
                });
                if let Err(err) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    // WebSockets (virt-handler's console) take the connection over.
                    .with_upgrades()
                    .await
                {
                    tracing::debug!(%addr, %err, "connection ended with an error");
                }
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_name_is_read() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "cdi-uploadproxy");
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(common_name(cert.der()).as_deref(), Some("cdi-uploadproxy"));
    }
}
