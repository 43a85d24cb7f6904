//! The VM's instancetype and preference in its reconcile: the revisions to keep them, the
//! status references to those, and the instance expanded with them, as KubeVirt's VM
//! controller does when it creates a VMI (`ApplyToVMI`, after a disk for each volume).

use api::instancetype::matcher::Scope;
use api::instancetype::{Conflicts, annotations, apply};
use api::kubevirt::{VirtualMachine, VirtualMachineInstance, VirtualMachineStatus};

use super::actions::VmAction;
use super::objects::instance_for;
use crate::kubevirt::instancetype::Resolved;

/// The revisions to create.
pub(super) fn revision_actions(resolved: &Resolved) -> Vec<VmAction> {
    let instancetype = resolved
        .instancetype
        .as_ref()
        .and_then(|c| c.new_revision.clone());
    let preference = resolved
        .preference
        .as_ref()
        .and_then(|c| c.new_revision.clone());
    [instancetype, preference]
        .into_iter()
        .flatten()
        .map(|r| VmAction::CreateControllerRevision(Box::new(r)))
        .collect()
}

/// The status with its references to the revisions.
pub(super) fn with_refs(status: &mut VirtualMachineStatus, resolved: &Resolved) {
    if let Some(chosen) = &resolved.instancetype {
        status.instancetype_ref = Some(chosen.status_ref.clone());
    }
    if let Some(chosen) = &resolved.preference {
        status.preference_ref = Some(chosen.status_ref.clone());
    }
}

/// The instance the VM's template describes with its instancetype and preference applied;
/// `Err` with upstream's message when the template sets what the instancetype does.
pub(super) fn expanded_instance(
    vm: &VirtualMachine,
    resolved: &Resolved,
) -> Result<Option<VirtualMachineInstance>, String> {
    let Some(mut vmi) = instance_for(vm) else {
        return Ok(None);
    };
    if resolved.instancetype.is_none() && resolved.preference.is_none() {
        return Ok(Some(vmi));
    }
    // A disk for each volume first, so the preference picks their buses (as upstream's
    // `SetDefaultVolumeDisk` runs before it).
    api::kubevirt::default::add_volume_disks(&mut vmi.spec);
    let mut names = vmi.metadata.annotations.take().unwrap_or_default();
    if let Some(c) = &resolved.instancetype {
        let key = match c.scope {
            Scope::Namespaced => annotations::INSTANCETYPE,
            Scope::Cluster => annotations::CLUSTER_INSTANCETYPE,
        };
        names.insert(key.into(), c.name.clone());
    }
    if let Some(c) = &resolved.preference {
        let key = match c.scope {
            Scope::Namespaced => annotations::PREFERENCE,
            Scope::Cluster => annotations::CLUSTER_PREFERENCE,
        };
        names.insert(key.into(), c.name.clone());
    }
    apply(
        "spec",
        resolved.instancetype.as_ref().map(|c| &c.spec),
        resolved.preference.as_ref().map(|c| &c.spec),
        &mut vmi.spec,
        &mut names,
    )
    .map_err(|conflicts: Conflicts| {
        format!(
            "Error creating virtual machine instance: Failed to apply instancetype: {}",
            conflicts.instance_message()
        )
    })?;
    vmi.metadata.annotations = Some(names);
    Ok(Some(vmi))
}
