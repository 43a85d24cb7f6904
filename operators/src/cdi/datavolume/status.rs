//! The DataVolume status from what is observed: the PVC (with the worker's state in its
//! annotations), whether the class waits for a first consumer, the scraped progress. Phases,
//! condition types, reasons and messages follow CDI's datavolume controllers.

use std::collections::BTreeMap;

use api::cdi::DataVolumeStatus;
use api::cdi::datavolume::{
    DataVolumeCondition, DataVolumeConditionType, DataVolumePhase, PROGRESS_DONE,
    PROGRESS_NOT_AVAILABLE, annotations, reasons,
};
use api::common::ConditionStatus;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::pod::{SOURCE_RUNNING_KEYS, recorded_terminal_failure};
use super::transfer::Transfer;

/// An event CDI publishes on a DataVolume when its status changes: of the phase, of the
/// Bound condition, or of a transfer that stopped with a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusEvent {
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// CDI's reason.
    pub reason: String,
    /// CDI's message.
    pub message: String,
}

/// What the status is computed from.
#[derive(Clone, Copy, Debug)]
pub struct StatusInputs<'a> {
    /// The status as stored.
    pub current: Option<&'a DataVolumeStatus>,
    /// What fills the PVC.
    pub transfer: &'a Transfer,
    /// The PVC, with the worker pod's annotations already applied.
    pub pvc: Option<&'a PersistentVolumeClaim>,
    /// The PVC's class binds on first consumer and the PVC is not bound.
    pub wait_for_first_consumer: bool,
    /// The worker's progress, as `NN.NN%`, when scraped.
    pub progress: Option<&'a str>,
    /// Why the DataVolume cannot proceed (source not found, ...): Bound reason and message.
    pub blocked: Option<(&'a str, &'a str)>,
    /// The time written on conditions that change.
    pub now: &'a Time,
}

fn find(conditions: &[DataVolumeCondition], type_: DataVolumeConditionType) -> Option<usize> {
    conditions.iter().position(|c| c.type_ == type_)
}

/// CDI's `updateCondition`: a status change moves both times, a new reason or message only
/// the heartbeat.
pub fn update_condition(
    conditions: &mut Vec<DataVolumeCondition>,
    type_: DataVolumeConditionType,
    status: ConditionStatus,
    message: &str,
    reason: &str,
    now: &Time,
) {
    let i = match find(conditions, type_) {
        Some(i) => i,
        None => {
            conditions.push(DataVolumeCondition {
                type_,
                status: ConditionStatus::Unknown,
                last_transition_time: None,
                last_heartbeat_time: None,
                reason: None,
                message: None,
            });
            conditions.len() - 1
        }
    };
    let c = &mut conditions[i];
    let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
    if c.status != status || c.last_transition_time.is_none() {
        c.last_transition_time = Some(now.clone());
        c.last_heartbeat_time = Some(now.clone());
        c.message = text(message);
        c.reason = text(reason);
    } else if c.message != text(message) || c.reason != text(reason) {
        c.message = text(message);
        c.reason = text(reason);
        c.last_heartbeat_time = Some(now.clone());
    }
    c.status = status;
}

