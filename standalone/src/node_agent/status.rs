//! What the agent reports in a pod's status: its container running, restarting or ended.

use kube::ResourceExt;
use serde_json::{Value, json};

use super::pod_api::{now, patch_status};
use super::{AgentError, PodRun};

impl PodRun {
    pub(super) fn container_status(&self, restarts: i32, state: Value, ready: bool) -> Value {
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

    pub(super) async fn report_running(
        &self,
        restarts: i32,
        started: &str,
    ) -> Result<(), AgentError> {
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

    pub(super) async fn report_restarting(
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

    pub(super) async fn report_terminated(
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
}
