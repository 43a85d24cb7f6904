//! The decision of the VMI replica set controller: the replica set and the VMIs of its
//! namespace in, a list of [`ReplicaSetAction`]s out, with no I/O. Behaviour as KubeVirt
//! v1.6.6's `pkg/virt-controller/watch/replicaset/replicaset.go`.

use api::common::ConditionStatus;
use api::kubevirt::replicaset::conditions;
use api::kubevirt::vmi::VirtualMachineCondition;
use api::kubevirt::{
    VirtualMachineInstance, VirtualMachineInstancePhase, VirtualMachineInstanceReplicaSet,
    VirtualMachineInstanceReplicaSetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::ResourceExt;

use crate::kubevirt::claims::{self, Claim};

/// At most this many instances are created or deleted in one reconcile (upstream's
/// default `burstReplicas`).
pub const BURST_REPLICAS: usize = 250;
/// The VMI condition a launcher pod that is being torn down gives its instance.
const POD_TERMINATING_REASON: &str = "PodTerminating";

/// Everything [`plan`] looks at.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The replica set, as just read.
    pub replica_set: &'a VirtualMachineInstanceReplicaSet,
    /// Every VMI of its namespace.
    pub vmis: &'a [VirtualMachineInstance],
    /// The current time.
    pub now: Time,
}

/// One step of a reconcile.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplicaSetAction {
    /// Make the replica set the controller of this orphan VMI (of that UID).
    Adopt { name: String, uid: String },
    /// Take the replica set's reference off this VMI its selector no longer selects.
    Release { name: String, uid: String },
    /// Create this instance (named by `generateName`).
    CreateVmi(Box<VirtualMachineInstance>),
    /// Delete an instance the replica set has too many of.
    DeleteVmi { name: String, uid: String },
    /// Delete an instance that ended.
    DeleteFinishedVmi { name: String, uid: String },
    /// Replace the status with this one (as if every create and delete before succeeded).
    WriteStatus(Box<VirtualMachineInstanceReplicaSetStatus>),
    /// Publish this normal event (pausing and resuming).
    Event {
        reason: &'static str,
        message: String,
    },
}

/// Why a replica set is not acted on at all, as upstream logs and skips it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSpec {
    /// No template, no selector, or a template without labels.
    #[error(
        "invalid controller spec: spec.template, spec.selector and template labels are required"
    )]
    Incomplete,
    /// A selector apimachinery would refuse.
    #[error("invalid selector on replicaset")]
    Selector,
    /// The selector does not select the template's labels.
    #[error("selector does not match template labels")]
    SelectorMismatch,
}

/// The instances the replica set counts and those it cleans up.
struct Partition<'a> {
    active: Vec<&'a VirtualMachineInstance>,
    finished: Vec<&'a VirtualMachineInstance>,
}

/// Decides what to do about a replica set.
pub fn plan(observed: &Observed) -> Result<Vec<ReplicaSetAction>, InvalidSpec> {
    let rs = observed.replica_set;
    check_spec(rs)?;
    let mut actions = Vec::new();
    let mine = claim_instances(observed, &mut actions);
    let partition = partition(&mine);
    let deleting = rs.metadata.deletion_timestamp.is_some();
    if !rs.spec.paused && !deleting {
        actions.extend(scale(rs, &partition.active));
        actions.extend(partition.finished.iter().take(BURST_REPLICAS).map(|v| {
            ReplicaSetAction::DeleteFinishedVmi {
                name: v.name_any(),
                uid: v.uid().unwrap_or_default(),
            }
        }));
    }
    let status = status(rs, &partition.active, None, &observed.now);
    if rs.status.as_ref() != Some(&status) {
        actions.push(ReplicaSetAction::WriteStatus(Box::new(status)));
        actions.extend(pause_event(rs));
    }
    Ok(actions)
}

/// Whether upstream's controller would act on the replica set at all.
pub fn check_spec(rs: &VirtualMachineInstanceReplicaSet) -> Result<(), InvalidSpec> {
    let (Some(template), Some(selector)) = (&rs.spec.template, &rs.spec.selector) else {
        return Err(InvalidSpec::Incomplete);
    };
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    let Some(labels) = labels.filter(|l| !l.is_empty()) else {
        return Err(InvalidSpec::Incomplete);
    };
    if !api::label_selector::is_valid(selector) {
        return Err(InvalidSpec::Selector);
    }
    if !api::label_selector::selects(selector, labels) {
        return Err(InvalidSpec::SelectorMismatch);
    }
    Ok(())
}

