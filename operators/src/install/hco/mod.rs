//! HCO: the HyperConverged `kubevirt-hyperconverged` in the operator's namespace is the
//! single source of truth. It becomes the KubeVirt, CDI, NetworkAddonsConfig and SSP CRs
//! ([`operands`]); an operand edited by hand is put back; the operands' conditions are
//! aggregated into the HC's ([`conditions`]) with `relatedObjects`, `versions` and
//! `systemHealthStatus`. An HC of another name or namespace is not reconciled and says so,
//! as HCO's controller does. Deleting the HC deletes the operands (HCO's finalizer); the
//! delete itself is refused while workloads exist by the uninstall webhooks
//! (`api::install::uninstall`). The HC also gets the CLI download Service and its server
//! ([`cli_download`]). The same loop runs on `ferrovirt up` and, as `ferrovirt
//! hco-operator`, on a cluster; [`Settings`] holds what differs.

pub mod cli_download;
pub mod conditions;
pub mod hardware;
pub mod operands;

use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use self::conditions::{Operand, Reported};
use crate::install::changes;
use crate::install::operator_cr::{cdi_resource, kubevirt_resource};

/// HCO's finalizer on the HC.
pub const FINALIZER: &str = "kubevirt.io/hyperconverged";
/// How often the operands are checked again without a change.
const RESYNC: Duration = Duration::from_secs(30);
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub fn hyperconverged_resource() -> ApiResource {
    resource(
        "hco.kubevirt.io/v1beta1",
        "HyperConverged",
        "hyperconvergeds",
    )
}

fn network_addons_resource() -> ApiResource {
    resource(
        "networkaddonsoperator.network.kubevirt.io/v1",
        "NetworkAddonsConfig",
        "networkaddonsconfigs",
    )
}

/// SSP at v1beta3, its storage version, as upstream HCO writes it
/// (`controllers/handlers/ssp.go`, `NewSSP`).
fn ssp_resource() -> ApiResource {
    resource("ssp.kubevirt.io/v1beta3", "SSP", "ssps")
}

/// TektonTasks, the CR of tekton-tasks-operator, as HCO v1.9 wrote it.
fn tekton_tasks_resource() -> ApiResource {
    resource(
        "tektontasks.kubevirt.io/v1alpha1",
        "TektonTasks",
        "tektontasks",
    )
}

/// Where HCO runs and what differs between one machine and a cluster.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The namespace whose HC is reconciled: the operator's own.
    pub namespace: String,
    /// Whether the KubeVirt CR allows software emulation where KVM is unusable.
    pub use_emulation: bool,
    /// How the CLI download server runs.
    pub cli_download: cli_download::Server,
}

/// One operand of the HC: where it lives and what HCO wants in it.
pub struct Desired {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
    pub component: &'static str,
    /// The operand as HCO would write it; its `spec` is what HCO keeps.
    pub body: Value,
}

/// The operands `hc` asks for: KubeVirt, CDI, NetworkAddonsConfig, SSP and TektonTasks.
pub fn desired(hc: &Value, use_emulation: bool) -> Vec<Desired> {
    let name = hc["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = hc["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    vec![
        Desired {
            resource: kubevirt_resource(),
            namespace: Some(namespace.clone()),
            name: operands::kubevirt_name(name),
            component: "compute",
            body: operands::kubevirt(hc, use_emulation),
        },
        Desired {
            resource: cdi_resource(),
            namespace: None,
            name: operands::cdi_name(name),
            component: "storage",
            body: operands::cdi(hc),
        },
        Desired {
            resource: network_addons_resource(),
            namespace: None,
            name: operands::NETWORK_ADDONS_NAME.to_owned(),
            component: "network",
            body: operands::network_addons(hc),
        },
        Desired {
            resource: ssp_resource(),
            namespace: Some(namespace.clone()),
            name: operands::ssp_name(name),
            component: "schedule",
            body: operands::ssp(hc),
        },
        Desired {
            resource: tekton_tasks_resource(),
            namespace: Some(namespace),
            name: operands::tekton_tasks_name(name),
            component: "tekton",
            body: operands::tekton_tasks(hc),
        },
    ]
}

fn api_for(client: &Client, desired: &Desired) -> Api<DynamicObject> {
    match &desired.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &desired.resource),
        None => Api::all_with(client.clone(), &desired.resource),
    }
}

