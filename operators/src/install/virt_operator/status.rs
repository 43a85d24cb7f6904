//! The KubeVirt CR's status on a cluster, from its workloads, with virt-operator's phases,
//! reasons and messages.

use serde_json::{Value, json};

use crate::install::operator_cr::{VERSION, condition, deployed_kubevirt_status};
use crate::install::workloads::Workload;

/// The Deployments of the install strategy.
pub const DEPLOYMENTS: [&str; 2] = ["virt-api", "virt-controller"];
/// The DaemonSets of the install strategy.
pub const DAEMONSETS: [&str; 1] = ["virt-handler"];

/// The registry of `image`: all but its last path element (`quay.io/ferrovirt` of
/// `quay.io/ferrovirt/ferrovirt:latest`), as virt-operator reports its registry.
pub fn registry_of(image: &str) -> &str {
    image.rsplit_once('/').map_or("", |(registry, _)| registry)
}

/// The status of the active CR once every object is created: `Deploying` until every
/// workload is ready, then `Deployed`. Once deployed, a workload going unready does not
/// take the phase back, as virt-operator never does.
pub fn deploy_status(
    workloads: &[Workload],
    current_phase: &str,
    generation: i64,
    image: &str,
    now: &str,
) -> Value {
    let registry = registry_of(image);
    let mut status = if workloads.iter().all(|w| w.ready) {
        let mut status = deployed_kubevirt_status(generation, now);
        status["observedKubeVirtRegistry"] = json!(registry);
        status
    } else {
        let message = format!("Deploying version {VERSION} with registry {registry}");
        json!({
            "phase": if current_phase == "Deployed" { "Deployed" } else { "Deploying" },
            "conditions": [
                condition("Available", "False", "DeploymentInProgress", &message, now),
                condition("Progressing", "True", "DeploymentInProgress", &message, now),
                condition("Degraded", "False", "DeploymentInProgress", &message, now),
                condition("Created", "True", "AllResourcesCreated", "All resources were created.", now),
            ],
            "operatorVersion": VERSION,
            "targetKubeVirtVersion": VERSION,
            "targetDeploymentID": VERSION,
        })
    };
    status["targetKubeVirtRegistry"] = json!(registry);
    status
}

/// The status while the CR's deployment is being removed.
pub fn deleting_status(now: &str) -> Value {
    let message = "Deletion was triggered";
    json!({
        "phase": "Deleting",
        "conditions": [
            condition("Available", "False", "DeletionInProgress", message, now),
            condition("Progressing", "False", "DeletionInProgress", message, now),
            condition("Degraded", "True", "DeletionInProgress", message, now),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-11-26T00:00:00Z";

    fn workload(name: &str, ready: bool) -> Workload {
        Workload {
            name: name.to_owned(),
            ready,
        }
    }

    fn condition_of<'a>(status: &'a Value, type_: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == type_))
            .unwrap_or_else(|| panic!("{type_} in {status}"))
    }

    #[test]
    fn deploying_until_every_workload_is_ready_then_deployed() {
        let image = "registry.example/fv/ferrovirt:1";
        let some = [workload("virt-api", true), workload("virt-handler", false)];
        let status = deploy_status(&some, "", 3, image, NOW);
        assert_eq!(status["phase"], "Deploying");
        let available = condition_of(&status, "Available");
        assert_eq!(available["status"], "False");
        assert_eq!(available["reason"], "DeploymentInProgress");
        assert_eq!(
            available["message"],
            format!("Deploying version {VERSION} with registry registry.example/fv")
        );
        assert_eq!(condition_of(&status, "Created")["status"], "True");

        let all = [workload("virt-api", true), workload("virt-handler", true)];
        let status = deploy_status(&all, "Deploying", 3, image, NOW);
        assert_eq!(status["phase"], "Deployed");
        assert_eq!(
            condition_of(&status, "Available")["reason"],
            "AllComponentsReady"
        );
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(status["observedKubeVirtRegistry"], "registry.example/fv");

        // A deployed KubeVirt stays Deployed while a workload recovers.
        assert_eq!(
            deploy_status(&some, "Deployed", 3, image, NOW)["phase"],
            "Deployed"
        );
    }

    #[test]
    fn deleting_is_degraded_with_virt_operators_words() {
        let status = deleting_status(NOW);
        assert_eq!(status["phase"], "Deleting");
        let degraded = condition_of(&status, "Degraded");
        assert_eq!(degraded["status"], "True");
        assert_eq!(degraded["reason"], "DeletionInProgress");
        assert_eq!(degraded["message"], "Deletion was triggered");
    }
}
