//! KubeVirt's printable status of a VM (`status.printableStatus`): one ordered table of
//! predicates over what the reconcile saw and decided, the first that holds shown.

use api::common::ConditionStatus;
use api::kubevirt::vmi::condition_types;
use api::kubevirt::{
    RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineInstancePhase,
    VirtualMachinePrintableStatus,
};

use super::backoff::{StartFailure, counts_start_failures};
use super::instance::Decision;
use super::observed::{is_deleting, vmi_condition_is};

/// What the printable status is decided from.
pub(super) struct Facts<'a> {
    pub(super) vm: &'a VirtualMachine,
    pub(super) vmi: Option<&'a VirtualMachineInstance>,
    pub(super) strategy: RunStrategy,
    pub(super) decision: Decision,
    pub(super) set_to_start: bool,
    pub(super) start_failure: Option<&'a StartFailure>,
    /// A DataVolume the template uses is in error.
    pub(super) dv_error: bool,
    /// A DataVolume the template uses is being created or filled.
    pub(super) dv_provisioning: bool,
    /// A claim the template uses exists and is not bound.
    pub(super) unbound_claim: bool,
}

impl Facts<'_> {
    fn start_expected(&self) -> bool {
        self.decision.create || self.decision.waiting_for_volumes || self.decision.switch_to_always
    }
    fn vmi_running(&self) -> bool {
        self.vmi
            .is_some_and(|v| v.phase() == Some(VirtualMachineInstancePhase::Running))
    }
    fn paused(&self) -> bool {
        self.vmi
            .is_some_and(|v| v.condition_holds(condition_types::PAUSED))
    }
    fn synchronized_false(&self, reason: &str) -> bool {
        vmi_condition_is(
            self.vmi,
            "Synchronized",
            ConditionStatus::False,
            Some(reason),
        )
    }
}

type Predicate = fn(&Facts) -> bool;

/// The printable statuses in upstream's precedence: the first that holds is shown.
const PRINTABLE_STATUSES: [(VirtualMachinePrintableStatus, Predicate); 15] = [
    (VirtualMachinePrintableStatus::Terminating, |f| {
        is_deleting(&f.vm.metadata)
    }),
    (VirtualMachinePrintableStatus::Stopping, |f| {
        f.vmi
            .is_some_and(|v| !v.is_final() && (is_deleting(&v.metadata) || f.decision.delete))
    }),
    (VirtualMachinePrintableStatus::Paused, |f| {
        f.vmi_running() && f.paused()
    }),
    (VirtualMachinePrintableStatus::Running, |f| {
        f.vmi_running() && !f.paused()
    }),
    (VirtualMachinePrintableStatus::ErrorPvcNotFound, |f| {
        f.synchronized_false("FailedPvcNotFound")
    }),
    (VirtualMachinePrintableStatus::DataVolumeError, |f| {
        f.dv_error
    }),
    (VirtualMachinePrintableStatus::ErrorUnschedulable, |f| {
        vmi_condition_is(
            f.vmi,
            "PodScheduled",
            ConditionStatus::False,
            Some("Unschedulable"),
        )
    }),
    (VirtualMachinePrintableStatus::Provisioning, |f| {
        f.dv_provisioning
    }),
    (
        VirtualMachinePrintableStatus::WaitingForVolumeBinding,
        |f| f.set_to_start && f.unbound_claim,
    ),
    (VirtualMachinePrintableStatus::ErrImagePull, |f| {
        f.synchronized_false("ErrImagePull")
    }),
    (VirtualMachinePrintableStatus::ImagePullBackOff, |f| {
        f.synchronized_false("ImagePullBackOff")
    }),
    (VirtualMachinePrintableStatus::Starting, |f| match f.vmi {
        None => f.start_expected(),
        Some(v) => matches!(
            v.phase(),
            None | Some(
                VirtualMachineInstancePhase::Pending
                    | VirtualMachineInstancePhase::Scheduling
                    | VirtualMachineInstancePhase::Scheduled
            )
        ),
    }),
    (VirtualMachinePrintableStatus::CrashLoopBackOff, |f| {
        f.vmi.is_none_or(VirtualMachineInstance::is_final)
            && !f.decision.create
            && f.start_failure
                .is_some_and(|s| s.consecutive_fail_count > 0)
            && counts_start_failures(f.strategy)
    }),
    (VirtualMachinePrintableStatus::Stopped, |f| match f.vmi {
        Some(v) => v.is_final(),
        None => !f.start_expected(),
    }),
    (VirtualMachinePrintableStatus::WaitingForReceiver, |f| {
        f.strategy == RunStrategy::WaitAsReceiver
            && f.vmi
                .is_none_or(|v| v.phase() == Some(VirtualMachineInstancePhase::WaitingForSync))
    }),
];

pub(super) fn printable_status(facts: &Facts) -> VirtualMachinePrintableStatus {
    PRINTABLE_STATUSES
        .iter()
        .find(|(_, holds)| holds(facts))
        .map_or(VirtualMachinePrintableStatus::Unknown, |(status, _)| {
            *status
        })
}
