//! The local node agent: the kubelet of one machine for the platform's own pods. A pod whose
//! container images are all Ferrovirt's (importer, upload server, cloner, a TaskRun's steps)
//! runs each container as a child process `ferrovirt <args>` with its environment, side by
//! side as a kubelet runs a pod's containers, each with its own log, status and restarts; its claims are bound (selecting this node
//! for WaitForFirstConsumer classes) and published through CSI NodeStage/NodePublish under
//! the pod's root directory, at the paths the pod expects (`FERROVIRT_POD_ROOT` tells the
//! program where that root is). Each pod gets its own loopback address as its pod IP. The
//! agent reports phase, restarts and termination messages, restarts per restartPolicy, and
//! stops the process when the pod is deleted. Pods of other images stay Pending with a
//! reason that says why.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::{Client, ResourceExt};
use tokio::sync::watch as stop_signal;
use tokio::task::JoinSet;

use crate::csi::{CsiClient, CsiError};
use crate::pod_network::PodNetwork;

mod environment;
mod identity;
mod lifecycle;
mod pod_api;
mod pod_watch;
mod process;
mod status;
mod volumes;

pub use crate::pod_files::{container_log, pod_root, state_dir};
use volumes::Published;

/// How often a pod waiting for node resources looks at the Node again.
const RESOURCE_RECHECK: Duration = Duration::from_secs(2);
pub use api::pod_contract::{OWN_IMAGE, is_own_image};
/// Where a container writes its termination message when it names no other path.
const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// Kubernetes' default `terminationGracePeriodSeconds`.
const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(30);
/// At shutdown, how long a stopped pod may take to unpublish its volumes.
const UNPUBLISH_TIME: Duration = Duration::from_secs(5);
/// Held on every pod whose process this agent runs, and released once the process has
/// ended and its volumes are unpublished: a deleted pod stays visible (with its
/// deletionTimestamp) until then, as a kubelet's graceful deletion keeps it.
pub const POD_FINALIZER: &str = "ferrovirt.io/local-node-agent";
/// How often a release races a concurrent change before it gives up.
const RELEASE_ATTEMPTS: usize = 20;
const MAX_BACKOFF: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Csi(#[from] CsiError),
    #[error("pod {pod}: {message}")]
    Pod { pod: String, message: String },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

pub struct LocalNodeAgent {
    pub client: Client,
    pub csi: CsiClient,
    pub node: String,
    /// Pod roots, volume staging and logs live here.
    pub state_dir: PathBuf,
    /// The `ferrovirt` binary the pods run.
    pub executable: PathBuf,
    /// The platform's kubeconfig: the cluster (address and CA) the pods' service accounts
    /// are projected for.
    pub kubeconfig: PathBuf,
}

struct Running {
    stop: stop_signal::Sender<bool>,
}

struct Shared {
    agent: LocalNodeAgent,
    running: Mutex<HashMap<String, Running>>,
    network: PodNetwork,
    /// The pods' supervising tasks, awaited at shutdown so that their volumes are unpublished.
    tasks: Mutex<JoinSet<()>>,
    /// Set at shutdown: no pod starts any more.
    stopping: AtomicBool,
    /// Set at shutdown: the longest a pod may take to stop from then on.
    shutdown_grace: std::sync::OnceLock<Duration>,
}

/// A running node agent, to shut down.
pub struct NodeAgentHandle {
    shared: Arc<Shared>,
}

impl NodeAgentHandle {
    /// Stops every pod, each within its grace period but at most `grace` (as a kubelet's
    /// graceful node shutdown caps them), and waits until each has unpublished its volumes
    /// (a pod left running would leave its mounts and loop devices behind).
    pub async fn shutdown(&self, grace: Duration) {
        let _ = self.shared.shutdown_grace.set(grace);
        self.shared.stopping.store(true, Ordering::Release);
        self.shared.stop_all_except(&[]);
        let mut tasks = std::mem::take(&mut *self.shared.tasks());
        let all_done = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(grace + UNPUBLISH_TIME, all_done)
            .await
            .is_err()
        {
            tracing::warn!("pods still stopping at shutdown; their volumes may stay mounted");
        }
    }
}

impl LocalNodeAgent {
    /// Claims a pod network and runs the pods of this node until the pod watch ends or the
    /// returned handle shuts the agent down.
    pub fn start(self) -> Result<NodeAgentHandle, AgentError> {
        let network = PodNetwork::claim(&self.state_dir).map_err(|source| AgentError::Io {
            what: "claiming a pod network",
            path: self.state_dir.clone(),
            source,
        })?;
        let shared = Arc::new(Shared {
            agent: self,
            running: Mutex::new(HashMap::new()),
            network,
            tasks: Mutex::new(JoinSet::new()),
            stopping: AtomicBool::new(false),
            shutdown_grace: std::sync::OnceLock::new(),
        });
        tokio::spawn(shared.clone().watch());
        Ok(NodeAgentHandle { shared })
    }
}

/// One pod's life on this node.
struct PodRun {
    shared: Arc<Shared>,
    pod: Pod,
    ip: Ipv4Addr,
    published: Vec<Published>,
    /// Each container's status as last reported, in the pod's order; held while a report
    /// is written, so that the reports of containers running side by side do not cross.
    statuses: tokio::sync::Mutex<Vec<serde_json::Value>>,
    /// When the pod first started on a node (kept across restarts of the agent).
    start_time: String,
    /// `KUBECONFIG` naming the pod's projected service account, once projected.
    service_account: Option<(String, String)>,
}

impl PodRun {
    fn agent(&self) -> &LocalNodeAgent {
        &self.shared.agent
    }

    fn name(&self) -> String {
        format!(
            "{}/{}",
            self.pod.namespace().unwrap_or_default(),
            self.pod.name_any()
        )
    }

    fn containers(&self) -> &[Container] {
        self.pod
            .spec
            .as_ref()
            .map_or(&[], |s| s.containers.as_slice())
    }

    fn root(&self) -> PathBuf {
        pod_root(&self.agent().state_dir, &self.pod.uid().unwrap_or_default())
    }

    fn error(&self, message: String) -> AgentError {
        AgentError::Pod {
            pod: self.name(),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::pod_contract::under_root as under;
    use std::path::Path;

    #[test]
    fn a_volume_is_in_use_while_any_pods_record_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let record = |uid: &str, handles: &[&str]| {
            let path = volumes::published_record(dir.path(), uid);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let published: Vec<serde_json::Value> = handles
                .iter()
                .map(|h| serde_json::json!({"handle": h, "staging": "/s", "target": "/t"}))
                .collect();
            std::fs::write(path, serde_json::to_vec(&published).unwrap()).unwrap();
        };
        record("a", &["pvc-1"]);
        record("b", &["pvc-1", "pvc-2"]);
        std::fs::create_dir_all(dir.path().join("pods/c")).unwrap();
        let in_use = volumes::handles_in_use(dir.path());
        assert_eq!(in_use.into_iter().collect::<Vec<_>>(), ["pvc-1", "pvc-2"]);
    }

    #[test]
    fn in_pod_paths_land_under_the_root() {
        assert_eq!(under(Path::new("/r"), "/data"), PathBuf::from("/r/data"));
        assert_eq!(
            under(Path::new("/r"), "/dev/cdi-block-volume"),
            PathBuf::from("/r/dev/cdi-block-volume")
        );
    }
}