fn pvc_phase(pvc: &PersistentVolumeClaim) -> &str {
    pvc.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn bound_condition(conditions: &mut Vec<DataVolumeCondition>, obs: &StatusInputs<'_>) {
    use ConditionStatus::{False, True};
    use DataVolumeConditionType::{Bound, Ready};
    let now = obs.now;
    match obs.pvc {
        Some(pvc) => match pvc_phase(pvc) {
            "Bound" => update_condition(
                conditions,
                Bound,
                True,
                &format!("PVC {} Bound", pvc.name_any()),
                reasons::BOUND,
                now,
            ),
            "Pending" => {
                update_condition(
                    conditions,
                    Bound,
                    False,
                    &format!("PVC {} Pending", pvc.name_any()),
                    reasons::PENDING,
                    now,
                );
                update_condition(conditions, Ready, False, "", "", now);
            }
            "Lost" => {
                update_condition(
                    conditions,
                    Bound,
                    False,
                    "Claim Lost",
                    reasons::CLAIM_LOST,
                    now,
                );
                update_condition(conditions, Ready, False, "", "", now);
            }
            _ => {
                update_condition(conditions, Bound, False, "", "", now);
                update_condition(conditions, Ready, False, "", "", now);
            }
        },
        None => {
            let (reason, message) = obs.blocked.unwrap_or((reasons::NOT_FOUND, "No PVC found"));
            update_condition(conditions, Bound, False, message, reason, now);
            update_condition(conditions, Ready, False, "", "", now);
        }
    }
}

/// CDI's `updateRunningCondition` from the PVC's annotations.
fn running_condition(
    conditions: &mut Vec<DataVolumeCondition>,
    ann: &BTreeMap<String, String>,
    now: &Time,
) {
    use ConditionStatus::{False, True, Unknown};
    use DataVolumeConditionType::{Ready, Running};
    let get = |k: &str| ann.get(k).map(String::as_str).unwrap_or_default();
    let message = get(annotations::RUNNING_CONDITION_MESSAGE);
    let reason = get(annotations::RUNNING_CONDITION_REASON);
    match ann
        .get(annotations::RUNNING_CONDITION)
        .map(|v| v.to_ascii_lowercase())
    {
        Some(v) if v == "true" => {
            update_condition(conditions, Running, True, message, reason, now);
            update_condition(conditions, Ready, False, "", reasons::TRANSFER_RUNNING, now);
        }
        Some(v) if v == "false" => {
            update_condition(conditions, Running, False, message, reason, now)
        }
        Some(_) => update_condition(conditions, Running, Unknown, message, reason, now),
        None => update_condition(conditions, Running, False, message, reason, now),
    }
}

/// For a host-assisted clone whose source pod is not running and says why, the PVC's
/// annotations with the source's Running condition in place of the upload server's: the
/// DataVolume tells why the copy does not progress.
fn failing_source(
    transfer: &Transfer,
    ann: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    if !matches!(transfer, Transfer::HostClone { .. }) {
        return None;
    }
    let message = ann.get(annotations::SOURCE_RUNNING_CONDITION_MESSAGE)?;
    let not_running = ann
        .get(annotations::SOURCE_RUNNING_CONDITION)
        .is_some_and(|r| r == "false");
    let completed = ann
        .get(annotations::SOURCE_RUNNING_CONDITION_REASON)
        .is_some_and(|r| r == "Completed");
    if !not_running || completed || message.is_empty() {
        return None;
    }
    let mut view = ann.clone();
    for (to, from) in SOURCE_RUNNING_KEYS {
        if let Some(value) = ann.get(from) {
            view.insert(to.to_string(), value.clone());
        }
    }
    Some(view)
}

/// The phase, progress and event of the transfer as the PVC's annotations report it.
fn transfer_phase(
    obs: &StatusInputs<'_>,
    pvc: &PersistentVolumeClaim,
) -> (DataVolumePhase, Option<StatusEvent>) {
    let ann = pvc.annotations();
    let view = TransferView {
        pvc,
        ann,
        pod_phase: ann.get(annotations::POD_PHASE).map(String::as_str),
        name: pvc.name_any(),
        bound: pvc_phase(pvc) == "Bound",
        current: obs
            .current
            .and_then(|s| s.phase)
            .unwrap_or(DataVolumePhase::Pending),
    };
    match obs.transfer {
        Transfer::Import(_) => import_phase(&view),
        Transfer::Upload => upload_phase(&view),
        Transfer::CsiClone {
            namespace,
            name: source,
            snapshot,
        } => csi_clone_phase(&view, namespace, source, *snapshot),
        Transfer::HostClone {
            namespace,
            name: source,
            ..
        } => host_clone_phase(&view, namespace, source),
        Transfer::Unsupported(_) => (DataVolumePhase::Pending, None),
    }
}

/// What a transfer's phase is read from: the claim, the annotations its worker writes on
/// it, and the phase the DataVolume has now.
struct TransferView<'a> {
    pvc: &'a PersistentVolumeClaim,
    ann: &'a BTreeMap<String, String>,
    /// The worker pod's phase, as annotated.
    pod_phase: Option<&'a str>,
    /// The claim's name.
    name: String,
    /// The claim is bound.
    bound: bool,
    /// The DataVolume's phase now (Pending when it has none).
    current: DataVolumePhase,
}

impl TransferView<'_> {
    /// The worker pod is ready, as annotated.
    fn pod_ready(&self) -> bool {
        self.ann
            .get(annotations::POD_READY)
            .is_some_and(|r| r == "true")
    }
}

/// The event of a phase.
fn event(warning: bool, reason: &str, message: String) -> Option<StatusEvent> {
    Some(StatusEvent {
        warning,
        reason: reason.to_string(),
        message,
    })
}

/// An import's phase, from its importer pod's.
fn import_phase(view: &TransferView<'_>) -> (DataVolumePhase, Option<StatusEvent>) {
    use DataVolumePhase as P;
    let (name, bound, current) = (&view.name, view.bound, view.current);
    match view.pod_phase {
        Some("Succeeded") => (
            P::Succeeded,
            event(
                false,
                "ImportSucceeded",
                format!("Successfully imported into PVC {name}"),
            ),
        ),
        _ if !bound => (
            if current == P::ImportScheduled {
                current
            } else {
                P::Pending
            },
            None,
        ),
        Some("Running") => (
            P::ImportInProgress,
            event(
                false,
                "ImportInProgress",
                format!("Import into {name} in progress"),
            ),
        ),
        Some("Failed") => (
            P::ImportScheduled,
            event(
                true,
                "ImportFailed",
                format!("Failed to import into PVC {name}"),
            ),
        ),
        Some(_) => (
            P::ImportScheduled,
            event(
                false,
                "ImportScheduled",
                format!("Import into {name} scheduled"),
            ),
        ),
        None => (current, None),
    }
}

