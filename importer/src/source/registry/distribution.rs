//! The OCI distribution protocol, through oci-client on the workspace's reqwest and rustls
//! (ring) provider: anonymous, basic and bearer-token auth, manifests verified against the
//! digest they were asked by (or the registry's digest header), blobs streamed.

use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{
    BlobResponse, Certificate, CertificateEncoding, ClientConfig, ClientProtocol, SizedStream,
};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use tokio::runtime::Handle;

use super::RegistryOptions;
use super::layer::BlobOpener;
use super::manifest::{
    Descriptor, MANIFEST_MEDIA_TYPES, MAX_INDEX_DEPTH, Manifest, PlatformSpec, parse,
    select_platform,
};
use crate::error::ImportError;
use crate::error::error_chain;
use crate::source::http::ca_dir_files;

/// A registry and the image in it.
pub(super) struct Distribution {
    client: Client,
    auth: RegistryAuth,
    image: Reference,
    /// The reference as the user gave it, for messages.
    reference: String,
    runtime: Handle,
}

impl Distribution {
    /// `image` is the reference without its `docker://` scheme.
    pub async fn connect(
        reference: &str,
        image: &str,
        options: &RegistryOptions,
    ) -> Result<Self, ImportError> {
        // ring is the one crypto provider in the build.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let parsed: Reference = image
            .parse()
            .map_err(|e| ImportError::InvalidSource(reference.to_string(), format!("{e}")))?;
        let registry = parsed.resolve_registry().to_string();
        let mut protocol = ClientProtocol::Https;
        if options.insecure && !speaks_tls(&registry).await {
            tracing::info!(%registry, "registry does not speak TLS; using plain HTTP");
            protocol = ClientProtocol::HttpsExcept(vec![registry.clone()]);
        }
        let extra_root_certificates = match &options.cert_dir {
            Some(dir) => load_ca_dir(dir)?,
            None => Vec::new(),
        };
        let config = ClientConfig {
            protocol,
            accept_invalid_certificates: options.insecure,
            extra_root_certificates,
            connect_timeout: Some(Duration::from_secs(30)),
            read_timeout: Some(Duration::from_secs(120)),
            user_agent: concat!("ferrovirt-importer/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|e| ImportError::Tls(error_chain(&e)))?;
        let auth = match &options.credentials {
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
            None => RegistryAuth::Anonymous,
        };
        Ok(Self {
            client,
            auth,
            image: parsed,
            reference: reference.to_string(),
            runtime: Handle::current(),
        })
    }

    /// The layers of the image, through an index to the wanted platform's image if the
    /// reference names an index.
    pub async fn resolve(&self, platform: &PlatformSpec) -> Result<Vec<Descriptor>, ImportError> {
        let mut target = self.image.clone();
        for _ in 0..MAX_INDEX_DEPTH {
            let (bytes, digest) = self
                .client
                .pull_manifest_raw(&target, &self.auth, MANIFEST_MEDIA_TYPES)
                .await
                .map_err(|e| self.error(e))?;
            tracing::debug!(reference = %self.reference, %digest, "manifest fetched");
            match parse(&bytes).map_err(|reason| self.fail(reason))? {
                Manifest::Image(layers) => return Ok(layers),
                Manifest::Index(entries) => {
                    let entry =
                        select_platform(&entries, platform).map_err(|reason| self.fail(reason))?;
                    target = Reference::with_digest(
                        self.image.registry().to_string(),
                        self.image.repository().to_string(),
                        entry.digest.clone(),
                    );
                }
            }
        }
        Err(self.fail(format!("indexes nested more than {MAX_INDEX_DEPTH} deep")))
    }

    /// The digest of the manifest (or index) the reference names.
    pub async fn digest(&self) -> Result<String, ImportError> {
        let (_, digest) = self
            .client
            .pull_manifest_raw(&self.image, &self.auth, MANIFEST_MEDIA_TYPES)
            .await
            .map_err(|e| self.error(e))?;
        Ok(digest)
    }

    fn fail(&self, reason: String) -> ImportError {
        ImportError::Registry {
            reference: self.reference.clone(),
            reason,
        }
    }

    fn error(&self, err: OciDistributionError) -> ImportError {
        let reason = match &err {
            OciDistributionError::UnauthorizedError { url } => match self.auth {
                RegistryAuth::Anonymous => format!(
                    "401 Unauthorized from {url}: the registry requires credentials (accessKeyId / secretKey)"
                ),
                _ => format!("401 Unauthorized from {url}: the credentials were refused"),
            },
            OciDistributionError::DigestError(e) => format!("manifest digest mismatch: {e}"),
            _ => error_chain(&err),
        };
        self.fail(reason)
    }
}

impl BlobOpener for Distribution {
    fn open(&self, layer: &Descriptor) -> Result<Box<dyn Read + Send>, ImportError> {
        let descriptor = OciDescriptor {
            media_type: layer.media_type.clone(),
            digest: layer.digest.clone(),
            size: i64::try_from(layer.size).unwrap_or(i64::MAX),
            ..OciDescriptor::default()
        };
        // `Range: bytes=0-` asks for the whole blob. oci-client then leaves the digest to
        // us (a 206 answer) and we check it once, on our own thread, with our message; on a
        // 200 it checks too, and a mismatch it finds is confirmed by ours.
        let response = self
            .runtime
            .block_on(
                self.client
                    .pull_blob_stream_partial(&self.image, &descriptor, 0, None),
            )
            .map_err(|e| self.error(e))?;
        let stream = match response {
            BlobResponse::Full(stream) | BlobResponse::Partial(stream) => stream,
        };
        Ok(Box::new(BlobStreamReader {
            runtime: self.runtime.clone(),
            stream,
            current: Vec::new(),
            offset: 0,
        }))
    }
}

/// A blob's byte stream read from a blocking thread: each chunk is awaited on the runtime
/// that owns the connection, so hashing and decoding stay off the async threads.
struct BlobStreamReader {
    runtime: Handle,
    stream: SizedStream,
    current: Vec<u8>,
    offset: usize,
}

impl Read for BlobStreamReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.offset == self.current.len() {
            match self.runtime.block_on(self.stream.next()) {
                Some(Ok(chunk)) => {
                    self.current = chunk.to_vec();
                    self.offset = 0;
                }
                Some(Err(err)) => return Err(err),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.offset);
        buf[..n].copy_from_slice(&self.current[self.offset..self.offset + n]);
        self.offset += n;
        Ok(n)
    }
}

/// Whether the registry answers TLS: an insecure registry may speak plain HTTP, and
/// oci-client has to be told which.
async fn speaks_tls(registry: &str) -> bool {
    let Ok(client) = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
    else {
        return false;
    };
    client
        .get(format!("https://{registry}/v2/"))
        .send()
        .await
        .is_ok()
}

/// Every certificate in a CA directory, one per entry (oci-client reads each with
/// `from_pem`).
fn load_ca_dir(dir: &Path) -> Result<Vec<Certificate>, ImportError> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut certs = Vec::new();
    for (path, pem) in ca_dir_files(dir)? {
        let pem = String::from_utf8_lossy(&pem);
        for block in pem.split_inclusive(END).filter(|b| b.contains(END)) {
            let start = block
                .find(BEGIN)
                .ok_or_else(|| ImportError::Tls(format!("{}: malformed PEM", path.display())))?;
            let data = block.as_bytes()[start..].to_vec();
            reqwest::Certificate::from_pem(&data)
                .map_err(|e| ImportError::Tls(format!("{}: {e}", path.display())))?;
            certs.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
    }
    if certs.is_empty() {
        return Err(ImportError::Tls(format!(
            "cert dir {}: no PEM certificates found",
            dir.display()
        )));
    }
    Ok(certs)
}
