//! KubeVirt's crash-loop back-off: the record in `status.startFailure` of instances that
//! ended before they ever ran, and how long it delays the next start.

use std::time::Duration;

use api::kubevirt::vm::VirtualMachineStartFailure;
use api::kubevirt::{
    RunStrategy, VirtualMachineInstance, VirtualMachineInstancePhase, VirtualMachineStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

/// The longest wait before an instance that keeps failing to start is tried again.
pub const MAX_CRASH_LOOP_BACKOFF: Duration = Duration::from_secs(300);
/// Without phase transition timestamps on a VMI, an instance that ended this long after it
/// was created is taken to have run (not to have failed to start).
const RAN_WITHOUT_TIMESTAMPS_AFTER: i64 = 60;

/// `status.startFailure`: the record of instances that ended before they ever ran, which
/// delays the next start (KubeVirt's crash-loop back-off).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StartFailure {
    /// How many instances in a row failed to start.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consecutive_fail_count: i64,
    /// The UID of the last of them, so one failure is counted once.
    #[serde(
        default,
        rename = "lastFailedVMIUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_failed_vmi_uid: Option<String>,
    /// No instance is created before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_timestamp: Option<Time>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The crash-loop record of a VM, if any.
pub fn start_failure(status: Option<&VirtualMachineStatus>) -> Option<StartFailure> {
    let record = status?.start_failure.as_ref()?;
    Some(StartFailure {
        consecutive_fail_count: i64::from(record.consecutive_fail_count.unwrap_or_default()),
        last_failed_vmi_uid: record.last_failed_vmi_uid.clone(),
        retry_after_timestamp: record.retry_after_timestamp.clone(),
    })
}

pub(super) fn set_start_failure(status: &mut VirtualMachineStatus, record: Option<StartFailure>) {
    status.start_failure = record.map(|r| VirtualMachineStartFailure {
        consecutive_fail_count: (r.consecutive_fail_count != 0)
            .then(|| i32::try_from(r.consecutive_fail_count).unwrap_or(i32::MAX)),
        last_failed_vmi_uid: r.last_failed_vmi_uid,
        retry_after_timestamp: r.retry_after_timestamp,
    });
}

/// How long to wait before the next start after `fail_count` failures in a row: ten seconds
/// times the count squared, plus up to half of that again (`jitter_seed` picks how much, so
/// that VMs failing together do not retry together), capped at `max`.
pub fn start_backoff(fail_count: i64, max: Duration, jitter_seed: u64) -> Duration {
    let max_s = max.as_secs();
    let interval = (max_s / 30).max(10);
    let count = fail_count.clamp(1, 1_000) as u64;
    let delay = interval.saturating_mul(count * count);
    let jitter = jitter_seed % (delay / 2 + 1);
    Duration::from_secs(delay.saturating_add(jitter).min(max_s))
}

/// A stable number from a string (FNV-1a), the jitter seed of a failed instance.
fn seed_of(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether the instance ever reached Running: by its phase transition timestamps as
/// upstream, or, on an instance without them, by being Running now or having ended a
/// while after it was created.
pub(super) fn ever_ran(vmi: &VirtualMachineInstance, now: &Time) -> bool {
    if vmi.phase() == Some(VirtualMachineInstancePhase::Running) {
        return true;
    }
    let timestamps = vmi
        .status
        .as_ref()
        .and_then(|s| s.phase_transition_timestamps.as_ref());
    match timestamps {
        Some(list) => list
            .iter()
            .any(|t| t.phase == Some(VirtualMachineInstancePhase::Running)),
        None => {
            vmi.metadata.creation_timestamp.as_ref().is_some_and(|c| {
                now.0.as_second() - c.0.as_second() >= RAN_WITHOUT_TIMESTAMPS_AFTER
            })
        }
    }
}

/// The next crash-loop record, as upstream keeps it: cleared once an instance ran or when
/// the run strategy never restarts by itself; one more failure for each instance that
/// ended without ever running.
pub(super) fn next_start_failure(
    current: Option<StartFailure>,
    strategy: RunStrategy,
    vmi: Option<&VirtualMachineInstance>,
    now: &Time,
) -> Option<StartFailure> {
    let ran = vmi.is_some_and(|v| ever_ran(v, now));
    if ran || !counts_start_failures(strategy) {
        return None;
    }
    let Some(vmi) = vmi.filter(|v| v.is_final()) else {
        return current;
    };
    let uid = vmi.metadata.uid.clone().unwrap_or_default();
    if current
        .as_ref()
        .is_some_and(|c| c.last_failed_vmi_uid.as_deref() == Some(uid.as_str()))
    {
        return current;
    }
    let count = current.map_or(0, |c| c.consecutive_fail_count) + 1;
    let delay = start_backoff(count, MAX_CRASH_LOOP_BACKOFF, seed_of(&uid));
    let retry_after = k8s_openapi::jiff::Timestamp::from_second(
        now.0.as_second().saturating_add(delay.as_secs() as i64),
    )
    .map(Time)
    .ok();
    Some(StartFailure {
        consecutive_fail_count: count,
        last_failed_vmi_uid: Some(uid),
        retry_after_timestamp: retry_after,
    })
}

/// How long the crash-loop record still delays a start.
pub(super) fn backoff_left(record: Option<&StartFailure>, now: &Time) -> Option<Duration> {
    let retry = record?.retry_after_timestamp.as_ref()?;
    let left = retry.0.as_second() - now.0.as_second();
    (left > 0).then(|| Duration::from_secs(left as u64))
}

/// The strategies that start instances by themselves, so that failing starts are counted
/// (and shown as CrashLoopBackOff).
pub(super) fn counts_start_failures(strategy: RunStrategy) -> bool {
    matches!(
        strategy,
        RunStrategy::Always | RunStrategy::RerunOnFailure | RunStrategy::Once
    )
}
