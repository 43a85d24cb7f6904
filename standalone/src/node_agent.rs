//! The local node agent: the kubelet of one machine for the platform's own pods. A pod whose
//! container image is Ferrovirt's (importer, upload server, cloner) runs as a child process
//! `ferrovirt <args>` with the pod's environment; its claims are bound (selecting this node
//! for WaitForFirstConsumer classes) and published through CSI NodeStage/NodePublish under
//! the pod's root directory, at the paths the pod expects (`FERROVIRT_POD_ROOT` tells the
//! program where that root is). Each pod gets its own loopback address as its pod IP. The
//! agent reports phase, restarts and termination messages, restarts per restartPolicy, and
//! stops the process when the pod is deleted. Pods of other images stay Pending with a
//! reason that says why.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrovirt_hostpath::persist::{Readers, write_file};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret,
};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::sync::watch as stop_signal;
use tokio::task::JoinSet;

use crate::cri_log;
use crate::csi::{CsiClient, CsiError, Mode};
use crate::node_resources;
pub use crate::pod_files::{container_log, pod_root, state_dir};
use crate::pod_network::PodNetwork;
use crate::provisioner::SELECTED_NODE;
use crate::secondary_networks;

/// How often a pod waiting for node resources looks at the Node again.
const RESOURCE_RECHECK: Duration = Duration::from_secs(2);
/// The repository name of the images this agent runs (any registry, any tag).
pub const OWN_IMAGE: &str = "ferrovirt";
/// Where a pod's program finds the root its fixed paths (/data, /dev/...) live under.
pub const POD_ROOT_ENV: &str = "FERROVIRT_POD_ROOT";
/// The pod's own address, for programs that would listen on 0.0.0.0 in a container.
pub const POD_IP_ENV: &str = "FERROVIRT_POD_IP";
const TERMINATION_LOG: &str = "dev/termination-log";
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

/// Whether `image` is one this agent runs: its repository's last segment is `ferrovirt`.
pub fn is_own_image(image: &str) -> bool {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let repository = last.split(':').next().unwrap_or(last);
    repository == OWN_IMAGE
}

