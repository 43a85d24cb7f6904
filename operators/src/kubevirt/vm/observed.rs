//! What the VM controller decides from: the objects [`plan`](super::plan::plan) looks at,
//! and the reads of the VM and its instance that several of its steps share.

use std::collections::BTreeMap;

use api::cdi::DataVolume;
use api::common::ConditionStatus;
use api::kubevirt::vmi::VirtualMachineCondition;
use api::kubevirt::{VirtualMachine, VirtualMachineInstance};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::kubevirt::instancetype::{Failure, Resolved};

/// Everything [`plan`](super::plan::plan) looks at.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The VM, as just read.
    pub vm: &'a VirtualMachine,
    /// The VMI of the VM's name, if one exists (whoever owns it).
    pub vmi: Option<&'a VirtualMachineInstance>,
    /// The DataVolumes named by the VM's `dataVolumeTemplates` and by its template's
    /// `dataVolume` volumes that exist, by name.
    pub data_volumes: &'a BTreeMap<String, DataVolume>,
    /// The claims named by the template's volumes that exist, by name.
    pub claims: &'a BTreeMap<String, PersistentVolumeClaim>,
    /// The instancetype and preference the VM names, or why they cannot be had.
    pub instancetypes: &'a Result<Resolved, Failure>,
    /// The current time.
    pub now: Time,
}

pub(super) fn is_deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

pub(super) fn vmi_condition<'a>(
    vmi: Option<&'a VirtualMachineInstance>,
    type_: &str,
) -> Option<&'a VirtualMachineCondition> {
    vmi.and_then(|v| v.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

pub(super) fn vmi_condition_is(
    vmi: Option<&VirtualMachineInstance>,
    type_: &str,
    status: ConditionStatus,
    reason: Option<&str>,
) -> bool {
    vmi_condition(vmi, type_).is_some_and(|c| {
        c.status == status && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
    })
}
