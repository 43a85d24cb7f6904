//! Finding a VMI's launcher: its live launcher pod, and the control socket in that pod's
//! `sockets` emptyDir as the node sees it. Shared by virt-handler and the subresource API.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use api::kubevirt::{VirtualMachineInstance, keys, pod_contract};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use tonic::transport::Channel;

use crate::launcher::control::{self, proto::cmd_client::CmdClient};

/// Where, on this node, the `sockets` emptyDir of a launcher pod is.
pub type SocketDirOf = Arc<dyn Fn(&Pod) -> PathBuf + Send + Sync>;

/// Why a launcher could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum LauncherLookupError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("VMI {0} has no running launcher pod")]
    NoLauncher(String),
    #[error("the launcher of VMI {vmi} does not answer on {socket}: {message}")]
    Unreachable {
        vmi: String,
        socket: PathBuf,
        message: String,
    },
}

/// Finds and connects to launchers.
#[derive(Clone)]
pub struct Launchers {
    client: Client,
    socket_dir: SocketDirOf,
}

impl Launchers {
    pub fn new(client: Client, socket_dir: SocketDirOf) -> Self {
        Self { client, socket_dir }
    }

    /// The VMI's running launcher pod.
    pub async fn pod(&self, vmi: &VirtualMachineInstance) -> Result<Pod, LauncherLookupError> {
        let namespace = vmi.namespace().unwrap_or_default();
        let selector = format!(
            "{}={}",
            keys::CREATED_BY_LABEL,
            vmi.uid().unwrap_or_default()
        );
        Api::<Pod>::namespaced(self.client.clone(), &namespace)
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .into_iter()
            .find(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
            .ok_or_else(|| LauncherLookupError::NoLauncher(vmi.name_any()))
    }

    /// A client of the VMI's launcher, waiting up to `wait` for its socket to appear.
    pub async fn connect(
        &self,
        vmi: &VirtualMachineInstance,
        wait: Duration,
    ) -> Result<CmdClient<Channel>, LauncherLookupError> {
        let pod = self.pod(vmi).await?;
        self.connect_to(vmi, &pod, wait).await
    }

    /// A client of the launcher in `pod` (the VMI's, found already), waiting up to `wait`
    /// for its socket to appear.
    pub async fn connect_to(
        &self,
        vmi: &VirtualMachineInstance,
        pod: &Pod,
        wait: Duration,
    ) -> Result<CmdClient<Channel>, LauncherLookupError> {
        let socket = pod_contract::control_socket(&(self.socket_dir)(pod));
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match control::connect(socket.clone()).await {
                Ok(client) => return Ok(client),
                Err(err) if tokio::time::Instant::now() >= deadline => {
                    return Err(LauncherLookupError::Unreachable {
                        vmi: vmi.name_any(),
                        socket,
                        message: err.to_string(),
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}
