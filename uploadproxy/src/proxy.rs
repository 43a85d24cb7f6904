//! The upload proxy: the public HTTPS endpoint of uploads. It checks the `Authorization:
//! Bearer` upload token once, when a request starts (so an upload that outlasts the token's
//! five minutes is not cut, CDI #925), waits for the PVC's upload server to be ready, and
//! streams the body to it over mTLS without buffering, as CDI's `cdi-uploadproxy` does.
//! Missing or malformed authorization is 400, an invalid or expired token 401, an upload
//! server that is not ready within the wait 503.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, header};
use http_body_util::{BodyDataStream, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use importer::{ContentType, error_chain};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::resolver::{Resolution, UploadServerResolver, UploadTarget};
use crate::routes::{self, escape_html};
use crate::server::text;
use crate::tls::{self, Peer};
use crate::token::UploadTokenValidator;

/// How much of a refused request's body is read (and dropped) before the refusal is sent,
/// and for how long at most.
const DRAIN_LIMIT: usize = 16 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// Reads what is left of a refused request's body, up to [`DRAIN_LIMIT`] bytes or
/// [`DRAIN_TIME`]: a client still sending an image then reads the refusal, where closing
/// the connection under it would give it a broken pipe instead (Go's net/http, which CDI's
/// proxy runs on, discards an unread body the same way before closing).
async fn drain(mut body: Incoming) {
    use http_body_util::BodyExt as _;
    let mut read = 0;
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, Bytes::len);
            if read > DRAIN_LIMIT {
                break;
            }
        }
    })
    .await;
}

/// How long the proxy waits for an upload server to become ready, as CDI.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the proxy needs.
pub struct UploadProxyConfig {
    pub validator: UploadTokenValidator,
    pub resolver: Arc<dyn UploadServerResolver>,
    /// The client side of the mTLS to upload servers (see [`tls::client_config`]).
    pub upstream_tls: rustls::ClientConfig,
    pub ready_timeout: Duration,
}

/// The proxy; serve it with [`UploadProxy::serve`].
pub struct UploadProxy {
    validator: UploadTokenValidator,
    resolver: Arc<dyn UploadServerResolver>,
    client: reqwest::Client,
    ready_timeout: Duration,
}

/// Why the proxy could not be built.
#[derive(Debug, thiserror::Error)]
#[error("building the upload proxy's HTTP client: {0}")]
pub struct ProxyError(String);

