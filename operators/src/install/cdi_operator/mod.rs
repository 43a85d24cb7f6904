//! cdi-operator on a cluster: the (cluster-scoped) CDI CR deploys the DataVolume
//! controllers and the admission webhook ([`STRATEGY`], the manifests of
//! `deploy/operators/`) into the operator's namespace with its image, keeps the CDIConfig
//! `config` to the CR's `spec.config`, and reports the operator SDK's phase and
//! conditions. The oldest CDI CR is the active one; another is put in the `Error` phase, as
//! cdi-operator does. The active CR holds cdi-operator's finalizer: deleting it removes what
//! was deployed first. Objects deleted or edited by hand are put back on the next pass.

pub mod status;

use std::time::Duration;

use api::cdi::CDIConfig;
use api::cdi::operator::CdiConfigSpec;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use super::manifests::{MANAGED_BY_LABEL, Manifests, place};
use super::operator_cr::{self, cdi_resource};
use super::single_cr::{self, CrAction};
use super::{changes, deployer, workloads};
use crate::kit::finalizer;

/// cdi-operator's install strategy: the manifests of `deploy/operators/`.
pub const STRATEGY: Manifests = Manifests {
    files: &[
        (
            "rbac.yaml",
            include_str!("../../../../deploy/operators/rbac.yaml"),
        ),
        (
            "webhook.yaml",
            include_str!("../../../../deploy/operators/webhook.yaml"),
        ),
        (
            "controller.yaml",
            include_str!("../../../../deploy/operators/controller.yaml"),
        ),
        (
            "uploadproxy.yaml",
            include_str!("../../../../deploy/operators/uploadproxy.yaml"),
        ),
    ],
    namespace: "cdi",
    managed_by: MANAGER,
};

/// The finalizer cdi-operator holds on the CDI CR it deployed.
pub const FINALIZER: &str = "operator.cdi.kubevirt.io";
/// The field manager of what cdi-operator applies, and its managed-by label.
const MANAGER: &str = "cdi-operator";
/// The CDIConfig the CR's `spec.config` is written to.
const CDI_CONFIG: &str = "config";
/// How often everything is checked again without a change.
const RESYNC: Duration = Duration::from_secs(30);

/// Runs cdi-operator for every CDI CR, deploying `image` into `namespace`.
pub async fn run(client: Client, namespace: String, image: String) {
    let managed = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGER}"));
    let cdis: Api<DynamicObject> = Api::all_with(client.clone(), &cdi_resource());
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), &namespace);
    let changes = futures_util::stream::select(
        changes::of(cdis, watcher::Config::default()),
        changes::of(deployments, managed),
    );
    changes::run_on_changes(changes, RESYNC, || async {
        if let Err(err) = reconcile_all(&client, &namespace, &image).await {
            tracing::warn!(%err, "reconciling CDI CRs");
        }
    })
    .await;
}

/// Acts on every CDI CR as [`single_cr::plan`] says; one CR's failure does not keep the
/// others from their turn.
async fn reconcile_all(client: &Client, namespace: &str, image: &str) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &cdi_resource());
    let list = api.list(&ListParams::default()).await?;
    let values: Vec<Value> = list
        .items
        .iter()
        .filter_map(|cdi| serde_json::to_value(cdi).ok())
        .collect();
    let mut failure = Ok(());
    for (cdi, action) in list.items.iter().zip(single_cr::plan(&values, FINALIZER)) {
        let done = match action {
            CrAction::TearDown => tear_down(client, &api, cdi, namespace, image).await,
            CrAction::Deploy => deploy(client, &api, cdi, namespace, image).await,
            CrAction::Refuse => {
                let status = status::unwanted_status(&operator_cr::now());
                operator_cr::patch_status(&api, cdi, status).await;
                Ok(())
            }
            CrAction::Wait | CrAction::Nothing => Ok(()),
        };
        if let Err(err) = done {
            tracing::warn!(%err, cdi = %cdi.name_any(), ?action, "reconciling a CDI CR");
            failure = Err(err);
        }
    }
    failure
}

async fn deploy(
    client: &Client,
    api: &Api<DynamicObject>,
    cdi: &DynamicObject,
    namespace: &str,
    image: &str,
) -> Result<(), kube::Error> {
    finalizer::set(api, cdi, FINALIZER, true).await?;
    let mut objects = STRATEGY.render(namespace, image);
    // CDI's infra placement is inline in `spec.infra`, beside its replica counts.
    let infra = [
        "ferrovirt-controller",
        "ferrovirt-webhook",
        "cdi-uploadproxy",
    ];
    place(&mut objects, &infra, &cdi.data["spec"]["infra"]);
    deployer::ensure_all(client, MANAGER, &objects).await?;
    sync_cdi_config(client, &cdi.data["spec"]["config"]).await?;
    let workloads = workloads::observe(
        client,
        namespace,
        &status::DEPLOYMENTS,
        workloads::DeploymentRule::AllReplicas,
        &[],
    )
    .await?;
    let phase = cdi.data["status"]["phase"].as_str().unwrap_or_default();
    let status = status::deploy_status(&workloads, phase, &operator_cr::now());
    operator_cr::patch_status(api, cdi, status).await;
    Ok(())
}

/// The CDIConfig `config` gets the CR's `spec.config` as its whole spec (what the CR's
/// config leaves out goes), as cdi-operator keeps it; with no `spec.config` it is created
/// empty and otherwise left alone.
pub(crate) async fn sync_cdi_config(client: &Client, config: &Value) -> Result<(), kube::Error> {
    let configs: Api<CDIConfig> = Api::all(client.clone());
    let existing = configs.get_opt(CDI_CONFIG).await?;
    let spec: CdiConfigSpec = match (config.is_object(), &existing) {
        (true, _) => serde_json::from_value(config.clone()).map_err(kube::Error::SerdeError)?,
        (false, Some(_)) => return Ok(()),
        (false, None) => CdiConfigSpec::default(),
    };
    match existing {
        Some(current) if current.spec == spec => {}
        Some(mut current) => {
            current.spec = spec;
            configs
                .replace(CDI_CONFIG, &PostParams::default(), &current)
                .await?;
        }
        None => {
            configs
                .create(&PostParams::default(), &CDIConfig::new(CDI_CONFIG, spec))
                .await?;
        }
    }
    Ok(())
}

async fn tear_down(
    client: &Client,
    api: &Api<DynamicObject>,
    cdi: &DynamicObject,
    namespace: &str,
    image: &str,
) -> Result<(), kube::Error> {
    operator_cr::patch_status(api, cdi, status::deleting_status()).await;
    deployer::remove_all(client, &STRATEGY.render(namespace, image)).await?;
    // The CDIConfig is the CR's, as upstream's owner reference makes it.
    let configs: Api<api::cdi::CDIConfig> = Api::all(client.clone());
    crate::kit::delete_ignoring_missing(&configs, CDI_CONFIG).await?;
    finalizer::remove_from_latest(api, cdi, FINALIZER).await?;
    tracing::info!(cdi = %cdi.name_any(), %namespace, "removed the CDI deployment");
    Ok(())
}