pub struct LocalNodeAgent {
    pub client: Client,
    pub csi: CsiClient,
    pub node: String,
    /// Pod roots, volume staging and logs live here.
    pub state_dir: PathBuf,
    /// The `ferrovirt` binary the pods run.
    pub executable: PathBuf,
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

impl Shared {
    /// Follows the pods until the watch ends.
    async fn watch(self: Arc<Self>) {
        let shared = self;
        let pods = Api::<Pod>::all(shared.agent.client.clone());
        // Backing off on errors: a broken connection must not spin.
        let mut events = watcher(pods, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut listed: Vec<String> = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listed.clear(),
                Ok(watcher::Event::InitApply(pod)) => {
                    listed.push(pod.uid().unwrap_or_default());
                    shared.clone().observe(pod).await;
                }
                Ok(watcher::Event::InitDone) => {
                    shared.stop_all_except(&listed);
                    shared.unpublish_for_pods_gone(&listed).await;
                }
                Ok(watcher::Event::Apply(pod)) => shared.clone().observe(pod).await,
                Ok(watcher::Event::Delete(pod)) => {
                    shared.stop(&pod.uid().unwrap_or_default());
                }
                Err(err) => tracing::warn!(%err, "pod watch"),
            }
        }
        tracing::error!("the local node agent's pod watch ended");
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, JoinSet<()>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn observe(self: Arc<Self>, pod: Pod) {
        let uid = pod.uid().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            if !self.stop(&uid) {
                // Nothing runs for it (any more): let the deletion finish.
                unpublish_leftovers(&self.agent.csi, &self.agent.state_dir, &uid).await;
                release(&self.agent.client, &pod).await;
            }
            return;
        }
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if self.running().contains_key(&uid) || self.stopping.load(Ordering::Acquire) {
            return;
        }
        if phase == "Succeeded" || phase == "Failed" {
            unpublish_leftovers(&self.agent.csi, &self.agent.state_dir, &uid).await;
            return;
        }
        let Some(container) = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .cloned()
        else {
            return;
        };
        let image = container.image.clone().unwrap_or_default();
        if !is_own_image(&image) {
            if let Err(err) = self.report_unsupported(&pod, &container).await {
                tracing::warn!(pod = %pod.name_any(), %err, "cannot report status");
            }
            return;
        }
        let (stop, stopped) = stop_signal::channel(false);
        self.running().insert(uid.clone(), Running { stop });
        let previous_ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_ref())
            .and_then(|ip| ip.parse().ok());
        let ip = self.network.assign(previous_ip);
        let shared = self.clone();
        let mut tasks = self.tasks();
        // Reap the tasks of pods that are done.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(async move {
            let name = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
            let run = PodRun {
                shared: shared.clone(),
                pod,
                container,
                ip,
                published: Vec::new(),
            };
            if let Err(err) = run.supervise(stopped).await {
                tracing::warn!(pod = %name, %err, "pod failed to run");
            }
            shared.running().remove(&uid);
            shared.network.release(ip);
        });
    }

    /// Tells the pod's process to stop; `false` when none runs. The pod stays listed as
    /// running until its task has ended and released it, so a later event for the pod
    /// cannot release it while its process still runs.
    fn stop(&self, uid: &str) -> bool {
        match self.running().get(uid) {
            Some(running) => {
                let _ = running.stop.send(true);
                true
            }
            None => false,
        }
    }

    /// Unpublishes what pods deleted while no agent ran left published.
    async fn unpublish_for_pods_gone(&self, listed: &[String]) {
        let Ok(entries) = std::fs::read_dir(self.agent.state_dir.join("pods")) else {
            return;
        };
        let uids: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|uid| !listed.contains(uid) && !self.running().contains_key(uid))
            .collect();
        for uid in uids {
            unpublish_leftovers(&self.agent.csi, &self.agent.state_dir, &uid).await;
        }
    }

    fn stop_all_except(&self, keep: &[String]) {
        let gone: Vec<String> = self
            .running()
            .keys()
            .filter(|uid| !keep.contains(uid))
            .cloned()
            .collect();
        for uid in gone {
            self.stop(&uid);
        }
    }

    async fn report_unsupported(&self, pod: &Pod, container: &Container) -> Result<(), AgentError> {
        let reason = "ImageNotSupported";
        let waiting = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone());
        if waiting.as_deref() == Some(reason) {
            return Ok(());
        }
        let image = container.image.clone().unwrap_or_default();
        let message = format!(
            "the local node agent runs only Ferrovirt's own images (…/{OWN_IMAGE}:TAG); {image} needs a Kubernetes cluster"
        );
        let status = json!({"status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
            "containerStatuses": [{"name": container.name, "image": image, "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": reason, "message": message}}}],
        }});
        patch_status(&self.agent.client, pod, &status).await
    }
}

/// Drops this agent's finalizer from `pod`, if it holds one.
async fn release(client: &Client, pod: &Pod) {
    let result = patch_guarded(client, pod, |current| {
        if !current.finalizers().iter().any(|f| f == POD_FINALIZER) {
            return None;
        }
        let finalizers: Vec<&String> = current
            .finalizers()
            .iter()
            .filter(|f| *f != POD_FINALIZER)
            .collect();
        Some(json!({"metadata": {"finalizers": finalizers}}))
    })
    .await;
    if let Err(err) = result {
        tracing::warn!(pod = %pod.name_any(), %err, "cannot release the pod");
    }
}

/// Merges the patch `change` makes of the pod as it is now (nothing when it makes none),
/// guarded by that resourceVersion: a concurrent change (a deletion, a status write, another
/// finalizer) makes it read the pod again and retry rather than overwrite it. The pod as
/// patched, or `None` when it is gone (or another pod of that name) or needs no change.
async fn patch_guarded(
    client: &Client,
    pod: &Pod,
    change: impl Fn(&Pod) -> Option<Value>,
) -> Result<Option<Pod>, kube::Error> {
    let api = Api::<Pod>::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    for _ in 0..RELEASE_ATTEMPTS {
        let current = match api.get_opt(&pod.name_any()).await? {
            Some(current) if current.uid() == pod.uid() => current,
            _ => return Ok(None),
        };
        let Some(mut patch) = change(&current) else {
            return Ok(Some(current));
        };
        patch["metadata"]["resourceVersion"] = json!(current.resource_version());
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(patched) => return Ok(Some(patched)),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
            Err(err) => return Err(err),
        }
    }
    Err(kube::Error::Api(
        kube::core::Status::failure(
            &format!("pod {} keeps changing", pod.name_any()),
            "Conflict",
        )
        .with_code(409)
        .boxed(),
    ))
}