/// An upload's phase, from its upload server pod's.
fn upload_phase(view: &TransferView<'_>) -> (DataVolumePhase, Option<StatusEvent>) {
    use DataVolumePhase as P;
    let name = &view.name;
    match view.pod_phase {
        Some("Succeeded") => (
            P::Succeeded,
            event(
                false,
                "UploadSucceeded",
                format!("Successfully uploaded into {name}"),
            ),
        ),
        _ if !view.bound => (P::Pending, None),
        Some("Running") if view.pod_ready() => (
            P::UploadReady,
            event(false, "UploadReady", format!("Upload into {name} ready")),
        ),
        Some("Failed") => (
            P::UploadScheduled,
            event(true, "UploadFailed", format!("Upload into {name} failed")),
        ),
        Some(_) => (
            P::UploadScheduled,
            event(
                false,
                "UploadScheduled",
                format!("Upload into {name} scheduled"),
            ),
        ),
        None => (view.current, None),
    }
}

/// A CSI clone's (or snapshot restore's) phase: done once the claim is bound.
fn csi_clone_phase(
    view: &TransferView<'_>,
    namespace: &str,
    source: &str,
    snapshot: bool,
) -> (DataVolumePhase, Option<StatusEvent>) {
    use DataVolumePhase as P;
    let name = &view.name;
    let ns = view.pvc.namespace().unwrap_or_default();
    if view.bound {
        (
            P::Succeeded,
            event(
                false,
                "CloneSucceeded",
                format!("Successfully cloned from {namespace}/{source} into {ns}/{name}"),
            ),
        )
    } else if snapshot {
        (
            P::CloneFromSnapshotSourceInProgress,
            event(
                false,
                "CloneFromSnapshotSourceInProgress",
                format!("Restoring from snapshot {namespace}/{source}"),
            ),
        )
    } else {
        (
            P::CsiCloneInProgress,
            event(
                false,
                "CSICloneInProgress",
                format!("CSI Volume clone in progress (for pvc: {namespace}/{source})"),
            ),
        )
    }
}

/// A host-assisted clone's phase, from the target's upload server pod's.
fn host_clone_phase(
    view: &TransferView<'_>,
    namespace: &str,
    source: &str,
) -> (DataVolumePhase, Option<StatusEvent>) {
    use DataVolumePhase as P;
    let name = &view.name;
    match view.pod_phase {
        Some("Succeeded") => (
            P::Succeeded,
            event(
                false,
                "CloneSucceeded",
                format!(
                    "Successfully cloned from {namespace}/{source} into {}/{name}",
                    view.pvc.namespace().unwrap_or_default()
                ),
            ),
        ),
        _ if !view.bound => (P::Pending, None),
        Some("Running") if view.pod_ready() => (
            P::CloneInProgress,
            event(
                false,
                "CloneInProgress",
                format!("Cloning from {namespace}/{source} into {name} in progress"),
            ),
        ),
        Some(_) => (
            P::CloneScheduled,
            event(
                false,
                "CloneScheduled",
                format!("Cloning from {namespace}/{source} into {name} scheduled"),
            ),
        ),
        None => (view.current, None),
    }
}

/// The status the DataVolume should have, and the event of a phase change.
pub fn desired_status(obs: &StatusInputs<'_>) -> (DataVolumeStatus, Option<StatusEvent>) {
    let mut status = obs.current.cloned().unwrap_or_default();
    let previous = status.phase;
    let mut conditions = status.conditions.take().unwrap_or_default();
    let empty = BTreeMap::new();
    let ann = obs.pvc.map(|p| p.annotations()).unwrap_or(&empty);

    let (phase, mut event) = desired_phase(obs, previous);
    if Some(phase) == previous {
        event = None;
    }
    status.phase = Some(phase);
    status.claim_name = obs.pvc.map(|p| p.name_any());
    status.restart_count = Some(
        ann.get(annotations::POD_RESTARTS)
            .and_then(|r| r.parse().ok())
            .unwrap_or(status.restart_count.unwrap_or(0)),
    );
    status.progress = Some(progress_in(obs, phase, status.progress.as_ref()));

    bound_condition(&mut conditions, obs);
    ready_condition(&mut conditions, obs, phase, event.as_ref());
    match failing_source(obs.transfer, ann) {
        Some(source) => running_condition(&mut conditions, &source, obs.now),
        None => running_condition(&mut conditions, ann, obs.now),
    }
    status.conditions = Some(conditions);
    (status, event)
}