/// Creates the operand, or puts its spec and labels back to HCO's; returns it as stored.
async fn ensure(client: &Client, hc_name: &str, desired: &Desired) -> Result<Value, kube::Error> {
    let api = api_for(client, desired);
    let labels = operands::labels(hc_name, desired.component);
    match api.get_opt(&desired.name).await? {
        None => {
            let mut object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": desired.resource.api_version,
                "kind": desired.resource.kind,
                "metadata": {"name": desired.name, "labels": labels},
                "spec": desired.body["spec"],
            }))
            .map_err(kube::Error::SerdeError)?;
            object.metadata.namespace = desired.namespace.clone();
            let created = api.create(&PostParams::default(), &object).await?;
            tracing::info!(kind = %desired.resource.kind, name = %desired.name, "created an operand");
            Ok(serde_json::to_value(created).map_err(kube::Error::SerdeError)?)
        }
        Some(found) => {
            let found_value = serde_json::to_value(&found).map_err(kube::Error::SerdeError)?;
            let labels_kept = labels
                .as_object()
                .into_iter()
                .flatten()
                .all(|(k, v)| found_value["metadata"]["labels"][k] == *v);
            if found_value["spec"] == desired.body["spec"] && labels_kept {
                return Ok(found_value);
            }
            tracing::info!(kind = %desired.resource.kind, name = %desired.name, "putting an operand back to HCO's spec");
            let mut restored = found;
            restored.data["spec"] = desired.body["spec"].clone();
            let found_labels = restored.metadata.labels.get_or_insert_default();
            for (key, value) in labels.as_object().into_iter().flatten() {
                found_labels.insert(key.clone(), value.as_str().unwrap_or_default().to_owned());
            }
            let updated = api
                .replace(&desired.name, &PostParams::default(), &restored)
                .await?;
            Ok(serde_json::to_value(updated).map_err(kube::Error::SerdeError)?)
        }
    }
}

/// An operand's conditions as HCO reads them.
fn reported(object: &Value) -> Vec<Reported> {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| Reported {
            type_: c["type"].as_str().unwrap_or_default().to_owned(),
            status: c["status"].as_str().unwrap_or_default().to_owned(),
            reason: c["reason"].as_str().unwrap_or_default().to_owned(),
            message: c["message"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

fn related_object(object: &Value) -> Value {
    let meta = &object["metadata"];
    let mut reference = json!({
        "apiVersion": object["apiVersion"], "kind": object["kind"], "name": meta["name"],
        "resourceVersion": meta["resourceVersion"], "uid": meta["uid"],
    });
    if let Some(namespace) = meta["namespace"].as_str() {
        reference["namespace"] = json!(namespace);
    }
    reference
}

/// The HC's conditions with HCO's timestamps: a condition keeps its transition time while
/// its status stays.
fn with_times(wanted: &[Reported], current: &Value, generation: i64, now: &str) -> Vec<Value> {
    wanted
        .iter()
        .map(|c| {
            let previous = current["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["type"] == c.type_.as_str() && p["status"] == c.status.as_str());
            let since = previous
                .and_then(|p| p["lastTransitionTime"].as_str())
                .unwrap_or(now);
            json!({
                "type": c.type_, "status": c.status, "reason": c.reason, "message": c.message,
                "lastTransitionTime": since, "observedGeneration": generation,
            })
        })
        .collect()
}

/// HCO's systemHealthStatus from its conditions.
pub fn health(conditions: &[Reported]) -> &'static str {
    let is = |type_: &str, status: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == status)
    };
    if !is(conditions::AVAILABLE, "True") || is(conditions::DEGRADED, "True") {
        "error"
    } else if !is(conditions::RECONCILE_COMPLETE, "True") || is(conditions::PROGRESSING, "True") {
        "warning"
    } else {
        "healthy"
    }
}

async fn reconcile(
    client: &Client,
    settings: &Settings,
    hc: &DynamicObject,
) -> Result<(), kube::Error> {
    let (namespace, use_emulation) = (settings.namespace.as_str(), settings.use_emulation);
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &hyperconverged_resource());
    let hc_value = serde_json::to_value(hc).map_err(kube::Error::SerdeError)?;
    let name = hc.name_any();
    let generation = hc.metadata.generation.unwrap_or(1);
    if name != operands::HYPERCONVERGED_NAME {
        let invalid = Reported {
            type_: conditions::RECONCILE_COMPLETE.into(),
            status: "False".into(),
            reason: "InvalidRequest".into(),
            message: format!(
                "Request does not match expected name ({}) and namespace ({namespace})",
                operands::HYPERCONVERGED_NAME
            ),
        };
        let status =
            json!({"conditions": with_times(&[invalid], &hc_value["status"], generation, &now())});
        return write_status(&api, &name, &hc_value, status).await;
    }
    if hc.metadata.deletion_timestamp.is_some() {
        return remove_operands(client, &api, &hc_value, use_emulation).await;
    }
    if !hc.finalizers().iter().any(|f| f == FINALIZER) {
        let mut finalizers = hc.finalizers().to_vec();
        finalizers.push(FINALIZER.to_owned());
        let patch = Patch::Merge(json!({"metadata": {"finalizers": finalizers}}));
        api.patch(&name, &PatchParams::default(), &patch).await?;
    }
    let mut operands = Vec::new();
    let mut related = Vec::new();
    for wanted in desired(&hc_value, use_emulation) {
        let object = ensure(client, &name, &wanted).await?;
        related.push(related_object(&object));
        operands.push((wanted.resource.kind.clone(), reported(&object)));
    }
    cli_download::ensure(client, &hc_value, &settings.cli_download).await?;
    let aggregated = conditions::aggregate(
        &operands
            .iter()
            .map(|(kind, conditions)| Operand {
                kind,
                conditions: conditions.clone(),
            })
            .collect::<Vec<_>>(),
    );
    let status = json!({
        "conditions": with_times(&aggregated, &hc_value["status"], generation, &now()),
        "relatedObjects": related,
        "versions": [{"name": "operator", "version": VERSION}],
        "systemHealthStatus": health(&aggregated),
        "observedGeneration": generation,
    });
    write_status(&api, &name, &hc_value, status).await
}

