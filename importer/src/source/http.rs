//! HTTP(S) as a source, over reqwest and rustls: basic auth, extra headers, a directory of
//! extra CA certificates, opt-in insecure TLS, redirects, retries with backoff on connection
//! errors and 5xx, and resumption with a Range request when a transfer drops. A server that
//! honours Range is also a random-access source.

use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{
    ACCEPT_RANGES, CONTENT_RANGE, ETAG, HeaderMap, HeaderName, HeaderValue, IF_RANGE,
    LAST_MODIFIED, RANGE,
};
use reqwest::{Client, Response, StatusCode, Url};
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use super::{OpenedSource, RandomAccess};
use crate::error::{ImportError, error_chain};
use crate::stream::{ChannelReader, Chunk};

/// Chunks of a body in flight between the network task and the pipeline. hyper hands out
/// reads of up to ~400 KiB, so this bounds the queue to a few MiB (and the read-ahead wasted
/// when a range stream is dropped early).
const BODY_CHANNEL_DEPTH: usize = 8;

/// Basic-auth credentials. Never printed.
#[derive(Clone, Default)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// How connection failures and 5xx answers are retried.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

/// How long a connection may deliver no bytes before it counts as dropped: a server that
/// stalls is asked again (with Range) or the import fails, instead of waiting forever.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Everything about talking to the server besides the URL.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub credentials: Option<Credentials>,
    /// Extra request headers, as `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// A directory whose files hold PEM CA certificates, trusted besides the system's.
    pub cert_dir: Option<PathBuf>,
    pub insecure_tls: bool,
    pub retry: RetryPolicy,
    /// Signs each request (S3's Signature Version 4) instead of basic auth.
    pub signer: Option<Arc<dyn RequestSigner>>,
    /// The longest wait for the next bytes of an answer ([`DEFAULT_IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            credentials: None,
            headers: Vec::new(),
            cert_dir: None,
            insecure_tls: false,
            retry: RetryPolicy::default(),
            signer: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Adds authentication headers computed per request, such as a signature over the URL and
/// the time.
pub trait RequestSigner: fmt::Debug + Send + Sync {
    fn sign(&self, method: &str, url: &Url) -> Vec<(HeaderName, HeaderValue)>;
}

/// Splits `Name: value` into a header pair.
pub fn parse_header(line: &str) -> Result<(String, String), ImportError> {
    let (name, value) = line.split_once(':').ok_or_else(|| {
        ImportError::InvalidHeader(line.to_string(), "expected 'Name: value'".into())
    })?;
    Ok((name.trim().to_string(), value.trim().to_string()))
}

/// Opens `url` for streaming, and for random access when the server allows it.
pub async fn open(url: &str, options: &HttpOptions) -> Result<OpenedSource, ImportError> {
    let url =
        Url::parse(url).map_err(|e| ImportError::InvalidSource(url.to_string(), e.to_string()))?;
    check_dns(&url).await?;
    let http = Arc::new(HttpClient::new(url, options)?);
    let response = http.get(None).await?;
    let size = response
        .content_length()
        .filter(|_| response.status() == StatusCode::OK);
    let ranges = response
        .headers()
        .get(ACCEPT_RANGES)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|unit| unit.trim().eq_ignore_ascii_case("bytes"))
        });
    let validator = validator(response.headers());
    // Later requests go where the redirects led.
    let http = Arc::new(HttpClient {
        url: response.url().clone(),
        validator,
        ..(*http).clone()
    });
    tracing::info!(url = %http.url, ?size, ranges, "HTTP source opened");
    let stream = spawn_body(http.clone(), response, 0, size, ranges);
    let random_access: Option<Arc<dyn RandomAccess>> = match (ranges, size) {
        (true, Some(size)) => Some(Arc::new(HttpRandomAccess {
            http,
            size,
            runtime: Handle::current(),
        })),
        _ => None,
    };
    Ok(OpenedSource {
        stream: Box::new(stream),
        size,
        random_access,
    })
}

/// Resolves the host first, so a bad name fails at once with a clear message rather than
/// through the retries meant for flaky connections.
async fn check_dns(url: &Url) -> Result<(), ImportError> {
    let host = url
        .host_str()
        .ok_or_else(|| ImportError::InvalidSource(url.to_string(), "no host".into()))?;
    let port = url.port_or_known_default().unwrap_or(80);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match tokio::net::lookup_host((host, port))
        .await
        .map(|addrs| addrs.count())
    {
        Ok(0) => Err(ImportError::Dns {
            host: host.into(),
            reason: "no addresses".into(),
        }),
        Ok(_) => Ok(()),
        Err(e) => Err(ImportError::Dns {
            host: host.into(),
            reason: e.to_string(),
        }),
    }
}

