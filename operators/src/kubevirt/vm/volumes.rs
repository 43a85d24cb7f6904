//! The VM's DataVolumes and claims: which its templates name, what state they are in,
//! which to create now, and what the status says of them while they are filled.

use std::collections::BTreeSet;

use api::cdi::DataVolume;
use api::cdi::datavolume::{DataVolumeConditionType, DataVolumePhase};
use api::common::ConditionStatus;
use api::kubevirt::{
    VirtualMachine, VirtualMachineInstanceTemplateSpec, VirtualMachinePrintableStatus,
};
use kube::ResourceExt;

use super::actions::{VmAction, event};
use super::objects::data_volume_for;
use super::observed::Observed;
use super::reasons;

/// A VM annotation: `"false"` defers creating DataVolumes until the VM starts.
pub const IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION: &str =
    "kubevirt.io/immediate-data-volume-creation";

/// The names of the DataVolumes the template's volumes use.
pub(super) fn template_data_volumes(
    template: Option<&VirtualMachineInstanceTemplateSpec>,
) -> Vec<String> {
    template
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.volumes.as_ref())
        .map(|volumes| {
            volumes
                .iter()
                .filter_map(|v| v.data_volume.as_ref().map(|d| d.name.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the claims the template's volumes use (a DataVolume's claim has its name).
pub fn template_claims(vm: &VirtualMachine) -> Vec<String> {
    vm.spec
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(crate::kubevirt::vmi::launcher_pod::claim_of)
        .map(|(claim, _)| claim.to_owned())
        .collect()
}

/// The names of every DataVolume [`plan`](super::plan::plan) wants to see: the templates' and the volumes'.
pub fn data_volume_names(vm: &VirtualMachine) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = template_data_volumes(vm.spec.template.as_ref())
        .into_iter()
        .collect();
    for t in vm.spec.data_volume_templates.iter().flatten() {
        if let Some(name) = t.metadata.as_ref().and_then(|m| m.name.clone()) {
            names.insert(name);
        }
    }
    names
}

pub(super) fn dv_phase(dv: &DataVolume) -> Option<DataVolumePhase> {
    dv.status.as_ref().and_then(|s| s.phase)
}

fn dv_condition_is(
    dv: &DataVolume,
    type_: DataVolumeConditionType,
    status: ConditionStatus,
) -> Option<String> {
    dv.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_ && c.status == status))
        .map(|c| c.reason.clone().unwrap_or_default())
}

/// A DataVolume a start may go on with: filled, or waiting for its first consumer (the
/// launcher pod is that consumer).
pub(super) fn dv_usable(dv: &DataVolume) -> bool {
    dv_phase(dv).is_some_and(DataVolumePhase::usable_by_consumer)
}

/// Why a DataVolume is in error, as upstream sees it: failed, or its worker stopped on an
/// error.
pub(super) fn dv_error(dv: &DataVolume) -> Option<String> {
    let name = dv.name_any();
    if dv_phase(dv) == Some(DataVolumePhase::Failed) {
        return Some(format!("DataVolume {name} is in Failed phase"));
    }
    let running = dv
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == DataVolumeConditionType::Running)
        })?;
    let reason = running.reason.as_deref().unwrap_or_default();
    (running.status == ConditionStatus::False && matches!(reason, "Error" | "ImagePullFailed"))
        .then(|| {
            format!(
                "DataVolume {name} importer has stopped running due to an error: {}",
                running.message.as_deref().unwrap_or_default()
            )
        })
}

/// A DataVolume being filled, as upstream counts it for `Provisioning`: not done, and not
/// merely waiting for its first consumer while unbound.
pub(super) fn dv_provisioning(dv: &DataVolume) -> bool {
    match dv_phase(dv) {
        Some(DataVolumePhase::Succeeded | DataVolumePhase::PendingPopulation) => false,
        Some(DataVolumePhase::WaitForFirstConsumer) => {
            dv_condition_is(dv, DataVolumeConditionType::Bound, ConditionStatus::True).is_some()
        }
        _ => true,
    }
}

/// What a DataVolume is doing, for a person: `rootdisk (ImportInProgress, 45.10%)`.
pub(super) fn dv_progress(name: &str, dv: Option<&DataVolume>) -> String {
    match dv {
        None => format!("{name} (being created)"),
        Some(dv) => {
            let phase = dv_phase(dv).map_or("Pending", DataVolumePhase::as_str);
            match dv.status.as_ref().and_then(|s| s.progress.as_deref()) {
                Some(p) if !p.is_empty() && p != "N/A" => format!("{name} ({phase}, {p})"),
                _ => format!("{name} ({phase})"),
            }
        }
    }
}

/// The DataVolumes of the VM's `dataVolumeTemplates`, as a reconcile of a live VM finds them.
pub(super) struct TemplateVolumes {
    /// Their creation waits until the VM starts
    /// ([`IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION`]).
    deferred: bool,
    /// Every one exists and a start may go on with it.
    pub(super) ready: bool,
    /// The ones that do not exist yet.
    create: Vec<DataVolume>,
    /// The events of the ones that failed.
    failed: Vec<VmAction>,
}

