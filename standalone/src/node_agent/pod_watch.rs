//! The pods of this node, followed by a watch: a pod to run gets its supervising task, a
//! deleted one is stopped, and what pods gone while no agent ran left published is
//! unpublished. Pods of other images are reported as unsupported.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::watch as stop_signal;
use tokio::task::JoinSet;

use super::pod_api::{now, patch_status, release, rfc3339};
use super::volumes::unpublish_leftovers;
use super::{AgentError, OWN_IMAGE, PodRun, Running, Shared, is_own_image};

impl Shared {
    /// Follows the pods until the watch ends.
    pub(super) async fn watch(self: Arc<Self>) {
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

    pub(super) fn tasks(&self) -> std::sync::MutexGuard<'_, JoinSet<()>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) async fn observe(self: Arc<Self>, pod: Pod) {
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
        let containers = pod
            .spec
            .as_ref()
            .map_or(&[][..], |s| s.containers.as_slice());
        if containers.is_empty() {
            return;
        }
        let foreign = containers
            .iter()
            .find(|c| !is_own_image(c.image.as_deref().unwrap_or_default()))
            .cloned();
        if let Some(container) = foreign {
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
            let start_time = pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map_or_else(now, |t| rfc3339(t.0));
            let run = PodRun {
                shared: shared.clone(),
                pod,
                ip,
                published: Vec::new(),
                statuses: tokio::sync::Mutex::new(Vec::new()),
                start_time,
                service_account: None,
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
    pub(super) fn stop(&self, uid: &str) -> bool {
        match self.running().get(uid) {
            Some(running) => {
                let _ = running.stop.send(true);
                true
            }
            None => false,
        }
    }

    /// Unpublishes what pods deleted while no agent ran left published.
    pub(super) async fn unpublish_for_pods_gone(&self, listed: &[String]) {
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

    pub(super) fn stop_all_except(&self, keep: &[String]) {
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

    pub(super) async fn report_unsupported(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<(), AgentError> {
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
