//! `inferFromVolume`: a VM's instancetype or preference named by the labels of the volume
//! it boots from (KubeVirt's `pkg/instancetype/infer`), followed through claims,
//! DataVolumes (and their templates in the VM) and DataSources. A failure KubeVirt deems
//! ignorable drops the matcher under `inferFromVolumeFailurePolicy: Ignore`; any other
//! refuses the VM.

use api::instancetype::matcher::Family;
use api::instancetype::{
    DEFAULT_INSTANCETYPE_KIND_LABEL, DEFAULT_INSTANCETYPE_LABEL, DEFAULT_PREFERENCE_KIND_LABEL,
    DEFAULT_PREFERENCE_LABEL,
};
use serde_json::{Value, json};

use crate::Refusal;
use crate::cluster::Cluster;

/// Why inference failed.
enum Failed {
    /// A failure `Ignore` lets pass.
    Ignorable(String),
    /// A failure that refuses the VM whatever the policy.
    Fatal(Refusal),
}

fn ignorable(message: impl Into<String>) -> Failed {
    Failed::Ignorable(message.into())
}

/// Resolves `spec.FIELD.inferFromVolume` of `vm`, if set: the matcher becomes the name and
/// kind the volume's labels give.
pub async fn infer<C: Cluster>(
    cluster: &C,
    vm: &mut Value,
    namespace: &str,
    family: Family,
    field: &str,
) -> Result<(), Refusal> {
    let pointer = format!("/spec/{field}");
    let Some(matcher) = vm.pointer(&pointer).cloned() else {
        return Ok(());
    };
    let Some(volume) = matcher
        .get("inferFromVolume")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
    else {
        return Ok(());
    };
    let ignore = matcher
        .get("inferFromVolumeFailurePolicy")
        .and_then(Value::as_str)
        == Some("Ignore");
    let labels = match volume_labels(cluster, vm, namespace, volume).await {
        Ok(labels) => labels_for(family, &labels),
        Err(failed) => Err(failed),
    };
    let spec = vm.get_mut("spec").and_then(Value::as_object_mut);
    match (labels, spec) {
        (Ok((name, kind)), Some(spec)) => {
            let mut inferred = json!({"name": name});
            if let Some(kind) = kind {
                inferred["kind"] = Value::from(kind);
            }
            spec.insert(field.to_string(), inferred);
            if ignore
                && family == Family::Instancetype
                && let Some(domain) = vm
                    .pointer_mut("/spec/template/spec/domain")
                    .and_then(Value::as_object_mut)
            {
                // virtctl's fallback memory goes once an instancetype gives it.
                domain.remove("memory");
            }
            Ok(())
        }
        (Err(Failed::Ignorable(_)), Some(spec)) if ignore => {
            spec.remove(field);
            Ok(())
        }
        (Err(Failed::Ignorable(message)), _) => Err(Refusal::new(400, message)),
        (Err(Failed::Fatal(refusal)), _) => Err(refusal),
        (Ok(_), None) => Ok(()),
    }
}

fn labels_for(family: Family, labels: &Value) -> Result<(String, Option<String>), Failed> {
    let (name_label, kind_label) = match family {
        Family::Instancetype => (DEFAULT_INSTANCETYPE_LABEL, DEFAULT_INSTANCETYPE_KIND_LABEL),
        Family::Preference => (DEFAULT_PREFERENCE_LABEL, DEFAULT_PREFERENCE_KIND_LABEL),
    };
    let text = |key: &str| labels.get(key).and_then(Value::as_str).map(str::to_string);
    let name = text(name_label).ok_or_else(|| {
        ignorable(format!(
            "unable to find required {name_label} label on the volume"
        ))
    })?;
    Ok((name, text(kind_label)))
}