/// A client bound to one URL with its options.
#[derive(Clone)]
struct HttpClient {
    client: Client,
    url: Url,
    credentials: Option<Credentials>,
    headers: HeaderMap,
    retry: RetryPolicy,
    idle_timeout: Duration,
    /// ETag or Last-Modified of the first response, so a resumed download is the same file.
    validator: Option<HeaderValue>,
    signer: Option<Arc<dyn RequestSigner>>,
}

impl HttpClient {
    fn new(url: Url, options: &HttpOptions) -> Result<Self, ImportError> {
        // ring is the one crypto provider in the build (kube uses it too).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = Client::builder()
            .user_agent(concat!("ferrovirt-importer/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(options.idle_timeout)
            .tls_danger_accept_invalid_certs(options.insecure_tls);
        if let Some(dir) = &options.cert_dir {
            builder = builder.tls_certs_merge(load_ca_dir(dir)?);
        }
        let client = builder
            .build()
            .map_err(|e| ImportError::Tls(error_chain(&e)))?;
        let mut headers = HeaderMap::new();
        for (name, value) in &options.headers {
            let bad = |why: String| ImportError::InvalidHeader(name.clone(), why);
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(e.to_string()))?;
            let value = HeaderValue::from_str(value).map_err(|e| bad(e.to_string()))?;
            headers.append(name, value);
        }
        Ok(Self {
            client,
            url,
            credentials: options.credentials.clone(),
            headers,
            retry: options.retry.clone(),
            idle_timeout: options.idle_timeout,
            validator: None,
            signer: options.signer.clone(),
        })
    }

    /// GET, of the byte range `[start, end)` when given, retried per the policy.
    async fn get(&self, range: Option<(u64, Option<u64>)>) -> Result<Response, ImportError> {
        let mut delay = self.retry.first_delay;
        let mut attempt = 1;
        loop {
            let failure = match self.request(range).send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) if !retryable(response.status()) || attempt >= self.retry.attempts => {
                    return Err(ImportError::HttpStatus {
                        url: self.url.to_string(),
                        status: response.status().to_string(),
                    });
                }
                Ok(response) => format!("HTTP {}", response.status()),
                Err(e)
                    if (e.is_connect() || e.is_timeout() || e.is_request())
                        && attempt < self.retry.attempts =>
                {
                    error_chain(&e)
                }
                Err(e) => {
                    return Err(ImportError::Http {
                        url: self.url.to_string(),
                        reason: error_chain(&e),
                    });
                }
            };
            tracing::warn!(url = %self.url, attempt, %failure, "retrying in {delay:?}");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.retry.max_delay);
            attempt += 1;
        }
    }

    fn request(&self, range: Option<(u64, Option<u64>)>) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .get(self.url.clone())
            .headers(self.headers.clone());
        if let Some(signer) = &self.signer {
            for (name, value) in signer.sign("GET", &self.url) {
                request = request.header(name, value);
            }
        } else if let Some(credentials) = &self.credentials {
            request = request.basic_auth(&credentials.username, Some(&credentials.password));
        }
        if let Some((start, end)) = range {
            let spec = match end {
                Some(end) => format!("bytes={start}-{}", end - 1),
                None => format!("bytes={start}-"),
            };
            request = request.header(RANGE, spec);
            if let Some(validator) = &self.validator {
                request = request.header(IF_RANGE, validator.clone());
            }
        }
        request
    }

    /// A 206 answer for `[start, end)`; anything else means the file changed or the server
    /// stopped honouring ranges.
    async fn get_range(&self, start: u64, end: Option<u64>) -> Result<Response, ImportError> {
        let response = self.get(Some((start, end))).await?;
        let content_range = response
            .headers()
            .get(CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let starts_right = content_range
            .strip_prefix("bytes ")
            .and_then(|r| r.split('-').next())
            .and_then(|s| s.parse::<u64>().ok())
            == Some(start);
        if response.status() != StatusCode::PARTIAL_CONTENT || !starts_right {
            return Err(ImportError::SourceChanged {
                url: self.url.to_string(),
                offset: start,
            });
        }
        Ok(response)
    }
}

fn retryable(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

fn validator(headers: &HeaderMap) -> Option<HeaderValue> {
    let strong_etag = headers
        .get(ETAG)
        .filter(|v| !v.as_bytes().starts_with(b"W/"));
    strong_etag.or_else(|| headers.get(LAST_MODIFIED)).cloned()
}

/// The contents of every regular, non-hidden file of a CA directory (a mounted ConfigMap
/// also holds `..data` links, which are skipped), with the file's path.
pub(crate) fn ca_dir_files(dir: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, ImportError> {
    let bad = |e: &dyn fmt::Display| ImportError::Tls(format!("cert dir {}: {e}", dir.display()));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| bad(&e))? {
        let entry = entry.map_err(|e| bad(&e))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') || !path.is_file() {
            continue;
        }
        let pem = std::fs::read(&path).map_err(|e| bad(&e))?;
        files.push((path, pem));
    }
    Ok(files)
}

