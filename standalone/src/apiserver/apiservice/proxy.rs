//! The proxy to an APIService's backend, as kube-aggregator's: each request goes over HTTPS
//! to the address its Service resolves to, verified against `spec.caBundle` and presenting the
//! front-proxy client certificate; bodies stream both ways, and an upgrade the backend accepts
//! (a WebSocket console) becomes a byte pipe between client and backend.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::endpoint::{self, EndpointError, ServiceReference};
use crate::apiserver::aggregated::{AggregatedBody, AggregatedService, BoxError, unavailable};
use crate::apiserver::errors::ApiError;
use crate::apiserver::objects::Objects;

/// How long connecting to a backend (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a request could not reach the backend; each ends as a 503 Status.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    #[error("reading the service: {0}")]
    Store(#[from] ApiError),
    #[error("the APIService's TLS settings: {0}")]
    TlsConfig(String),
    #[error("error trying to reach service: dial tcp {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("error trying to reach service: dial tcp {0}: i/o timeout")]
    Timeout(SocketAddr),
    #[error("error trying to reach service: tls: {0}")]
    Tls(std::io::Error),
    #[error("error trying to reach service: {0}")]
    Http(#[from] hyper::Error),
}

/// One APIService's backend: its Service, and the TLS client settings it is reached with
/// (or why they could not be made, said to every request).
pub struct Backend {
    objects: Arc<Objects>,
    pub service: ServiceReference,
    tls: Result<TlsConnector, String>,
}

impl Backend {
    pub fn new(
        objects: Arc<Objects>,
        service: ServiceReference,
        tls: Result<Arc<rustls::ClientConfig>, String>,
    ) -> Backend {
        Backend {
            objects,
            service,
            tls: tls.map(TlsConnector::from),
        }
    }

    /// The backend as the service of an aggregated API: every request proxied.
    pub fn into_service(self: Arc<Self>) -> AggregatedService {
        Arc::new(move |request| {
            let backend = self.clone();
            Box::pin(async move {
                match backend.forward(request).await {
                    Ok(response) => response,
                    Err(err) => {
                        tracing::debug!(service = %backend.service, %err, "proxy failed");
                        unavailable(err.into())
                    }
                }
            })
        })
    }

    /// The backend's address, from the stored Service and Endpoints.
    pub async fn resolve(&self) -> Result<SocketAddr, ProxyError> {
        let objects = self.objects.clone();
        let reference = self.service.clone();
        tokio::task::spawn_blocking(move || {
            let read = |resource: &str| -> Result<Option<serde_json::Value>, ProxyError> {
                Ok(objects
                    .store
                    .get(resource, &reference.namespace, &reference.name)?)
            };
            // A stored object that does not parse is as good as none.
            let service: Option<Service> =
                read("/services")?.and_then(|v| serde_json::from_value(v).ok());
            let endpoints: Option<Endpoints> =
                read("/endpoints")?.and_then(|v| serde_json::from_value(v).ok());
            Ok(endpoint::resolve(
                &reference,
                service.as_ref(),
                endpoints.as_ref(),
            )?)
        })
        .await
        .map_err(|e| ProxyError::Store(ApiError::internal(e)))?
    }

    /// An HTTP/1.1 connection to the backend at `addr`, driven on its own task.
    async fn connect(
        &self,
        addr: SocketAddr,
    ) -> Result<hyper::client::conn::http1::SendRequest<AggregatedBody>, ProxyError> {
        let connector = self.tls.clone().map_err(ProxyError::TlsConfig)?;
        let server_name = ServerName::try_from(self.service.server_name())
            .map_err(|e| ProxyError::TlsConfig(e.to_string()))?;
        let connecting = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|source| ProxyError::Connect { addr, source })?;
            connector
                .connect(server_name, tcp)
                .await
                .map_err(ProxyError::Tls)
        };
        let tls = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
            .await
            .map_err(|_| ProxyError::Timeout(addr))??;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(async move {
            if let Err(err) = connection.with_upgrades().await {
                tracing::debug!(%addr, %err, "backend connection ended");
            }
        });
        Ok(sender)
    }

    /// Sends `request` to the backend and answers with its response; an accepted upgrade
    /// joins the client's connection to the backend's.
    pub async fn forward(
        &self,
        mut request: Request<Incoming>,
    ) -> Result<Response<AggregatedBody>, ProxyError> {
        let addr = self.resolve().await?;
        let mut sender = self.connect(addr).await?;
        let upgrading = is_upgrade(request.headers());
        let client_side = upgrading.then(|| hyper::upgrade::on(&mut request));
        let (mut parts, body) = request.into_parts();
        remove_hop_by_hop(&mut parts.headers, upgrading);
        if let Ok(host) = HeaderValue::from_str(&format!(
            "{}:{}",
            self.service.server_name(),
            self.service.port
        )) {
            parts.headers.insert(header::HOST, host);
        }
        let outgoing = Request::from_parts(parts, body.map_err(BoxError::from).boxed_unsync());
        let mut response = sender.send_request(outgoing).await?;
        let switched = response.status() == StatusCode::SWITCHING_PROTOCOLS;
        if let (true, Some(client_side)) = (switched, client_side) {
            let backend_side = hyper::upgrade::on(&mut response);
            tokio::spawn(join_upgraded(client_side, backend_side));
        }
        remove_hop_by_hop(response.headers_mut(), switched);
        Ok(response.map(|body| body.map_err(BoxError::from).boxed_unsync()))
    }

    /// kube-aggregator's availability check: `GET /apis/{group}/{version}` as
    /// `system:kube-aggregator` (group `system:masters`) answers 2xx.
    pub async fn check_discovery(&self, group: &str, version: &str) -> Result<(), String> {
        let path = format!("/apis/{group}/{version}");
        let addr = self.resolve().await.map_err(|e| e.to_string())?;
        let failing =
            |err: String| format!("failing or missing response from https://{addr}{path}: {err}");
        let request = Request::get(path.as_str())
            .header(
                header::HOST,
                format!("{}:{}", self.service.server_name(), self.service.port),
            )
            .header("x-remote-user", "system:kube-aggregator")
            .header("x-remote-group", "system:masters")
            .body(Empty::new().map_err(BoxError::from).boxed_unsync())
            .map_err(|e| failing(e.to_string()))?;
        let exchange = async {
            let mut sender = self.connect(addr).await?;
            let response = sender.send_request(request).await?;
            Ok::<_, ProxyError>(response.status())
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, exchange).await {
            Ok(Ok(status)) if status.is_success() => Ok(()),
            Ok(Ok(status)) => Err(failing(format!("bad status: {}", status.as_u16()))),
            Ok(Err(err)) => Err(failing(err.to_string())),
            Err(_) => Err(failing("timeout".into())),
        }
    }
}