/// The labels of what the named volume of the template comes from.
async fn volume_labels<C: Cluster>(
    cluster: &C,
    vm: &Value,
    namespace: &str,
    volume: &str,
) -> Result<Value, Failed> {
    let volumes = vm
        .pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(found) = volumes.iter().find(|v| v["name"] == volume) else {
        return Err(Failed::Fatal(Refusal::new(
            400,
            format!("unable to find volume {volume} to infer defaults"),
        )));
    };
    if let Some(claim) = found
        .pointer("/persistentVolumeClaim/claimName")
        .and_then(Value::as_str)
    {
        return claim_labels(cluster, namespace, claim).await;
    }
    let Some(dv_name) = found.pointer("/dataVolume/name").and_then(Value::as_str) else {
        return Err(ignorable(format!(
            "unable to infer defaults from volume {volume} as type is not supported"
        )));
    };
    let templates = vm
        .pointer("/spec/dataVolumeTemplates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(template) = templates
        .iter()
        .find(|t| t.pointer("/metadata/name").and_then(Value::as_str) == Some(dv_name))
    {
        return spec_labels(cluster, namespace, &template["spec"]).await;
    }
    match get(
        cluster,
        "cdi.kubevirt.io",
        "datavolumes",
        namespace,
        dv_name,
    )
    .await?
    {
        None => claim_labels(cluster, namespace, dv_name).await,
        Some(dv) => {
            let labels = dv.pointer("/metadata/labels").cloned().unwrap_or(json!({}));
            let named = [DEFAULT_INSTANCETYPE_LABEL, DEFAULT_PREFERENCE_LABEL]
                .iter()
                .any(|l| labels.get(l).is_some());
            if named {
                Ok(labels)
            } else {
                spec_labels(cluster, namespace, &dv["spec"]).await
            }
        }
    }
}

/// The labels of a DataVolume spec's source: a claim it clones, or a DataSource.
async fn spec_labels<C: Cluster>(
    cluster: &C,
    namespace: &str,
    spec: &Value,
) -> Result<Value, Failed> {
    if let Some(pvc) = spec.pointer("/source/pvc") {
        let ns = pvc["namespace"].as_str().unwrap_or(namespace);
        let name = pvc["name"].as_str().unwrap_or_default();
        return claim_labels(cluster, ns, name).await;
    }
    let Some(source_ref) = spec.get("sourceRef") else {
        return Err(ignorable(
            "unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported",
        ));
    };
    let kind = source_ref["kind"].as_str().unwrap_or_default();
    if kind != "DataSource" {
        return Err(ignorable(format!(
            "unable to infer defaults from DataVolumeSourceRef as Kind {kind} is not supported"
        )));
    }
    let ns = source_ref["namespace"].as_str().unwrap_or(namespace);
    let name = source_ref["name"].as_str().unwrap_or_default();
    let Some(source) = get(cluster, "cdi.kubevirt.io", "datasources", ns, name).await? else {
        return Err(Failed::Fatal(not_found(
            "datasources.cdi.kubevirt.io",
            name,
        )));
    };
    let labels = source
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    if labels.get(DEFAULT_INSTANCETYPE_LABEL).is_some()
        || labels.get(DEFAULT_PREFERENCE_LABEL).is_some()
    {
        return Ok(labels);
    }
    match source.pointer("/spec/source/pvc") {
        Some(pvc) => {
            let ns = pvc["namespace"].as_str().unwrap_or(ns);
            claim_labels(cluster, ns, pvc["name"].as_str().unwrap_or_default()).await
        }
        None => Err(ignorable(
            "unable to infer defaults from DataSource that doesn't provide DataVolumeSourcePVC",
        )),
    }
}

async fn claim_labels<C: Cluster>(
    cluster: &C,
    namespace: &str,
    name: &str,
) -> Result<Value, Failed> {
    match get(cluster, "", "persistentvolumeclaims", namespace, name).await? {
        Some(claim) => Ok(claim
            .pointer("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}))),
        None => Err(Failed::Fatal(not_found("persistentvolumeclaims", name))),
    }
}

async fn get<C: Cluster>(
    cluster: &C,
    group: &str,
    plural: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, Failed> {
    cluster
        .get(group, plural, namespace, name)
        .await
        .map_err(Failed::Fatal)
}

/// The API server's NotFound message, as upstream passes it through.
fn not_found(resource: &str, name: &str) -> Refusal {
    Refusal::new(400, format!("{resource} \"{name}\" not found"))
}