async fn patch_status(client: &Client, pod: &Pod, status: &Value) -> Result<(), AgentError> {
    let api = Api::<Pod>::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(status),
    )
    .await?;
    Ok(())
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A volume published for this pod, to unpublish when it ends. Kept in the pod's directory
/// too ([`published_record`]), so what an agent killed at the wrong moment left published is
/// unpublished by the next one.
#[derive(serde::Serialize, serde::Deserialize)]
struct Published {
    handle: String,
    staging: PathBuf,
    target: PathBuf,
}

/// Where a pod's publications are recorded.
fn published_record(state_dir: &Path, pod_uid: &str) -> PathBuf {
    state_dir.join("pods").join(pod_uid).join("published.json")
}

/// Unpublishes what a pod that no longer runs here left published (its agent was killed
/// after the pod ended and before it cleaned up), and forgets the record once all is done.
async fn unpublish_leftovers(csi: &CsiClient, state_dir: &Path, pod_uid: &str) {
    let record = published_record(state_dir, pod_uid);
    let Ok(bytes) = std::fs::read(&record) else {
        return;
    };
    let published: Vec<Published> = match serde_json::from_slice(&bytes) {
        Ok(published) => published,
        Err(err) => {
            tracing::warn!(record = %record.display(), %err, "unreadable record of publications");
            Vec::new()
        }
    };
    let mut done = true;
    for p in &published {
        tracing::info!(pod = %pod_uid, volume = %p.handle, "unpublishing what a pod left published");
        if let Err(err) = csi.unpublish(&p.handle, &p.staging, &p.target).await {
            tracing::warn!(volume = %p.handle, %err, "cannot unpublish");
            done = false;
        }
    }
    if done {
        let _ = std::fs::remove_file(&record);
    }
}

/// One pod's life on this node.
struct PodRun {
    shared: Arc<Shared>,
    pod: Pod,
    container: Container,
    ip: Ipv4Addr,
    published: Vec<Published>,
}

enum Exit {
    Stopped,
    Exited { code: i32, message: String },
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

    fn root(&self) -> PathBuf {
        pod_root(&self.agent().state_dir, &self.pod.uid().unwrap_or_default())
    }

    /// Takes the pod onto this node: its finalizer, so a deletion waits for the process to
    /// end, and `spec.nodeName`, as the scheduler would set it.
    async fn claim(&mut self) -> Result<(), AgentError> {
        let node = self.agent().node.clone();
        let claimed = patch_guarded(&self.agent().client, &self.pod, |current| {
            let mut patch = json!({"metadata": {}});
            if !current.finalizers().iter().any(|f| f == POD_FINALIZER) {
                let mut finalizers = current.finalizers().to_vec();
                finalizers.push(POD_FINALIZER.into());
                patch["metadata"]["finalizers"] = json!(finalizers);
            }
            if current
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none()
            {
                patch["spec"] = json!({"nodeName": node});
            }
            (patch != json!({"metadata": {}})).then_some(patch)
        })
        .await?;
        self.pod = claimed.ok_or_else(|| AgentError::Pod {
            pod: self.pod.name_any(),
            message: "deleted before it could be claimed".into(),
        })?;
        Ok(())
    }

