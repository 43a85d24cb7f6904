//! The VM's start and stop requests (`status.stateChangeRequests`, written by `virtctl
//! start`, `stop` and `restart`): which is pending, whether the VM is set to start, and
//! which remain after a reconcile.

use api::kubevirt::vm::{VirtualMachineStateChangeRequest, state_change};
use api::kubevirt::{
    RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineInstancePhase,
};

use super::observed::is_deleting;

/// The first pending state change request.
pub(super) fn first_request(vm: &VirtualMachine) -> Option<&VirtualMachineStateChangeRequest> {
    vm.status
        .as_ref()
        .and_then(|s| s.state_change_requests.as_ref())
        .and_then(|r| r.first())
}

pub(super) fn has_start_request(vm: &VirtualMachine) -> bool {
    first_request(vm).is_some_and(|r| r.action == state_change::START)
}

pub(super) fn has_start_paused_request(vm: &VirtualMachine) -> bool {
    first_request(vm).is_some_and(|r| {
        r.action == state_change::START
            && r.data
                .as_ref()
                .and_then(|d| d.get(state_change::PAUSED.0))
                .is_some_and(|v| v == state_change::PAUSED.1)
    })
}

pub(super) fn has_stop_request_for(vm: &VirtualMachine, vmi: &VirtualMachineInstance) -> bool {
    first_request(vm).is_some_and(|r| {
        r.action == state_change::STOP && r.uid.is_some() && r.uid == vmi.metadata.uid
    })
}

/// Whether the VM is meant to have a running instance (upstream's isSetToStart).
pub(super) fn set_to_start(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    strategy: RunStrategy,
) -> bool {
    match strategy {
        RunStrategy::Always => true,
        RunStrategy::Halted | RunStrategy::WaitAsReceiver => false,
        RunStrategy::Manual => match vmi {
            Some(v) => !has_stop_request_for(vm, v),
            None => has_start_request(vm),
        },
        RunStrategy::RerunOnFailure => match vmi {
            Some(v) => v.phase() != Some(VirtualMachineInstancePhase::Succeeded),
            None => rerun_should_start(vm),
        },
        RunStrategy::Once => vmi.is_none(),
    }
}

/// RerunOnFailure with no instance starts one on request, or when the VM just switched to
/// this strategy (its status still shows another one).
pub(super) fn rerun_should_start(vm: &VirtualMachine) -> bool {
    has_start_request(vm)
        || vm.status.as_ref().and_then(|s| s.run_strategy) != Some(RunStrategy::RerunOnFailure)
}

/// The pending state change requests after this reconcile: a start request queued by a
/// RerunOnFailure restart appended, then the first one dropped once it is done (a stop
/// whose instance is gone or replaced, a start whose instance exists and runs on).
pub(super) fn next_requests(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    queue_start: bool,
) -> Vec<VirtualMachineStateChangeRequest> {
    let mut requests = vm
        .status
        .as_ref()
        .and_then(|s| s.state_change_requests.clone())
        .unwrap_or_default();
    if queue_start {
        requests.push(VirtualMachineStateChangeRequest {
            action: state_change::START.to_string(),
            data: None,
            uid: None,
        });
    }
    let done = match requests.first() {
        None => false,
        Some(r) if r.action == state_change::STOP => match vmi {
            None => true,
            Some(v) => r.uid.is_none() || r.uid != v.metadata.uid,
        },
        Some(r) if r.action == state_change::START => {
            vmi.is_some_and(|v| !is_deleting(&v.metadata) && !v.is_final())
        }
        // A request this controller does not know can never be done: drop it.
        Some(_) => true,
    };
    if done {
        requests.remove(0);
    }
    requests
}