/// The phase the DataVolume is in, and its event: a failure or success stays, a recorded
/// terminal failure or a lost claim fails it, an unsupported source keeps it Pending, a
/// claim waiting for its first consumer says so, otherwise the transfer tells.
fn desired_phase(
    obs: &StatusInputs<'_>,
    previous: Option<DataVolumePhase>,
) -> (DataVolumePhase, Option<StatusEvent>) {
    use DataVolumePhase as P;
    if previous == Some(P::Failed) {
        (P::Failed, None)
    } else if let Some(message) = obs.pvc.and_then(recorded_terminal_failure) {
        (
            P::Failed,
            Some(StatusEvent {
                warning: true,
                reason: "Error".into(),
                message,
            }),
        )
    } else if let Some(lost) = obs.pvc.filter(|p| pvc_phase(p) == "Lost") {
        // The claim's volume is gone, whatever it held: CDI fails the DataVolume.
        (
            P::Failed,
            Some(StatusEvent {
                warning: true,
                reason: "ErrClaimLost".into(),
                message: format!("PVC {} lost", lost.name_any()),
            }),
        )
    } else if previous == Some(P::Succeeded) {
        (P::Succeeded, None)
    } else if let Transfer::Unsupported(message) = obs.transfer {
        (
            P::Pending,
            Some(StatusEvent {
                warning: true,
                reason: "Unsupported".into(),
                message: message.clone(),
            }),
        )
    } else if let Some(pvc) = obs.pvc {
        if obs.wait_for_first_consumer {
            let name = pvc.name_any();
            (
                P::WaitForFirstConsumer,
                Some(StatusEvent {
                    warning: false,
                    reason: "WaitForFirstConsumer".into(),
                    message: format!("PVC {name} Pending, waiting for first consumer"),
                }),
            )
        } else {
            transfer_phase(obs, pvc)
        }
    } else {
        (P::Pending, None)
    }
}

/// The progress in `phase`: done once succeeded, the worker's while it transfers, else
/// what it was (`current`).
fn progress_in(obs: &StatusInputs<'_>, phase: DataVolumePhase, current: Option<&String>) -> String {
    use DataVolumePhase as P;
    match phase {
        P::Succeeded => PROGRESS_DONE.to_string(),
        P::ImportInProgress | P::CloneInProgress => obs
            .progress
            .map(str::to_string)
            .or(current.cloned())
            .unwrap_or_else(|| PROGRESS_NOT_AVAILABLE.to_string()),
        _ => current
            .cloned()
            .unwrap_or_else(|| PROGRESS_NOT_AVAILABLE.to_string()),
    }
}

/// The Ready condition in `phase`: a failure with its recorded message, a phase change
/// with its event's reason and message, otherwise only a change of status.
fn ready_condition(
    conditions: &mut Vec<DataVolumeCondition>,
    obs: &StatusInputs<'_>,
    phase: DataVolumePhase,
    event: Option<&StatusEvent>,
) {
    use DataVolumePhase as P;
    let ready = match phase {
        P::Succeeded => ConditionStatus::True,
        P::Unknown => ConditionStatus::Unknown,
        _ => ConditionStatus::False,
    };
    let (ready_reason, ready_message) = match (event, phase) {
        (Some(e), _) => (e.reason.as_str(), e.message.clone()),
        _ => ("", String::new()),
    };
    if phase == P::Failed {
        let message = obs.pvc.and_then(recorded_terminal_failure).or_else(|| {
            conditions
                .iter()
                .find(|c| c.type_ == DataVolumeConditionType::Ready)
                .and_then(|c| c.message.clone())
        });
        update_condition(
            conditions,
            DataVolumeConditionType::Ready,
            ready,
            message.as_deref().unwrap_or_default(),
            "Error",
            obs.now,
        );
    } else if event.is_some() || find(conditions, DataVolumeConditionType::Ready).is_none() {
        update_condition(
            conditions,
            DataVolumeConditionType::Ready,
            ready,
            &ready_message,
            ready_reason,
            obs.now,
        );
    } else if let Some(i) = find(conditions, DataVolumeConditionType::Ready) {
        if conditions[i].status != ready {
            update_condition(
                conditions,
                DataVolumeConditionType::Ready,
                ready,
                "",
                "",
                obs.now,
            );
        }
    }
}

