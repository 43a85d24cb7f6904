//! The upload server: one per upload, behind the proxy (mTLS), it feeds a request body through
//! the import pipeline into the volume. Like CDI's `cdi-uploadserver`: POST only, sync routes
//! answer when the volume is complete, async ones when the bytes are in; one upload at a time
//! (503 to another), 409 once done. Beyond CDI: qcow2 and compressed images convert while they
//! stream (no scratch space), an `X-Checksum` is verified at the end, and an interrupted upload
//! resumes: HEAD tells the committed offset, and a POST with `Upload-Offset` continues the same
//! pipeline, which waited for the bytes (up to the idle timeout).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, header};
use http_body_util::{BodyDataStream, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use importer::clone_stream::WIRE_ENCODING;
use importer::source::upload::{self, UploadFeed};
use importer::{Checksum, ContentType, ImportError, ImportOutcome, ImportRequest};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::form::{self, FilePart, FormError};
use crate::routes::{self, CHECKSUM_HEADER, CONTENT_TYPE_HEADER, OFFSET_HEADER, Route};
use crate::tls::{self, Peer};

/// How long an interrupted upload waits for its client to come back, by default.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// What an upload server writes and how.
#[derive(Debug, Clone)]
pub struct UploadServerConfig {
    /// The disk image file (`/data/disk.img`) or block device (`/dev/cdi-block-volume`).
    pub destination: PathBuf,
    /// Where an archive upload is extracted (`/data`).
    pub archive_dir: PathBuf,
    /// The size the image should have (already less the filesystem overhead); `None` for a
    /// block device or to use the image's own size.
    pub image_size: Option<u64>,
    pub preallocate: bool,
    /// The checksum the upload must have, from the DataVolume; a request may also send one.
    pub checksum: Option<Checksum>,
    /// How long the pipeline waits for bytes before it fails the upload as abandoned.
    pub idle_timeout: Duration,
    /// The common name the client certificate must have (CDI's `CLIENT_NAME`), if any.
    pub client_name: Option<String>,
}

impl UploadServerConfig {
    pub fn new(destination: impl Into<PathBuf>) -> Self {
        let destination = destination.into();
        let archive_dir = destination
            .parent()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        Self {
            destination,
            archive_dir,
            image_size: None,
            preallocate: false,
            checksum: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            client_name: None,
        }
    }
}

/// Why an upload failed, kept so that every waiting request can answer with it.
#[derive(Debug, Clone)]
struct Failure {
    /// The image does not fit (CDI's ValidationSizeError): 400 rather than 500.
    capacity: bool,
    message: String,
}

impl From<ImportError> for Failure {
    fn from(err: ImportError) -> Self {
        let capacity = matches!(
            err,
            ImportError::TargetTooSmall { .. }
                | ImportError::RequestedSizeTooSmall { .. }
                | ImportError::ImageLargerThanTarget { .. }
        );
        Self {
            capacity,
            message: err.to_string(),
        }
    }
}

type AttemptResult = Option<Result<ImportOutcome, Failure>>;

/// One run of the pipeline, fed by one request or, when resumed, several in turn.
struct Attempt {
    feed: UploadFeed,
    result: watch::Receiver<AttemptResult>,
    /// The last byte arrived; the pipeline is finishing.
    body_complete: AtomicBool,
}

impl Attempt {
    async fn wait(&self) -> Result<ImportOutcome, Failure> {
        let mut result = self.result.clone();
        let done = result.wait_for(Option::is_some).await;
        match done {
            Ok(value) => value.clone().expect("waited for a result"),
            Err(_) => Err(Failure {
                capacity: false,
                message: "the import task ended without a result".into(),
            }),
        }
    }

    fn result_now(&self) -> AttemptResult {
        self.result.borrow().clone()
    }
}

enum Phase {
    Idle,
    /// A pipeline is running; `attached` while a request feeds it.
    Active {
        attempt: Arc<Attempt>,
        attached: bool,
    },
    Succeeded {
        bytes: u64,
    },
}

struct State {
    phase: Phase,
    /// Why the previous attempt failed, for a client that tries to resume it.
    last_error: Option<String>,
}

/// The upload server's state and request handling; serve it with [`UploadServer::serve`].
pub struct UploadServer {
    config: UploadServerConfig,
    state: Mutex<State>,
    succeeded: watch::Sender<Option<ImportOutcome>>,
    /// Requests being handled, so that a finished server answers them before it exits.
    in_flight: AtomicUsize,
}

/// Counts a request as in flight while it lives.
struct InFlight(Arc<UploadServer>);

impl InFlight {
    fn new(server: &Arc<UploadServer>) -> Self {
        server.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(server.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How feeding a request body ended.
enum Fed {
    /// Every byte of the body is in the pipeline.
    Complete,
    /// The pipeline stopped reading (it failed, or it needed no more bytes).
    PipelineStopped,
    /// The client went away mid-body; the pipeline waits for a resumed request.
    Interrupted(String),
    /// The request is unusable (a form without a `file` part, say).
    BadRequest(String),
}

impl UploadServer {
    pub fn new(config: UploadServerConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            state: Mutex::new(State {
                phase: Phase::Idle,
                last_error: None,
            }),
            succeeded: watch::Sender::new(None),
            in_flight: AtomicUsize::new(0),
        })
    }

    /// Serves HTTPS on `listener` (with a `tls` configuration that requires client
    /// certificates, see [`tls::server_config`]) until the task is aborted.
    pub fn serve(
        self: &Arc<Self>,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
    ) -> JoinHandle<()> {
        let server = self.clone();
        tls::serve(listener, tls, move |request, peer| {
            let server = server.clone();
            async move { server.handle(request, peer).await }
        })
    }

    /// Waits until an upload has completed and returns what the import did.
    pub async fn succeeded(&self) -> ImportOutcome {
        let mut receiver = self.succeeded.subscribe();
        let outcome = receiver
            .wait_for(Option::is_some)
            .await
            .expect("the sender lives in self");
        outcome.clone().expect("waited for an outcome")
    }

    /// Waits (up to `limit`) until no request is being handled: a sync upload's answer is
    /// written after the upload completed.
    pub async fn quiesce(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.in_flight.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Let the connection write the last answer out.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    /// Bytes of the current upload the pipeline has been given.
    pub fn committed(&self) -> u64 {
        match &self.state.lock().expect("state lock").phase {
            Phase::Idle => 0,
            Phase::Active { attempt, .. } => attempt.feed.committed(),
            Phase::Succeeded { bytes } => *bytes,
        }
    }

    /// Handles one request.
    pub async fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        peer: Peer,
    ) -> Response<Full<Bytes>> {
        let _in_flight = InFlight::new(&self);
        if request.uri().path() == "/healthz" {
            return text(StatusCode::OK, "OK");
        }
        if let Some(expected) = &self.config.client_name
            && peer.common_name.as_deref() != Some(expected.as_str())
        {
            tracing::warn!(peer = %peer.addr, cn = ?peer.common_name, "client certificate refused");
            return text(StatusCode::UNAUTHORIZED, "client certificate not accepted");
        }
        let Some(route) = routes::route(request.uri().path()) else {
            return text(StatusCode::NOT_FOUND, "not found");
        };
        match *request.method() {
            Method::POST => self.post(request, route).await,
            Method::HEAD => {
                let mut response = text(StatusCode::OK, "");
                response
                    .headers_mut()
                    .insert(OFFSET_HEADER, self.committed().into());
                response
            }
            _ => {
                let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "uploads are POSTed");
                response
                    .headers_mut()
                    .insert(header::ALLOW, "POST, HEAD".parse().expect("a valid header"));
                response
            }
        }
    }

    /// Checks a POST's headers and claims the server for it: the attempt to feed and how many
    /// leading bytes of the body it already has, or the refusal.
    #[allow(clippy::result_large_err)]
    fn admit(
        self: &Arc<Self>,
        headers: &HeaderMap,
        route: Route,
    ) -> Result<(Arc<Attempt>, u64), Response<Full<Bytes>>> {
        let content_type = content_type(headers, route)
            .map_err(|message| text(StatusCode::BAD_REQUEST, &message))?;
        let offset = match header_str(headers, OFFSET_HEADER).map(str::parse::<u64>) {
            None => None,
            Some(Ok(offset)) => Some(offset),
            Some(Err(_)) => {
                return Err(text(
                    StatusCode::BAD_REQUEST,
                    "Upload-Offset must be a byte count",
                ));
            }
        };
        let checksum = self
            .checksum(headers)
            .map_err(|message| text(StatusCode::BAD_REQUEST, &message))?;
        // A plain body announces the upload's size; a form's length includes its framing.
        let size = (!route.form && offset.unwrap_or(0) == 0)
            .then(|| {
                header_str(headers, header::CONTENT_LENGTH.as_str())?
                    .parse()
                    .ok()
            })
            .flatten();
        self.attach(content_type, offset, checksum, size)
    }

    async fn post(
        self: Arc<Self>,
        request: Request<Incoming>,
        route: Route,
    ) -> Response<Full<Bytes>> {
        let (attempt, skip) = match self.admit(request.headers(), route) {
            Ok(admitted) => admitted,
            Err(response) => return refuse(request.into_body(), response).await,
        };
        let fed = if route.form {
            match form::boundary(header_str(request.headers(), header::CONTENT_TYPE.as_str())) {
                Ok(boundary) => feed_form(request.into_body(), boundary, &attempt, skip).await,
                Err(err) => Fed::BadRequest(err.to_string()),
            }
        } else {
            feed_body(request.into_body(), &attempt, skip).await
        };
        match fed {
            Fed::Complete => {
                attempt.body_complete.store(true, Ordering::Release);
                attempt.feed.finish();
                self.detach(&attempt);
                if route.asynchronous {
                    // Answer now unless the pipeline has already failed.
                    match attempt.result_now() {
                        Some(Err(failure)) => failure_response(&failure),
                        _ => text(StatusCode::OK, ""),
                    }
                } else {
                    outcome_response(attempt.wait().await)
                }
            }
            Fed::PipelineStopped => {
                attempt.body_complete.store(true, Ordering::Release);
                self.detach(&attempt);
                outcome_response(attempt.wait().await)
            }
            Fed::Interrupted(reason) => {
                self.detach(&attempt);
                let committed = attempt.feed.committed();
                tracing::warn!(committed, %reason, "upload interrupted; waiting for it to resume");
                let mut response = text(
                    StatusCode::BAD_REQUEST,
                    &format!("upload interrupted at byte {committed}: {reason}"),
                );
                response
                    .headers_mut()
                    .insert(OFFSET_HEADER, committed.into());
                response
            }
            Fed::BadRequest(message) => {
                self.detach(&attempt);
                text(StatusCode::BAD_REQUEST, &message)
            }
        }
    }

    /// The checksum to verify: the configured one, or the request's header; both must agree.
    fn checksum(&self, headers: &HeaderMap) -> Result<Option<Checksum>, String> {
        let requested = header_str(headers, CHECKSUM_HEADER)
            .map(|text| text.parse::<Checksum>().map_err(|e| e.to_string()))
            .transpose()?;
        match (&self.config.checksum, requested) {
            (Some(configured), Some(requested)) if *configured != requested => {
                Err("the X-Checksum header disagrees with the upload's configured checksum".into())
            }
            (Some(configured), _) => Ok(Some(configured.clone())),
            (None, requested) => Ok(requested),
        }
    }

    /// Claims the server for one request: starts a pipeline, or resumes the interrupted one.
    /// Returns the attempt and how many leading bytes of the body the pipeline already has.
    #[allow(clippy::result_large_err)]
    fn attach(
        self: &Arc<Self>,
        content_type: ContentType,
        offset: Option<u64>,
        checksum: Option<Checksum>,
        size: Option<u64>,
    ) -> Result<(Arc<Attempt>, u64), Response<Full<Bytes>>> {
        let mut state = self.state.lock().expect("state lock");
        let last_error = state.last_error.clone();
        match &mut state.phase {
            Phase::Succeeded { .. } => Err(text(
                StatusCode::CONFLICT,
                "the upload has already completed",
            )),
            Phase::Active { attached: true, .. } => Err(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "another upload to this volume is in progress",
            )),
            Phase::Active { attempt, .. } if attempt.body_complete.load(Ordering::Acquire) => {
                Err(text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the upload has been received and is being converted",
                ))
            }
            Phase::Active { attempt, attached } => {
                let committed = attempt.feed.committed();
                match offset {
                    Some(offset) if offset <= committed => {
                        *attached = true;
                        tracing::info!(offset, committed, "resuming the upload");
                        Ok((attempt.clone(), committed - offset))
                    }
                    _ => Err(resume_conflict(
                        committed,
                        &format!(
                            "the upload was interrupted at byte {committed}: resume it with the header Upload-Offset: {committed}"
                        ),
                    )),
                }
            }
            Phase::Idle => {
                if offset.is_some_and(|o| o > 0) {
                    let why = match last_error {
                        Some(err) => {
                            format!("the interrupted upload failed ({err}); start again at byte 0")
                        }
                        None => "there is no upload to resume; start at byte 0".into(),
                    };
                    return Err(resume_conflict(0, &why));
                }
                let attempt = self.start(content_type, checksum, size);
                state.phase = Phase::Active {
                    attempt: attempt.clone(),
                    attached: true,
                };
                Ok((attempt, 0))
            }
        }
    }

    /// Starts the pipeline of a new attempt; its end moves the state on.
    fn start(
        self: &Arc<Self>,
        content_type: ContentType,
        checksum: Option<Checksum>,
        size: Option<u64>,
    ) -> Arc<Attempt> {
        let config = &self.config;
        let (feed, source) = upload::channel(size, config.idle_timeout);
        let (tx, rx) = watch::channel(None);
        let attempt = Arc::new(Attempt {
            feed,
            result: rx,
            body_complete: AtomicBool::new(false),
        });
        let archive = content_type == ContentType::Archive;
        let target = if archive {
            config.archive_dir.clone()
        } else {
            config.destination.clone()
        };
        let mut request = ImportRequest::new(format!("upload to {}", target.display()), target);
        request.content_type = content_type;
        request.size = config.image_size.filter(|_| !archive);
        request.preallocate = config.preallocate;
        request.checksum = checksum;
        let server = self.clone();
        let ours = attempt.clone();
        tokio::spawn(async move {
            let result = importer::pipeline::import_from(request, source)
                .await
                .map_err(Failure::from);
            match &result {
                Ok(outcome) => tracing::info!(?outcome, "upload complete"),
                Err(failure) => tracing::warn!(error = %failure.message, "upload failed"),
            }
            server.finish(&ours, &result);
            let _ = tx.send(Some(result));
        });
        attempt
    }

    /// Moves the state on when an attempt's pipeline ends.
    fn finish(&self, attempt: &Arc<Attempt>, result: &Result<ImportOutcome, Failure>) {
        let mut state = self.state.lock().expect("state lock");
        let current =
            matches!(&state.phase, Phase::Active { attempt: a, .. } if Arc::ptr_eq(a, attempt));
        if !current {
            return;
        }
        match result {
            Ok(outcome) => {
                state.phase = Phase::Succeeded {
                    bytes: attempt.feed.committed(),
                };
                self.succeeded.send_replace(Some(outcome.clone()));
            }
            Err(failure) => {
                state.phase = Phase::Idle;
                state.last_error = Some(failure.message.clone());
            }
        }
    }

    /// The request that fed `attempt` is done with it.
    fn detach(&self, attempt: &Arc<Attempt>) {
        let mut state = self.state.lock().expect("state lock");
        if let Phase::Active {
            attempt: a,
            attached,
        } = &mut state.phase
            && Arc::ptr_eq(a, attempt)
        {
            *attached = false;
        }
    }
}

