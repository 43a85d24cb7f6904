//! The bundle on the cluster, as virt-operator keeps it for the active KubeVirt CR: while
//! `spec.configuration.commonInstancetypesDeployment.enabled` is unset or true, each object
//! is created, or updated (a hand edit reverted) when its labels, annotations or spec
//! differ; when it is false, every object virt-operator labelled as its own goes.

use std::collections::BTreeMap;

use api::instancetype::{VirtualMachineClusterInstancetype, VirtualMachineClusterPreference};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Map, Value, json};

use super::{cluster_instancetypes, cluster_preferences};
use crate::install::manifests::MANAGED_BY_LABEL;

/// The managed-by label's value on what virt-operator deploys.
pub const MANAGED_BY: &str = "virt-operator";
/// The label naming the product component, `kubevirt` unless the CR names another.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
const VERSION_LABEL: &str = "app.kubernetes.io/version";
const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";

/// Whether the KubeVirt CR `kv` wants the bundle deployed (the default).
pub fn enabled(kv: &Value) -> bool {
    kv["spec"]["configuration"]["commonInstancetypesDeployment"]["enabled"]
        .as_bool()
        .unwrap_or(true)
}

/// The `app.kubernetes.io` labels virt-operator adds to what it deploys for `kv`.
pub fn operator_labels(kv: &Value) -> Map<String, Value> {
    let spec = &kv["spec"];
    let component = spec["productComponent"]
        .as_str()
        .filter(|c| !c.is_empty())
        .unwrap_or("kubevirt");
    let mut labels = Map::new();
    labels.insert(COMPONENT_LABEL.into(), json!(component));
    labels.insert(MANAGED_BY_LABEL.into(), json!(MANAGED_BY));
    for (field, label) in [
        ("productVersion", VERSION_LABEL),
        ("productName", PART_OF_LABEL),
    ] {
        if let Some(value) = spec[field].as_str().filter(|v| !v.is_empty()) {
            labels.insert(label.into(), json!(value));
        }
    }
    labels
}

/// `object` with virt-operator's labels for `kv` added to its own.
pub fn with_operator_labels(mut object: Value, kv: &Value) -> Value {
    if let Some(labels) = object["metadata"]["labels"].as_object_mut() {
        labels.extend(operator_labels(kv));
    }
    object
}

/// What to do for one object of the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Create,
    /// Replace what is there, whose resourceVersion is given.
    Update(String),
    UpToDate,
}

/// The step that brings `found` (the object on the cluster, if any) to `desired`.
pub fn step(found: Option<&Value>, desired: &Value) -> Step {
    let Some(found) = found else {
        return Step::Create;
    };
    let same = |pointer: &str| {
        let empty = Value::Object(Map::new());
        let of = |v: &Value| v.pointer(pointer).cloned().unwrap_or_else(|| empty.clone());
        of(found) == of(desired)
    };
    if same("/metadata/labels") && same("/metadata/annotations") && same("/spec") {
        Step::UpToDate
    } else {
        let version = found["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        Step::Update(version.to_owned())
    }
}

/// The two kinds' APIs, to watch for hand edits of what was deployed.
pub fn watched(client: &Client) -> [Api<DynamicObject>; 2] {
    resources().map(|resource| Api::all_with(client.clone(), &resource))
}

fn resources() -> [ApiResource; 2] {
    [
        ApiResource::erase::<VirtualMachineClusterInstancetype>(&()),
        ApiResource::erase::<VirtualMachineClusterPreference>(&()),
    ]
}

/// Brings the cluster to what the KubeVirt CR `kv` asks of the bundle.
pub async fn reconcile(client: &Client, kv: &Value) -> Result<(), kube::Error> {
    let bundles = [cluster_instancetypes(), cluster_preferences()];
    for (resource, bundle) in resources().into_iter().zip(bundles) {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        if enabled(kv) {
            let desired: Vec<Value> = bundle
                .into_iter()
                .map(|object| with_operator_labels(object, kv))
                .collect();
            ensure(&api, &desired).await?;
        } else {
            remove(&api, kv).await?;
        }
    }
    Ok(())
}

/// Creates or updates each of `desired` against what `api` lists.
async fn ensure(api: &Api<DynamicObject>, desired: &[Value]) -> Result<(), kube::Error> {
    let found: BTreeMap<String, Value> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|o| Some((o.name_any(), serde_json::to_value(o).ok()?)))
        .collect();
    for object in desired {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let step = step(found.get(name), object);
        let mut dynamic: DynamicObject =
            serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
        match step {
            Step::UpToDate => continue,
            Step::Create => {
                api.create(&PostParams::default(), &dynamic).await?;
                tracing::info!(name, kind = ?dynamic.types, "created");
            }
            Step::Update(version) => {
                dynamic.metadata.resource_version = Some(version);
                api.replace(name, &PostParams::default(), &dynamic).await?;
                tracing::info!(name, kind = ?dynamic.types, "updated");
            }
        }
    }
    Ok(())
}

/// Deletes everything of `api`'s kind labelled as virt-operator's for `kv`.
async fn remove(api: &Api<DynamicObject>, kv: &Value) -> Result<(), kube::Error> {
    let labels = operator_labels(kv);
    let selector = format!(
        "{COMPONENT_LABEL}={},{MANAGED_BY_LABEL}={MANAGED_BY}",
        labels[COMPONENT_LABEL].as_str().unwrap_or_default()
    );
    let listed = api.list(&ListParams::default().labels(&selector)).await?;
    for object in listed.items {
        let name = object.name_any();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(%name, "deleted: common instancetypes are disabled"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
