//! The scheduler's resource fit for the node-level resources other agents report on the
//! Node (the bridge marker's `bridge.network.kubevirt.io/<bridge>`): a pod that requests one
//! the node does not offer stays Pending, unschedulable, as kube-scheduler leaves it, until
//! the node offers it. CPU and memory are not checked: the one node here takes every pod.

use k8s_openapi::api::core::v1::{Node, Pod};

/// Whether a resource name is one checked here: a domain-qualified extended resource that
/// is not one of Kubernetes' own (`hugepages-*`, `kubernetes.io/...`).
fn is_extended(resource: &str) -> bool {
    resource
        .split_once('/')
        .is_some_and(|(domain, _)| !domain.ends_with("kubernetes.io"))
}

/// The extended resources `pod` requests, sorted.
pub fn requested(pod: &Pod) -> Vec<String> {
    let mut requested: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref())
        .flat_map(|r| r.requests.iter().chain(r.limits.iter()).flatten())
        .map(|(name, _)| name)
        .filter(|name| is_extended(name))
        .cloned()
        .collect();
    requested.sort();
    requested.dedup();
    requested
}

/// Those of `requested` that `node` does not offer.
pub fn missing(requested: &[String], node: &Node) -> Vec<String> {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    requested
        .iter()
        .filter(|name| !allocatable.is_some_and(|a| a.contains_key(*name)))
        .cloned()
        .collect()
}

/// kube-scheduler's message for a pod that fits nowhere for lack of `missing`.
pub fn unschedulable_message(missing: &[String]) -> String {
    let reasons: Vec<String> = missing
        .iter()
        .map(|r| format!("1 Insufficient {r}"))
        .collect();
    format!("0/1 nodes are available: {}.", reasons.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(requests: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
        }))
        .unwrap()
    }

    fn node(allocatable: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n"}, "status": {"allocatable": allocatable}}),
        )
        .unwrap()
    }

    #[test]
    fn a_bridge_the_node_lacks_is_missing() {
        let wants = pod(
            json!({"memory": "1Gi", "bridge.network.kubevirt.io/br1": "1",
                               "bridge.network.kubevirt.io/br2": "1"}),
        );
        let offers = node(json!({"bridge.network.kubevirt.io/br1": "1k"}));
        let missing = missing(&requested(&wants), &offers);
        assert_eq!(missing, ["bridge.network.kubevirt.io/br2"]);
        assert_eq!(
            unschedulable_message(&missing),
            "0/1 nodes are available: 1 Insufficient bridge.network.kubevirt.io/br2."
        );
    }

    #[test]
    fn kubernetes_own_resources_are_not_checked() {
        let wants = pod(json!({"cpu": "1", "hugepages-2Mi": "2Mi",
                               "ephemeral-storage": "1Gi", "example.kubernetes.io/thing": "1"}));
        assert!(requested(&wants).is_empty());
        assert!(missing(&requested(&wants), &node(json!({}))).is_empty());
    }
}