/// The instances that are the replica set's, adopting selected orphans and releasing owned
/// instances it no longer selects.
fn claim_instances<'a>(
    observed: &Observed<'a>,
    actions: &mut Vec<ReplicaSetAction>,
) -> Vec<&'a VirtualMachineInstance> {
    let rs = observed.replica_set;
    let uid = rs.uid().unwrap_or_default();
    let Some(selector) = rs.spec.selector.as_ref() else {
        return Vec::new();
    };
    let may_adopt = rs.metadata.deletion_timestamp.is_none();
    let mut mine = Vec::new();
    for vmi in observed.vmis {
        let (name, vmi_uid) = (vmi.name_any(), vmi.uid().unwrap_or_default());
        match claims::claim(&uid, selector, &vmi.metadata, may_adopt) {
            Claim::Owned => mine.push(vmi),
            Claim::Adopt => {
                actions.push(ReplicaSetAction::Adopt { name, uid: vmi_uid });
                mine.push(vmi);
            }
            Claim::Release => actions.push(ReplicaSetAction::Release { name, uid: vmi_uid }),
            Claim::Ignore => {}
        }
    }
    mine
}

fn pod_terminating(vmi: &VirtualMachineInstance) -> bool {
    condition(vmi, "Ready").is_some_and(|c| {
        c.status == ConditionStatus::False && c.reason.as_deref() == Some(POD_TERMINATING_REASON)
    })
}

fn condition<'a>(
    vmi: &'a VirtualMachineInstance,
    type_: &str,
) -> Option<&'a VirtualMachineCondition> {
    vmi.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

fn is_ready(vmi: &VirtualMachineInstance) -> bool {
    condition(vmi, "Ready").is_some_and(|c| c.status == ConditionStatus::True)
}

/// Active: neither final, nor being deleted, nor losing its pod. Finished: final, or
/// losing its pod, and not yet being deleted.
fn partition<'a>(mine: &[&'a VirtualMachineInstance]) -> Partition<'a> {
    let mut partition = Partition {
        active: Vec::new(),
        finished: Vec::new(),
    };
    for vmi in mine {
        if vmi.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if vmi.is_final() || pod_terminating(vmi) {
            partition.finished.push(vmi);
        } else {
            partition.active.push(vmi);
        }
    }
    partition
}

fn wanted_replicas(rs: &VirtualMachineInstanceReplicaSet) -> i64 {
    i64::from(rs.spec.replicas.unwrap_or(1))
}

/// Instances created or deleted to reach `spec.replicas`, at most [`BURST_REPLICAS`].
fn scale(
    rs: &VirtualMachineInstanceReplicaSet,
    active: &[&VirtualMachineInstance],
) -> Vec<ReplicaSetAction> {
    let diff = active.len() as i64 - wanted_replicas(rs);
    let count = usize::try_from(diff.unsigned_abs())
        .unwrap_or(usize::MAX)
        .min(BURST_REPLICAS);
    if diff > 0 {
        let mut candidates = active.to_vec();
        candidates.sort_by_key(|v| deletion_rank(v));
        candidates
            .iter()
            .take(count)
            .map(|v| ReplicaSetAction::DeleteVmi {
                name: v.name_any(),
                uid: v.uid().unwrap_or_default(),
            })
            .collect()
    } else {
        (0..count)
            .map(|_| ReplicaSetAction::CreateVmi(Box::new(instance_for(rs))))
            .collect()
    }
}

/// The order extra instances go in. Upstream deletes the first ones of its cache, in no
/// defined order; we choose Kubernetes' ReplicaSet order so the least useful go first: not
/// yet scheduled before scheduling before scheduled before running, not ready before
/// ready, newest before oldest, then by name.
fn deletion_rank(vmi: &VirtualMachineInstance) -> (u8, bool, std::cmp::Reverse<String>, String) {
    let phase = match vmi.phase() {
        None | Some(VirtualMachineInstancePhase::Pending) => 0,
        Some(VirtualMachineInstancePhase::Scheduling) => 1,
        Some(VirtualMachineInstancePhase::Scheduled) => 2,
        Some(_) => 3,
    };
    let created = vmi
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    (
        phase,
        is_ready(vmi),
        std::cmp::Reverse(created),
        vmi.name_any(),
    )
}

