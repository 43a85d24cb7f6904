//! The objects a VM makes and the patches it writes on itself: its instance and
//! DataVolumes (owned by it), the controller's finalizer, and the switch of a halted VM to
//! `Always`.

use api::cdi::DataVolume;
use api::kubevirt::keys;
use api::kubevirt::vmi::START_STRATEGY_PAUSED;
use api::kubevirt::{VirtualMachine, VirtualMachineInstance};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use serde_json::{Value, json};

use super::requests::has_start_paused_request;
use crate::kit::finalizer;

/// The finalizer by which a VM's deletion orphans its dependents.
const ORPHAN_FINALIZER: &str = "orphan";

/// The controller reference a VM puts on what it creates.
pub fn owner_reference(vm: &VirtualMachine) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/{}", api::kubevirt::GROUP, api::kubevirt::VERSION),
        kind: "VirtualMachine".to_string(),
        name: vm.name_any(),
        uid: vm.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The DataVolume a template describes, owned by the VM.
pub fn data_volume_for(
    vm: &VirtualMachine,
    template: &api::kubevirt::DataVolumeTemplateSpec,
) -> Option<DataVolume> {
    let meta = template.metadata.clone().unwrap_or_default();
    let name = meta.name.clone().filter(|n| !n.is_empty())?;
    let mut labels = meta.labels.clone().unwrap_or_default();
    labels.insert(
        keys::CREATED_BY_LABEL.to_string(),
        vm.metadata.uid.clone().unwrap_or_default(),
    );
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    // As upstream: the DataVolume adopts a claim of its name that already exists.
    annotations.insert(
        keys::ALLOW_CLAIM_ADOPTION_ANNOTATION.to_string(),
        "true".to_string(),
    );
    let mut spec = template.spec.clone();
    if spec.priority_class_name.is_none() {
        spec.priority_class_name = vm
            .spec
            .template
            .as_ref()
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.priority_class_name.clone());
    }
    let mut dv = DataVolume::new(&name, spec);
    dv.metadata = ObjectMeta {
        name: Some(name),
        namespace: vm.namespace(),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: Some(vec![owner_reference(vm)]),
        ..Default::default()
    };
    Some(dv)
}

/// The instance a VM's template describes: the VM's name and namespace, the template's
/// labels and annotations plus the VM's name and generation, owned by the VM and held by
/// the VM controller's finalizer; paused when the start request asks for it.
pub fn instance_for(vm: &VirtualMachine) -> Option<VirtualMachineInstance> {
    let template = vm.spec.template.as_ref()?;
    let mut spec = template.spec.clone()?;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(keys::VM_NAME_LABEL.to_string(), vm.name_any());
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(
        keys::VM_GENERATION_ANNOTATION.to_string(),
        vm.metadata.generation.unwrap_or_default().to_string(),
    );
    let mut finalizers = meta.finalizers.unwrap_or_default();
    if !finalizers
        .iter()
        .any(|f| f == keys::VM_CONTROLLER_FINALIZER)
    {
        finalizers.push(keys::VM_CONTROLLER_FINALIZER.to_string());
    }
    if has_start_paused_request(vm) {
        spec.start_strategy = Some(START_STRATEGY_PAUSED.to_string());
    }
    let mut vmi = VirtualMachineInstance::new(&vm.name_any(), spec);
    vmi.metadata = ObjectMeta {
        name: Some(vm.name_any()),
        namespace: vm.namespace(),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: Some(vec![owner_reference(vm)]),
        finalizers: Some(finalizers),
        ..Default::default()
    };
    Some(vmi)
}

/// Whether the instance belongs to the VM: controlled by it, or by nothing (then it is
/// taken over, as upstream adopts orphans of the VM's name).
pub(super) fn is_ours(vm: &VirtualMachine, vmi: &VirtualMachineInstance) -> bool {
    let controller = vmi
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    controller.is_none_or(|r| Some(&r.uid) == vm.metadata.uid.as_ref())
}

/// A JSON patch adding (`add`) or removing the VM controller's finalizer, failing if the
/// finalizers changed meanwhile.
pub fn finalizer_patch(meta: &ObjectMeta, add: bool) -> Value {
    finalizer::json_patch(meta, keys::VM_CONTROLLER_FINALIZER, add)
}

/// The spec patch that turns a halted VM on (`runStrategy: Always`, or `running: true`
/// where the VM uses the older field), failing if the field changed meanwhile.
pub(super) fn switch_to_always_patch(vm: &VirtualMachine) -> Value {
    match (vm.spec.run_strategy, vm.spec.running) {
        (Some(current), _) => json!([
            {"op": "test", "path": "/spec/runStrategy", "value": current.as_str()},
            {"op": "replace", "path": "/spec/runStrategy", "value": "Always"},
        ]),
        (None, Some(current)) => json!([
            {"op": "test", "path": "/spec/running", "value": current},
            {"op": "replace", "path": "/spec/running", "value": true},
        ]),
        (None, None) => {
            let mut ops = Vec::new();
            if let Some(rv) = &vm.metadata.resource_version {
                ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
            }
            ops.push(json!({"op": "add", "path": "/spec/runStrategy", "value": "Always"}));
            Value::Array(ops)
        }
    }
}

pub(super) fn decision_orphans(vm: &VirtualMachine) -> bool {
    vm.finalizers().iter().any(|f| f == ORPHAN_FINALIZER)
}
