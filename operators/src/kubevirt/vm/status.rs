//! The VM's status: what a reconcile writes (created, ready, run strategy, requests, the
//! crash-loop record, conditions, generations, printable status), and the Failure condition
//! the runner adds when an action failed.

use api::kubevirt::keys;
use api::kubevirt::vmi::{VirtualMachineCondition, condition_types, set_condition};
use api::kubevirt::{RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::backoff::{StartFailure, next_start_failure, set_start_failure};
use super::instance::Decision;
use super::observed::vmi_condition;
use super::printable::{Facts, printable_status};
use super::reasons;
use super::requests::{next_requests, set_to_start};
use super::volumes::VolumeReport;

/// What a reconcile found and decided, that the status is written from.
pub(super) struct StatusInputs<'a> {
    pub(super) vm: &'a VirtualMachine,
    pub(super) vmi: Option<&'a VirtualMachineInstance>,
    pub(super) strategy: RunStrategy,
    pub(super) decision: Decision,
    /// The crash-loop record as read.
    pub(super) current_failure: Option<StartFailure>,
    /// Why the VM cannot be as its spec says (reason, message), in order.
    pub(super) failures: &'a [(&'static str, String)],
    pub(super) volumes: &'a VolumeReport,
    pub(super) now: &'a Time,
}

/// The status after this reconcile.
pub(super) fn next_status(inputs: StatusInputs) -> VirtualMachineStatus {
    let StatusInputs {
        vm,
        vmi,
        strategy,
        decision,
        current_failure,
        failures,
        volumes,
        now,
    } = inputs;
    let next_failure = next_start_failure(current_failure, strategy, vmi, now);
    let mut status = vm.status.clone().unwrap_or_default();
    status.created = Some(vmi.is_some());
    status.ready = Some(vmi.is_some_and(|v| v.condition_holds(condition_types::READY)));
    if status.run_strategy.is_some() || vmi.is_some() {
        status.run_strategy = Some(strategy);
    }
    let requests = next_requests(vm, vmi, decision.queue_start);
    status.state_change_requests = (!requests.is_empty()).then_some(requests);
    set_start_failure(&mut status, next_failure.clone());
    status.conditions = conditions(
        vm.status.as_ref().and_then(|s| s.conditions.as_ref()),
        vmi,
        failures,
        volumes.ready.clone(),
        now,
    );
    if let Some(generation) = vmi
        .and_then(|v| v.annotations().get(keys::VM_GENERATION_ANNOTATION))
        .and_then(|g| g.parse::<i64>().ok())
    {
        status.observed_generation = Some(generation);
        status.desired_generation = vm.metadata.generation;
    }
    let facts = Facts {
        vm,
        vmi,
        strategy,
        decision,
        set_to_start: set_to_start(vm, vmi, strategy),
        start_failure: next_failure.as_ref(),
        dv_error: volumes.dv_error,
        dv_provisioning: !volumes.provisioning.is_empty(),
        unbound_claim: volumes.unbound_claim,
    };
    status.printable_status = Some(printable_status(&facts));
    status
}

/// The status with a Failure condition for `reason`/`message` (the runner's, when an
/// action failed).
pub fn with_failure(
    status: &VirtualMachineStatus,
    reason: &str,
    message: String,
    now: &Time,
) -> VirtualMachineStatus {
    let mut status = status.clone();
    let mut conditions = status.conditions.take().unwrap_or_default();
    set_condition(
        &mut conditions,
        VirtualMachineCondition::new(condition_types::FAILURE, true, reason, &message, now),
    );
    status.conditions = Some(conditions);
    status
}

/// The conditions: Ready from the instance, Failure from `failures`, DataVolumesReady
/// while there is no instance, and every other condition of the instance mirrored.
pub(super) fn conditions(
    previous: Option<&Vec<VirtualMachineCondition>>,
    vmi: Option<&VirtualMachineInstance>,
    failures: &[(&'static str, String)],
    volumes_ready: Option<(bool, String)>,
    now: &Time,
) -> Option<Vec<VirtualMachineCondition>> {
    const NOT_MIRRORED: [&str; 3] = [
        condition_types::READY,
        condition_types::FAILURE,
        condition_types::RESTART_REQUIRED,
    ];
    let mut conditions = previous.cloned().unwrap_or_default();
    let ready = match (vmi, vmi_condition(vmi, condition_types::READY)) {
        (None, _) => VirtualMachineCondition::new(
            condition_types::READY,
            false,
            reasons::VMI_NOT_EXISTS,
            "VMI does not exist",
            now,
        ),
        (Some(_), None) => VirtualMachineCondition::new(
            condition_types::READY,
            false,
            reasons::VMI_CONDITION_MISSING,
            "VMI is missing the Ready condition",
            now,
        ),
        (Some(_), Some(c)) => c.clone(),
    };
    set_condition(&mut conditions, ready);
    match failures.first() {
        Some((reason, _)) => {
            let message = failures
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            set_condition(
                &mut conditions,
                VirtualMachineCondition::new(condition_types::FAILURE, true, reason, &message, now),
            );
        }
        None => conditions.retain(|c| c.type_ != condition_types::FAILURE),
    }
    match vmi {
        Some(vmi) => {
            let mirrored: Vec<&VirtualMachineCondition> = vmi
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .filter(|c| !NOT_MIRRORED.contains(&c.type_.as_str()))
                .collect();
            conditions.retain(|c| {
                NOT_MIRRORED.contains(&c.type_.as_str())
                    || mirrored.iter().any(|m| m.type_ == c.type_)
            });
            for c in mirrored {
                set_condition(&mut conditions, c.clone());
            }
        }
        None => match volumes_ready {
            Some((ready, message)) => {
                let reason = if ready {
                    reasons::ALL_DVS_READY
                } else {
                    reasons::NOT_ALL_DVS_READY
                };
                set_condition(
                    &mut conditions,
                    VirtualMachineCondition::new(
                        condition_types::DATA_VOLUMES_READY,
                        ready,
                        reason,
                        &message,
                        now,
                    ),
                );
            }
            None => conditions.retain(|c| c.type_ != condition_types::DATA_VOLUMES_READY),
        },
    }
    (!conditions.is_empty()).then_some(conditions)
}