/// The replica set's controller reference, as upstream's `OwnerRef`.
pub fn owner_reference(rs: &VirtualMachineInstanceReplicaSet) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/{}", api::kubevirt::GROUP, api::kubevirt::VERSION),
        kind: "VirtualMachineInstanceReplicaSet".into(),
        name: rs.name_any(),
        uid: rs.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The template's name, else its generateName, else the replica set's name.
fn base_name(rs: &VirtualMachineInstanceReplicaSet) -> String {
    let meta = rs.spec.template.as_ref().and_then(|t| t.metadata.as_ref());
    let non_empty = |s: Option<&String>| s.filter(|s| !s.is_empty()).cloned();
    non_empty(meta.and_then(|m| m.name.as_ref()))
        .or_else(|| non_empty(meta.and_then(|m| m.generate_name.as_ref())))
        .unwrap_or_else(|| rs.name_any())
}

/// A new instance from the template: its metadata, named by `generateName`, owned by the
/// replica set.
pub fn instance_for(rs: &VirtualMachineInstanceReplicaSet) -> VirtualMachineInstance {
    let template = rs.spec.template.clone().unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let metadata = ObjectMeta {
        name: None,
        generate_name: Some(base_name(rs)),
        namespace: rs.namespace(),
        labels: meta.labels,
        annotations: meta.annotations,
        finalizers: meta.finalizers,
        owner_references: Some(vec![owner_reference(rs)]),
        ..Default::default()
    };
    VirtualMachineInstance {
        metadata,
        spec: template.spec.unwrap_or_default(),
        status: None,
    }
}

/// The status upstream writes: counts of the active instances, the canonical selector,
/// Paused while paused, and ReplicaFailure while creates (`failure` with a negative
/// difference) or deletes failed.
pub fn status(
    rs: &VirtualMachineInstanceReplicaSet,
    active: &[&VirtualMachineInstance],
    failure: Option<&str>,
    now: &Time,
) -> VirtualMachineInstanceReplicaSetStatus {
    let current = rs.status.clone().unwrap_or_default();
    let mut conditions = current.conditions;
    let paused =
        rs.spec
            .paused
            .then_some(("", conditions::PAUSED_REASON, conditions::PAUSED_MESSAGE));
    claims::set_condition(&mut conditions, paused, conditions::REPLICA_PAUSED, now);
    let reason = if (active.len() as i64) < wanted_replicas(rs) {
        "FailedCreate"
    } else {
        "FailedDelete"
    };
    let failed = failure.map(|message| ("", reason, message));
    claims::set_condition(&mut conditions, failed, conditions::REPLICA_FAILURE, now);
    VirtualMachineInstanceReplicaSetStatus {
        replicas: i32::try_from(active.len()).unwrap_or(i32::MAX),
        ready_replicas: i32::try_from(active.iter().filter(|v| is_ready(v)).count())
            .unwrap_or(i32::MAX),
        conditions,
        label_selector: rs
            .spec
            .selector
            .as_ref()
            .map(api::label_selector::canonical)
            .unwrap_or_default(),
    }
}

/// The active instances of the replica set (for a status written after a failure).
pub fn active_instances<'a>(
    rs: &'a VirtualMachineInstanceReplicaSet,
    vmis: &'a [VirtualMachineInstance],
) -> Vec<&'a VirtualMachineInstance> {
    let observed = Observed {
        replica_set: rs,
        vmis,
        now: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    };
    let mine = claim_instances(&observed, &mut Vec::new());
    partition(&mine).active
}

/// SuccessfulPaused or SuccessfulResumed, when the Paused condition is to change.
fn pause_event(rs: &VirtualMachineInstanceReplicaSet) -> Option<ReplicaSetAction> {
    let has = rs
        .status
        .as_ref()
        .is_some_and(|s| claims::has_condition(&s.conditions, conditions::REPLICA_PAUSED));
    match (rs.spec.paused, has) {
        (true, false) => Some(ReplicaSetAction::Event {
            reason: conditions::SUCCESSFUL_PAUSED,
            message: "Paused".into(),
        }),
        (false, true) => Some(ReplicaSetAction::Event {
            reason: conditions::SUCCESSFUL_RESUMED,
            message: "Resumed".into(),
        }),
        _ => None,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
