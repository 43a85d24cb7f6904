//! The decision of the VM controller: the observed objects in, a list of [`VmAction`]s out,
//! with no I/O. Its steps are in the sibling modules: the instance
//! ([`super::instance`]), the DataVolumes ([`super::volumes`]) and the status
//! ([`super::status`]).

use std::time::Duration;

use api::kubevirt::keys;
use api::kubevirt::{RunStrategy, VirtualMachine, VirtualMachineInstance};
use kube::ResourceExt;

pub use super::actions::{VmAction, VmEvent};
use super::backoff::start_failure;
use super::expansion;
use super::instance;
use super::objects::{decision_orphans, is_ours};
pub use super::observed::Observed;
use super::observed::is_deleting;
use super::reasons;
use super::status::{StatusInputs, next_status};
use super::volumes::{self, VolumeReport};
use crate::kubevirt::instancetype::Resolved;

/// How often a VM waiting on volumes, or on its instancetype or preference, is looked at
/// again (neither is watched).
const VOLUME_RECHECK: Duration = Duration::from_secs(10);

/// Decides what to do about a VM: the one function of this controller with its logic.
pub fn plan(observed: &Observed) -> Vec<VmAction> {
    let vm = observed.vm;
    let now = &observed.now;
    let strategy = vm.spec.effective_run_strategy();
    let mut actions = Vec::new();
    let mut failures: Vec<(&'static str, String)> = Vec::new();

    let vmi = owned_instance(vm, observed.vmi, &mut failures);
    // A foreign instance of the VM's name blocks creating one.
    let foreign = observed.vmi.is_some() && vmi.is_none();
    let deleting = is_deleting(&vm.metadata);
    let has_finalizer = vm
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == keys::VM_CONTROLLER_FINALIZER);
    let mut template_ok = spec_is_usable(vm, strategy, &mut failures);
    let resolved = match observed.instancetypes {
        Ok(resolved) => resolved.clone(),
        Err(failure) => {
            failures.push((failure.reason, failure.message.clone()));
            template_ok = false;
            Resolved::default()
        }
    };
    let instance = match expansion::expanded_instance(vm, &resolved) {
        Ok(instance) => instance,
        Err(message) => {
            failures.push((reasons::FAILED_CREATE, message));
            template_ok = false;
            None
        }
    };

    let current_failure = start_failure(vm.status.as_ref());
    let (decision, requeue, dv_actions) = if deleting {
        (instance::on_vm_deletion(vm, vmi), None, Vec::new())
    } else {
        if !has_finalizer {
            actions.push(VmAction::AddVmFinalizer);
        }
        let template_volumes = volumes::template_volumes(observed, &mut failures);
        let (mut decision, want_start) = instance::by_run_strategy(vm, vmi, strategy);
        let requeue = if want_start && !foreign {
            instance::start(
                &mut decision,
                strategy,
                current_failure.as_ref(),
                template_ok,
                template_volumes.ready,
                now,
            )
        } else {
            None
        };
        (decision, requeue, template_volumes.actions(want_start))
    };
    actions.extend(dv_actions);
    if !deleting {
        actions.extend(expansion::revision_actions(&resolved));
    }
    actions.extend(instance::actions(vm, vmi, decision, instance));

    let volumes = volumes::volume_report(observed, deleting);
    let mut status = next_status(StatusInputs {
        vm,
        vmi,
        strategy,
        decision,
        current_failure,
        failures: &failures,
        volumes: &volumes,
        now,
    });
    expansion::with_refs(&mut status, &resolved);
    if vm.status.as_ref() != Some(&status) {
        actions.push(VmAction::PatchVmStatus(Box::new(status)));
    }
    // An instancetype or preference not there yet is looked for again soon (they are not
    // watched).
    let requeue = match observed.instancetypes {
        Err(_) => Some(requeue.map_or(VOLUME_RECHECK, |r| r.min(VOLUME_RECHECK))),
        Ok(_) => requeue,
    };
    actions.extend(release_and_requeue(
        vm,
        vmi,
        deleting && has_finalizer,
        requeue,
        &volumes,
    ));
    actions
}

/// The instance of the VM's name if it is the VM's (an instance another object controls
/// is a failure, and is left alone).
fn owned_instance<'a>(
    vm: &VirtualMachine,
    vmi: Option<&'a VirtualMachineInstance>,
    failures: &mut Vec<(&'static str, String)>,
) -> Option<&'a VirtualMachineInstance> {
    let name = vm.name_any();
    match vmi {
        Some(v) if !is_ours(vm, v) => {
            failures.push((
                reasons::FAILED_CREATE,
                format!("VirtualMachineInstance {name} exists and is controlled by another object"),
            ));
            None
        }
        other => other,
    }
}

/// Whether the VM's template can make an instance; what keeps the spec from being carried
/// out (no template, a template without spec, an unsupported run strategy) is a failure.
fn spec_is_usable(
    vm: &VirtualMachine,
    strategy: RunStrategy,
    failures: &mut Vec<(&'static str, String)>,
) -> bool {
    let template_ok = match vm.spec.template.as_ref() {
        None => {
            failures.push((
                reasons::FAILED_CREATE,
                "spec.template: required: the VirtualMachine has no template to create its instance from".to_string(),
            ));
            false
        }
        Some(t) if t.spec.is_none() => {
            failures.push((
                reasons::FAILED_CREATE,
                "spec.template.spec: required: the VirtualMachine's template has no spec"
                    .to_string(),
            ));
            false
        }
        Some(_) => true,
    };
    if strategy == RunStrategy::WaitAsReceiver {
        failures.push((
            reasons::FAILED_CREATE,
            "spec.runStrategy: WaitAsReceiver is not supported".to_string(),
        ));
    }
    template_ok
}

/// The last actions: the controller's finalizer off an instance that ended or goes, off a
/// deleted VM (`releasing`, it holds it) once its instance is gone or orphaned, and when to
/// look again (the back-off, or volumes still being filled or bound).
fn release_and_requeue(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    releasing: bool,
    requeue: Option<Duration>,
    volumes: &VolumeReport,
) -> Vec<VmAction> {
    let mut actions = Vec::new();
    if let Some(v) = vmi
        && (v.is_final() || is_deleting(&v.metadata))
        && v.finalizers()
            .iter()
            .any(|f| f == keys::VM_CONTROLLER_FINALIZER)
    {
        actions.push(VmAction::RemoveVmiFinalizer { name: v.name_any() });
    }
    if releasing && (vmi.is_none() || decision_orphans(vm)) {
        actions.push(VmAction::RemoveVmFinalizer);
    }
    if let Some(after) = requeue {
        actions.push(VmAction::RequeueAfter(after));
    } else if !volumes.provisioning.is_empty() || volumes.unbound_claim {
        actions.push(VmAction::RequeueAfter(VOLUME_RECHECK));
    }
    actions
}

#[cfg(test)]
mod tests;
