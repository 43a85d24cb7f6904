//! The CSI v1.x driver: Identity, Controller and Node gRPC services over the hostpath store,
//! served with tonic on a unix socket. One process per node is both the controller (with the
//! external-provisioner in node-deployment mode) and the node plugin, as HPP's driver is.

mod authority;
mod capability;
pub mod client;
mod controller;
mod identity;
mod node;
mod status;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrovirt_hostpath::HostPathStore;
use tokio::net::UnixListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;

/// The CSI bindings generated from `proto/csi.proto`.
pub mod proto {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("csi.v1");
}

/// HPP's driver name, so StorageClasses written for HPP keep working.
pub const DRIVER_NAME: &str = "kubevirt.io.hostpath-provisioner";
/// HPP's topology key: volumes are reachable only from the node that holds them.
pub const TOPOLOGY_KEY: &str = "topology.hostpath.csi/node";
/// The StorageClass parameter that picks the pool.
pub const POOL_PARAMETER: &str = "storagePool";

/// Who this driver is.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// The CSI driver name reported by GetPluginInfo.
    pub name: String,
    /// This node's id, as the CO knows it (the Kubernetes node name).
    pub node_id: String,
    /// The version reported by GetPluginInfo.
    pub version: String,
}

impl DriverConfig {
    /// A configuration with HPP's driver name and this crate's version.
    pub fn new(node_id: impl Into<String>) -> Self {
        Self {
            name: DRIVER_NAME.to_string(),
            node_id: node_id.into(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// The state shared by the three services.
#[derive(Clone)]
pub(crate) struct Shared {
    pub store: Arc<HostPathStore>,
    pub config: Arc<DriverConfig>,
}

impl Shared {
    /// This node's topology segment.
    pub fn topology(&self) -> proto::Topology {
        proto::Topology {
            segments: [(TOPOLOGY_KEY.to_string(), self.config.node_id.clone())].into(),
        }
    }
}

/// A failure to start serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("endpoint {0:?} is not a unix socket (expected unix:///path/to/csi.sock)")]
    Endpoint(String),
    #[error("socket {path}: {source}")]
    Socket {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The socket path of a CSI endpoint: `unix:///path`, `unix:/path` or a bare path.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, ServeError> {
    let path = endpoint
        .strip_prefix("unix://")
        .or_else(|| endpoint.strip_prefix("unix:"))
        .unwrap_or(endpoint);
    if path.is_empty() || endpoint.contains("://") && !endpoint.starts_with("unix://") {
        return Err(ServeError::Endpoint(endpoint.to_string()));
    }
    Ok(PathBuf::from(path))
}

/// Binds the socket (replacing a stale one) and serves the three CSI services until `shutdown`
/// completes.
pub async fn serve(
    store: Arc<HostPathStore>,
    config: DriverConfig,
    socket: &Path,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let socket_err = |source| ServeError::Socket {
        path: socket.to_path_buf(),
        source,
    };
    if let Some(parent) = socket.parent() {
        std::fs::create_dir_all(parent).map_err(socket_err)?;
    }
    match std::fs::remove_file(socket) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(socket_err(err)),
    }
    let listener = UnixListener::bind(socket).map_err(socket_err)?;
    tracing::info!(socket = %socket.display(), node = %config.node_id, "CSI driver serving");
    let shared = Shared {
        store,
        config: Arc::new(config),
    };
    tonic::transport::Server::builder()
        .add_service(proto::identity_server::IdentityServer::new(
            identity::IdentityService::new(shared.clone()),
        ))
        .add_service(proto::controller_server::ControllerServer::new(
            controller::ControllerService::new(shared.clone()),
        ))
        .add_service(proto::node_server::NodeServer::new(node::NodeService::new(
            shared,
        )))
        .serve_with_incoming_shutdown(
            UnixListenerStream::new(listener).map(|accepted| accepted.map(authority::relay)),
            shutdown,
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            socket_path("unix:///csi/csi.sock").unwrap(),
            PathBuf::from("/csi/csi.sock")
        );
        assert_eq!(
            socket_path("unix:/csi/csi.sock").unwrap(),
            PathBuf::from("/csi/csi.sock")
        );
        assert_eq!(socket_path("/x.sock").unwrap(), PathBuf::from("/x.sock"));
        assert!(socket_path("tcp://127.0.0.1:10000").is_err());
        assert!(socket_path("unix://").is_err());
    }
}
