//! The HTTPS front of the API server: TLS on loopback, bearer-token authentication, and
//! the translation of requests into the verbs of [`Objects`] and back into JSON (objects,
//! lists, Tables, watch streams and Status errors), or their hand-over to an aggregated
//! API's service.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch as shutdown_signal;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

use super::aggregated::{self, AggregatedApis, AggregatedBody, AggregatedService};
use super::authz::{Authorizer, CreateAdmission, CreateRequest, ResourceAttributes, UserInfo};
use super::crd_schema::Input;
use super::discovery;
use super::errors::ApiError;
use super::kube_protobuf::{self, ProtobufError};
use super::managed_fields;
use super::object::UpdateTarget;
use super::objects::{ListOptions, Objects, Propagation};
use super::openapi;
use super::openapi_v2;
use super::patch::{self, PatchType};
use super::pod_log;
use super::query::{dry_run, is_true, persist_of, query_params};
use super::resources::ResourceType;
use super::route::{self, ResourcePath, Route};
use super::selector::{FieldSelector, LabelSelector};
use super::service_account_token::{ServiceAccountRef, ServiceAccountTokens, TokenSpec};
use super::store::Persist;
use super::table;
use super::validation::{Operation, Validations};
use super::watch::{self, WatchRequest};

/// The largest request body accepted, as kube-apiserver's limit.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The default watch length when the client gives no timeoutSeconds.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// How long a connection may finish its request once the server stops; a watch still
/// streaming after that is cut.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

type Body = BoxBody<Bytes, Infallible>;

/// Answers creates of a resource that is not stored (UploadTokenRequest, access reviews).
pub type VirtualCreate = dyn Fn(&str, Value) -> Result<Value, ApiError> + Send + Sync;

pub struct Handler {
    pub objects: Arc<Objects>,
    pub token: String,
    /// Keyed by (group, plural).
    pub virtual_creates: HashMap<(String, String), Box<VirtualCreate>>,
    /// Run before every create with the requesting user.
    pub create_admission: Vec<Box<CreateAdmission>>,
    /// Validating webhooks that read other objects or warn, run before a write.
    pub validations: Arc<Validations>,
    pub aggregated: Arc<AggregatedApis>,
    /// The node agent's state, where pods' logs are (`kubectl logs`).
    pub pod_state_dir: PathBuf,
    /// The protobuf messages of the built-in kinds.
    pub protobuf: kube_protobuf::Messages,
    /// Issues and checks service account tokens.
    pub service_accounts: ServiceAccountTokens,
}

/// Serves `handler` on `listener` with TLS until `shutdown` changes.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handler: Arc<Handler>,
    mut shutdown: shutdown_signal::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(conn) => conn,
            Err(err) => {
                tracing::warn!(%err, "accept failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let mut stopping = shutdown.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(stream).await {
                Ok(tls) => tls,
                Err(err) => {
                    tracing::debug!(%peer, %err, "TLS handshake failed");
                    return;
                }
            };
            let service = service_fn(move |request| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler.handle(request).await) }
            });
            let io = StopAwareIo::new(tls, stopping.clone());
            let connection = http1::Builder::new()
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = stopped(&mut stopping) => {}
            }
            // Idle keep-alive connections close now, a request in flight may finish, and a
            // watch is cut after the grace period (its client sees the stream end).
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection).await;
        });
    }
}

/// Resolves once the server stops (or its handle is dropped).
async fn stopped(shutdown: &mut shutdown_signal::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopped| *stopped).await;
}

/// A connection's stream that reads as ended once the server stops, so a connection an
/// aggregated API took over with an upgrade (a WebSocket console) ends with the server:
/// its service sees the client close. Writes pass through, so a response can finish.
struct StopAwareIo<T> {
    inner: T,
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    stopped: bool,
}