/// Every certificate in a CA directory's files, trusted besides the system's.
fn load_ca_dir(dir: &Path) -> Result<Vec<reqwest::Certificate>, ImportError> {
    let mut certs = Vec::new();
    for (path, pem) in ca_dir_files(dir)? {
        let found = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ImportError::Tls(format!("{}: {e}", path.display())))?;
        if found.is_empty() {
            tracing::warn!(file = %path.display(), "no certificates in file");
        }
        certs.extend(found);
    }
    if certs.is_empty() {
        return Err(ImportError::Tls(format!(
            "cert dir {}: no PEM certificates found",
            dir.display()
        )));
    }
    Ok(certs)
}

/// Streams a response body into the pipeline from a network task, resuming with a Range
/// request from the last byte received whenever the connection drops.
fn spawn_body(
    http: Arc<HttpClient>,
    response: Response,
    start: u64,
    end: Option<u64>,
    ranges: bool,
) -> ChannelReader {
    let (tx, rx) = mpsc::channel::<Chunk>(BODY_CHANNEL_DEPTH);
    tokio::spawn(pump_body(http, response, start, end, ranges, tx));
    ChannelReader::from_tokio(rx)
}

async fn pump_body(
    http: Arc<HttpClient>,
    mut response: Response,
    mut pos: u64,
    end: Option<u64>,
    ranges: bool,
    tx: mpsc::Sender<Chunk>,
) {
    // Resumptions in a row that brought no byte: a server that stalls or drops every
    // connection at the same place is given up on after the retry policy's attempts.
    let mut fruitless = 0u32;
    loop {
        let interruption = match response.chunk().await {
            Ok(Some(bytes)) => {
                pos += bytes.len() as u64;
                fruitless = 0;
                if tx.send(Ok(bytes.to_vec())).await.is_err() {
                    return; // The pipeline is done with this stream.
                }
                continue;
            }
            Ok(None) if end.is_none_or(|end| pos >= end) => return,
            Ok(None) => Interruption::EndedEarly,
            Err(e) if e.is_timeout() => Interruption::Stalled,
            Err(e) => Interruption::Failed(error_chain(&e)),
        };
        let give_up = if !ranges {
            Some(match interruption {
                Interruption::Stalled => ImportError::Stalled {
                    url: http.url.to_string(),
                    offset: pos,
                    idle: http.idle_timeout,
                },
                _ => ImportError::CannotResume {
                    url: http.url.to_string(),
                    offset: pos,
                },
            })
        } else if fruitless >= http.retry.attempts {
            Some(match interruption {
                Interruption::Stalled => ImportError::Stalled {
                    url: http.url.to_string(),
                    offset: pos,
                    idle: http.idle_timeout,
                },
                ref other => ImportError::Interrupted {
                    url: http.url.to_string(),
                    offset: pos,
                    attempts: fruitless + 1,
                    reason: other.to_string(),
                },
            })
        } else {
            None
        };
        if let Some(err) = give_up {
            tracing::warn!(url = %http.url, offset = pos, %err, "transfer failed");
            let _ = tx.send(Err(err.into_io())).await;
            return;
        }
        fruitless += 1;
        tracing::warn!(url = %http.url, offset = pos, reason = %interruption, attempt = fruitless, "transfer interrupted; resuming");
        match http.get_range(pos, end).await {
            Ok(resumed) => response = resumed,
            Err(err) => {
                let _ = tx.send(Err(err.into_io())).await;
                return;
            }
        }
    }
}

/// Why a body stopped before its end.
enum Interruption {
    /// No bytes for the idle timeout.
    Stalled,
    /// The connection closed cleanly before the announced length.
    EndedEarly,
    Failed(String),
}

impl fmt::Display for Interruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Interruption::Stalled => f.write_str("no bytes within the idle timeout"),
            Interruption::EndedEarly => f.write_str("the body ended early"),
            Interruption::Failed(reason) => f.write_str(reason),
        }
    }
}

/// Range requests against a server that honours them. Called from pipeline threads, which
/// are blocking threads of the runtime that owns the client.
struct HttpRandomAccess {
    http: Arc<HttpClient>,
    size: u64,
    runtime: Handle,
}

impl RandomAccess for HttpRandomAccess {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_range(&self, offset: u64, len: u64) -> io::Result<Box<dyn Read + Send + '_>> {
        if len == 0 {
            return Ok(Box::new(io::empty()));
        }
        let end = offset + len;
        let response = self
            .runtime
            .block_on(self.http.get_range(offset, Some(end)))
            .map_err(ImportError::into_io)?;
        let _guard = self.runtime.enter();
        Ok(Box::new(spawn_body(
            self.http.clone(),
            response,
            offset,
            Some(end),
            true,
        )))
    }
}
