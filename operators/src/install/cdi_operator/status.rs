//! The CDI CR's status on a cluster, with the operator SDK's phases, conditions and words
//! (controller-lifecycle-operator-sdk, which cdi-operator reports through).

use serde_json::{Value, json};

use crate::install::operator_cr::{VERSION, deployed_cdi_status, sdk_condition};
use crate::install::workloads::Workload;

/// The Deployments of the install strategy.
pub const DEPLOYMENTS: [&str; 2] = ["ferrovirt-controller", "ferrovirt-webhook"];

/// The status of the active CR once every object is created: `Deploying` until every
/// Deployment is ready, then `Deployed`. A Deployed CR stays Deployed and Available while a
/// Deployment recovers, only Degraded (the SDK's `CheckDegraded`).
pub fn deploy_status(workloads: &[Workload], current_phase: &str, now: &str) -> Value {
    let ready = workloads.iter().all(|w| w.ready);
    if ready || current_phase == "Deployed" {
        let mut status = deployed_cdi_status(now);
        if !ready {
            status["conditions"][2] = sdk_condition("Degraded", "True", "", "", now);
        }
        return status;
    }
    json!({
        "phase": "Deploying",
        "conditions": [
            sdk_condition("Available", "False", "", "", now),
            sdk_condition("Progressing", "True", "DeployStarted", "Started Deployment", now),
            sdk_condition("Degraded", "False", "", "", now),
        ],
        "operatorVersion": VERSION,
        "targetVersion": VERSION,
    })
}

/// The status of a CDI CR other than the active one.
pub fn unwanted_status(now: &str) -> Value {
    let message = "Reconciling to error state, unwanted CDI object";
    json!({
        "phase": "Error",
        "conditions": [
            sdk_condition("Available", "False", "", "", now),
            sdk_condition("Progressing", "False", "", "", now),
            sdk_condition("Degraded", "True", "ConfigError", message, now),
        ],
    })
}

/// The status while the CR's deployment is being removed.
pub fn deleting_status() -> Value {
    json!({"phase": "Deleting"})
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-11-26T00:00:00Z";

    fn condition_of<'a>(status: &'a Value, type_: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == type_))
            .unwrap_or_else(|| panic!("{type_} in {status}"))
    }

    #[test]
    fn deploying_until_both_deployments_are_ready_then_deployed() {
        let workload = |name: &str, ready| Workload {
            name: name.to_owned(),
            ready,
        };
        let some = [
            workload("ferrovirt-controller", true),
            workload("ferrovirt-webhook", false),
        ];
        let status = deploy_status(&some, "", NOW);
        assert_eq!(status["phase"], "Deploying");
        assert_eq!(condition_of(&status, "Available")["status"], "False");
        assert_eq!(
            condition_of(&status, "Progressing")["reason"],
            "DeployStarted"
        );
        let all = [
            workload("ferrovirt-controller", true),
            workload("ferrovirt-webhook", true),
        ];
        let status = deploy_status(&all, "Deploying", NOW);
        assert_eq!(status["phase"], "Deployed");
        assert_eq!(condition_of(&status, "Available")["status"], "True");
        assert_eq!(
            condition_of(&status, "Available")["reason"],
            "DeployCompleted"
        );
        assert_eq!(status["observedVersion"], VERSION);
        let recovering = deploy_status(&some, "Deployed", NOW);
        assert_eq!(recovering["phase"], "Deployed");
        assert_eq!(condition_of(&recovering, "Available")["status"], "True");
        assert_eq!(condition_of(&recovering, "Degraded")["status"], "True");
    }

    #[test]
    fn a_second_cr_is_an_error_in_cdi_operators_words() {
        let status = unwanted_status(NOW);
        assert_eq!(status["phase"], "Error");
        assert_eq!(
            condition_of(&status, "Degraded")["message"],
            "Reconciling to error state, unwanted CDI object"
        );
    }
}
