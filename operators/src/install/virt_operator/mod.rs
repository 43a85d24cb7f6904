//! virt-operator on a cluster: the KubeVirt CR deploys virt-api, virt-controller and
//! virt-handler with their accounts, RBAC, APIServices and webhooks ([`STRATEGY`]), in the
//! CR's namespace and with the operator's image. The oldest KubeVirt CR is the active one;
//! another is marked `ExistingDeployment` and left alone. The active CR holds the
//! `kubevirt.io/foregroundDeleteKubeVirt` finalizer: deleting it removes what was deployed first.
//! Objects deleted or edited by hand are put back on the next pass, which every change of
//! a KubeVirt CR or of a deployed workload starts. The CR's status follows its workloads
//! ([`status`]). The active CR also gets common-instancetypes
//! ([`super::common_instancetypes`]). On `ferrovirt up` the components run in-process
//! instead, and `install::components` reports them.

pub mod customize;
pub mod status;

use std::time::Duration;

use kube::api::{DynamicObject, ListParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use super::manifests::{MANAGED_BY_LABEL, Manifests, place};
use super::operator_cr::{self, kubevirt_resource};
use super::single_cr::{self, CrAction};
use super::{changes, common_instancetypes, deployer, workloads};
use crate::kit::finalizer;

/// virt-operator's install strategy: the manifests of `deploy/virt/`.
pub const STRATEGY: Manifests = Manifests {
    files: &[
        (
            "rbac.yaml",
            include_str!("../../../../deploy/virt/rbac.yaml"),
        ),
        (
            "virt-api.yaml",
            include_str!("../../../../deploy/virt/virt-api.yaml"),
        ),
        (
            "virt-controller.yaml",
            include_str!("../../../../deploy/virt/virt-controller.yaml"),
        ),
        (
            "virt-handler.yaml",
            include_str!("../../../../deploy/virt/virt-handler.yaml"),
        ),
    ],
    namespace: "kubevirt",
    managed_by: MANAGER,
};

/// The finalizer virt-operator holds on the KubeVirt CR it deployed.
pub const FINALIZER: &str = "kubevirt.io/foregroundDeleteKubeVirt";
/// The field manager of what virt-operator applies, and its managed-by label.
const MANAGER: &str = "virt-operator";
/// How often everything is checked again without a change.
const RESYNC: Duration = Duration::from_secs(30);

/// Runs virt-operator for every KubeVirt CR of the cluster, deploying `image`.
pub async fn run(client: Client, image: String) {
    let managed = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGER}"));
    let kubevirts: Api<DynamicObject> = Api::all_with(client.clone(), &kubevirt_resource());
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::all(client.clone());
    let daemonsets: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::all(client.clone());
    let [instancetypes, preferences] = common_instancetypes::deploy::watched(&client);
    let changes = futures_util::stream::select_all([
        changes::of(kubevirts, watcher::Config::default()),
        changes::of(deployments, managed.clone()),
        changes::of(daemonsets, managed.clone()),
        changes::of(instancetypes, managed.clone()),
        changes::of(preferences, managed),
    ]);
    changes::run_on_changes(changes, RESYNC, || async {
        if let Err(err) = reconcile_all(&client, &image).await {
            tracing::warn!(%err, "reconciling KubeVirt CRs");
        }
    })
    .await;
}

/// Acts on every KubeVirt CR as [`single_cr::plan`] says; one CR's failure does not keep
/// the others from their turn.
async fn reconcile_all(client: &Client, image: &str) -> Result<(), kube::Error> {
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &kubevirt_resource());
    let list = all.list(&ListParams::default()).await?;
    let values: Vec<Value> = list
        .items
        .iter()
        .filter_map(|kv| serde_json::to_value(kv).ok())
        .collect();
    let mut failure = Ok(());
    for (kv, action) in list.items.iter().zip(single_cr::plan(&values, FINALIZER)) {
        let namespace = kv.namespace().unwrap_or_default();
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &kubevirt_resource());
        let done = match action {
            CrAction::TearDown => tear_down(client, &api, kv, image).await,
            CrAction::Deploy => deploy(client, &api, kv, image).await,
            CrAction::Refuse => {
                let status = operator_cr::existing_deployment_status(&operator_cr::now());
                operator_cr::patch_status(&api, kv, status).await;
                Ok(())
            }
            CrAction::Wait | CrAction::Nothing => Ok(()),
        };
        if let Err(err) = done {
            tracing::warn!(%err, kubevirt = %kv.name_any(), ?action, "reconciling a KubeVirt CR");
            failure = Err(err);
        }
    }
    failure
}

/// Deploys the strategy for the active CR and reports how far its workloads are.
async fn deploy(
    client: &Client,
    api: &Api<DynamicObject>,
    kv: &DynamicObject,
    image: &str,
) -> Result<(), kube::Error> {
    let namespace = kv.namespace().unwrap_or_default();
    finalizer::set(api, kv, FINALIZER, true).await?;
    let mut objects = STRATEGY.render(&namespace, image);
    let spec = &kv.data["spec"];
    place(
        &mut objects,
        &status::DEPLOYMENTS,
        &spec["infra"]["nodePlacement"],
    );
    place(
        &mut objects,
        &status::DAEMONSETS,
        &spec["workloads"]["nodePlacement"],
    );
    if let Err(err) = customize::customize(&mut objects, &spec["customizeComponents"]) {
        // As upstream, nothing is deployed until the patches apply; the next pass retries.
        tracing::warn!(%err, "not deploying: the KubeVirt CR's customizeComponents");
        return Ok(());
    }
    deployer::ensure_all(client, MANAGER, &objects).await?;
    let kv_value = serde_json::to_value(kv).map_err(kube::Error::SerdeError)?;
    common_instancetypes::deploy::reconcile(client, &kv_value).await?;
    let workloads = workloads::observe(
        client,
        &namespace,
        &status::DEPLOYMENTS,
        workloads::DeploymentRule::AnyReplica,
        &status::DAEMONSETS,
    )
    .await?;
    let generation = kv.metadata.generation.unwrap_or(1);
    let phase = kv.data["status"]["phase"].as_str().unwrap_or_default();
    let status = status::deploy_status(&workloads, phase, generation, image, &operator_cr::now());
    operator_cr::patch_status(api, kv, status).await;
    Ok(())
}

/// Removes what the strategy deployed, then the finalizer, so the CR goes.
async fn tear_down(
    client: &Client,
    api: &Api<DynamicObject>,
    kv: &DynamicObject,
    image: &str,
) -> Result<(), kube::Error> {
    let namespace = kv.namespace().unwrap_or_default();
    operator_cr::patch_status(api, kv, status::deleting_status(&operator_cr::now())).await;
    deployer::remove_all(client, &STRATEGY.render(&namespace, image)).await?;
    let disabled = serde_json::json!({"spec": {
        "productComponent": kv.data["spec"]["productComponent"],
        "configuration": {"commonInstancetypesDeployment": {"enabled": false}},
    }});
    common_instancetypes::deploy::reconcile(client, &disabled).await?;
    finalizer::remove_from_latest(api, kv, FINALIZER).await?;
    tracing::info!(kubevirt = %kv.name_any(), %namespace, "removed the KubeVirt deployment");
    Ok(())
}