/// The events CDI publishes when a status write changes the DataVolume, in the order a
/// reader follows them: the Bound condition's whenever its status, reason or message changes
/// (the claim is bound before anything is scheduled on it), then `phase_event`, then a
/// warning with the Running condition's reason and message when a bound transfer stopped,
/// not ready, with a message it did not have before.
pub fn status_events(
    before: Option<&DataVolumeStatus>,
    after: &DataVolumeStatus,
    phase_event: Option<StatusEvent>,
) -> Vec<StatusEvent> {
    use DataVolumeConditionType::{Bound, Ready, Running};
    let condition = |status: Option<&DataVolumeStatus>, type_| {
        status?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == type_)
            .cloned()
    };
    let same = |a: &DataVolumeCondition, b: &DataVolumeCondition| {
        a.status == b.status && a.reason == b.reason && a.message == b.message
    };
    let mut events = Vec::new();
    let bound = condition(Some(after), Bound);
    if let Some(now) = &bound {
        if !condition(before, Bound).is_some_and(|was| same(&was, now)) {
            events.push(StatusEvent {
                warning: false,
                reason: now.reason.clone().unwrap_or_default(),
                message: now.message.clone().unwrap_or_default(),
            });
        }
    }
    events.extend(phase_event);
    let (Some(bound), Some(ready), Some(running)) = (
        bound,
        condition(Some(after), Ready),
        condition(Some(after), Running),
    ) else {
        return events;
    };
    let stopped = ready.status == ConditionStatus::False
        && running.status == ConditionStatus::False
        && bound.status == ConditionStatus::True;
    let message = running.message.clone().unwrap_or_default();
    let was = condition(before, Running).and_then(|c| c.message);
    if stopped && !message.is_empty() && was.as_deref() != Some(message.as_str()) {
        events.push(StatusEvent {
            warning: true,
            reason: running.reason.unwrap_or_default(),
            message,
        });
    }
    events
}