async fn write_status(
    api: &Api<DynamicObject>,
    name: &str,
    hc: &Value,
    status: Value,
) -> Result<(), kube::Error> {
    let unchanged = hc["status"]["conditions"] == status["conditions"]
        && status
            .as_object()
            .into_iter()
            .flatten()
            .all(|(k, v)| k == "relatedObjects" || hc["status"][k] == *v);
    let related_same = related_names(&hc["status"]) == related_names(&status);
    if unchanged && related_same {
        return Ok(());
    }
    crate::kit::objects::patch_status(api, name, &status).await?;
    Ok(())
}

/// Related objects by kind and name (their resourceVersions change with every status).
fn related_names(status: &Value) -> Vec<(String, String)> {
    status["relatedObjects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().to_owned(),
                r["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// On delete: the operands go, then the finalizer.
async fn remove_operands(
    client: &Client,
    api: &Api<DynamicObject>,
    hc: &Value,
    use_emulation: bool,
) -> Result<(), kube::Error> {
    for operand in desired(hc, use_emulation) {
        crate::kit::delete_ignoring_missing(&api_for(client, &operand), &operand.name).await?;
    }
    let name = hc["metadata"]["name"].as_str().unwrap_or_default();
    let finalizers: Vec<&str> = hc["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|f| *f != FINALIZER)
        .collect();
    let patch = Patch::Merge(json!({"metadata": {"finalizers": finalizers}}));
    api.patch(name, &PatchParams::default(), &patch).await?;
    Ok(())
}

fn now() -> String {
    api::meta_time::rfc3339(k8s_openapi::jiff::Timestamp::now())
}

/// Reconciles the HyperConverged CRs of the settings' namespace whenever they or an operand
/// change.
pub async fn run(client: Client, settings: Settings) {
    let hcs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &settings.namespace,
        &hyperconverged_resource(),
    );
    let operand_changes = [
        kubevirt_resource(),
        cdi_resource(),
        network_addons_resource(),
        ssp_resource(),
        tekton_tasks_resource(),
    ]
    .map(|resource| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        changes::of(api, watcher::Config::default())
    });
    let mut watches = futures_util::stream::select_all(
        operand_changes
            .into_iter()
            .chain([changes::of(hcs.clone(), watcher::Config::default())]),
    );
    loop {
        match hcs.list(&ListParams::default()).await {
            Ok(list) => {
                for hc in &list.items {
                    if let Err(err) = reconcile(&client, &settings, hc).await {
                        tracing::warn!(%err, name = %hc.name_any(), "reconciling a HyperConverged");
                    }
                }
            }
            Err(err) => tracing::warn!(%err, "listing HyperConverged CRs"),
        }
        tokio::select! {
            _ = watches.next() => {}
            _ = tokio::time::sleep(RESYNC) => {}
        }
        // A burst of watch events (one change often causes several) is one reconcile.
        while let Ok(Some(())) =
            tokio::time::timeout(Duration::from_millis(100), watches.next()).await
        {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported(type_: &str, status: &str) -> Reported {
        Reported {
            type_: type_.into(),
            status: status.into(),
            reason: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn health_follows_hco() {
        let healthy = [
            reported("Available", "True"),
            reported("ReconcileComplete", "True"),
            reported("Progressing", "False"),
            reported("Degraded", "False"),
        ];
        assert_eq!(health(&healthy), "healthy");
        let mut progressing = healthy.clone();
        progressing[2] = reported("Progressing", "True");
        assert_eq!(health(&progressing), "warning");
        let mut down = healthy.clone();
        down[0] = reported("Available", "False");
        assert_eq!(health(&down), "error");
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_stays() {
        let current = json!({"conditions": [
            {"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Degraded", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]});
        let wanted = [reported("Available", "True"), reported("Degraded", "False")];
        let timed = with_times(&wanted, &current, 3, "2026-02-02T00:00:00Z");
        assert_eq!(timed[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(timed[1]["lastTransitionTime"], "2026-02-02T00:00:00Z");
        assert_eq!(timed[1]["observedGeneration"], 3);
    }

    #[test]
    fn every_operand_has_hcos_name() {
        let hc = json!({"metadata": {"name": "kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged"}, "spec": {}});
        let names: Vec<(String, Option<String>)> = desired(&hc, false)
            .into_iter()
            .map(|d| (d.name, d.namespace))
            .collect();
        let ns = Some("kubevirt-hyperconverged".to_owned());
        assert_eq!(
            names,
            [
                ("kubevirt-kubevirt-hyperconverged".to_owned(), ns.clone()),
                ("cdi-kubevirt-hyperconverged".to_owned(), None),
                ("cluster".to_owned(), None),
                ("ssp-kubevirt-hyperconverged".to_owned(), ns.clone()),
                ("tto-kubevirt-hyperconverged".to_owned(), ns),
            ]
        );
    }
}