/// Request headers that are about one hop, or are the proxy's alone, and are not forwarded.
const NOT_FORWARDED: &[&str] = &[
    "authorization",
    "connection",
    "expect",
    "host",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

impl UploadProxy {
    pub fn new(config: UploadProxyConfig) -> Result<Arc<Self>, ProxyError> {
        Self::build(config, None)
    }

    /// A proxy that finds upload servers' addresses with `names` instead of the system's
    /// resolver: where there is no cluster DNS for `<service>.<namespace>.svc` names (one
    /// machine), while TLS still checks the server's certificate against that name.
    pub fn with_name_resolver(
        config: UploadProxyConfig,
        names: Arc<dyn reqwest::dns::Resolve>,
    ) -> Result<Arc<Self>, ProxyError> {
        Self::build(config, Some(names))
    }

    fn build(
        config: UploadProxyConfig,
        names: Option<Arc<dyn reqwest::dns::Resolve>>,
    ) -> Result<Arc<Self>, ProxyError> {
        let mut builder = reqwest::Client::builder()
            .use_preconfigured_tls(config.upstream_tls)
            .http1_only()
            .no_proxy()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10));
        if let Some(names) = names {
            builder = builder.dns_resolver(names);
        }
        let client = builder.build().map_err(|e| ProxyError(e.to_string()))?;
        Ok(Arc::new(Self {
            validator: config.validator,
            resolver: config.resolver,
            client,
            ready_timeout: config.ready_timeout,
        }))
    }

    /// Serves HTTPS on `listener` until the task is aborted.
    pub fn serve(
        self: &Arc<Self>,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
    ) -> JoinHandle<()> {
        let proxy = self.clone();
        tls::serve(listener, tls, move |request, peer| {
            let proxy = proxy.clone();
            async move { proxy.handle(request, peer).await }
        })
    }

    /// Handles one request.
    pub async fn handle(&self, request: Request<Incoming>, _peer: Peer) -> Response<Full<Bytes>> {
        match self.upstream_url(&request).await {
            Ok(url) => self.forward(request, &url).await,
            Err(refusal) => {
                drain(request.into_body()).await;
                refusal
            }
        }
    }

    /// Where the request goes (its token checked, its upload server ready), or the answer
    /// that refuses it.
    async fn upstream_url(
        &self,
        request: &Request<Incoming>,
    ) -> Result<String, Response<Full<Bytes>>> {
        let path = request.uri().path();
        if path == "/healthz" {
            return Err(text(StatusCode::OK, "OK"));
        }
        if routes::route(path).is_none() {
            return Err(text(StatusCode::NOT_FOUND, "not found"));
        }
        let Some(token) = bearer_token(request.headers()) else {
            return Err(text(
                StatusCode::BAD_REQUEST,
                "missing or malformed Authorization header (expected \"Bearer <upload token>\")",
            ));
        };
        let claims = match self.validator.validate(token) {
            Ok(claims) => claims,
            Err(err) => {
                tracing::warn!(%err, "token refused");
                let status = if err.is_wrong_purpose() {
                    StatusCode::BAD_REQUEST
                } else {
                    StatusCode::UNAUTHORIZED
                };
                return Err(text(status, &escape_html(&err.to_string())));
            }
        };
        let target = match self.wait_ready(&claims.namespace, &claims.name).await {
            Ok(target) => target,
            Err(message) => {
                return Err(text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &escape_html(&message),
                ));
            }
        };
        let upstream_path = match target.content_type {
            ContentType::Archive => routes::archive_path(path),
            ContentType::Kubevirt | ContentType::Clone => path,
        };
        Ok(format!(
            "{}{upstream_path}",
            target.base_url.trim_end_matches('/')
        ))
    }

    /// Asks the resolver until the upload server is ready, it refuses, or the wait ends.
    async fn wait_ready(&self, namespace: &str, pvc: &str) -> Result<UploadTarget, String> {
        let deadline = Instant::now() + self.ready_timeout;
        let interval =
            (self.ready_timeout / 10).clamp(Duration::from_millis(10), Duration::from_secs(1));
        loop {
            let reason = match self.resolver.resolve(namespace, pvc).await {
                Resolution::Ready(target) => return Ok(target),
                Resolution::Rejected(reason) => return Err(reason),
                Resolution::NotReady(reason) => reason,
            };
            if Instant::now() + interval > deadline {
                return Err(format!(
                    "upload server for PVC {namespace}/{pvc} not ready after {} s: {reason}",
                    self.ready_timeout.as_secs_f64()
                ));
            }
            tokio::time::sleep(interval).await;
        }
    }

    /// Streams the request to the upload server and relays its answer.
    async fn forward(&self, request: Request<Incoming>, url: &str) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let mut headers = HeaderMap::new();
        for (name, value) in &parts.headers {
            if !NOT_FORWARDED.contains(&name.as_str()) {
                headers.append(name.clone(), value.clone());
            }
        }
        let mut upstream = self
            .client
            .request(parts.method.clone(), url)
            .headers(headers);
        if parts.method != Method::HEAD && parts.method != Method::GET {
            upstream = upstream.body(reqwest::Body::wrap_stream(BodyDataStream::new(body)));
        }
        tracing::debug!(method = %parts.method, %url, "forwarding");
        let response = match upstream.send().await {
            Ok(response) => response,
            Err(err) => {
                let message = format!("error in upload-proxy: {}", error_chain(&err));
                tracing::warn!(%url, %message);
                return text(StatusCode::BAD_GATEWAY, &escape_html(&message));
            }
        };
        let status = response.status();
        let mut relayed = Response::builder().status(status);
        for (name, value) in response.headers() {
            if name == header::CONTENT_LENGTH
                || name == header::TRANSFER_ENCODING
                || name == header::CONNECTION
            {
                continue;
            }
            relayed = relayed.header(name, value);
        }
        // Upload server answers are short messages.
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(err) => Bytes::from(format!("error in upload-proxy: {}", error_chain(&err))),
        };
        relayed
            .body(Full::new(body))
            .unwrap_or_else(|e| text(StatusCode::BAD_GATEWAY, &e.to_string()))
    }
}

/// The token of an `Authorization: Bearer <token>` header, if it is one (case-insensitive
/// scheme, token characters as CDI's pattern allows).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(char::is_whitespace)?;
    let token = token.trim_start();
    let valid = |c: char| c.is_ascii_alphanumeric() || "-._~+/".contains(c);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.chars().all(valid))
        .then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "bearer abc.def-_".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("abc.def-_"));
        headers.insert(header::AUTHORIZATION, "Basic dXNlcjpwdw==".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer a b".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
        headers.insert(header::AUTHORIZATION, "Bearer".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
    }
}