/// Serves `GET /healthz` → `OK` over plain HTTP (CDI's upload server answers the kubelet's
/// probe on port 8080) until the task is aborted.
pub fn serve_healthz(listener: TcpListener) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|request: Request<Incoming>| async move {
                    Ok::<_, std::convert::Infallible>(match request.uri().path() {
                        "/healthz" => text(StatusCode::OK, "OK"),
                        _ => text(StatusCode::NOT_FOUND, "not found"),
                    })
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// Pushes a request body into the pipeline, dropping its first `skip` bytes (which the
/// pipeline has from an earlier request).
async fn feed_body(body: Incoming, attempt: &Attempt, skip: u64) -> Fed {
    let mut skip = skip;
    let mut body = body;
    loop {
        match body.frame().await {
            None => return Fed::Complete,
            Some(Err(err)) => return Fed::Interrupted(err.to_string()),
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if let Some(stopped) = push(attempt, data, &mut skip).await {
                    drain(body).await;
                    return stopped;
                }
            }
        }
    }
}

/// Pushes the `file` part of a multipart form into the pipeline.
async fn feed_form(body: Incoming, boundary: String, attempt: &Attempt, skip: u64) -> Fed {
    let mut skip = skip;
    let mut file = FilePart::new(BodyDataStream::new(body), boundary);
    loop {
        match file.next_chunk().await {
            Ok(Some(data)) => {
                if let Some(stopped) = push(attempt, data, &mut skip).await {
                    return stopped;
                }
            }
            Ok(None) => return Fed::Complete,
            Err(FormError::Interrupted(message)) => return Fed::Interrupted(message),
            Err(err) => return Fed::BadRequest(err.to_string()),
        }
    }
}

