//! The workloads an operator deployed, as the cluster reports them. A Deployment counts as
//! ready with a ready replica, a DaemonSet when every pod it should run is ready, as
//! virt-operator counts them (it also checks each pod's install-strategy annotations; one
//! strategy version exists here, so that check is moot).

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::{Api, Client};

/// One workload as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub name: String,
    pub ready: bool,
}

impl Workload {
    pub fn deployment(name: &str, observed: Option<&Deployment>) -> Self {
        let status = observed.and_then(|d| d.status.as_ref());
        let ready = status
            .is_some_and(|s| s.replicas.unwrap_or(0) > 0 && s.ready_replicas.unwrap_or(0) > 0);
        Self {
            name: name.to_owned(),
            ready,
        }
    }

    /// A Deployment as the operator SDK (cdi-operator's) counts it: every wanted replica
    /// (one when unset) is there and ready.
    pub fn deployment_all_ready(name: &str, observed: Option<&Deployment>) -> Self {
        let wanted = observed
            .and_then(|d| d.spec.as_ref())
            .and_then(|s| s.replicas)
            .unwrap_or(1);
        let status = observed.and_then(|d| d.status.as_ref());
        let ready = status.is_some_and(|s| {
            s.replicas.unwrap_or(0) == wanted && s.ready_replicas.unwrap_or(0) == wanted
        });
        Self {
            name: name.to_owned(),
            ready,
        }
    }

    pub fn daemonset(name: &str, observed: Option<&DaemonSet>) -> Self {
        let status = observed.and_then(|d| d.status.as_ref());
        let ready = status.is_some_and(|s| {
            s.desired_number_scheduled > 0 && s.desired_number_scheduled == s.number_ready
        });
        Self {
            name: name.to_owned(),
            ready,
        }
    }
}

/// How a Deployment counts as ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeploymentRule {
    /// One ready replica is enough (virt-operator).
    AnyReplica,
    /// Every wanted replica must be ready (the operator SDK).
    AllReplicas,
}

/// The named Deployments and DaemonSets of `namespace` (absent ones not ready).
pub async fn observe(
    client: &Client,
    namespace: &str,
    deployments: &[&str],
    rule: DeploymentRule,
    daemonsets: &[&str],
) -> Result<Vec<Workload>, kube::Error> {
    let deployment_api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let daemonset_api: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let mut workloads = Vec::new();
    for name in deployments {
        let observed = deployment_api.get_opt(name).await?;
        workloads.push(match rule {
            DeploymentRule::AnyReplica => Workload::deployment(name, observed.as_ref()),
            DeploymentRule::AllReplicas => Workload::deployment_all_ready(name, observed.as_ref()),
        });
    }
    for name in daemonsets {
        let observed = daemonset_api.get_opt(name).await?;
        workloads.push(Workload::daemonset(name, observed.as_ref()));
    }
    Ok(workloads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn workloads_are_ready_as_virt_operator_counts_them() {
        let deployment = |replicas, ready| -> Deployment {
            serde_json::from_value(
                json!({"status": {"replicas": replicas, "readyReplicas": ready}}),
            )
            .expect("a Deployment")
        };
        assert!(Workload::deployment("a", Some(&deployment(1, 1))).ready);
        assert!(!Workload::deployment("a", Some(&deployment(1, 0))).ready);
        assert!(!Workload::deployment("a", None).ready);
        let scaled: Deployment = serde_json::from_value(
            json!({"spec": {"replicas": 2}, "status": {"replicas": 2, "readyReplicas": 1}}),
        )
        .expect("a Deployment");
        assert!(Workload::deployment("a", Some(&scaled)).ready);
        assert!(!Workload::deployment_all_ready("a", Some(&scaled)).ready);
        assert!(Workload::deployment_all_ready("a", Some(&deployment(1, 1))).ready);
        let daemonset = |desired, ready| -> DaemonSet {
            serde_json::from_value(json!({"status": {
                "desiredNumberScheduled": desired, "numberReady": ready,
                "currentNumberScheduled": desired, "numberMisscheduled": 0,
            }}))
            .expect("a DaemonSet")
        };
        assert!(Workload::daemonset("h", Some(&daemonset(2, 2))).ready);
        assert!(!Workload::daemonset("h", Some(&daemonset(2, 1))).ready);
        // No node to run on is not ready: virt-operator waits for one.
        assert!(!Workload::daemonset("h", Some(&daemonset(0, 0))).ready);
    }
}
