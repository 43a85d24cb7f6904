//! One pod's life on this node: waiting until the node offers what it asks for, claiming
//! it, preparing it, and running its containers until they end or are stopped, restarting
//! each per the pod's restartPolicy with a growing back-off.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;
use tokio::sync::watch as stop_signal;

use super::pod_api::{now, patch_guarded, patch_status, release};
use super::process::Exit;
use super::status::ContainerState;
use super::{AgentError, MAX_BACKOFF, POD_FINALIZER, PodRun, RESOURCE_RECHECK};
use crate::node_resources;

impl PodRun {
    pub(super) async fn supervise(
        mut self,
        mut stopped: stop_signal::Receiver<bool>,
    ) -> Result<(), AgentError> {
        let result = self.run_to_end(&mut stopped).await;
        release(&self.shared.agent.client, &self.pod).await;
        result
    }

    pub(super) async fn run_to_end(
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
            // Its processes ended with the agent that ran them (a node restart): a pod that
            // is never restarted has failed.
            self.report_creating("").await?;
            let message = "the node agent stopped while the pod ran";
            for (index, container) in self.containers().iter().enumerate() {
                let restarts = self.observed_restarts(&container.name) - 1;
                let state = ContainerState::Terminated {
                    started: &self.start_time,
                    code: 137,
                    message,
                };
                self.report(index, restarts, state).await?;
            }
            return Ok(());
        }
        // A kubelet retries what keeps a pod from starting (a volume that cannot be
        // published yet) until the pod is deleted, saying why in its status.
        let mut attempts = 0;
        loop {
            let prepared = tokio::select! {
                result = self.prepare() => Some(result),
                _ = stopped.changed() => None,
            };
            let err = match prepared {
                Some(Ok(())) => break,
                None => return self.cleanup().await,
                Some(Err(err)) => err,
            };
            self.cleanup().await?;
            attempts += 1;
            tracing::warn!(pod = %self.name(), %err, attempts, "cannot prepare the pod; retrying");
            self.report_creating(&err.to_string()).await?;
            let backoff = backoff(attempts);
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stopped.changed() => return Ok(()),
            }
        }
        self.report_creating("").await?;
        // The containers run side by side, as a kubelet runs them; the pod ends when the
        // last one has.
        let runs = (0..self.containers().len())
            .map(|index| self.run_container(index, &policy, stopped.clone()));
        let ended = futures_util::future::join_all(runs).await;
        self.cleanup().await?;
        ended.into_iter().collect()
    }

    /// Runs the container at `index` until it ends for good (per `policy`) or is stopped.
    async fn run_container(
        &self,
        index: usize,
        policy: &str,
        mut stopped: stop_signal::Receiver<bool>,
    ) -> Result<(), AgentError> {
        let Some(container) = self.containers().get(index) else {
            return Ok(());
        };
        let root = self.root();
        let mut env = self.environment(&root, container).await?;
        let mut restarts = self.observed_restarts(&container.name);
        loop {
            let started = now();
            let child = self.spawn(container, &env)?;
            self.report(
                index,
                restarts,
                ContainerState::Running { started: &started },
            )
            .await?;
            let (code, message) = match self.wait(container, child, &mut stopped).await? {
                Exit::Stopped => return Ok(()),
                Exit::Exited { code, message } => (code, message),
            };
            let restart = match policy {
                "Never" => false,
                "OnFailure" => code != 0,
                _ => true,
            };
            if !restart {
                let state = ContainerState::Terminated {
                    started: &started,
                    code,
                    message: &message,
                };
                return self.report(index, restarts, state).await;
            }
            restarts += 1;
            let state = ContainerState::Restarting {
                code,
                message: &message,
            };
            self.report(index, restarts, state).await?;
            let backoff = backoff(restarts);
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stopped.changed() => return Ok(()),
            }
            // A new container reads its Secrets and ConfigMaps again, as the kubelet's
            // does: a fixed Secret fixes the next attempt.
            match self.environment(&root, container).await {
                Ok(fresh) => env = fresh,
                Err(err) => {
                    tracing::warn!(pod = %self.name(), %err, "cannot read the environment again; keeping the last one");
                }
            }
        }
    }

    /// Takes the pod onto this node: its finalizer, so a deletion waits for the process to
    /// end, and `spec.nodeName`, as the scheduler would set it.
    pub(super) async fn claim(&mut self) -> Result<(), AgentError> {
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
    pub(super) async fn wait_until_schedulable(
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

    /// Restarts of the container `name` reported before (counting one more for a pod that
    /// was running when the agent last stopped).
    pub(super) fn observed_restarts(&self, name: &str) -> i32 {
        let status = self.pod.status.as_ref();
        let previous = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.iter().find(|c| c.name == name))
            .map(|c| c.restart_count)
            .unwrap_or(0);
        let was_running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
        previous + i32::from(was_running)
    }

    /// The pod's root made, its volumes published and its service account projected.
    pub(super) async fn prepare(&mut self) -> Result<(), AgentError> {
        let root = self.root();
        for dir in [root.join("dev"), root.clone()] {
            std::fs::create_dir_all(&dir).map_err(|source| AgentError::Io {
                what: "creating",
                path: dir.clone(),
                source,
            })?;
        }
        self.publish_volumes(&root).await?;
        self.service_account = self.project_service_account(&root).await?;
        Ok(())
    }
}

/// The wait before attempt `attempts + 1` of a restart or a preparation: doubling from 2 s,
/// at most [`MAX_BACKOFF`].
fn backoff(attempts: i32) -> Duration {
    Duration::from_secs(1 << attempts.clamp(0, 4)).min(MAX_BACKOFF)
}