/// Copies bytes both ways between the client's and the backend's upgraded connections
/// until both sides end.
async fn join_upgraded(client: hyper::upgrade::OnUpgrade, backend: hyper::upgrade::OnUpgrade) {
    let (client, backend) = match tokio::try_join!(client, backend) {
        Ok(both) => both,
        Err(err) => {
            tracing::debug!(%err, "upgrade through the proxy failed");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut backend = TokioIo::new(backend);
    if let Err(err) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
        tracing::debug!(%err, "upgraded connection through the proxy ended");
    }
}

/// Whether a request asks to switch protocols (`Connection: upgrade`).
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
        && headers.contains_key(header::UPGRADE)
}

/// Drops the headers of one hop (RFC 9110 §7.6.1), and those `Connection` names; an upgrade
/// keeps `Connection` and `Upgrade`, which it is about.
fn remove_hop_by_hop(headers: &mut HeaderMap, upgrading: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .filter(|name| !(upgrading && name == header::UPGRADE))
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::PROXY_AUTHORIZATION,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ] {
        headers.remove(name);
    }
    if !upgrading {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_stay_behind_except_an_upgrade() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("Upgrade, X-Hop"),
        );
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert("x-hop", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("x-remote-user", HeaderValue::from_static("alice"));
        assert!(is_upgrade(&headers));
        let mut upgrade = headers.clone();
        remove_hop_by_hop(&mut upgrade, true);
        assert_eq!(upgrade[header::UPGRADE], "websocket");
        assert!(upgrade.contains_key(header::CONNECTION));
        assert!(!upgrade.contains_key("x-hop") && !upgrade.contains_key("keep-alive"));
        remove_hop_by_hop(&mut headers, false);
        assert!(!headers.contains_key(header::UPGRADE));
        assert!(!headers.contains_key(header::CONNECTION));
        assert_eq!(headers["x-remote-user"], "alice");
    }
}