/// The progress of `owner_uid`'s transfer from a worker's Prometheus text, as CDI formats
/// it (`45.30%`): the `kubevirt_cdi_import_progress_total` (or clone) sample with that
/// `ownerUID` label.
pub fn parse_progress(metrics: &str, owner_uid: &str) -> Option<String> {
    let label = format!("ownerUID=\"{owner_uid}\"");
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("kubevirt_cdi_import_progress_total{")
                || l.starts_with("kubevirt_cdi_clone_progress_total{")
        })
        .filter(|l| l.contains(&label))
        .find_map(|l| {
            l.rsplit_once('}')?
                .1
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .filter(|p| p.is_finite())
        .map(|p| format!("{:.2}%", p.clamp(0.0, 100.0)))
}

#[cfg(test)]
mod tests {
    use super::super::keys::ANN_FAILURE_REASON;
    use super::super::transfer::ImportSource;
    use super::*;
    use api::cdi::pod_contract::{FailureReason, WorkerFailure};
    use k8s_openapi::api::core::v1::PersistentVolumeClaimStatus;
    use kube::api::ObjectMeta;

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
    }

    fn import() -> Transfer {
        Transfer::Import(ImportSource {
            kind: "http",
            ..Default::default()
        })
    }

    fn pvc(phase: &str, ann: &[(&str, &str)]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("disk".into()),
                namespace: Some("ns".into()),
                annotations: Some(
                    ann.iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: None,
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    fn observe<'a>(
        transfer: &'a Transfer,
        pvc: Option<&'a PersistentVolumeClaim>,
        current: Option<&'a DataVolumeStatus>,
        now: &'a Time,
    ) -> StatusInputs<'a> {
        StatusInputs {
            current,
            transfer,
            pvc,
            wait_for_first_consumer: false,
            progress: None,
            blocked: None,
            now,
        }
    }

    fn condition(status: &DataVolumeStatus, t: DataVolumeConditionType) -> &DataVolumeCondition {
        status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
    }

    #[test]
    fn no_pvc_is_pending_with_bound_not_found() {
        let now = now();
        let t = import();
        let (status, _) = desired_status(&observe(&t, None, None, &now));
        assert_eq!(status.phase, Some(DataVolumePhase::Pending));
        assert_eq!(status.progress.as_deref(), Some("N/A"));
        let bound = condition(&status, DataVolumeConditionType::Bound);
        assert_eq!(bound.status, ConditionStatus::False);
        assert_eq!(bound.reason.as_deref(), Some("NotFound"));
    }

    #[test]
    fn an_unbound_pvc_stays_pending_and_a_pending_pod_is_scheduled() {
        let now = now();
        let t = import();
        let unbound = pvc("Pending", &[(annotations::POD_PHASE, "Pending")]);
        let (status, _) = desired_status(&observe(&t, Some(&unbound), None, &now));
        assert_eq!(status.phase, Some(DataVolumePhase::Pending));
        assert_eq!(
            condition(&status, DataVolumeConditionType::Bound)
                .message
                .as_deref(),
            Some("PVC disk Pending")
        );
        let bound = pvc("Bound", &[(annotations::POD_PHASE, "Pending")]);
        let (status, event) = desired_status(&observe(&t, Some(&bound), None, &now));
        assert_eq!(status.phase, Some(DataVolumePhase::ImportScheduled));
        assert_eq!(event.unwrap().message, "Import into disk scheduled");
        let b = condition(&status, DataVolumeConditionType::Bound);
        assert_eq!(
            (b.status, b.reason.as_deref(), b.message.as_deref()),
            (ConditionStatus::True, Some("Bound"), Some("PVC disk Bound"))
        );
        assert_eq!(status.claim_name.as_deref(), Some("disk"));
    }

    #[test]
    fn running_import_reports_progress_and_transfer_running() {
        let now = now();
        let t = import();
        let running = pvc(
            "Bound",
            &[
                (annotations::POD_PHASE, "Running"),
                (annotations::RUNNING_CONDITION, "true"),
                (annotations::RUNNING_CONDITION_REASON, "Pod is running"),
                (annotations::POD_RESTARTS, "1"),
            ],
        );
        let mut obs = observe(&t, Some(&running), None, &now);
        obs.progress = Some("45.30%");
        let (status, event) = desired_status(&obs);
        assert_eq!(status.phase, Some(DataVolumePhase::ImportInProgress));
        assert_eq!(event.unwrap().reason, "ImportInProgress");
        assert_eq!(status.progress.as_deref(), Some("45.30%"));
        assert_eq!(status.restart_count, Some(1));
        let r = condition(&status, DataVolumeConditionType::Running);
        assert_eq!(
            (r.status, r.reason.as_deref()),
            (ConditionStatus::True, Some("Pod is running"))
        );
        let ready = condition(&status, DataVolumeConditionType::Ready);
        assert_eq!(
            (ready.status, ready.reason.as_deref()),
            (ConditionStatus::False, Some("TransferRunning"))
        );
        // The same observation again changes nothing and publishes no event.
        let mut again = obs;
        again.current = Some(&status);
        let (second, event) = desired_status(&again);
        assert_eq!(second, status);
        assert_eq!(event, None);
    }

    #[test]
    fn a_host_assisted_clone_is_scheduled_in_progress_then_succeeded_or_failed() {
        let now = now();
        let t = Transfer::HostClone {
            namespace: "ns".into(),
            name: "golden".into(),
            snapshot: false,
        };
        let phase_of = |claim: &PersistentVolumeClaim, progress: Option<&'static str>| {
            let mut obs = observe(&t, Some(claim), None, &now);
            obs.progress = progress;
            desired_status(&obs)
        };
        let scheduled = pvc("Bound", &[(annotations::POD_PHASE, "Pending")]);
        let (status, event) = phase_of(&scheduled, None);
        assert_eq!(status.phase, Some(DataVolumePhase::CloneScheduled));
        assert_eq!(event.unwrap().reason, "CloneScheduled");
        let running = pvc(
            "Bound",
            &[
                (annotations::POD_PHASE, "Running"),
                (annotations::POD_READY, "true"),
            ],
        );
        let (status, event) = phase_of(&running, Some("12.50%"));
        assert_eq!(status.phase, Some(DataVolumePhase::CloneInProgress));
        assert_eq!(event.unwrap().reason, "CloneInProgress");
        assert_eq!(status.progress.as_deref(), Some("12.50%"));
        // A source that fails (and restarts) says why, over the upload server's Running.
        let refused = "Unable to clone: POST https://cdi-upload-disk.ns.svc/v1beta1/upload: connection refused";
        let source_failing = pvc(
            "Bound",
            &[
                (annotations::POD_PHASE, "Running"),
                (annotations::POD_READY, "true"),
                (annotations::RUNNING_CONDITION, "true"),
                (annotations::RUNNING_CONDITION_REASON, "Pod is running"),
                (annotations::SOURCE_RUNNING_CONDITION, "false"),
                (annotations::SOURCE_RUNNING_CONDITION_MESSAGE, refused),
                (annotations::SOURCE_RUNNING_CONDITION_REASON, "Error"),
            ],
        );
        let (status, _) = phase_of(&source_failing, None);
        let r = condition(&status, DataVolumeConditionType::Running);
        assert_eq!(
            (r.status, r.reason.as_deref(), r.message.as_deref()),
            (ConditionStatus::False, Some("Error"), Some(refused))
        );
        let done = pvc("Bound", &[(annotations::POD_PHASE, "Succeeded")]);
        let (status, event) = phase_of(&done, None);
        assert_eq!(status.phase, Some(DataVolumePhase::Succeeded));
        assert_eq!(
            event.unwrap().message,
            "Successfully cloned from ns/golden into ns/disk"
        );
        let message = "Unable to clone: the source volume has no disk.img (at /x): only disk images are cloned this way, not archive contents";
        let failed_ann = super::super::pod::failure_annotations(&WorkerFailure::new(
            FailureReason::NoDiskImage,
            message,
        ));
        let failed_ann: Vec<(&str, &str)> = failed_ann
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let failed = pvc("Bound", &failed_ann);
        let (status, _) = phase_of(&failed, None);
        assert_eq!(status.phase, Some(DataVolumePhase::Failed));
        assert_eq!(
            condition(&status, DataVolumeConditionType::Ready)
                .message
                .as_deref(),
            Some(message)
        );
    }

    #[test]
    fn completed_import_succeeds_and_stays_succeeded() {
        let now = now();
        let t = import();
        let done = pvc(
            "Bound",
            &[
                (annotations::POD_PHASE, "Succeeded"),
                (annotations::RUNNING_CONDITION, "false"),
                (annotations::RUNNING_CONDITION_MESSAGE, "Import Complete"),
                (annotations::RUNNING_CONDITION_REASON, "Completed"),
            ],
        );
        let (status, event) = desired_status(&observe(&t, Some(&done), None, &now));
        assert_eq!(status.phase, Some(DataVolumePhase::Succeeded));
        assert_eq!(status.progress.as_deref(), Some("100.0%"));
        assert_eq!(
            event.unwrap().message,
            "Successfully imported into PVC disk"
        );
        let ready = condition(&status, DataVolumeConditionType::Ready);
        assert_eq!(ready.status, ConditionStatus::True);
        let r = condition(&status, DataVolumeConditionType::Running);
        assert_eq!(
            (r.status, r.reason.as_deref(), r.message.as_deref()),
            (
                ConditionStatus::False,
                Some("Completed"),
                Some("Import Complete")
            )
        );
    }

    #[test]
    fn a_checksum_mismatch_is_terminal() {
        let now = now();
        let t = import();
        let msg =
            "Unable to process data: checksum mismatch: expected sha256:00, calculated sha256:11";
        let failed = pvc(
            "Bound",
            &[
                (annotations::POD_PHASE, "Failed"),
                (annotations::RUNNING_CONDITION, "false"),
                (annotations::RUNNING_CONDITION_MESSAGE, msg),
                (annotations::RUNNING_CONDITION_REASON, "Error"),
                (ANN_FAILURE_REASON, "ChecksumMismatch"),
            ],
        );
        let (status, event) = desired_status(&observe(&t, Some(&failed), None, &now));
        assert_eq!(status.phase, Some(DataVolumePhase::Failed));
        assert!(event.unwrap().warning);
        let ready = condition(&status, DataVolumeConditionType::Ready);
        assert_eq!(
            (ready.status, ready.message.as_deref()),
            (ConditionStatus::False, Some(msg))
        );
        let r = condition(&status, DataVolumeConditionType::Running);
        assert_eq!(
            (r.reason.as_deref(), r.message.as_deref()),
            (Some("Error"), Some(msg))
        );
        // Failed stays Failed whatever comes next.
        let later = pvc("Bound", &[(annotations::POD_PHASE, "Running")]);
        let (after, _) = desired_status(&observe(&t, Some(&later), Some(&status), &now));
        assert_eq!(after.phase, Some(DataVolumePhase::Failed));
    }

    #[test]
    fn waiting_for_first_consumer_uploads_and_clones() {
        let now = now();
        let t = import();
        let unbound = pvc("Pending", &[]);
        let mut obs = observe(&t, Some(&unbound), None, &now);
        obs.wait_for_first_consumer = true;
        assert_eq!(
            desired_status(&obs).0.phase,
            Some(DataVolumePhase::WaitForFirstConsumer)
        );
        let up = Transfer::Upload;
        let ready = pvc(
            "Bound",
            &[
                (annotations::POD_PHASE, "Running"),
                (annotations::POD_READY, "true"),
            ],
        );
        assert_eq!(
            desired_status(&observe(&up, Some(&ready), None, &now))
                .0
                .phase,
            Some(DataVolumePhase::UploadReady)
        );
        let starting = pvc(
            "Bound",
            &[
                (annotations::POD_PHASE, "Running"),
                (annotations::POD_READY, "false"),
            ],
        );
        assert_eq!(
            desired_status(&observe(&up, Some(&starting), None, &now))
                .0
                .phase,
            Some(DataVolumePhase::UploadScheduled)
        );
        let clone = Transfer::CsiClone {
            namespace: "ns".into(),
            name: "golden".into(),
            snapshot: false,
        };
        assert_eq!(
            desired_status(&observe(&clone, Some(&unbound), None, &now))
                .0
                .phase,
            Some(DataVolumePhase::CsiCloneInProgress)
        );
        let restore = Transfer::CsiClone {
            namespace: "ns".into(),
            name: "golden-snapshot".into(),
            snapshot: true,
        };
        assert_eq!(
            desired_status(&observe(&restore, Some(&unbound), None, &now))
                .0
                .phase,
            Some(DataVolumePhase::CloneFromSnapshotSourceInProgress)
        );
        let bound = pvc("Bound", &[]);
        let (status, _) = desired_status(&observe(&restore, Some(&bound), None, &now));
        assert_eq!(status.phase, Some(DataVolumePhase::Succeeded));
        let (status, _) = desired_status(&observe(&clone, Some(&bound), None, &now));
        assert_eq!(status.phase, Some(DataVolumePhase::Succeeded));
        assert_eq!(status.progress.as_deref(), Some("100.0%"));
    }

    #[test]
    fn progress_is_read_from_prometheus_text() {
        let text = "# HELP kubevirt_cdi_import_progress The import progress in percentage\n\
                    # TYPE kubevirt_cdi_import_progress counter\n\
                    kubevirt_cdi_import_progress_total{ownerUID=\"other\"} 10.0\n\
                    kubevirt_cdi_import_progress_total{ownerUID=\"uid-dv\"} 45.3\n";
        assert_eq!(parse_progress(text, "uid-dv").as_deref(), Some("45.30%"));
        assert_eq!(parse_progress(text, "missing"), None);
        assert_eq!(
            parse_progress(
                "kubevirt_cdi_import_progress_total{ownerUID=\"u\"} NaN",
                "u"
            ),
            None
        );
    }

    /// The events of an import whose claim and pod go through `steps` (claim phase, pod
    /// phase), each step's status written over the last, as the controller does.
    fn events_of(steps: &[(&str, Option<&str>)]) -> Vec<(bool, String, String)> {
        let transfer = import();
        let now = now();
        let mut current: Option<DataVolumeStatus> = None;
        let mut events = Vec::new();
        for (claim, pod) in steps {
            let mut ann = vec![(annotations::POD_RESTARTS, "0")];
            if let Some(pod) = pod {
                ann.push((annotations::POD_PHASE, pod));
            }
            if *pod == Some("Failed") {
                ann.push((annotations::RUNNING_CONDITION, "false"));
                ann.push((annotations::RUNNING_CONDITION_REASON, "Error"));
                ann.push((annotations::RUNNING_CONDITION_MESSAGE, "HTTP 404 Not Found"));
            }
            let claim = pvc(claim, &ann);
            let (status, phase_event) =
                desired_status(&observe(&transfer, Some(&claim), current.as_ref(), &now));
            if current.as_ref() != Some(&status) {
                for e in status_events(current.as_ref(), &status, phase_event) {
                    events.push((e.warning, e.reason, e.message));
                }
            }
            current = Some(status);
        }
        events
    }

    #[test]
    fn an_import_publishes_cdis_events_in_order_and_each_once() {
        let events = events_of(&[
            ("Pending", None),
            ("Pending", None),
            ("Bound", None),
            ("Bound", Some("Pending")),
            ("Bound", Some("Running")),
            ("Bound", Some("Running")),
            ("Bound", Some("Succeeded")),
        ]);
        let normal = |reason: &str, message: &str| (false, reason.to_string(), message.to_string());
        assert_eq!(
            events,
            [
                normal("Pending", "PVC disk Pending"),
                normal("Bound", "PVC disk Bound"),
                normal("ImportScheduled", "Import into disk scheduled"),
                normal("ImportInProgress", "Import into disk in progress"),
                normal("ImportSucceeded", "Successfully imported into PVC disk"),
            ]
        );
    }

    #[test]
    fn a_stopped_transfer_warns_with_its_message_once() {
        let events = events_of(&[
            ("Bound", Some("Running")),
            ("Bound", Some("Failed")),
            ("Bound", Some("Failed")),
        ]);
        let warnings: Vec<_> = events.iter().filter(|e| e.0).collect();
        assert_eq!(
            warnings,
            [
                &(
                    true,
                    "ImportFailed".into(),
                    "Failed to import into PVC disk".into()
                ),
                &(true, "Error".into(), "HTTP 404 Not Found".into()),
            ]
        );
    }

    #[test]
    fn a_lost_claim_is_published() {
        let events = events_of(&[("Bound", Some("Succeeded")), ("Lost", Some("Succeeded"))]);
        let lost: Vec<_> = events.iter().skip_while(|e| e.1 != "ClaimLost").collect();
        let claim_lost = (false, "ClaimLost".to_string(), "Claim Lost".to_string());
        let failed = (
            true,
            "ErrClaimLost".to_string(),
            "PVC disk lost".to_string(),
        );
        assert_eq!(lost, [&claim_lost, &failed]);
    }
}