    /// Waits while the pod asks for node resources the Node does not offer (a bridge not on
    /// this machine), saying so in its PodScheduled condition as kube-scheduler does;
    /// `false` when the pod was stopped meanwhile. A pod already bound, or asking for no
    /// such resource, is not checked.
    async fn wait_until_schedulable(
        &self,
        stopped: &mut stop_signal::Receiver<bool>,
    ) -> Result<bool, AgentError> {
        let requested = node_resources::requested(&self.pod);
        let bound = self.pod.spec.as_ref().and_then(|s| s.node_name.as_ref());
        if requested.is_empty() || bound.is_some() {
            return Ok(true);
        }
        let nodes = Api::<Node>::all(self.agent().client.clone());
        let mut reported = None;
        loop {
            let node = nodes.get_status(&self.agent().node).await?;
            let missing = node_resources::missing(&requested, &node);
            if missing.is_empty() {
                return Ok(true);
            }
            let message = node_resources::unschedulable_message(&missing);
            if reported.as_ref() != Some(&message) {
                tracing::info!(pod = %self.name(), %message, "waiting for node resources");
                let status = json!({"status": {"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": message, "lastTransitionTime": now(),
                }]}});
                patch_status(&self.agent().client, &self.pod, &status).await?;
                reported = Some(message);
            }
            tokio::select! {
                _ = tokio::time::sleep(RESOURCE_RECHECK) => {}
                _ = stopped.changed() => return Ok(false),
            }
        }
    }

    /// The pod's `terminationGracePeriodSeconds`, capped by the node's shutdown.
    fn stop_grace(&self) -> Duration {
        let grace = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_STOP_GRACE);
        match self.shared.shutdown_grace.get() {
            Some(cap) => grace.min(*cap),
            None => grace,
        }
    }

    async fn supervise(
        mut self,
        mut stopped: stop_signal::Receiver<bool>,
    ) -> Result<(), AgentError> {
        let result = self.run_to_end(&mut stopped).await;
        release(&self.shared.agent.client, &self.pod).await;
        result
    }

    async fn run_to_end(
        &mut self,
        stopped: &mut stop_signal::Receiver<bool>,
    ) -> Result<(), AgentError> {
        if !self.wait_until_schedulable(stopped).await? {
            return Ok(());
        }
        self.claim().await?;
        let policy = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into());
        let was_running =
            self.pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if policy == "Never" && was_running {
            // Its process ended with the agent that ran it (a node restart): a pod that is
            // never restarted has failed.
            let message = "the node agent stopped while the pod ran";
            self.report_terminated(self.observed_restarts() - 1, &now(), 137, message)
                .await?;
            return Ok(());
        }
        let prepared = tokio::select! {
            result = self.prepare() => result,
            _ = stopped.changed() => Ok(None),
        };
        let mut env = match prepared {
            Ok(Some(env)) => env,
            Ok(None) => return self.cleanup().await,
            Err(err) => {
                self.cleanup().await?;
                return Err(err);
            }
        };
        let mut restarts = self.observed_restarts();
        loop {
            let started = now();
            let child = self.spawn(&env)?;
            self.report_running(restarts, &started).await?;
            match self.wait(child, stopped).await? {
                Exit::Stopped => return self.cleanup().await,
                Exit::Exited { code, message } => {
                    let restart = match policy.as_str() {
                        "Never" => false,
                        "OnFailure" => code != 0,
                        _ => true,
                    };
                    if !restart {
                        self.report_terminated(restarts, &started, code, &message)
                            .await?;
                        return self.cleanup().await;
                    }
                    restarts += 1;
                    self.report_restarting(restarts, code, &message).await?;
                    let backoff = Duration::from_secs(1 << restarts.min(4)).min(MAX_BACKOFF);
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stopped.changed() => return self.cleanup().await,
                    }
                    // A new container reads its Secrets and ConfigMaps again, as the
                    // kubelet's does: a fixed Secret fixes the next attempt.
                    match self.environment(&self.root()).await {
                        Ok(fresh) => env = fresh,
                        Err(err) => {
                            tracing::warn!(pod = %self.name(), %err, "cannot read the environment again; keeping the last one");
                        }
                    }
                }
            }
        }
    }

    /// Restarts reported before (a pod that was running when the agent last stopped).
    fn observed_restarts(&self) -> i32 {
        let status = self.pod.status.as_ref();
        let statuses = status.and_then(|s| s.container_statuses.as_ref());
        let previous = statuses
            .and_then(|c| c.first())
            .map(|c| c.restart_count)
            .unwrap_or(0);
        let was_running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
        previous + i32::from(was_running)
    }

    /// Volumes published and the environment built; `None` when stopped meanwhile.
    async fn prepare(&mut self) -> Result<Option<Vec<(String, String)>>, AgentError> {
        let root = self.root();
        for dir in [root.join("dev"), root.clone()] {
            std::fs::create_dir_all(&dir).map_err(|source| AgentError::Io {
                what: "creating",
                path: dir.clone(),
                source,
            })?;
        }
        self.publish_volumes(&root).await?;
        Ok(Some(self.environment(&root).await?))
    }

    async fn publish_volumes(&mut self, root: &Path) -> Result<(), AgentError> {
        let spec = self.pod.spec.clone().unwrap_or_default();
        let namespace = self.pod.namespace().unwrap_or_default();
        let container = self.container.clone();
        for volume in spec.volumes.unwrap_or_default() {
            let mounts: Vec<String> = container
                .volume_mounts
                .iter()
                .flatten()
                .filter(|m| m.name == volume.name)
                .map(|m| m.mount_path.clone())
                .collect();
            let devices: Vec<String> = container
                .volume_devices
                .iter()
                .flatten()
                .filter(|d| d.name == volume.name)
                .map(|d| d.device_path.clone())
                .collect();
            if let Some(claim) = &volume.persistent_volume_claim {
                let pv = self.bound_volume(&namespace, &claim.claim_name).await?;
                let pv_spec = pv.spec.clone().unwrap_or_default();
                let Some(csi) = pv_spec.csi else {
                    return Err(self.error(format!("volume {} is not a CSI volume", pv.name_any())));
                };
                let mode = Mode::from_volume_mode(pv_spec.volume_mode.as_deref());
                let staging = self.agent().state_dir.join("staging").join(pv.name_any());
                for path in mounts.iter().chain(devices.iter()) {
                    let target = under(root, path);
                    self.agent()
                        .csi
                        .publish(&csi.volume_handle, mode, &staging, &target)
                        .await?;
                    self.published.push(Published {
                        handle: csi.volume_handle.clone(),
                        staging: staging.clone(),
                        target,
                    });
                    self.record_published()?;
                }
            } else if let Some(source) = &volume.secret {
                let name = source.secret_name.clone().unwrap_or_default();
                let secret = Api::<Secret>::namespaced(self.agent().client.clone(), &namespace)
                    .get(&name)
                    .await?;
                let files: BTreeMap<String, Vec<u8>> = secret
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                write_files(root, &mounts, &files)?;
            } else if let Some(source) = &volume.config_map {
                let map = Api::<ConfigMap>::namespaced(self.agent().client.clone(), &namespace)
                    .get(&source.name)
                    .await?;
                let files: BTreeMap<String, Vec<u8>> = map
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect();
                write_files(root, &mounts, &files)?;
            } else {
                write_files(root, &mounts, &BTreeMap::new())?;
            }
        }
        Ok(())
    }

    /// The PV of a claim, once bound; selects this node for a claim waiting for a consumer.
    async fn bound_volume(
        &self,
        namespace: &str,
        claim: &str,
    ) -> Result<PersistentVolume, AgentError> {
        let claims =
            Api::<PersistentVolumeClaim>::namespaced(self.agent().client.clone(), namespace);
        let mut selected = false;
        loop {
            let pvc = claims.get(claim).await?;
            let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
            let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
            if let (Some(volume), true) = (volume, bound) {
                return Ok(Api::<PersistentVolume>::all(self.agent().client.clone())
                    .get(&volume)
                    .await?);
            }
            if !selected && !pvc.annotations().contains_key(SELECTED_NODE) {
                let patch =
                    json!({"metadata": {"annotations": {SELECTED_NODE: self.agent().node}}});
                claims
                    .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                selected = true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn environment(&self, root: &Path) -> Result<Vec<(String, String)>, AgentError> {
        let namespace = self.pod.namespace().unwrap_or_default();
        let mut env = vec![
            (POD_ROOT_ENV.to_string(), root.display().to_string()),
            (POD_IP_ENV.to_string(), self.ip.to_string()),
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
        ];
        let bridges = secondary_networks::pod_bridges(&self.agent().client, &self.pod)
            .await
            .map_err(|err| self.error(err.to_string()))?;
        if !bridges.is_empty() {
            env.push((
                secondary_networks::POD_BRIDGES_ENV.to_string(),
                secondary_networks::env_value(&bridges),
            ));
        }
        for var in self.container.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    if let Some(key) = &from.secret_key_ref {
                        let secret =
                            Api::<Secret>::namespaced(self.agent().client.clone(), &namespace)
                                .get(&key.name)
                                .await?;
                        let bytes = secret
                            .data
                            .and_then(|d| d.get(&key.key).map(|b| b.0.clone()));
                        String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned()
                    } else if let Some(key) = &from.config_map_key_ref {
                        let map =
                            Api::<ConfigMap>::namespaced(self.agent().client.clone(), &namespace)
                                .get(&key.name)
                                .await?;
                        map.data
                            .and_then(|d| d.get(&key.key).cloned())
                            .unwrap_or_default()
                    } else if let Some(field) = &from.field_ref {
                        self.field(&field.field_path)
                    } else {
                        String::new()
                    }
                }
                (None, None) => String::new(),
            };
            // 0.0.0.0 is the pod's own network; here, its loopback address.
            env.push((
                var.name.clone(),
                value.replace("0.0.0.0:", &format!("{}:", self.ip)),
            ));
        }
        Ok(env)
    }

    fn field(&self, path: &str) -> String {
        match path {
            "metadata.name" => self.pod.name_any(),
            "metadata.namespace" => self.pod.namespace().unwrap_or_default(),
            "metadata.uid" => self.pod.uid().unwrap_or_default(),
            "status.podIP" => self.ip.to_string(),
            "spec.nodeName" => self.agent().node.clone(),
            _ => String::new(),
        }
    }

    fn spawn(&self, env: &[(String, String)]) -> Result<Child, AgentError> {
        let args = self.container.args.clone().unwrap_or_default();
        let uid = self.pod.uid().unwrap_or_default();
        let log_path = container_log(&self.agent().state_dir, &uid, false);
        // Each run gets a log of its own; the one before stays for `--previous`.
        if log_path.exists() {
            let previous = container_log(&self.agent().state_dir, &uid, true);
            std::fs::rename(&log_path, &previous).map_err(|source| AgentError::Io {
                what: "keeping the previous log",
                path: previous,
                source,
            })?;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|source| AgentError::Io {
                what: "opening",
                path: log_path.clone(),
                source,
            })?;
        let log = Arc::new(Mutex::new(log));
        let pipe_error = |source: rustix::io::Errno| AgentError::Io {
            what: "making a pipe for the output to",
            path: log_path.clone(),
            source: source.into(),
        };
        let (stdout, stdout_writer) = rustix::pipe::pipe().map_err(pipe_error)?;
        let (stderr, stderr_writer) = rustix::pipe::pipe().map_err(pipe_error)?;
        // The kubelet's record per line, with its time, so that `kubectl logs` can show
        // times and start from one; the threads end when the container's output closes.
        for (output, stream) in [(stdout, "stdout"), (stderr, "stderr")] {
            let log = log.clone();
            std::thread::spawn(move || {
                if let Err(err) = cri_log::relay(std::fs::File::from(output), stream, &log) {
                    tracing::warn!(%err, stream, "writing a container's log");
                }
            });
        }
        let mut command = Command::new(&self.agent().executable);
        command
            .args(&args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout_writer))
            .stderr(Stdio::from(stderr_writer))
            .kill_on_drop(true);
        // SAFETY: only calls prctl, which is async-signal-safe, between fork and exec.
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        command.spawn().map_err(|source| AgentError::Io {
            what: "starting",
            path: self.agent().executable.clone(),
            source,
        })
    }

    async fn wait(
        &self,
        mut child: Child,
        stopped: &mut stop_signal::Receiver<bool>,
    ) -> Result<Exit, AgentError> {
        tokio::select! {
            status = child.wait() => {
                let code = status.map(|s| s.code().unwrap_or(137)).unwrap_or(1);
                let log = self.root().join(TERMINATION_LOG);
                let message = std::fs::read_to_string(&log).unwrap_or_default();
                let _ = std::fs::remove_file(&log);
                Ok(Exit::Exited { code, message: message.trim().to_string() })
            }
            _ = stopped.changed() => {
                if let Some(pid) = child.id().and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                }
                if tokio::time::timeout(self.stop_grace(), child.wait()).await.is_err() {
                    let _ = child.kill().await;
                }
                Ok(Exit::Stopped)
            }
        }
    }

    fn container_status(&self, restarts: i32, state: Value, ready: bool) -> Value {
        json!({
            "name": self.container.name,
            "image": self.container.image,
            "imageID": "",
            "containerID": format!("ferrovirt://{}", self.pod.uid().unwrap_or_default()),
            "ready": ready,
            "started": ready,
            "restartCount": restarts,
            "state": state,
        })
    }

    async fn report_running(&self, restarts: i32, started: &str) -> Result<(), AgentError> {
        let status = json!({"status": {
            "phase": "Running",
            "podIP": self.ip.to_string(),
            "podIPs": [{"ip": self.ip.to_string()}],
            "hostIP": "127.0.0.1",
            "startTime": started,
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
            "containerStatuses": [self.container_status(restarts, json!({"running": {"startedAt": started}}), true)],
        }});
        patch_status(&self.agent().client, &self.pod, &status).await
    }

    async fn report_restarting(
        &self,
        restarts: i32,
        code: i32,
        message: &str,
    ) -> Result<(), AgentError> {
        let mut waiting = self.container_status(
            restarts,
            json!({"waiting": {"reason": "CrashLoopBackOff", "message": format!("back-off restarting failed container {}", self.container.name)}}),
            false,
        );
        waiting["lastState"] = json!({"terminated": {"exitCode": code, "reason": "Error", "message": message, "finishedAt": now()}});
        let status = json!({"status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
            "containerStatuses": [waiting],
        }});
        patch_status(&self.agent().client, &self.pod, &status).await
    }

    async fn report_terminated(
        &self,
        restarts: i32,
        started: &str,
        code: i32,
        message: &str,
    ) -> Result<(), AgentError> {
        let reason = if code == 0 { "Completed" } else { "Error" };
        let terminated = json!({"terminated": {
            "exitCode": code, "reason": reason, "message": message, "startedAt": started, "finishedAt": now(),
        }});
        let status = json!({"status": {
            "phase": if code == 0 { "Succeeded" } else { "Failed" },
            "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}],
            "containerStatuses": [self.container_status(restarts, terminated, false)],
        }});
        patch_status(&self.agent().client, &self.pod, &status).await
    }

    /// Writes down what is published for the pod, before anything else can happen to it.
    fn record_published(&self) -> Result<(), AgentError> {
        let uid = self.pod.uid().unwrap_or_default();
        let path = published_record(&self.agent().state_dir, &uid);
        let bytes = serde_json::to_vec(&self.published).unwrap_or_default();
        write_file(&path, &bytes, Readers::Owner).map_err(|source| AgentError::Io {
            what: "writing",
            path,
            source,
        })
    }

    async fn cleanup(&mut self) -> Result<(), AgentError> {
        let mut left = false;
        for published in self.published.drain(..) {
            if let Err(err) = self
                .shared
                .agent
                .csi
                .unpublish(&published.handle, &published.staging, &published.target)
                .await
            {
                tracing::warn!(volume = %published.handle, %err, "cannot unpublish");
                left = true;
            }
        }
        if !left {
            let uid = self.pod.uid().unwrap_or_default();
            let _ = std::fs::remove_file(published_record(&self.agent().state_dir, &uid));
        }
        if let Some(pod_dir) = self.root().parent() {
            let _ = std::fs::remove_dir_all(pod_dir.join("root"));
        }
        Ok(())
    }

    fn error(&self, message: String) -> AgentError {
        AgentError::Pod {
            pod: self.name(),
            message,
        }
    }
}

/// `root` joined with an absolute in-pod path.
fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Materializes Secret/ConfigMap keys as files (and empty directories for emptyDir).
fn write_files(
    root: &Path,
    mounts: &[String],
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<(), AgentError> {
    for mount in mounts {
        let dir = under(root, mount);
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| AgentError::Io { what, path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io("creating", &dir))?;
        for (key, content) in files {
            let path = dir.join(key);
            std::fs::write(&path, content).map_err(io("writing", &path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_images_are_recognized_by_repository_name() {
        assert!(is_own_image("quay.io/ferrovirt/ferrovirt:latest"));
        assert!(is_own_image("ferrovirt"));
        assert!(is_own_image("localhost:5000/ferrovirt@sha256:abc"));
        assert!(!is_own_image("quay.io/kubevirt/cdi-importer:v1.60"));
        assert!(!is_own_image("quay.io/ferrovirt/other:1"));
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
