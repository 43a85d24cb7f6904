//! What a reconcile of a VM does, as values: the [`VmAction`]s [`plan`](super::plan::plan)
//! returns and the events among them.

use std::time::Duration;

use api::cdi::DataVolume;
use api::kubevirt::{VirtualMachineInstance, VirtualMachineStatus};
use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;

/// An event to publish on the VM.
#[derive(Clone, Debug, PartialEq)]
pub struct VmEvent {
    /// A warning rather than a normal event.
    pub warning: bool,
    /// Upstream's reason.
    pub reason: &'static str,
    /// What happened, for a person.
    pub message: String,
}

/// One step of a reconcile. Events directly follow the action they report and are
/// published only when it succeeded.
#[derive(Clone, Debug, PartialEq)]
pub enum VmAction {
    /// Put [`keys::VM_CONTROLLER_FINALIZER`](api::kubevirt::keys::VM_CONTROLLER_FINALIZER) on the VM.
    AddVmFinalizer,
    /// Take [`keys::VM_CONTROLLER_FINALIZER`](api::kubevirt::keys::VM_CONTROLLER_FINALIZER) off the VM (it is being deleted).
    RemoveVmFinalizer,
    /// Create this DataVolume.
    CreateDataVolume(Box<DataVolume>),
    /// Create this instance.
    CreateVmi(Box<VirtualMachineInstance>),
    /// Create this revision (keeping the VM's instancetype or preference).
    CreateControllerRevision(Box<ControllerRevision>),
    /// Delete the instance of that name, only if it still has that UID.
    DeleteVmi {
        /// Its name.
        name: String,
        /// Its UID, a precondition of the deletion.
        uid: Option<String>,
    },
    /// Take [`keys::VM_CONTROLLER_FINALIZER`](api::kubevirt::keys::VM_CONTROLLER_FINALIZER) off the instance of that name.
    RemoveVmiFinalizer {
        /// Its name.
        name: String,
    },
    /// Apply this JSON patch (RFC 6902) to the VM (its spec).
    PatchVm(Value),
    /// Replace the VM's status with this one.
    PatchVmStatus(Box<VirtualMachineStatus>),
    /// Publish an event on the VM.
    Event(VmEvent),
    /// Look at the VM again after this long.
    RequeueAfter(Duration),
}

pub(super) fn event(warning: bool, reason: &'static str, message: String) -> VmAction {
    VmAction::Event(VmEvent {
        warning,
        reason,
        message,
    })
}
