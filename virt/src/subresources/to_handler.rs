//! virt-api on a cluster: the paths a VMI's launcher answers (pause, the guest agent, the
//! console, VNC, port-forward) reach only the VMI's node, so virt-api forwards them to that
//! node's virt-handler over mutual TLS, WebSocket upgrades included, as KubeVirt's virt-api
//! does. virt-handler serves [`node_router`](super::node_router) there and publishes its
//! address on its Node under [`HANDLER_ADDRESS_ANNOTATION`].
//!
//! Written by hand because it is small and specific: one request forwarded as it came (no
//! pooling, no retries) and, on `101 Switching Protocols`, the two upgraded connections
//! joined.

use std::sync::Arc;

use api::kubevirt::VirtualMachineInstance;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client, ResourceExt};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::StatusError;

/// The Node annotation where virt-handler publishes the `host:port` of its server.
pub const HANDLER_ADDRESS_ANNOTATION: &str = "ferrovirt.io/virt-handler-address";
/// The name virt-handler's serving certificate carries, whatever its address.
pub const HANDLER_SERVER_NAME: &str = "virt-handler";
/// How long connecting to a handler (TCP and TLS) may take: a stale address must not hold
/// a console request for the kernel's connect timeout.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Forwards requests to the virt-handler of the addressed VMI's node.
#[derive(Clone)]
pub struct ToHandler {
    client: Client,
    tls: tokio_rustls::TlsConnector,
}

impl ToHandler {
    /// `tls` trusts virt-handler's serving certificate and presents virt-api's client one.
    pub fn new(client: Client, tls: Arc<rustls::ClientConfig>) -> Self {
        Self {
            client,
            tls: tokio_rustls::TlsConnector::from(tls),
        }
    }

    /// A router sending every request to the handler of its VMI's node.
    pub fn router(self) -> Router {
        Router::new().fallback(forward).with_state(self)
    }

    /// The `host:port` of the virt-handler that runs the VMI the path names.
    async fn handler_of(&self, target: &Target) -> Result<String, StatusError> {
        let vmi = Api::<VirtualMachineInstance>::namespaced(self.client.clone(), &target.namespace)
            .get_opt(&target.name)
            .await?;
        let not_running = |cause| StatusError::conflict(target.resource, &target.name, cause);
        let Some(vmi) = vmi else {
            return Err(if target.resource == "virtualmachine" {
                not_running("VMI is not started")
            } else {
                StatusError::not_found("virtualmachineinstance", &target.name)
            });
        };
        let node = vmi
            .status
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .ok_or_else(|| not_running("VMI is not running"))?;
        let node = Api::<Node>::all(self.client.clone())
            .get_opt(&node)
            .await?
            .ok_or_else(|| StatusError::internal(format!("the VMI's node {node} is gone")))?;
        node.annotations()
            .get(HANDLER_ADDRESS_ANNOTATION)
            .cloned()
            .ok_or_else(|| {
                StatusError::internal(format!(
                    "no virt-handler runs on node {} (annotation {HANDLER_ADDRESS_ANNOTATION} unset)",
                    node.name_any()
                ))
            })
    }

    /// Sends `request` to the handler at `address` and answers with its response; an
    /// upgrade is joined to the client's connection in the background.
    async fn send(&self, address: &str, mut request: Request) -> Result<Response, StatusError> {
        let unreachable = |e: &dyn std::fmt::Display| {
            StatusError::internal(format!("virt-handler at {address}: {e}"))
        };
        let name = ServerName::try_from(HANDLER_SERVER_NAME).map_err(|e| unreachable(&e))?;
        let connect = async {
            let tcp = TcpStream::connect(address).await?;
            let _ = tcp.set_nodelay(true);
            self.tls.connect(name, tcp).await
        };
        let tls = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| unreachable(&format!("no connection within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| unreachable(&e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| unreachable(&e))?;
        tokio::spawn(async move {
            if let Err(err) = connection.with_upgrades().await {
                tracing::debug!(%err, "the connection to virt-handler ended");
            }
        });
        let client_upgrade = request
            .extensions_mut()
            .remove::<hyper::upgrade::OnUpgrade>();
        let mut response = sender
            .send_request(request)
            .await
            .map_err(|e| unreachable(&e))?;
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            let handler_upgrade = hyper::upgrade::on(&mut response);
            if let Some(client_upgrade) = client_upgrade {
                tokio::spawn(join(client_upgrade, handler_upgrade));
            }
        }
        Ok(response.map(Body::new))
    }
}

/// Copies bytes both ways between the client's and the handler's upgraded connections
/// until both directions have ended.
async fn join(client: hyper::upgrade::OnUpgrade, handler: hyper::upgrade::OnUpgrade) {
    let (client, handler) = match tokio::try_join!(client, handler) {
        Ok(both) => both,
        Err(err) => {
            tracing::debug!(%err, "an upgrade through virt-api failed");
            return;
        }
    };
    let mut client = TokioIo::new(client);
    let mut handler = TokioIo::new(handler);
    if let Err(err) = tokio::io::copy_bidirectional(&mut client, &mut handler).await {
        tracing::debug!(%err, "a stream through virt-api ended");
    }
}

/// The object a forwarded path is about.
#[derive(Debug, PartialEq)]
struct Target {
    /// `virtualmachine` or `virtualmachineinstance`, as KubeVirt's messages name it.
    resource: &'static str,
    namespace: String,
    name: String,
}

/// `/apis/subresources.kubevirt.io/{version}/namespaces/{ns}/{resource}/{name}/{verb}...`
/// for a VM or a VMI (a VM's verbs are about its instance, of the same name).
fn target(path: &str) -> Option<Target> {
    let rest = path.strip_prefix(&format!("/apis/{}/", super::GROUP))?;
    let segments: Vec<&str> = rest.split('/').collect();
    let [_version, "namespaces", namespace, resource, name, _verb, ..] = segments.as_slice() else {
        return None;
    };
    let resource = match *resource {
        "virtualmachines" => "virtualmachine",
        "virtualmachineinstances" => "virtualmachineinstance",
        _ => return None,
    };
    let valid = |s: &str| !s.is_empty();
    (valid(namespace) && valid(name)).then(|| Target {
        resource,
        namespace: (*namespace).to_owned(),
        name: (*name).to_owned(),
    })
}

async fn forward(State(to): State<ToHandler>, request: Request) -> Response {
    let Some(target) = target(request.uri().path()) else {
        return super::not_found().await.into_response();
    };
    let answered = async {
        let address = to.handler_of(&target).await?;
        to.send(&address, request).await
    };
    answered.await.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_vm_or_vmi_they_are_about() {
        let base = "/apis/subresources.kubevirt.io/v1/namespaces/ns";
        assert_eq!(
            target(&format!("{base}/virtualmachineinstances/vmi/console")),
            Some(Target {
                resource: "virtualmachineinstance",
                namespace: "ns".into(),
                name: "vmi".into()
            })
        );
        assert_eq!(
            target(&format!("{base}/virtualmachines/vm/portforward/22/tcp")),
            Some(Target {
                resource: "virtualmachine",
                namespace: "ns".into(),
                name: "vm".into()
            })
        );
        for path in [
            format!("{base}/virtualmachineinstances/vmi"),
            format!("{base}/pods/p/console"),
            format!("{base}/virtualmachineinstances//console"),
            "/apis/other.io/v1/namespaces/ns/virtualmachineinstances/vmi/console".into(),
            "/apis/subresources.kubevirt.io/v1/version".into(),
        ] {
            assert_eq!(target(&path), None, "{path}");
        }
    }
}
