//! `setOwnerReference`: the object a task creates is owned by the TaskRun's pod, so it goes
//! when the run is pruned. The pod is named by `POD_NAME` and `POD_NAMESPACE`, which the
//! Task sets from the downward API, as upstream's tasks do.

use serde_json::{Value, json};

use crate::objects::{Cluster, Kind};

/// Replaces the ownerReferences of `object` (which will be created in `namespace`) with one
/// to the task's pod, as upstream does; the message says why it could not.
pub async fn own_by_task_pod(
    cluster: &Cluster,
    object: &mut Value,
    namespace: &str,
) -> Result<(), String> {
    let pod_name = env("POD_NAME").ok_or("pod name env variable is not set")?;
    let pod_namespace = env("POD_NAMESPACE").ok_or("pod namespace env variable is not set")?;
    if pod_namespace != namespace {
        return Err("can't create owner reference for objects in different namespaces".into());
    }
    let pod = cluster
        .api(Kind::Pod, &pod_namespace)
        .get(&pod_name)
        .await
        .map_err(|e| e.to_string())?;
    let uid = pod.metadata.uid.unwrap_or_default();
    object["metadata"]["ownerReferences"] = owner_references(&pod_name, &uid);
    Ok(())
}

/// Upstream's reference to the pod: no `controller`, no `blockOwnerDeletion`.
fn owner_references(pod: &str, uid: &str) -> Value {
    json!([{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}])
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_a_plain_pod_reference() {
        assert_eq!(
            owner_references("run-pod", "u-1"),
            json!([{"apiVersion": "v1", "kind": "Pod", "name": "run-pod", "uid": "u-1"}])
        );
    }
}