/// Pushes one chunk, less what is still to be skipped; `Some` if the pipeline stopped.
async fn push(attempt: &Attempt, mut data: Bytes, skip: &mut u64) -> Option<Fed> {
    if *skip > 0 {
        let dropped = (*skip).min(data.len() as u64);
        *skip -= dropped;
        data = data.slice(dropped as usize..);
    }
    if data.is_empty() {
        return None;
    }
    attempt
        .feed
        .push(data)
        .await
        .err()
        .map(|_| Fed::PipelineStopped)
}

/// The content type a POST asks for: its `x-cdi-content-type` header, else the route's. A
/// clone stream must say how it is encoded: Ferrovirt's clone source sends zstd, while CDI's
/// cloner sends snappy-framed tar or device bytes, which this server does not decode.
fn content_type(headers: &HeaderMap, route: Route) -> Result<ContentType, String> {
    match header_str(headers, CONTENT_TYPE_HEADER).unwrap_or("") {
        "" | "kubevirt" if route.archive => Ok(ContentType::Archive),
        "" | "kubevirt" => Ok(ContentType::Kubevirt),
        "archive" => Ok(ContentType::Archive),
        routes::BLOCKDEVICE_CLONE => match header_str(headers, header::CONTENT_ENCODING.as_str()) {
            Some(encoding) if encoding.eq_ignore_ascii_case(WIRE_ENCODING) => {
                Ok(ContentType::Clone)
            }
            other => Err(format!(
                "a {} stream must be sent with Content-Encoding: {WIRE_ENCODING}, not {}",
                routes::BLOCKDEVICE_CLONE,
                other.map_or("none".to_string(), |e| format!("{e:?}"))
            )),
        },
        other => Err(format!(
            "content type {other:?} is not supported (kubevirt, archive or {})",
            routes::BLOCKDEVICE_CLONE
        )),
    }
}