/// Looks at the VM's `dataVolumeTemplates`: a template without a name is a failure, a
/// missing DataVolume is to be created, a failed one reported once (while the printable
/// status does not already say so).
pub(super) fn template_volumes(
    observed: &Observed,
    failures: &mut Vec<(&'static str, String)>,
) -> TemplateVolumes {
    let vm = observed.vm;
    let previous_printable = vm.status.as_ref().and_then(|s| s.printable_status);
    // DataVolumes: created with the VM (even a halted one) unless deferred.
    let deferred = vm
        .annotations()
        .get(IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION)
        .is_some_and(|v| v == "false");
    let mut dvs_ready = true;
    let mut create_dvs = Vec::new();
    let mut dv_actions = Vec::new();
    for (i, t) in vm.spec.data_volume_templates.iter().flatten().enumerate() {
        let Some(dv) = data_volume_for(vm, t) else {
            failures.push((
                reasons::FAILED_CREATE,
                format!("spec.dataVolumeTemplates[{i}].metadata.name: required"),
            ));
            dvs_ready = false;
            continue;
        };
        let dv_name = dv.name_any();
        match observed.data_volumes.get(&dv_name) {
            None => {
                dvs_ready = false;
                create_dvs.push(dv);
            }
            Some(existing) => {
                if !dv_usable(existing) {
                    dvs_ready = false;
                }
                if dv_phase(existing) == Some(DataVolumePhase::Failed)
                    && previous_printable != Some(VirtualMachinePrintableStatus::DataVolumeError)
                {
                    dv_actions.push(event(
                        true,
                        reasons::FAILED_DATA_VOLUME_IMPORT,
                        format!("DataVolume {dv_name} failed to import disk image"),
                    ));
                }
            }
        }
    }
    TemplateVolumes {
        deferred,
        ready: dvs_ready,
        create: create_dvs,
        failed: dv_actions,
    }
}

impl TemplateVolumes {
    /// The actions on them: the failures' events, then, unless their creation is deferred
    /// and no start is wanted, the creation of the missing ones.
    pub(super) fn actions(self, want_start: bool) -> Vec<VmAction> {
        let mut dv_actions = self.failed;
        if !self.deferred || want_start {
            for dv in self.create {
                let message = format!("Created DataVolume {}", dv.name_any());
                dv_actions.push(VmAction::CreateDataVolume(Box::new(dv)));
                dv_actions.push(event(
                    false,
                    reasons::SUCCESSFUL_DATA_VOLUME_CREATE,
                    message,
                ));
            }
        }
        dv_actions
    }
}

/// The volumes the template uses, as the status reports them.
pub(super) struct VolumeReport {
    /// A DataVolume the template uses is in error.
    pub(super) dv_error: bool,
    /// The DataVolumes being created or filled, for a person.
    pub(super) provisioning: Vec<String>,
    /// A claim the template uses exists and is not bound.
    pub(super) unbound_claim: bool,
    /// The DataVolumesReady condition (ready, message), when the template uses any.
    pub(super) ready: Option<(bool, String)>,
}

/// Reports the volumes the VM's template uses; `deleting` VMs expect no templated
/// DataVolume still to be created.
pub(super) fn volume_report(observed: &Observed, deleting: bool) -> VolumeReport {
    let vm = observed.vm;
    let used_dvs = template_data_volumes(vm.spec.template.as_ref());
    let templated: BTreeSet<String> = vm
        .spec
        .data_volume_templates
        .iter()
        .flatten()
        .filter_map(|t| t.metadata.as_ref().and_then(|m| m.name.clone()))
        .collect();
    let mut dv_error_found = false;
    let mut provisioning = Vec::new();
    for dv_name in &used_dvs {
        match observed.data_volumes.get(dv_name) {
            Some(dv) => {
                dv_error_found |= dv_error(dv).is_some();
                if dv_provisioning(dv) {
                    provisioning.push(dv_progress(dv_name, Some(dv)));
                }
            }
            None if templated.contains(dv_name) && !deleting => {
                provisioning.push(dv_progress(dv_name, None));
            }
            None => {}
        }
    }
    let unbound_claim = template_claims(vm).iter().any(|c| {
        observed.claims.get(c).is_some_and(|pvc| {
            pvc.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound")
        })
    });
    let volumes_ready = (!used_dvs.is_empty()).then(|| {
        if provisioning.is_empty() {
            (true, "All of the VM's DataVolumes are ready".to_string())
        } else {
            (
                false,
                format!("Waiting for DataVolume {}", provisioning.join(", ")),
            )
        }
    });
    VolumeReport {
        dv_error: dv_error_found,
        provisioning,
        unbound_claim,
        ready: volumes_ready,
    }
}
