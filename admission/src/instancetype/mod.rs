//! virt-api's admission of instancetypes and preferences: the VM mutator's matcher checks,
//! inference from a volume's labels and kind defaults ([`mutate_vm`]); the VM validator's
//! expansion of the template with them, refused on conflicts, unmet requirements or an
//! indivisible spread ([`validate_vm`]); and the checks of the four kinds themselves
//! ([`kinds`]). As KubeVirt v1.6, a VM naming an object that does not exist is admitted:
//! the VM controller reports it in the VM's `Failure` condition.

pub mod infer;
pub mod kinds;

use api::instancetype::matcher::{Family, Scope};
use api::instancetype::requirements::{check, check_spread};
use api::instancetype::{VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec, apply};
use api::kubevirt::VirtualMachine;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Refusal;
use crate::cluster::Cluster;

/// The VM mutator's name, as kubectl quotes its refusals.
pub const VM_MUTATOR: &str = "virtualmachines-mutator.kubevirt.io";

const FAMILIES: [(Family, &str); 2] = [
    (Family::Instancetype, "instancetype"),
    (Family::Preference, "preference"),
];

/// The VM mutator's part for instancetypes: the matchers checked, inferred from their
/// volume, their kinds defaulted, and the preference's storage class given to the
/// DataVolume templates that name none. `old` is the VM before an update.
pub async fn mutate_vm<C: Cluster>(
    cluster: &C,
    vm: &mut Value,
    old: Option<&Value>,
) -> Result<(), Refusal> {
    check_matchers(vm, old)?;
    let namespace = vm
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    for (family, field) in FAMILIES {
        infer::infer(cluster, vm, &namespace, family, field).await?;
        if let Some(matcher) = vm.pointer_mut(&format!("/spec/{field}"))
            && matcher.get("name").is_some()
            && matcher
                .get("kind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            matcher["kind"] = Value::from(family.default_kind());
        }
    }
    let preference: Option<VirtualMachinePreferenceSpec> =
        find(cluster, vm, &namespace, Family::Preference, "preference").await;
    if let Some(class) = preference
        .and_then(|p| p.volumes)
        .and_then(|v| v.preferred_storage_class_name)
    {
        give_storage_class(vm, &class);
    }
    Ok(())
}

/// KubeVirt's checks of a matcher's fields, all told at once.
fn check_matchers(vm: &Value, old: Option<&Value>) -> Result<(), Refusal> {
    let mut problems = Vec::new();
    for (family, field) in FAMILIES {
        let Some(matcher) = vm.pointer(&format!("/spec/{field}")) else {
            continue;
        };
        let text = |key: &str| matcher.get(key).and_then(Value::as_str).unwrap_or_default();
        let which = family.matcher();
        if text("name").is_empty() && text("inferFromVolume").is_empty() {
            problems.push(format!(
                "Either Name or InferFromVolume should be provided within the {which}"
            ));
        }
        if !text("inferFromVolume").is_empty() {
            if !text("name").is_empty() {
                problems.push(format!(
                    "Name should not be provided when InferFromVolume is used within the {which}"
                ));
            }
            if !text("kind").is_empty() {
                problems.push(format!(
                    "Kind should not be provided when InferFromVolume is used within the {which}"
                ));
            }
        }
        let policy = text("inferFromVolumeFailurePolicy");
        if !policy.is_empty() && policy != "Reject" && policy != "Ignore" {
            problems.push(format!(
                "Invalid value '{policy}' for InferFromVolumeFailurePolicy"
            ));
        }
        let before = old.and_then(|o| o.pointer(&format!("/spec/{field}")));
        if let Some(before) = before {
            let revision = |m: &Value| m.get("revisionName").cloned();
            let name = |m: &Value| m.get("name").cloned();
            if revision(before).is_some_and(|r| !r.is_null())
                && name(before) != name(matcher)
                && revision(before) == revision(matcher)
            {
                problems.push(
                    "the Matcher Name has been updated without updating the RevisionName".into(),
                );
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Refusal::new(422, problems.join(", ")))
    }
}

fn give_storage_class(vm: &mut Value, class: &str) {
    let Some(templates) = vm
        .pointer_mut("/spec/dataVolumeTemplates")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for template in templates {
        for claim in ["pvc", "storage"] {
            if let Some(spec) = template
                .pointer_mut(&format!("/spec/{claim}"))
                .and_then(Value::as_object_mut)
            {
                spec.entry("storageClassName")
                    .or_insert_with(|| Value::from(class));
            }
        }
    }
}

/// The object a matcher names, read live; none when it names none or cannot be read
/// (upstream's admission only logs that).
async fn find<C: Cluster, S: DeserializeOwned>(
    cluster: &C,
    vm: &Value,
    namespace: &str,
    family: Family,
    field: &str,
) -> Option<S> {
    let matcher = vm.pointer(&format!("/spec/{field}"))?;
    let name = matcher.get("name").and_then(Value::as_str)?;
    let scope = family
        .scope(matcher.get("kind").and_then(Value::as_str))
        .ok()?;
    let kind = family.kind(scope);
    let plural = format!("{}s", kind.to_lowercase());
    let namespace = match scope {
        Scope::Namespaced => namespace,
        Scope::Cluster => "",
    };
    let object = cluster
        .get(api::instancetype::GROUP, &plural, namespace, name)
        .await;
    match object {
        Ok(Some(object)) => serde_json::from_value(object.get("spec")?.clone()).ok(),
        Ok(None) => None,
        Err(refusal) => {
            tracing::info!(%name, %kind, error = %refusal.message, "ignoring the error looking for it");
            None
        }
    }
}

/// The VM validator's part for instancetypes: the template expanded with them as the
/// controller will, refused as KubeVirt refuses it.
pub async fn validate_vm<C: Cluster>(cluster: &C, vm: &Value) -> Result<(), Refusal> {
    if vm.pointer("/spec/instancetype").is_none() && vm.pointer("/spec/preference").is_none() {
        return Ok(());
    }
    let namespace = vm
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let instancetype: Option<VirtualMachineInstancetypeSpec> =
        find(cluster, vm, namespace, Family::Instancetype, "instancetype").await;
    let preference: Option<VirtualMachinePreferenceSpec> =
        find(cluster, vm, namespace, Family::Preference, "preference").await;
    if instancetype.is_none() && preference.is_none() {
        return Ok(());
    }
    let parsed: VirtualMachine = serde_json::from_value(vm.clone())
        .map_err(|e| Refusal::new(422, format!("not a VirtualMachine: {e}")))?;
    let Some(template) = parsed.spec.template else {
        return Ok(());
    };
    let mut spec = template.spec.unwrap_or_default();
    let mut annotations = template
        .metadata
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    if let Some(it) = &instancetype {
        check_spread(it, preference.as_ref()).map_err(|message| Refusal::new(422, message))?;
    }
    apply(
        "spec.template.spec",
        instancetype.as_ref(),
        preference.as_ref(),
        &mut spec,
        &mut annotations,
    )
    .map_err(|conflicts| {
        let each: Vec<String> = conflicts
            .0
            .iter()
            .map(|path| format!("VM field(s) {path} conflicts with selected instance type"))
            .collect();
        Refusal::new(422, each.join(", "))
    })?;
    if let Some(pref) = &preference {
        check(instancetype.as_ref(), pref, &spec)
            .map_err(|unmet| Refusal::new(422, unmet.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
