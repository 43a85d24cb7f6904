//! What the agent reports in a pod's status: each container waiting, running, restarting or
//! ended, and the pod's phase and conditions as the kubelet derives them from those.

use k8s_openapi::api::core::v1::Container;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::pod_api::{now, patch_status};
use super::{AgentError, PodRun};

/// One container's state, as its status reports it.
pub(super) enum ContainerState<'a> {
    /// Not started yet; `why` says what it waits for, when something went wrong.
    Creating {
        why: &'a str,
    },
    Running {
        started: &'a str,
    },
    Restarting {
        code: i32,
        message: &'a str,
    },
    Terminated {
        started: &'a str,
        code: i32,
        message: &'a str,
    },
}

impl ContainerState<'_> {
    fn to_json(&self, container: &str) -> Value {
        match self {
            ContainerState::Creating { why: "" } => {
                json!({"waiting": {"reason": "ContainerCreating"}})
            }
            ContainerState::Creating { why } => {
                json!({"waiting": {"reason": "ContainerCreating", "message": why}})
            }
            ContainerState::Running { started } => json!({"running": {"startedAt": started}}),
            ContainerState::Restarting { .. } => json!({"waiting": {
                "reason": "CrashLoopBackOff",
                "message": format!("back-off restarting failed container {container}"),
            }}),
            ContainerState::Terminated {
                started,
                code,
                message,
            } => json!({"terminated": {
                "exitCode": code, "reason": exit_reason(*code), "message": message,
                "startedAt": started, "finishedAt": now(),
            }}),
        }
    }
}

fn exit_reason(code: i32) -> &'static str {
    if code == 0 { "Completed" } else { "Error" }
}

/// A container's status entry in `state`, after `restarts` restarts.
pub(super) fn container_status(
    uid: &str,
    container: &Container,
    restarts: i32,
    state: &ContainerState,
) -> Value {
    let running = matches!(state, ContainerState::Running { .. });
    let mut status = json!({
        "name": container.name,
        "image": container.image,
        "imageID": "",
        "containerID": format!("ferrovirt://{uid}/{}", container.name),
        "ready": running,
        "started": running,
        "restartCount": restarts,
        "state": state.to_json(&container.name),
    });
    if let ContainerState::Restarting { code, message } = state {
        status["lastState"] = json!({"terminated": {
            "exitCode": code, "reason": exit_reason(*code), "message": message, "finishedAt": now(),
        }});
    }
    status
}

/// The pod's phase from its containers' statuses, as the kubelet's `getPhase`: Pending until
/// every container has started once, Succeeded or Failed when every one has ended for good
/// (Failed when any ended with an error), Running otherwise.
pub(super) fn pod_phase(statuses: &[Value]) -> &'static str {
    let state = |s: &Value, which: &str| s["state"][which].is_object();
    let terminated: Vec<&Value> = statuses.iter().filter(|s| state(s, "terminated")).collect();
    if !statuses.is_empty() && terminated.len() == statuses.len() {
        let failed = terminated
            .iter()
            .any(|s| s["state"]["terminated"]["exitCode"].as_i64() != Some(0));
        return if failed { "Failed" } else { "Succeeded" };
    }
    let never_started = statuses
        .iter()
        .any(|s| s["state"]["waiting"]["reason"] == "ContainerCreating" && s["restartCount"] == 0);
    if never_started { "Pending" } else { "Running" }
}

/// The pod's status from its containers' statuses.
pub(super) fn pod_status(statuses: &[Value], ip: &str, start_time: &str) -> Value {
    let phase = pod_phase(statuses);
    let all_ready = statuses.iter().all(|s| s["ready"] == true);
    let ready = if all_ready {
        json!({"type": "Ready", "status": "True"})
    } else {
        let reason = if phase == "Succeeded" || phase == "Failed" {
            "PodCompleted"
        } else {
            "ContainersNotReady"
        };
        json!({"type": "Ready", "status": "False", "reason": reason})
    };
    let mut containers_ready = ready.clone();
    containers_ready["type"] = json!("ContainersReady");
    json!({"status": {
        "phase": phase,
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "hostIP": "127.0.0.1",
        "startTime": start_time,
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            containers_ready,
            ready,
        ],
        "containerStatuses": statuses,
    }})
}

impl PodRun {
    /// Every container as about to start, with the restarts reported before, and why it has
    /// not yet (empty when nothing went wrong).
    pub(super) async fn report_creating(&self, why: &str) -> Result<(), AgentError> {
        let uid = self.pod.uid().unwrap_or_default();
        let fresh: Vec<Value> = self
            .containers()
            .iter()
            .map(|c| {
                let restarts = self.observed_restarts(&c.name);
                container_status(&uid, c, restarts, &ContainerState::Creating { why })
            })
            .collect();
        let mut statuses = self.statuses.lock().await;
        *statuses = fresh;
        let status = pod_status(&statuses, &self.ip.to_string(), &self.start_time);
        patch_status(&self.agent().client, &self.pod, &status).await
    }

    /// Reports the container at `index` in `state`, with the others as last reported.
    pub(super) async fn report(
        &self,
        index: usize,
        restarts: i32,
        state: ContainerState<'_>,
    ) -> Result<(), AgentError> {
        let uid = self.pod.uid().unwrap_or_default();
        let Some(container) = self.containers().get(index) else {
            return Ok(());
        };
        let mut statuses = self.statuses.lock().await;
        if let Some(slot) = statuses.get_mut(index) {
            *slot = container_status(&uid, container, restarts, &state);
        }
        let status = pod_status(&statuses, &self.ip.to_string(), &self.start_time);
        patch_status(&self.agent().client, &self.pod, &status).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: ContainerState) -> Value {
        let container = Container {
            name: "step".into(),
            ..Default::default()
        };
        container_status("u", &container, 0, &state)
    }

    #[test]
    fn the_phase_follows_the_containers_as_the_kubelet_derives_it() {
        let creating = status(ContainerState::Creating { why: "" });
        let running = status(ContainerState::Running { started: "t" });
        let ended = |code| {
            status(ContainerState::Terminated {
                started: "t",
                code,
                message: "",
            })
        };
        assert_eq!(pod_phase(&[creating.clone(), running.clone()]), "Pending");
        assert_eq!(pod_phase(&[ended(0), running.clone()]), "Running");
        assert_eq!(pod_phase(&[ended(0), ended(0)]), "Succeeded");
        assert_eq!(pod_phase(&[ended(0), ended(1)]), "Failed");
        let restarting = status(ContainerState::Restarting {
            code: 1,
            message: "",
        });
        assert_eq!(pod_phase(&[restarting.clone(), running]), "Running");
        assert_eq!(restarting["lastState"]["terminated"]["exitCode"], 1);
    }

    #[test]
    fn the_pod_is_ready_only_when_every_container_is() {
        let running = status(ContainerState::Running { started: "t" });
        let creating = status(ContainerState::Creating { why: "" });
        let pod = pod_status(&[running.clone(), creating], "10.0.0.1", "t");
        assert_eq!(pod["status"]["conditions"][3]["status"], "False");
        let pod = pod_status(&[running.clone(), running], "10.0.0.1", "t");
        assert_eq!(pod["status"]["conditions"][3]["status"], "True");
        assert_eq!(pod["status"]["phase"], "Running");
    }
}