impl<T> StopAwareIo<T> {
    fn new(inner: T, mut shutdown: shutdown_signal::Receiver<bool>) -> Self {
        StopAwareIo {
            inner,
            stop: Box::pin(async move { stopped(&mut shutdown).await }),
            stopped: false,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StopAwareIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.stopped && this.stop.as_mut().poll(cx).is_ready() {
            this.stopped = true;
        }
        if this.stopped {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StopAwareIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Admission warnings as kube-apiserver sends them: `Warning: 299 - "text"` headers, the
/// text a quoted-string (quotes and backslashes escaped), which kubectl prints as
/// `Warning: text`.
fn add_warnings(response: &mut Response<Body>, warnings: &[String]) {
    for warning in warnings {
        let text = warning
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace(['\n', '\r'], " ");
        if let Ok(value) = header::HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// The admin token's user, or the one it impersonates.
fn impersonated(headers: &header::HeaderMap) -> Result<UserInfo, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    let groups = values("impersonate-group");
    match values("impersonate-user").first() {
        Some(name) => Ok(UserInfo::impersonated(name, groups)),
        None if groups.is_empty() => Ok(UserInfo::admin()),
        None => Err(ApiError::BadRequest(
            "requested impersonation of groups without impersonating a user".into(),
        )),
    }
}

/// A protobuf body that cannot be read: a kind without a message is the media type's
/// limit (415), anything else a malformed request (400).
fn protobuf_error(err: ProtobufError) -> ApiError {
    match err {
        ProtobufError::UnknownKind { .. } => ApiError::UnsupportedMediaType(err.to_string()),
        other => ApiError::BadRequest(other.to_string()),
    }
}

fn error_response(err: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &err.status());
    if let ApiError::Refused { warnings, .. } = err {
        add_warnings(&mut response, warnings);
    }
    response
}

/// The authorization attributes of a resource request, as kube-apiserver derives them.
fn request_attributes(rt: &ResourceType, call: &Call) -> ResourceAttributes {
    let path = &call.path;
    let collection = path.name.is_none();
    let verb = match call.method {
        Method::GET if collection && is_true(call.query.get("watch")) => "watch",
        Method::GET if collection => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if collection => "deletecollection",
        Method::DELETE => "delete",
        _ => "",
    };
    ResourceAttributes {
        verb: verb.into(),
        group: rt.group.clone(),
        resource: rt.plural.clone(),
        subresource: path.subresource.clone().unwrap_or_default(),
        namespace: path.namespace.clone().unwrap_or_default(),
        name: path.name.clone().unwrap_or_default(),
    }
}

/// What one resource request carries besides its path.
struct Call {
    method: Method,
    path: ResourcePath,
    query: HashMap<String, String>,
    accept: String,
    content_type: String,
    body: Bytes,
    user: UserInfo,
}

/// A response of this server as hyper sends it: its own, or an aggregated API's.
fn unsync(response: Response<Body>) -> Response<AggregatedBody> {
    response.map(|body| body.map_err(|never| match never {}).boxed_unsync())
}

impl Handler {
    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<AggregatedBody> {
        let user = match self.authenticate(&request).await {
            Ok(user) => user,
            Err(err) => return unsync(error_response(&err)),
        };
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let response = match self.aggregated.for_path(&path) {
            Some(service) => match self.clone().to_aggregated(service, request, user).await {
                Ok(response) => response,
                Err(err) => unsync(error_response(&err)),
            },
            None => unsync(match self.clone().dispatch(request, user).await {
                Ok(response) => response,
                Err(err) => error_response(&err),
            }),
        };
        tracing::debug!(%method, %path, status = response.status().as_u16(), "request");
        response
    }

    /// Hands a request to an aggregated API's service once RBAC allows it (a discovery
    /// document needs no rule), with the requester's identity in `X-Remote-User` /
    /// `X-Remote-Group` instead of its credentials.
    async fn to_aggregated(
        self: Arc<Self>,
        service: AggregatedService,
        mut request: Request<Incoming>,
        user: UserInfo,
    ) -> Result<Response<AggregatedBody>, ApiError> {
        if !user.is_master() && !aggregated::is_discovery_document(request.uri().path()) {
            let attributes = aggregated::request_attributes(
                request.method(),
                request.uri().path(),
                request.uri().query(),
            );
            let handler = self.clone();
            let subject = user.clone();
            let checked = attributes.clone();
            let allowed = tokio::task::spawn_blocking(move || {
                Authorizer::new(&handler.objects).allows(&subject, &checked)
            })
            .await
            .map_err(ApiError::internal)??;
            if !allowed {
                return Err(attributes.forbidden(&user));
            }
        }
        aggregated::set_remote_user(request.headers_mut(), &user);
        Ok(service(request).await)
    }

    /// The user of a request: the admin token's (or the user it impersonates, `kubectl
    /// --as`, `--as-group`), or a service account's from a token this server issued.
    async fn authenticate(
        self: &Arc<Self>,
        request: &Request<Incoming>,
    ) -> Result<UserInfo, ApiError> {
        let headers = request.headers();
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(ApiError::Unauthorized)?;
        let impersonating =
            headers.contains_key("impersonate-user") || headers.contains_key("impersonate-group");
        if constant_time_eq(token.as_bytes(), self.token.as_bytes()) {
            return impersonated(headers);
        }
        let account = self
            .service_accounts
            .verify(token)
            .ok_or(ApiError::Unauthorized)?;
        let handler = self.clone();
        let lookup = account.clone();
        let current = tokio::task::spawn_blocking(move || handler.service_account(&lookup))
            .await
            .map_err(ApiError::internal)?;
        // A deleted (or deleted and recreated) account's tokens are revoked.
        if !current.is_ok_and(|uid| uid == account.uid) {
            return Err(ApiError::Unauthorized);
        }
        if impersonating {
            return Err(ApiError::Forbidden(format!(
                "users \"{}\" is forbidden: this server lets only the admin token impersonate",
                account.user_name()
            )));
        }
        Ok(UserInfo::impersonated(&account.user_name(), vec![]))
    }

    /// The uid of a stored service account.
    fn service_account(&self, account: &ServiceAccountRef) -> Result<String, ApiError> {
        let accounts = self
            .objects
            .registry
            .find("", "v1", "serviceaccounts")
            .ok_or(ApiError::NoSuchResource)?;
        let stored = self
            .objects
            .get(&accounts, &account.namespace, &account.name)?;
        Ok(super::object::uid(&stored).to_string())
    }

    /// `kubectl create token`: a TokenRequest for an existing service account.
    fn token_request(&self, call: &Call) -> Result<Response<Body>, ApiError> {
        let namespace = call.path.namespace.clone().unwrap_or_default();
        let name = call.path.name.clone().ok_or(ApiError::MethodNotAllowed)?;
        let spec = TokenSpec::from_request(&parse_json(&call.body)?, &name)?;
        let mut account = ServiceAccountRef {
            namespace,
            name,
            uid: String::new(),
        };
        account.uid = self.service_account(&account)?;
        let answer = self.service_accounts.issue(&account, &spec)?;
        Ok(json_response(StatusCode::CREATED, &answer))
    }

    async fn dispatch(
        self: Arc<Self>,
        request: Request<Incoming>,
        user: UserInfo,
    ) -> Result<Response<Body>, ApiError> {
        let route = route::parse(request.uri().path()).ok_or(ApiError::NoSuchResource)?;
        let types = || self.objects.registry.all();
        let ok = |body: Value| Ok(json_response(StatusCode::OK, &body));
        match route {
            Route::Version => ok(discovery::version()),
            Route::Health => Ok(Response::new(Full::new(Bytes::from_static(b"ok")).boxed())),
            Route::CoreVersions => ok(discovery::core_versions()),
            Route::Groups => {
                let mut list = discovery::group_list(&types());
                self.aggregated.add_to_group_list(&mut list);
                ok(list)
            }
            Route::Group(name) => ok(self
                .aggregated
                .group(&name)
                .or_else(|| discovery::group(&types(), &name))
                .ok_or(ApiError::NoSuchResource)?),
            Route::ResourceList { group, version } => {
                let list = match self.aggregated.resource_list(&group, &version) {
                    Some(aggregated) => aggregated,
                    None => discovery::resource_list(&types(), &group, &version),
                };
                ok(list.ok_or(ApiError::NoSuchResource)?)
            }
            Route::OpenApiV3Index => ok(openapi::openapi_v3_index(&types())),
            Route::OpenApiV3 { group, version } => {
                let schema_of = |rt: &ResourceType| crd_schema(rt, &version);
                ok(
                    openapi::openapi_v3_document(&types(), &group, &version, schema_of)
                        .ok_or(ApiError::NoSuchResource)?,
                )
            }
            Route::OpenApiV2 => {
                let schema_of = |rt: &ResourceType, version: &str| crd_schema(rt, version);
                let doc = openapi_v2::document(&types(), schema_of);
                let accept = request.headers().get(header::ACCEPT);
                let accept = accept.and_then(|v| v.to_str().ok()).unwrap_or("");
                if !accept.contains(openapi_v2::PROTOBUF_MEDIA_TYPE) {
                    return ok(doc);
                }
                let bytes = tokio::task::spawn_blocking(move || openapi_v2::to_protobuf(&doc))
                    .await
                    .map_err(|e| ApiError::Internal(format!("encoding /openapi/v2: {e}")))?;
                Ok(Response::builder()
                    .header(header::CONTENT_TYPE, openapi_v2::PROTOBUF_CONTENT_TYPE)
                    .body(Full::new(Bytes::from(bytes)).boxed())
                    .map_err(|e| ApiError::Internal(e.to_string()))?)
            }
            Route::Resource(path) => {
                let header = |name: header::HeaderName| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string()
                };
                let accept = header(header::ACCEPT);
                let content_type = header(header::CONTENT_TYPE);
                let method = request.method().clone();
                let query = query_params(request.uri().query());
                let body = Limited::new(request.into_body(), MAX_BODY)
                    .collect()
                    .await
                    .map_err(|e| ApiError::BadRequest(format!("reading the request body: {e}")))?
                    .to_bytes();
                self.resource(Call {
                    method,
                    path,
                    query,
                    accept,
                    content_type,
                    body,
                    user,
                })
                .await
            }
        }
    }

    /// A resource request in either of Kubernetes' media types: a protobuf body is read
    /// into JSON before the verbs see it, and a plain object or list is answered in
    /// protobuf when the client prefers it. Streams (watch, logs), Tables and errors stay
    /// JSON, which every client that asks for protobuf also accepts.
    async fn resource(self: Arc<Self>, mut call: Call) -> Result<Response<Body>, ApiError> {
        // A request without a body (a get, a list) may name a content type all the same.
        if kube_protobuf::is_media_type(&call.content_type) && !call.body.is_empty() {
            let object = self.protobuf.decode(&call.body).map_err(protobuf_error)?;
            call.body = Bytes::from(object.to_string());
            call.content_type = "application/json".into();
        }
        let streams =
            call.path.subresource.as_deref() == Some("log") || is_true(call.query.get("watch"));
        let answer_protobuf = kube_protobuf::preferred_in(&call.accept) && !streams;
        let response = self.clone().resource_json(call).await?;
        if !answer_protobuf {
            return Ok(response);
        }
        let (mut parts, body) = response.into_parts();
        let json = body.collect().await.map_err(ApiError::internal)?.to_bytes();
        // A list of thousands of objects takes a while: off the async threads.
        let handler = self.clone();
        let answer = json.clone();
        let encoded = tokio::task::spawn_blocking(move || handler.to_protobuf(&answer))
            .await
            .map_err(ApiError::internal)?;
        let body = match encoded {
            Some(message) => {
                parts.headers.insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static(kube_protobuf::MEDIA_TYPE),
                );
                Bytes::from(message)
            }
            None => json,
        };
        Ok(Response::from_parts(parts, Full::new(body).boxed()))
    }

    /// A JSON answer as protobuf, or `None` when its kind has no message. A stored object
    /// its message cannot hold is answered in JSON too (which the client accepts as well),
    /// and the mismatch logged to be fixed.
    fn to_protobuf(&self, json: &[u8]) -> Option<Vec<u8>> {
        let object = serde_json::from_slice::<Value>(json).ok()?;
        self.protobuf.encode(&object).unwrap_or_else(|err| {
            tracing::warn!(%err, "answering in JSON: the object does not fit its protobuf message");
            None
        })
    }

    async fn resource_json(self: Arc<Self>, call: Call) -> Result<Response<Body>, ApiError> {
        let path = &call.path;
        let rt = self
            .objects
            .registry
            .find(&path.group, &path.version, &path.plural)
            .ok_or(ApiError::NoSuchResource)?;
        if !rt.namespaced && path.namespace.is_some() {
            return Err(ApiError::NoSuchResource);
        }
        let pod_log = path.subresource.as_deref() == Some("log")
            && rt.group.is_empty()
            && rt.plural == "pods"
            && call.method == Method::GET;
        let token_request = path.subresource.as_deref() == Some("token")
            && rt.group.is_empty()
            && rt.plural == "serviceaccounts"
            && call.method == Method::POST;
        match path.subresource.as_deref() {
            None | Some("status") => {}
            Some("log") if pod_log => {}
            Some("token") if token_request => {
                // Refused rather than ignored: ignoring it would make a dry run issue a token.
                if persist_of(&call.query)? == Persist::DryRun {
                    return Err(ApiError::BadRequest(
                        "dryRun is not supported for serviceaccounts/token".into(),
                    ));
                }
            }
            Some(_) => return Err(ApiError::NoSuchResource),
        }
        if !call.user.is_master() {
            let handler = self.clone();
            let attributes = request_attributes(&rt, &call);
            let user = call.user.clone();
            let allowed = tokio::task::spawn_blocking(move || {
                Authorizer::new(&handler.objects).allows(&user, &attributes)
            })
            .await
            .map_err(ApiError::internal)??;
            if !allowed {
                return Err(request_attributes(&rt, &call).forbidden(&call.user));
            }
        }
        if pod_log {
            return self.pod_log(rt, &call).await;
        }
        if token_request {
            let handler = self.clone();
            return tokio::task::spawn_blocking(move || handler.token_request(&call))
                .await
                .map_err(ApiError::internal)?;
        }
        if call.method == Method::GET && path.name.is_none() && is_true(call.query.get("watch")) {
            return self.watch(rt, &call);
        }
        if call.method == Method::POST && rt.group == "authorization.k8s.io" {
            let handler = self.clone();
            return tokio::task::spawn_blocking(move || handler.access_review(&rt, &call))
                .await
                .map_err(ApiError::internal)?;
        }
        if call.method == Method::POST && path.name.is_none() {
            if let Some(create) = self
                .virtual_creates
                .get(&(rt.group.clone(), rt.plural.clone()))
            {
                let body = parse_json(&call.body)?;
                let ns = path.namespace.clone().unwrap_or_default();
                let answer = create(&ns, body)?;
                return Ok(json_response(StatusCode::CREATED, &answer));
            }
        }
        if rt.create_only {
            return Err(ApiError::MethodNotAllowed);
        }
        let handler = self.clone();
        tokio::task::spawn_blocking(move || handler.resource_blocking(&rt, &call))
            .await
            .map_err(ApiError::internal)?
    }

    /// `kubectl logs`: the pod's log file as text, followed while its container runs.
    async fn pod_log(
        self: Arc<Self>,
        pods: ResourceType,
        call: &Call,
    ) -> Result<Response<Body>, ApiError> {
        let options = pod_log::LogOptions::parse(&call.query)?;
        let ns = call.path.namespace.clone().unwrap_or_default();
        let name = call.path.name.clone().ok_or(ApiError::NoSuchResource)?;
        let objects = self.objects.clone();
        let (get_pods, get_ns, get_name) = (pods.clone(), ns.clone(), name.clone());
        let pod = tokio::task::spawn_blocking(move || objects.get(&get_pods, &get_ns, &get_name))
            .await
            .map_err(ApiError::internal)??;
        let file = pod_log::log_file(&self.pod_state_dir, &pod, &options)?;
        let objects = self.objects.clone();
        let running = move || pod_log::container_running(&objects, &pods, &ns, &name);
        let (out, chunks) = tokio::sync::mpsc::channel(8);
        tokio::task::spawn_blocking(move || {
            if let Err(err) = pod_log::stream(file, options, running, out) {
                tracing::warn!(%err, "reading a pod's log");
            }
        });
        let body = StreamBody::new(ReceiverStream::new(chunks).map(|chunk| Ok(Frame::data(chunk))));
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(BodyExt::boxed(body))
            .map_err(ApiError::internal)
    }

    /// The verbs, run on a blocking thread: they wait on the database.
    fn resource_blocking(
        &self,
        rt: &ResourceType,
        call: &Call,
    ) -> Result<Response<Body>, ApiError> {
        let path = &call.path;
        let version = path.version.as_str();
        let ns = path.namespace.as_deref().unwrap_or("");
        let target = if path.subresource.as_deref() == Some("status") {
            UpdateTarget::Status
        } else {
            UpdateTarget::Main
        };
        let objects = &self.objects;
        // Reads ignore `dryRun`, as kube-apiserver's do.
        let persist = match call.method {
            Method::GET => Persist::Commit,
            _ => persist_of(&call.query)?,
        };
        let mut warnings = Vec::new();
        let respond = |status: StatusCode,
                       object: Value,
                       warnings: Vec<String>|
         -> Result<Response<Body>, ApiError> {
            let mut response = json_response(status, &self.render_one(rt, &call.accept, object));
            add_warnings(&mut response, &warnings);
            Ok(response)
        };
        let validate = |operation: Operation, object: Option<&Value>, old: Option<&Value>| {
            self.validations
                .run(objects, operation, rt, ns, object, old)
        };
        let judged =
            |operation| target == UpdateTarget::Main && self.validations.applies(rt, operation);
        match (&call.method, path.name.as_deref()) {
            (&Method::GET, None) => self.list(rt, call),
            (&Method::GET, Some(name)) => respond(
                StatusCode::OK,
                objects.get_at(rt, version, ns, name)?,
                warnings,
            ),
            (&Method::POST, None) => {
                let mut body = parse_json(&call.body)?;
                warnings = Self::check_fields(rt, version, call, &body)?;
                let request = CreateRequest {
                    resource: rt,
                    namespace: ns,
                    user: &call.user,
                    objects,
                };
                for admit in &self.create_admission {
                    admit(&request, &mut body)?;
                }
                if judged(Operation::Create) {
                    warnings.extend(validate(Operation::Create, Some(&body), None)?);
                }
                let created = objects.create_as(persist, rt, version, ns, body)?;
                respond(StatusCode::CREATED, created, warnings)
            }
            (&Method::PUT, Some(name)) => {
                let body = parse_json(&call.body)?;
                warnings = Self::check_fields(rt, version, call, &body)?;
                if judged(Operation::Update) {
                    let old = objects.get_at(rt, version, ns, name)?;
                    warnings.extend(validate(Operation::Update, Some(&body), Some(&old))?);
                }
                let updated = objects.update_as(persist, rt, version, ns, name, body, target)?;
                respond(StatusCode::OK, updated, warnings)
            }
            (&Method::PATCH, Some(name)) => {
                let kind = PatchType::from_content_type(&call.content_type)?;
                let manager = call.query.get("fieldManager").cloned();
                if kind == PatchType::Apply {
                    managed_fields::check_manager(manager.as_deref())
                        .map_err(ApiError::BadRequest)?;
                }
                let patch = patch::Patch {
                    kind,
                    body: patch::parse_body(kind, &call.body)?,
                    manager,
                };
                // A merge-style patch has the object's shape; a JSON patch does not.
                if kind != PatchType::Json {
                    warnings = Self::check_fields(rt, version, call, &patch.body)?;
                }
                let existed = kind == PatchType::Apply
                    && objects.store.get(&rt.storage_key(), ns, name)?.is_some();
                if existed && judged(Operation::Update) {
                    let (old, new) = objects.preview_patch(rt, version, ns, name, &patch)?;
                    warnings.extend(validate(Operation::Update, Some(&new), Some(&old))?);
                } else if kind == PatchType::Apply && judged(Operation::Create) {
                    warnings.extend(validate(Operation::Create, Some(&patch.body), None)?);
                } else if kind != PatchType::Apply && judged(Operation::Update) {
                    let (old, new) = objects.preview_patch(rt, version, ns, name, &patch)?;
                    warnings.extend(validate(Operation::Update, Some(&new), Some(&old))?);
                }
                let object = objects.patch_as(persist, rt, version, ns, name, &patch, target)?;
                let status = if kind == PatchType::Apply && !existed {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                respond(status, object, warnings)
            }
            (&Method::DELETE, Some(name)) => {
                let (propagation, uid, persist) = delete_options(&call.query, &call.body)?;
                if self.validations.applies(rt, Operation::Delete) {
                    let old = objects.get_at(rt, version, ns, name)?;
                    warnings = validate(Operation::Delete, None, Some(&old))?;
                }
                let options = (propagation, uid.as_deref());
                let deleted = objects.delete_as(persist, rt, version, ns, name, options)?;
                respond(StatusCode::OK, deleted, warnings)
            }
            (&Method::DELETE, None) => self.delete_collection(rt, call),
            _ => Err(ApiError::MethodNotAllowed),
        }
    }

    /// A SubjectAccessReview (about `spec.user`) or SelfSubjectAccessReview (about the
    /// requester), answered with `status.allowed` and nothing stored.
    fn access_review(&self, rt: &ResourceType, call: &Call) -> Result<Response<Body>, ApiError> {
        let mut review = parse_json(&call.body)?;
        let spec = &review["spec"];
        let subject = if rt.plural == "selfsubjectaccessreviews" {
            call.user.clone()
        } else {
            let groups = spec["groups"]
                .as_array()
                .map(|g| {
                    g.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            UserInfo {
                name: spec["user"].as_str().unwrap_or_default().to_string(),
                groups,
            }
        };
        let Some(attributes) = spec.get("resourceAttributes") else {
            return Err(ApiError::Invalid {
                kind: rt.kind.clone(),
                name: String::new(),
                message: "spec.resourceAttributes: Required value: this server reviews resource requests only".into(),
            });
        };
        let attributes = ResourceAttributes::from_review(attributes);
        let allowed = Authorizer::new(&self.objects).allows(&subject, &attributes)?;
        review["status"] = json!({"allowed": allowed});
        if !allowed {
            review["status"]["reason"] = json!(format!(
                "no RBAC rule allows {} {}",
                subject.name, attributes.verb
            ));
        }
        Ok(json_response(StatusCode::CREATED, &review))
    }

    /// The fields of a request body that its kind's schema (a custom resource's CRD's, a
    /// built-in kind's published one) does not declare, which the write will prune: with
    /// `fieldValidation=Strict` (kubectl's default) a refusal naming them, as the API
    /// server's strict decoding; with `Ignore` nothing; else (`Warn`, the default) a
    /// warning for each.
    fn check_fields(
        rt: &ResourceType,
        version: &str,
        call: &Call,
        body: &Value,
    ) -> Result<Vec<String>, ApiError> {
        let mode = call.query.get("fieldValidation").map(String::as_str);
        if mode == Some("Ignore") {
            return Ok(Vec::new());
        }
        let unknown = match &rt.schemas {
            Some(schemas) => schemas.prune(version, &mut body.clone(), Input::Body),
            // A body's types are judged once it is the object it makes.
            None => super::openapi::prune_builtin(rt, version, &mut body.clone(), Input::Body)
                .unwrap_or_default(),
        };
        let named: Vec<String> = unknown
            .iter()
            .map(|field| format!("unknown field \"{field}\""))
            .collect();
        if mode != Some("Strict") || named.is_empty() {
            return Ok(named);
        }
        Err(ApiError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
            named.join(", "),
            kind = rt.kind
        )))
    }

    fn render_one(&self, rt: &ResourceType, accept: &str, object: Value) -> Value {
        if table::wants_table(accept) {
            let meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
            table::render(rt, vec![object], meta)
        } else {
            object
        }
    }

    fn list_options(
        rt: &ResourceType,
        query: &HashMap<String, String>,
    ) -> Result<ListOptions, ApiError> {
        let get = |key: &str| query.get(key).map(String::as_str).unwrap_or("");
        let fields = FieldSelector::parse(get("fieldSelector"))?;
        fields.check_selectable(&rt.group, &rt.kind)?;
        Ok(ListOptions {
            labels: LabelSelector::parse(get("labelSelector"))?,
            fields,
            limit: query.get("limit").and_then(|l| l.parse().ok()),
            continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
        })
    }

    fn list(&self, rt: &ResourceType, call: &Call) -> Result<Response<Body>, ApiError> {
        let options = Self::list_options(rt, &call.query)?;
        let page = self
            .objects
            .list(rt, call.path.namespace.as_deref(), &options)?;
        let version = &call.path.version;
        let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
        if let Some(token) = page.continue_token {
            meta["continue"] = json!(token);
        }
        if let Some(remaining) = page.remaining {
            meta["remainingItemCount"] = json!(remaining);
        }
        let items: Vec<Value> = page
            .items
            .into_iter()
            .map(|o| super::objects::with_version(rt, version, o))
            .collect::<Result<_, _>>()?;
        let body = if table::wants_table(&call.accept) {
            table::render(rt, items, meta)
        } else {
            json!({
                "kind": format!("{}List", rt.kind),
                "apiVersion": rt.api_version(version),
                "metadata": meta,
                "items": items,
            })
        };
        Ok(json_response(StatusCode::OK, &body))
    }

    fn delete_collection(
        &self,
        rt: &ResourceType,
        call: &Call,
    ) -> Result<Response<Body>, ApiError> {
        let options = Self::list_options(rt, &call.query)?;
        let (propagation, _, persist) = delete_options(&call.query, &call.body)?;
        let page = self
            .objects
            .list(rt, call.path.namespace.as_deref(), &options)?;
        let mut deleted = Vec::new();
        for item in page.items {
            let ns = item["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = super::object::name(&item).to_string();
            let version = &call.path.version;
            match self
                .objects
                .delete_as(persist, rt, version, &ns, &name, (propagation, None))
            {
                Ok(object) => deleted.push(object),
                Err(ApiError::NotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        let body = json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(&call.path.version),
            "metadata": {},
            "items": deleted,
        });
        Ok(json_response(StatusCode::OK, &body))
    }

    fn watch(&self, rt: ResourceType, call: &Call) -> Result<Response<Body>, ApiError> {
        let filter = Self::list_options(&rt, &call.query)?;
        let timeout = call
            .query
            .get("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_WATCH_TIMEOUT);
        let as_table = table::wants_table(&call.accept);
        let table_type = rt.clone();
        let render: watch::Render = Arc::new(move |object| {
            if as_table {
                let meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
                table::render(&table_type, vec![object], meta)
            } else {
                object
            }
        });
        let request = WatchRequest {
            rt,
            version: call.path.version.clone(),
            namespace: call.path.namespace.clone(),
            filter,
            resource_version: call.query.get("resourceVersion").cloned(),
            bookmarks: is_true(call.query.get("allowWatchBookmarks")),
            timeout,
            render,
        };
        let lines = watch::start(self.objects.clone(), request);
        let body = StreamBody::new(ReceiverStream::new(lines).map(|line| Ok(Frame::data(line))));
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::TRANSFER_ENCODING, "chunked")
            .body(BodyExt::boxed(body))
            .map_err(ApiError::internal)
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(value) = serde_json::from_slice(body) {
        return Ok(value);
    }
    // kubectl and client libraries send JSON; YAML is accepted for hand-made requests.
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::BadRequest("the request body is not UTF-8".into()))?;
    serde_saphyr::from_str(text).map_err(|e| {
        ApiError::BadRequest(format!("the request body is not valid JSON or YAML: {e}"))
    })
}

/// propagationPolicy (query or DeleteOptions body) and a uid precondition.
/// A delete's options from its query and its DeleteOptions body: the propagation, the
/// precondition UID, and whether it is a dry run (kubectl puts `dryRun` in the body).
fn delete_options(
    query: &HashMap<String, String>,
    body: &[u8],
) -> Result<(Propagation, Option<String>, Persist), ApiError> {
    let options: Value = if body.is_empty() {
        Value::Null
    } else {
        parse_json(body)?
    };
    let mut policy = options["propagationPolicy"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if let Some(q) = query.get("propagationPolicy") {
        policy = q.clone();
    }
    if policy.is_empty() && options["orphanDependents"].as_bool() == Some(true) {
        policy = "Orphan".into();
    }
    let uid = options["preconditions"]["uid"].as_str().map(String::from);
    let mut persist = persist_of(query)?;
    let malformed = || ApiError::BadRequest("dryRun: must be a list of strings".into());
    let values = match &options["dryRun"] {
        Value::Null => &Vec::new(),
        Value::Array(values) => values,
        _ => return Err(malformed()),
    };
    for value in values {
        if dry_run(value.as_str().ok_or_else(malformed)?)? == Persist::DryRun {
            persist = Persist::DryRun;
        }
    }
    Ok((Propagation::parse(&policy)?, uid, persist))
}

/// Compares secrets without an early exit that would time how much matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The `openAPIV3Schema` of `version` of a custom resource, for the published documents.
fn crd_schema(rt: &ResourceType, version: &str) -> Option<Value> {
    rt.schemas.as_ref()?.schema(version).cloned()
}