/// How much of a refused request's body is read before the answer.
const REFUSED_BODY_LIMIT: usize = 64 << 20;

/// Answers a refused request after reading (up to a limit, for a while) the body its client
/// may still be sending: a client, or the proxy, writing into a closed connection would get a
/// broken pipe instead of the answer.
async fn refuse(mut body: Incoming, response: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let mut read = 0;
        while read < REFUSED_BODY_LIMIT {
            match body.frame().await {
                Some(Ok(frame)) => read += frame.data_ref().map_or(0, Bytes::len),
                _ => break,
            }
        }
    })
    .await;
    response
}

/// Reads and discards the rest of a body (an archive's padding after its end marker), so the
/// client gets its answer rather than a reset.
async fn drain(mut body: Incoming) {
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(_)) = body.frame().await {}
    })
    .await;
}

fn outcome_response(result: Result<ImportOutcome, Failure>) -> Response<Full<Bytes>> {
    match result {
        Ok(_) => text(StatusCode::OK, ""),
        Err(failure) => failure_response(&failure),
    }
}

fn failure_response(failure: &Failure) -> Response<Full<Bytes>> {
    let status = if failure.capacity {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    text(
        status,
        &format!("Saving stream failed: {}", failure.message),
    )
}

fn resume_conflict(offset: u64, message: &str) -> Response<Full<Bytes>> {
    let mut response = text(StatusCode::CONFLICT, message);
    response.headers_mut().insert(OFFSET_HEADER, offset.into());
    response
}

/// A plain-text response; `nosniff` keeps a browser from reading it as HTML.
pub(crate) fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        "text/plain; charset=utf-8".parse().expect("a valid header"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        "nosniff".parse().expect("a valid header"),
    );
    response
}
