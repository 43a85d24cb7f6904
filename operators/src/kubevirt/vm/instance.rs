//! What becomes of the VM's instance in a reconcile: deleted with the VM, created, deleted
//! or left as the run strategy and the pending requests say, a start held back by the
//! crash-loop back-off or by volumes, and the actions that carry the decision out.

use std::time::Duration;

use api::kubevirt::{
    RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineInstancePhase,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::actions::{VmAction, event};
use super::backoff::{StartFailure, backoff_left};
use super::objects::{decision_orphans, switch_to_always_patch};
use super::observed::is_deleting;
use super::reasons;
use super::requests::{has_start_request, has_stop_request_for, rerun_should_start};

/// What [`plan`](super::plan::plan) decided about the instance.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Decision {
    /// An instance is created now.
    pub(super) create: bool,
    /// The instance is deleted now.
    pub(super) delete: bool,
    /// A start is wanted but waits for DataVolumes.
    pub(super) waiting_for_volumes: bool,
    /// The spec is switched to `Always` (a paused start of a halted VM).
    pub(super) switch_to_always: bool,
    /// A start request is queued (RerunOnFailure after a failure).
    pub(super) queue_start: bool,
}

/// The decision while the VM is deleted: its instance goes with it, unless the VM orphans
/// it or it is already going.
pub(super) fn on_vm_deletion(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
) -> Decision {
    let mut decision = Decision::default();
    if let Some(v) = vmi {
        if !decision_orphans(vm) && !is_deleting(&v.metadata) {
            decision.delete = true;
        }
    }
    decision
}

/// The decision the run strategy makes about the instance, and whether it wants one
/// started.
pub(super) fn by_run_strategy(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    strategy: RunStrategy,
) -> (Decision, bool) {
    let mut decision = Decision::default();
    // The instance, per run strategy.
    let mut want_start = false;
    match (strategy, vmi) {
        (RunStrategy::Always, Some(v)) => {
            decision.delete = has_stop_request_for(vm, v) || v.is_final();
        }
        (RunStrategy::RerunOnFailure, Some(v)) => {
            let failed = v.phase() == Some(VirtualMachineInstancePhase::Failed);
            let succeeded = v.phase() == Some(VirtualMachineInstancePhase::Succeeded);
            if !is_deleting(&v.metadata) && (has_stop_request_for(vm, v) || failed || succeeded) {
                decision.delete = true;
                decision.queue_start = failed;
            }
        }
        (RunStrategy::Manual, Some(v)) => decision.delete = has_stop_request_for(vm, v),
        (RunStrategy::Halted, Some(_)) => decision.delete = true,
        (RunStrategy::Once | RunStrategy::WaitAsReceiver, Some(_)) => {}
        (RunStrategy::Always | RunStrategy::Once, None) => want_start = true,
        (RunStrategy::RerunOnFailure, None) => want_start = rerun_should_start(vm),
        (RunStrategy::Manual, None) => want_start = has_start_request(vm),
        (RunStrategy::Halted, None) => decision.switch_to_always = has_start_request(vm),
        (RunStrategy::WaitAsReceiver, None) => {}
    }
    if decision.delete && vmi.is_some_and(|v| is_deleting(&v.metadata)) {
        decision.delete = false;
    }
    (decision, want_start)
}

/// A wanted start: held back by the crash-loop back-off (what is left of it is returned),
/// by a template that cannot make an instance, or, waiting, by DataVolumes not ready;
/// otherwise the instance is created.
pub(super) fn start(
    decision: &mut Decision,
    strategy: RunStrategy,
    current_failure: Option<&StartFailure>,
    template_ok: bool,
    dvs_ready: bool,
    now: &Time,
) -> Option<Duration> {
    let backoff = matches!(strategy, RunStrategy::Always | RunStrategy::RerunOnFailure)
        .then(|| backoff_left(current_failure, now))
        .flatten();
    if let Some(left) = backoff {
        return Some(left);
    }
    if template_ok {
        if dvs_ready {
            decision.create = true;
        } else {
            decision.waiting_for_volumes = true;
        }
    }
    None
}

/// The actions of a decision: the switch to `Always`, the creation of `instance` (the
/// expanded template), the instance's deletion, each with its event.
pub(super) fn actions(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    decision: Decision,
    instance: Option<VirtualMachineInstance>,
) -> Vec<VmAction> {
    let name = vm.name_any();
    let mut actions = Vec::new();
    if decision.switch_to_always {
        actions.push(VmAction::PatchVm(switch_to_always_patch(vm)));
    }
    if decision.create
        && let Some(instance) = instance
    {
        let message = format!(
            "Started the virtual machine by creating the new virtual machine instance {name}"
        );
        actions.push(VmAction::CreateVmi(Box::new(instance)));
        actions.push(event(false, reasons::SUCCESSFUL_CREATE, message));
    }
    if decision.delete
        && let Some(v) = vmi
    {
        let uid = v.metadata.uid.clone();
        actions.push(VmAction::DeleteVmi {
            name: v.name_any(),
            uid: uid.clone(),
        });
        actions.push(event(
            false,
            reasons::SUCCESSFUL_DELETE,
            format!(
                "Stopped the virtual machine by deleting the virtual machine instance {}",
                uid.unwrap_or_default()
            ),
        ));
    }
    actions
}
