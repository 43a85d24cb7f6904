//! virt-operator and cdi-operator on one machine: the KubeVirt and CDI components run in
//! the `ferrovirt up` process, so "deploying" them is reporting them. The oldest KubeVirt CR
//! is the active deployment (`Deployed`, with virt-operator's Available/Progressing/
//! Degraded/Created conditions); any other is marked `ExistingDeployment` and left alone,
//! as virt-operator does. Each CDI CR gets the operator SDK's `Deployed` phase and
//! conditions. Their configuration is read where it takes effect (the KubeVirt CR's feature
//! gates by virt-api's admission, its default interface binding and machine type by
//! virt-api's defaulting of VMIs, kept current in a [`SharedClusterConfig`]). The active
//! KubeVirt CR's common-instancetypes are deployed as virt-operator deploys them.

use std::time::Duration;

use api::kubevirt::cluster_config::{ClusterConfig, SharedClusterConfig};
use kube::api::{DynamicObject, ListParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use super::changes;
/// Where the active CR is chosen; re-exported for the callers that read it from here.
pub use super::operator_cr::active_cr;
use super::operator_cr::{
    cdi_resource, deployed_cdi_status, deployed_kubevirt_status, existing_deployment_status,
    kubevirt_resource, now, patch_status,
};

/// How often the status is checked again without a change.
const RESYNC: Duration = Duration::from_secs(30);

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
    // The active CR's common-instancetypes, as virt-operator deploys them; with no CR, as
    // for a CR with the defaults, since the components run here without one.
    let no_cr = Value::Object(Default::default());
    let kv = active_cr(&values).unwrap_or(&no_cr);
    if let Err(err) = super::common_instancetypes::deploy::reconcile(client, kv).await {
        tracing::warn!(%err, "deploying common-instancetypes");
    }
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
    let changes = changes::of(api, watcher::Config::default());
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
    // Hand edits of the common-instancetypes are put back on the next pass.
    let [instancetypes, preferences] = super::common_instancetypes::deploy::watched(&client);
    let managed = watcher::Config::default().labels(&format!(
        "{}={}",
        super::manifests::MANAGED_BY_LABEL,
        super::common_instancetypes::deploy::MANAGED_BY
    ));
    let changes = futures_util::stream::select_all([
        changes::of(kubevirts, watcher::Config::default()),
        changes::of(cdis, watcher::Config::default()),
        changes::of(instancetypes, managed.clone()),
        changes::of(preferences, managed),
    ]);
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
