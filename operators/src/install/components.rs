//! virt-operator and cdi-operator on one machine: the KubeVirt and CDI components run in
//! the `ferrovirt up` process, so "deploying" them is reporting them. The oldest KubeVirt CR
//! is the active deployment (`Deployed`, with virt-operator's Available/Progressing/
//! Degraded/Created conditions); any other is marked `ExistingDeployment` and left alone,
//! as virt-operator does. Each CDI CR gets the operator SDK's `Deployed` phase and
//! conditions. Their configuration is read where it takes effect (the KubeVirt CR's feature
//! gates by virt-api's admission, its default interface binding and machine type by
//! virt-api's defaulting of VMIs, kept current in a [`SharedClusterConfig`]).

use std::time::Duration;

use api::kubevirt::cluster_config::{ClusterConfig, SharedClusterConfig};
use futures_util::StreamExt;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use super::changes;

/// The version reported as deployed.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
/// How often the status is checked again without a change.
const RESYNC: Duration = Duration::from_secs(30);

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
    let patch = Patch::Merge(json!({"status": status}));
    if let Err(err) = api
        .patch_status(&name, &PatchParams::default(), &patch)
        .await
    {
        tracing::warn!(%err, %name, "reporting an operator's status");
    }
}

pub(crate) fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Reports every KubeVirt CR; the active one's configuration goes to `cluster`.
async fn report_kubevirts(
    client: &Client,
    cluster: &SharedClusterConfig,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &kubevirt_resource());
    let list = api.list(&ListParams::default()).await?;
    let values: Vec<Value> = list
        .items
        .iter()
        .filter_map(|kv| serde_json::to_value(kv).ok())
        .collect();
    set_cluster_config(cluster, &values);
    let active = active_cr(&values).map(|kv| kv["metadata"]["uid"].clone());
    for kv in &list.items {
        let namespace = kv.namespace().unwrap_or_default();
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &kubevirt_resource());
        let status = if active.as_ref().and_then(Value::as_str) == kv.uid().as_deref() {
            deployed_kubevirt_status(kv.metadata.generation.unwrap_or(1), &now())
        } else {
            existing_deployment_status(&now())
        };
        patch_status(&api, kv, status).await;
    }
    Ok(())
}

/// Sets `cluster` to the configuration of the active CR among the KubeVirt CRs `all`.
fn set_cluster_config(cluster: &SharedClusterConfig, all: &[Value]) {
    let config = active_cr(all).map_or_else(ClusterConfig::default, ClusterConfig::from_kubevirt);
    if cluster.set(config.clone()) {
        tracing::info!(?config, "the cluster configuration changed");
    }
}

/// Sets `cluster` to the active KubeVirt CR's configuration as the API server has it now.
pub async fn load_cluster_config(
    client: &Client,
    cluster: &SharedClusterConfig,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &kubevirt_resource());
    let values: Vec<Value> = api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|kv| serde_json::to_value(kv).ok())
        .collect();
    set_cluster_config(cluster, &values);
    Ok(())
}

/// Keeps `cluster` to the active KubeVirt CR's configuration, as virt-api's cluster config
/// informer does on a cluster (where virt-operator, not this process, reports the CRs).
pub async fn follow_cluster_config(client: Client, cluster: SharedClusterConfig) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &kubevirt_resource());
    let changes = watcher(api, watcher::Config::default())
        .default_backoff()
        .map(|_| ());
    changes::run_on_changes(changes, RESYNC, || async {
        if let Err(err) = load_cluster_config(&client, &cluster).await {
            tracing::warn!(%err, "reading the KubeVirt CRs");
        }
    })
    .await;
}

/// Reports every CDI CR deployed, and gives CDIConfig `config` the active CR's
/// `spec.config` as cdi-operator does (a CR without one leaves the CDIConfig as it is; the
/// CDIConfig outlives the CR here, as the upload proxy's URL is published in it).
async fn report_cdis(client: &Client) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &cdi_resource());
    let cdis = api.list(&ListParams::default()).await?.items;
    for cdi in &cdis {
        if cdi.metadata.deletion_timestamp.is_none() {
            patch_status(&api, cdi, deployed_cdi_status(&now())).await;
        }
    }
    let values: Vec<Value> = cdis
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    if let Some(config) = active_cr(&values).map(|cdi| &cdi["spec"]["config"])
        && config.is_object()
    {
        super::cdi_operator::sync_cdi_config(client, config).await?;
    }
    Ok(())
}

/// Reports every KubeVirt and CDI CR whenever one changes, keeping `cluster` to the active
/// KubeVirt's configuration. Without `cluster` (`ferrovirt up --no-virt`) no KubeVirt
/// component runs in-process, and the KubeVirt CRs are left to a virt-operator.
pub async fn run(client: Client, cluster: Option<SharedClusterConfig>) {
    let kubevirts: Api<DynamicObject> = Api::all_with(client.clone(), &kubevirt_resource());
    let cdis: Api<DynamicObject> = Api::all_with(client.clone(), &cdi_resource());
    let changes = futures_util::stream::select(
        watcher(kubevirts, watcher::Config::default())
            .default_backoff()
            .map(|_| ()),
        watcher(cdis, watcher::Config::default())
            .default_backoff()
            .map(|_| ()),
    );
    changes::run_on_changes(changes, RESYNC, || async {
        if let Some(cluster) = &cluster
            && let Err(err) = report_kubevirts(&client, cluster).await
        {
            tracing::warn!(%err, "reporting KubeVirt CRs");
        }
        if let Err(err) = report_cdis(&client).await {
            tracing::warn!(%err, "reporting CDI CRs");
        }
    })
    .await;
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
