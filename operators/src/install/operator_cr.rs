//! The KubeVirt and CDI CRs as virt-operator and cdi-operator handle them, apart from any
//! deployment: their API resources, which CR is the active one, the statuses and conditions
//! the operators report on them, and how such a status is patched.

use kube::api::{ApiResource, DynamicObject};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

/// The version reported as deployed.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
pub fn kubevirt_resource() -> ApiResource {
    ApiResource {
        group: "kubevirt.io".into(),
        version: "v1".into(),
        api_version: "kubevirt.io/v1".into(),
        kind: "KubeVirt".into(),
        plural: "kubevirts".into(),
    }
}

pub fn cdi_resource() -> ApiResource {
    ApiResource {
        group: "cdi.kubevirt.io".into(),
        version: "v1beta1".into(),
        api_version: "cdi.kubevirt.io/v1beta1".into(),
        kind: "CDI".into(),
        plural: "cdis".into(),
    }
}

/// The active CR among `all` (KubeVirt or CDI CRs): the oldest not being deleted, ties
/// broken by name (virt-operator and cdi-operator keep the first they deployed).
pub fn active_cr(all: &[Value]) -> Option<&Value> {
    all.iter()
        .filter(|kv| kv["metadata"]["deletionTimestamp"].is_null())
        .min_by_key(|kv| {
            (
                kv["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                kv["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
}

/// A condition of KubeVirt's CR (`lastProbeTime`).
pub(crate) fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) -> Value {
    json!({
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastProbeTime": now, "lastTransitionTime": now,
    })
}

/// A condition of the operator SDK's (the CDI CR's): KubeVirt's, with the heartbeat time its
/// schema declares (`lastHeartbeatTime`) in place of `lastProbeTime`.
pub(crate) fn sdk_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) -> Value {
    let mut condition = condition(type_, status, reason, message, now);
    if let Some(fields) = condition.as_object_mut()
        && let Some(time) = fields.remove("lastProbeTime")
    {
        fields.insert("lastHeartbeatTime".into(), time);
    }
    condition
}

/// The status virt-operator gives the KubeVirt CR it deployed.
pub fn deployed_kubevirt_status(generation: i64, now: &str) -> Value {
    let ready = "All components are ready.";
    json!({
        "phase": "Deployed",
        "conditions": [
            condition("Available", "True", "AllComponentsReady", ready, now),
            condition("Progressing", "False", "AllComponentsReady", ready, now),
            condition("Degraded", "False", "AllComponentsReady", ready, now),
            condition("Created", "True", "AllResourcesCreated", "All resources were created.", now),
        ],
        "operatorVersion": VERSION,
        "targetKubeVirtVersion": VERSION,
        "observedKubeVirtVersion": VERSION,
        "observedDeploymentID": VERSION,
        "defaultArchitecture": std::env::consts::ARCH.replace("x86_64", "amd64"),
        "observedGeneration": generation,
    })
}

/// The status of a second KubeVirt CR: only `Synchronized` False, so HCO ignores it.
pub fn existing_deployment_status(now: &str) -> Value {
    json!({
        "conditions": [condition(
            "Synchronized", "False", "ExistingDeployment",
            "There is an active KubeVirt deployment", now,
        )],
    })
}

/// The operator SDK status of a deployed CDI.
pub fn deployed_cdi_status(now: &str) -> Value {
    let done = "Deployment Completed";
    json!({
        "phase": "Deployed",
        "conditions": [
            sdk_condition("Available", "True", "DeployCompleted", done, now),
            sdk_condition("Progressing", "False", "", "", now),
            sdk_condition("Degraded", "False", "", "", now),
        ],
        "operatorVersion": VERSION,
        "targetVersion": VERSION,
        "observedVersion": VERSION,
    })
}

/// Whether `current` already says everything `wanted` says, ignoring timestamps. Keys only
/// `current` has stay as a merge patch would leave them (a Deployed status keeps the
/// target fields of its Deploying days), so they do not count as a difference.
fn same_status(current: &Value, wanted: &Value) -> bool {
    let strip = |status: &Value| {
        let mut status = status.clone();
        if let Some(conditions) = status["conditions"].as_array_mut() {
            for condition in conditions {
                if let Some(fields) = condition.as_object_mut() {
                    fields.remove("lastProbeTime");
                    fields.remove("lastHeartbeatTime");
                    fields.remove("lastTransitionTime");
                }
            }
        }
        status
    };
    let (current, wanted) = (strip(current), strip(wanted));
    match wanted.as_object() {
        Some(fields) => fields.iter().all(|(key, value)| current[key] == *value),
        None => current == wanted,
    }
}

pub(crate) async fn patch_status(api: &Api<DynamicObject>, object: &DynamicObject, status: Value) {
    if same_status(&object.data["status"], &status) {
        return;
    }
    let name = object.name_any();
    if let Err(err) = crate::kit::objects::patch_status(api, &name, &status).await {
        tracing::warn!(%err, %name, "reporting an operator's status");
    }
}

pub(crate) fn now() -> String {
    api::meta_time::rfc3339(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_kubevirt_is_the_active_one() {
        let kv = |name: &str, created: &str| json!({"metadata": {"name": name, "creationTimestamp": created}});
        let all = [
            kv("b", "2026-01-02T00:00:00Z"),
            kv("a", "2026-01-03T00:00:00Z"),
        ];
        assert_eq!(active_cr(&all).unwrap()["metadata"]["name"], "b");
        let tie = [
            kv("z", "2026-01-02T00:00:00Z"),
            kv("y", "2026-01-02T00:00:00Z"),
        ];
        assert_eq!(active_cr(&tie).unwrap()["metadata"]["name"], "y");
        assert!(active_cr(&[]).is_none());
    }

    #[test]
    fn timestamps_alone_do_not_count_as_a_change() {
        let earlier = deployed_cdi_status("2026-01-01T00:00:00Z");
        let later = deployed_cdi_status("2026-01-02T00:00:00Z");
        assert!(same_status(&earlier, &later));
        // A key the stored status has and the wanted one lacks is no difference.
        let mut stored = later.clone();
        stored["targetDeploymentID"] = json!("v1");
        assert!(same_status(&stored, &earlier));
        assert!(!same_status(&earlier, &stored));
        assert!(!same_status(
            &earlier,
            &existing_deployment_status("2026-01-01T00:00:00Z")
        ));
    }
}
