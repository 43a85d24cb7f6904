//! The VirtualMachine controller (virt-controller's VM part): it keeps a VM's instance
//! (VMI) created or deleted as its run strategy and its pending start/stop requests say,
//! creates the DataVolumes of its `dataVolumeTemplates`, backs off a VMI that keeps failing
//! to start, and mirrors the instance into the VM's status with KubeVirt's printable status.
//!
//! [`plan`] is the whole decision: the observed objects in, a list of [`VmAction`]s out,
//! with no I/O. [`run`] gathers what `plan` needs and applies what it returns.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use api::cdi::DataVolume;
use api::cdi::datavolume::{DataVolumeConditionType, DataVolumePhase};
use api::common::ConditionStatus;
use api::kubevirt::keys;
use api::kubevirt::vm::{VirtualMachineStateChangeRequest, state_change};
use api::kubevirt::vmi::{VirtualMachineCondition, condition_types, set_condition};
use api::kubevirt::{
    RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineInstancePhase,
    VirtualMachineInstanceTemplateSpec, VirtualMachinePrintableStatus, VirtualMachineStatus,
};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::kube::{events, finalizer, is_status};

/// A VM annotation: `"false"` defers creating DataVolumes until the VM starts.
pub const IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION: &str =
    "kubevirt.io/immediate-data-volume-creation";
/// The finalizer by which a VM's deletion orphans its dependents.
const ORPHAN_FINALIZER: &str = "orphan";
/// The longest wait before an instance that keeps failing to start is tried again.
pub const MAX_CRASH_LOOP_BACKOFF: Duration = Duration::from_secs(300);
/// Without phase transition timestamps on a VMI, an instance that ended this long after it
/// was created is taken to have run (not to have failed to start).
const RAN_WITHOUT_TIMESTAMPS_AFTER: i64 = 60;
/// How often a VM waiting on volumes is looked at again (claims are not watched).
const VOLUME_RECHECK: Duration = Duration::from_secs(10);
/// How often any VM is looked at again without a change.
const RESYNC: Duration = Duration::from_secs(300);

/// Event and condition reasons, by upstream's names.
pub mod reasons {
    /// An instance was created.
    pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
    /// Creating an instance failed (also the Failure condition's reason).
    pub const FAILED_CREATE: &str = "FailedCreate";
    /// An instance was deleted.
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
    /// Deleting an instance failed.
    pub const FAILED_DELETE: &str = "FailedDelete";
    /// A DataVolume of the VM was created.
    pub const SUCCESSFUL_DATA_VOLUME_CREATE: &str = "SuccessfulDataVolumeCreate";
    /// Creating a DataVolume failed.
    pub const FAILED_DATA_VOLUME_CREATE: &str = "FailedDataVolumeCreate";
    /// A DataVolume of the VM failed.
    pub const FAILED_DATA_VOLUME_IMPORT: &str = "FailedDataVolumeImport";
    /// Ready condition: no instance exists.
    pub const VMI_NOT_EXISTS: &str = "VMINotExists";
    /// Ready condition: the instance has no Ready condition.
    pub const VMI_CONDITION_MISSING: &str = "VMIConditionMissing";
    /// DataVolumesReady condition: every DataVolume can be used.
    pub const ALL_DVS_READY: &str = "AllDVsReady";
    /// DataVolumesReady condition: some DataVolume is still being filled.
    pub const NOT_ALL_DVS_READY: &str = "NotAllDVsReady";
}

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

/// The key of [`StartFailure`] in the VM's status.
const START_FAILURE_KEY: &str = "startFailure";

/// The crash-loop record of a VM, if any (an unreadable one counts as none).
pub fn start_failure(status: Option<&VirtualMachineStatus>) -> Option<StartFailure> {
    status
        .and_then(|s| s.extra.get(START_FAILURE_KEY))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

fn set_start_failure(status: &mut VirtualMachineStatus, record: Option<StartFailure>) {
    match record.and_then(|r| serde_json::to_value(r).ok()) {
        Some(value) => {
            status.extra.insert(START_FAILURE_KEY.to_string(), value);
        }
        None => {
            status.extra.remove(START_FAILURE_KEY);
        }
    }
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

/// Everything [`plan`] looks at.
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
    /// The current time.
    pub now: Time,
}

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
    /// Put [`keys::VM_CONTROLLER_FINALIZER`] on the VM.
    AddVmFinalizer,
    /// Take [`keys::VM_CONTROLLER_FINALIZER`] off the VM (it is being deleted).
    RemoveVmFinalizer,
    /// Create this DataVolume.
    CreateDataVolume(Box<DataVolume>),
    /// Create this instance.
    CreateVmi(Box<VirtualMachineInstance>),
    /// Delete the instance of that name, only if it still has that UID.
    DeleteVmi {
        /// Its name.
        name: String,
        /// Its UID, a precondition of the deletion.
        uid: Option<String>,
    },
    /// Take [`keys::VM_CONTROLLER_FINALIZER`] off the instance of that name.
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

fn event(warning: bool, reason: &'static str, message: String) -> VmAction {
    VmAction::Event(VmEvent {
        warning,
        reason,
        message,
    })
}

/// What [`plan`] decided about the instance.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Decision {
    /// An instance is created now.
    create: bool,
    /// The instance is deleted now.
    delete: bool,
    /// A start is wanted but waits for DataVolumes.
    waiting_for_volumes: bool,
    /// The spec is switched to `Always` (a paused start of a halted VM).
    switch_to_always: bool,
    /// A start request is queued (RerunOnFailure after a failure).
    queue_start: bool,
}

fn is_deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

fn vmi_condition<'a>(
    vmi: Option<&'a VirtualMachineInstance>,
    type_: &str,
) -> Option<&'a VirtualMachineCondition> {
    vmi.and_then(|v| v.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

fn vmi_condition_is(
    vmi: Option<&VirtualMachineInstance>,
    type_: &str,
    status: ConditionStatus,
    reason: Option<&str>,
) -> bool {
    vmi_condition(vmi, type_).is_some_and(|c| {
        c.status == status && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
    })
}

/// The first pending state change request.
fn first_request(vm: &VirtualMachine) -> Option<&VirtualMachineStateChangeRequest> {
    vm.status
        .as_ref()
        .and_then(|s| s.state_change_requests.as_ref())
        .and_then(|r| r.first())
}

fn has_start_request(vm: &VirtualMachine) -> bool {
    first_request(vm).is_some_and(|r| r.action == state_change::START)
}

fn has_start_paused_request(vm: &VirtualMachine) -> bool {
    first_request(vm).is_some_and(|r| {
        r.action == state_change::START
            && r.data
                .as_ref()
                .and_then(|d| d.get(state_change::PAUSED.0))
                .is_some_and(|v| v == state_change::PAUSED.1)
    })
}

fn has_stop_request_for(vm: &VirtualMachine, vmi: &VirtualMachineInstance) -> bool {
    first_request(vm).is_some_and(|r| {
        r.action == state_change::STOP && r.uid.is_some() && r.uid == vmi.metadata.uid
    })
}

/// Whether the instance ever reached Running: by its phase transition timestamps as
/// upstream, or, on an instance without them, by being Running now or having ended a
/// while after it was created.
fn ever_ran(vmi: &VirtualMachineInstance, now: &Time) -> bool {
    if vmi.phase() == Some(VirtualMachineInstancePhase::Running) {
        return true;
    }
    let timestamps = vmi
        .status
        .as_ref()
        .and_then(|s| s.extra.get("phaseTransitionTimestamps"))
        .and_then(Value::as_array);
    match timestamps {
        Some(list) => list.iter().any(|t| t["phase"] == "Running"),
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
fn next_start_failure(
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
fn backoff_left(record: Option<&StartFailure>, now: &Time) -> Option<Duration> {
    let retry = record?.retry_after_timestamp.as_ref()?;
    let left = retry.0.as_second() - now.0.as_second();
    (left > 0).then(|| Duration::from_secs(left as u64))
}

/// The names of the DataVolumes the template's volumes use.
fn template_data_volumes(template: Option<&VirtualMachineInstanceTemplateSpec>) -> Vec<String> {
    template
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.volumes.as_ref())
        .map(|volumes| {
            volumes
                .iter()
                .filter_map(|v| v.data_volume.as_ref().map(|d| d.name.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the claims the template's volumes use (a DataVolume's claim has its name).
pub fn template_claims(vm: &VirtualMachine) -> Vec<String> {
    vm.spec
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(super::vmi::launcher_pod::claim_of)
        .map(|(claim, _)| claim.to_owned())
        .collect()
}

/// The names of every DataVolume [`plan`] wants to see: the templates' and the volumes'.
pub fn data_volume_names(vm: &VirtualMachine) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = template_data_volumes(vm.spec.template.as_ref())
        .into_iter()
        .collect();
    for t in vm.spec.data_volume_templates.iter().flatten() {
        if let Some(name) = t.metadata.as_ref().and_then(|m| m.name.clone()) {
            names.insert(name);
        }
    }
    names
}

fn dv_phase(dv: &DataVolume) -> Option<DataVolumePhase> {
    dv.status.as_ref().and_then(|s| s.phase)
}

fn dv_condition_is(
    dv: &DataVolume,
    type_: DataVolumeConditionType,
    status: ConditionStatus,
) -> Option<String> {
    dv.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_ && c.status == status))
        .map(|c| c.reason.clone().unwrap_or_default())
}

/// A DataVolume a start may go on with: filled, or waiting for its first consumer (the
/// launcher pod is that consumer).
fn dv_usable(dv: &DataVolume) -> bool {
    dv_phase(dv).is_some_and(DataVolumePhase::usable_by_consumer)
}

/// Why a DataVolume is in error, as upstream sees it: failed, or its worker stopped on an
/// error.
fn dv_error(dv: &DataVolume) -> Option<String> {
    let name = dv.name_any();
    if dv_phase(dv) == Some(DataVolumePhase::Failed) {
        return Some(format!("DataVolume {name} is in Failed phase"));
    }
    let running = dv
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == DataVolumeConditionType::Running)
        })?;
    let reason = running.reason.as_deref().unwrap_or_default();
    (running.status == ConditionStatus::False && matches!(reason, "Error" | "ImagePullFailed"))
        .then(|| {
            format!(
                "DataVolume {name} importer has stopped running due to an error: {}",
                running.message.as_deref().unwrap_or_default()
            )
        })
}

/// A DataVolume being filled, as upstream counts it for `Provisioning`: not done, and not
/// merely waiting for its first consumer while unbound.
fn dv_provisioning(dv: &DataVolume) -> bool {
    match dv_phase(dv) {
        Some(DataVolumePhase::Succeeded | DataVolumePhase::PendingPopulation) => false,
        Some(DataVolumePhase::WaitForFirstConsumer) => {
            dv_condition_is(dv, DataVolumeConditionType::Bound, ConditionStatus::True).is_some()
        }
        _ => true,
    }
}

/// What a DataVolume is doing, for a person: `rootdisk (ImportInProgress, 45.10%)`.
fn dv_progress(name: &str, dv: Option<&DataVolume>) -> String {
    match dv {
        None => format!("{name} (being created)"),
        Some(dv) => {
            let phase = dv_phase(dv).map_or("Pending", DataVolumePhase::as_str);
            match dv.status.as_ref().and_then(|s| s.progress.as_deref()) {
                Some(p) if !p.is_empty() && p != "N/A" => format!("{name} ({phase}, {p})"),
                _ => format!("{name} ({phase})"),
            }
        }
    }
}

/// The controller reference a VM puts on what it creates.
pub fn owner_reference(vm: &VirtualMachine) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/{}", api::kubevirt::GROUP, api::kubevirt::VERSION),
        kind: "VirtualMachine".to_string(),
        name: vm.name_any(),
        uid: vm.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The DataVolume a template describes, owned by the VM.
pub fn data_volume_for(
    vm: &VirtualMachine,
    template: &api::kubevirt::DataVolumeTemplateSpec,
) -> Option<DataVolume> {
    let meta = template.metadata.clone().unwrap_or_default();
    let name = meta.name.clone().filter(|n| !n.is_empty())?;
    let mut labels = meta.labels.clone().unwrap_or_default();
    labels.insert(
        keys::CREATED_BY_LABEL.to_string(),
        vm.metadata.uid.clone().unwrap_or_default(),
    );
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    // As upstream: the DataVolume adopts a claim of its name that already exists.
    annotations.insert(
        keys::ALLOW_CLAIM_ADOPTION_ANNOTATION.to_string(),
        "true".to_string(),
    );
    let mut spec = template.spec.clone();
    if spec.priority_class_name.is_none() {
        spec.priority_class_name = vm
            .spec
            .template
            .as_ref()
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.extra.get("priorityClassName"))
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    let mut dv = DataVolume::new(&name, spec);
    dv.metadata = ObjectMeta {
        name: Some(name),
        namespace: vm.namespace(),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: Some(vec![owner_reference(vm)]),
        ..Default::default()
    };
    Some(dv)
}

/// The instance a VM's template describes: the VM's name and namespace, the template's
/// labels and annotations plus the VM's name and generation, owned by the VM and held by
/// the VM controller's finalizer; paused when the start request asks for it.
pub fn instance_for(vm: &VirtualMachine) -> Option<VirtualMachineInstance> {
    let template = vm.spec.template.as_ref()?;
    let mut spec = template.spec.clone()?;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(keys::VM_NAME_LABEL.to_string(), vm.name_any());
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(
        keys::VM_GENERATION_ANNOTATION.to_string(),
        vm.metadata.generation.unwrap_or_default().to_string(),
    );
    let mut finalizers = meta.finalizers.unwrap_or_default();
    if !finalizers
        .iter()
        .any(|f| f == keys::VM_CONTROLLER_FINALIZER)
    {
        finalizers.push(keys::VM_CONTROLLER_FINALIZER.to_string());
    }
    if has_start_paused_request(vm) {
        spec.extra
            .insert("startStrategy".to_string(), Value::from("Paused"));
    }
    let mut vmi = VirtualMachineInstance::new(&vm.name_any(), spec);
    vmi.metadata = ObjectMeta {
        name: Some(vm.name_any()),
        namespace: vm.namespace(),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: Some(vec![owner_reference(vm)]),
        finalizers: Some(finalizers),
        ..Default::default()
    };
    Some(vmi)
}

/// Whether the instance belongs to the VM: controlled by it, or by nothing (then it is
/// taken over, as upstream adopts orphans of the VM's name).
fn is_ours(vm: &VirtualMachine, vmi: &VirtualMachineInstance) -> bool {
    let controller = vmi
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    controller.is_none_or(|r| Some(&r.uid) == vm.metadata.uid.as_ref())
}

/// A JSON patch adding (`add`) or removing the VM controller's finalizer, failing if the
/// finalizers changed meanwhile.
pub fn finalizer_patch(meta: &ObjectMeta, add: bool) -> Value {
    finalizer::json_patch(meta, keys::VM_CONTROLLER_FINALIZER, add)
}

/// The spec patch that turns a halted VM on (`runStrategy: Always`, or `running: true`
/// where the VM uses the older field), failing if the field changed meanwhile.
fn switch_to_always_patch(vm: &VirtualMachine) -> Value {
    match (vm.spec.run_strategy, vm.spec.running) {
        (Some(current), _) => json!([
            {"op": "test", "path": "/spec/runStrategy", "value": current.as_str()},
            {"op": "replace", "path": "/spec/runStrategy", "value": "Always"},
        ]),
        (None, Some(current)) => json!([
            {"op": "test", "path": "/spec/running", "value": current},
            {"op": "replace", "path": "/spec/running", "value": true},
        ]),
        (None, None) => {
            let mut ops = Vec::new();
            if let Some(rv) = &vm.metadata.resource_version {
                ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
            }
            ops.push(json!({"op": "add", "path": "/spec/runStrategy", "value": "Always"}));
            Value::Array(ops)
        }
    }
}

/// What the printable status is decided from.
struct Facts<'a> {
    vm: &'a VirtualMachine,
    vmi: Option<&'a VirtualMachineInstance>,
    strategy: RunStrategy,
    decision: Decision,
    set_to_start: bool,
    start_failure: Option<&'a StartFailure>,
    /// A DataVolume the template uses is in error.
    dv_error: bool,
    /// A DataVolume the template uses is being created or filled.
    dv_provisioning: bool,
    /// A claim the template uses exists and is not bound.
    unbound_claim: bool,
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

fn printable_status(facts: &Facts) -> VirtualMachinePrintableStatus {
    PRINTABLE_STATUSES
        .iter()
        .find(|(_, holds)| holds(facts))
        .map_or(VirtualMachinePrintableStatus::Unknown, |(status, _)| {
            *status
        })
}

/// Whether the VM is meant to have a running instance (upstream's isSetToStart).
fn set_to_start(
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
fn rerun_should_start(vm: &VirtualMachine) -> bool {
    has_start_request(vm)
        || vm.status.as_ref().and_then(|s| s.run_strategy) != Some(RunStrategy::RerunOnFailure)
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
fn conditions(
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

/// The pending state change requests after this reconcile: a start request queued by a
/// RerunOnFailure restart appended, then the first one dropped once it is done (a stop
/// whose instance is gone or replaced, a start whose instance exists and runs on).
fn next_requests(
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

/// Decides what to do about a VM: the one function of this controller with its logic.
pub fn plan(observed: &Observed) -> Vec<VmAction> {
    let vm = observed.vm;
    let now = &observed.now;
    let name = vm.name_any();
    let strategy = vm.spec.effective_run_strategy();
    let mut actions = Vec::new();
    let mut failures: Vec<(&'static str, String)> = Vec::new();

    let vmi = match observed.vmi {
        Some(v) if !is_ours(vm, v) => {
            failures.push((
                reasons::FAILED_CREATE,
                format!("VirtualMachineInstance {name} exists and is controlled by another object"),
            ));
            None
        }
        other => other,
    };
    // A foreign instance of the VM's name blocks creating one.
    let foreign = observed.vmi.is_some() && vmi.is_none();
    let deleting = is_deleting(&vm.metadata);
    let has_finalizer = vm
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == keys::VM_CONTROLLER_FINALIZER);
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

    let mut decision = Decision::default();
    let current_failure = start_failure(vm.status.as_ref());
    let mut requeue = None;
    let mut dv_actions = Vec::new();
    let previous_printable = vm.status.as_ref().and_then(|s| s.printable_status);

    if deleting {
        if let Some(v) = vmi {
            if !decision_orphans(vm) && !is_deleting(&v.metadata) {
                decision.delete = true;
            }
        }
    } else {
        if !has_finalizer {
            actions.push(VmAction::AddVmFinalizer);
        }

        // DataVolumes: created with the VM (even a halted one) unless deferred.
        let deferred = vm
            .annotations()
            .get(IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION)
            .is_some_and(|v| v == "false");
        let mut dvs_ready = true;
        let mut create_dvs = Vec::new();
        for (i, t) in vm.spec.data_volume_templates.iter().flatten().enumerate() {
            let Some(dv) = data_volume_for(vm, t) else {
                failures.push((
                    reasons::FAILED_CREATE,
                    format!("spec.dataVolumeTemplates[{i}].metadata.name: required"),
                ));
                dvs_ready = false;
                continue;
            };
            let dv_name = dv.name_any();
            match observed.data_volumes.get(&dv_name) {
                None => {
                    dvs_ready = false;
                    create_dvs.push(dv);
                }
                Some(existing) => {
                    if !dv_usable(existing) {
                        dvs_ready = false;
                    }
                    if dv_phase(existing) == Some(DataVolumePhase::Failed)
                        && previous_printable
                            != Some(VirtualMachinePrintableStatus::DataVolumeError)
                    {
                        dv_actions.push(event(
                            true,
                            reasons::FAILED_DATA_VOLUME_IMPORT,
                            format!("DataVolume {dv_name} failed to import disk image"),
                        ));
                    }
                }
            }
        }

        // The instance, per run strategy.
        let mut want_start = false;
        match (strategy, vmi) {
            (RunStrategy::Always, Some(v)) => {
                decision.delete = has_stop_request_for(vm, v) || v.is_final();
            }
            (RunStrategy::RerunOnFailure, Some(v)) => {
                let failed = v.phase() == Some(VirtualMachineInstancePhase::Failed);
                let succeeded = v.phase() == Some(VirtualMachineInstancePhase::Succeeded);
                if !is_deleting(&v.metadata) && (has_stop_request_for(vm, v) || failed || succeeded)
                {
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
        if want_start && !foreign {
            let backoff = matches!(strategy, RunStrategy::Always | RunStrategy::RerunOnFailure)
                .then(|| backoff_left(current_failure.as_ref(), now))
                .flatten();
            if let Some(left) = backoff {
                requeue = Some(left);
            } else if !template_ok {
            } else if !dvs_ready {
                decision.waiting_for_volumes = true;
            } else {
                decision.create = true;
            }
        }
        if !deferred || want_start {
            for dv in create_dvs {
                let message = format!("Created DataVolume {}", dv.name_any());
                dv_actions.push(VmAction::CreateDataVolume(Box::new(dv)));
                dv_actions.push(event(
                    false,
                    reasons::SUCCESSFUL_DATA_VOLUME_CREATE,
                    message,
                ));
            }
        }
    }
    actions.extend(dv_actions);
    if decision.switch_to_always {
        actions.push(VmAction::PatchVm(switch_to_always_patch(vm)));
    }
    if decision.create
        && let Some(instance) = instance_for(vm)
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

    // Volumes, as the status reports them.
    let used_dvs = template_data_volumes(vm.spec.template.as_ref());
    let templated: BTreeSet<String> = vm
        .spec
        .data_volume_templates
        .iter()
        .flatten()
        .filter_map(|t| t.metadata.as_ref().and_then(|m| m.name.clone()))
        .collect();
    let mut dv_error_found = false;
    let mut provisioning = Vec::new();
    for dv_name in &used_dvs {
        match observed.data_volumes.get(dv_name) {
            Some(dv) => {
                dv_error_found |= dv_error(dv).is_some();
                if dv_provisioning(dv) {
                    provisioning.push(dv_progress(dv_name, Some(dv)));
                }
            }
            None if templated.contains(dv_name) && !deleting => {
                provisioning.push(dv_progress(dv_name, None));
            }
            None => {}
        }
    }
    let unbound_claim = template_claims(vm).iter().any(|c| {
        observed.claims.get(c).is_some_and(|pvc| {
            pvc.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound")
        })
    });
    let volumes_ready = (!used_dvs.is_empty()).then(|| {
        if provisioning.is_empty() {
            (true, "All of the VM's DataVolumes are ready".to_string())
        } else {
            (
                false,
                format!("Waiting for DataVolume {}", provisioning.join(", ")),
            )
        }
    });

    // The status.
    let next_failure = next_start_failure(current_failure.clone(), strategy, vmi, now);
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
        &failures,
        volumes_ready,
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
        dv_error: dv_error_found,
        dv_provisioning: !provisioning.is_empty(),
        unbound_claim,
    };
    status.printable_status = Some(printable_status(&facts));
    if vm.status.as_ref() != Some(&status) {
        actions.push(VmAction::PatchVmStatus(Box::new(status)));
    }

    if let Some(v) = vmi
        && (v.is_final() || is_deleting(&v.metadata))
        && v.finalizers()
            .iter()
            .any(|f| f == keys::VM_CONTROLLER_FINALIZER)
    {
        actions.push(VmAction::RemoveVmiFinalizer { name: v.name_any() });
    }
    if deleting && has_finalizer && (vmi.is_none() || decision_orphans(vm)) {
        actions.push(VmAction::RemoveVmFinalizer);
    }
    if let Some(after) = requeue {
        actions.push(VmAction::RequeueAfter(after));
    } else if !provisioning.is_empty() || unbound_claim {
        actions.push(VmAction::RequeueAfter(VOLUME_RECHECK));
    }
    actions
}

/// The strategies that start instances by themselves, so that failing starts are counted
/// (and shown as CrashLoopBackOff).
fn counts_start_failures(strategy: RunStrategy) -> bool {
    matches!(
        strategy,
        RunStrategy::Always | RunStrategy::RerunOnFailure | RunStrategy::Once
    )
}

fn decision_orphans(vm: &VirtualMachine) -> bool {
    vm.finalizers().iter().any(|f| f == ORPHAN_FINALIZER)
}

/// Errors of the VirtualMachine controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// A patch this controller built is not a JSON patch (a bug).
    #[error("invalid JSON patch: {0}")]
    Patch(#[from] serde_json::Error),
    /// The VM changed while it was reconciled; it is looked at again.
    #[error("the VirtualMachine changed while it was reconciled")]
    Stale,
    /// Creating or deleting an object the VM needs failed.
    #[error("{reason}: {message}")]
    Action {
        /// Upstream's reason.
        reason: &'static str,
        /// What failed.
        message: String,
    },
}

impl Error {
    /// The variant's name, for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube(_) => "Kube",
            Self::Patch(_) => "Patch",
            Self::Stale => "Stale",
            Self::Action { .. } => "Action",
        }
    }
}

struct Context {
    client: Client,
    recorder: Recorder,
}

fn json_patch(value: Value) -> Result<Patch<()>, Error> {
    Ok(Patch::Json(serde_json::from_value(value)?))
}

/// Replaces the status, failing if the VM changed since it was read.
fn status_patch(vm: &VirtualMachine, status: &VirtualMachineStatus) -> Result<Patch<()>, Error> {
    let mut ops = Vec::new();
    if let Some(rv) = &vm.metadata.resource_version {
        ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
    }
    ops.push(json!({"op": "add", "path": "/status", "value": status}));
    json_patch(Value::Array(ops))
}

async fn observe(
    client: &Client,
    namespace: &str,
    vm: &VirtualMachine,
) -> Result<
    (
        Option<VirtualMachineInstance>,
        BTreeMap<String, DataVolume>,
        BTreeMap<String, PersistentVolumeClaim>,
    ),
    Error,
> {
    let vmi = Api::<VirtualMachineInstance>::namespaced(client.clone(), namespace)
        .get_opt(&vm.name_any())
        .await?;
    let dv_api = Api::<DataVolume>::namespaced(client.clone(), namespace);
    let mut data_volumes = BTreeMap::new();
    for name in data_volume_names(vm) {
        if let Some(dv) = dv_api.get_opt(&name).await? {
            data_volumes.insert(name, dv);
        }
    }
    let pvc_api = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
    let mut claims = BTreeMap::new();
    for name in template_claims(vm) {
        if claims.contains_key(&name) {
            continue;
        }
        if let Some(pvc) = pvc_api.get_opt(&name).await? {
            claims.insert(name, pvc);
        }
    }
    Ok((vmi, data_volumes, claims))
}

async fn publish(ctx: &Context, vm: &VirtualMachine, ev: &VmEvent) {
    events::publish(&ctx.recorder, vm, ev.warning, ev.reason, &ev.message).await;
}

/// Applies one action; `Ok(false)` when it had nothing to do (its event is not published).
async fn apply(
    ctx: &Context,
    namespace: &str,
    vm: &mut VirtualMachine,
    action: &VmAction,
) -> Result<bool, Error> {
    let vms = Api::<VirtualMachine>::namespaced(ctx.client.clone(), namespace);
    let vmis = Api::<VirtualMachineInstance>::namespaced(ctx.client.clone(), namespace);
    let name = vm.name_any();
    match action {
        VmAction::AddVmFinalizer | VmAction::RemoveVmFinalizer => {
            let add = matches!(action, VmAction::AddVmFinalizer);
            let patch = json_patch(finalizer_patch(&vm.metadata, add))?;
            match vms.patch(&name, &PatchParams::default(), &patch).await {
                Ok(patched) => {
                    follow(vm, &patched);
                    Ok(true)
                }
                Err(e) if !add && is_status(&e, 404) => Ok(false),
                Err(e) => Err(e.into()),
            }
        }
        VmAction::CreateDataVolume(dv) => {
            let api = Api::<DataVolume>::namespaced(ctx.client.clone(), namespace);
            match api.create(&PostParams::default(), dv).await {
                Ok(_) => Ok(true),
                Err(e) if is_status(&e, 409) => Ok(false),
                Err(e) => Err(Error::Action {
                    reason: reasons::FAILED_DATA_VOLUME_CREATE,
                    message: format!("Error creating DataVolume {}: {e}", dv.name_any()),
                }),
            }
        }
        VmAction::CreateVmi(vmi) => match vmis.create(&PostParams::default(), vmi).await {
            Ok(_) => Ok(true),
            Err(e) if is_status(&e, 409) => Ok(false),
            Err(e) => Err(Error::Action {
                reason: reasons::FAILED_CREATE,
                message: format!("Error creating virtual machine instance: {e}"),
            }),
        },
        VmAction::DeleteVmi { name, uid } => {
            let params = DeleteParams {
                preconditions: uid.clone().map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match vmis.delete(name, &params).await {
                Ok(_) => Ok(true),
                Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(false),
                Err(e) => Err(Error::Action {
                    reason: reasons::FAILED_DELETE,
                    message: format!("Error deleting virtual machine instance {name}: {e}"),
                }),
            }
        }
        VmAction::RemoveVmiFinalizer { name } => {
            let Some(current) = vmis.get_opt(name).await? else {
                return Ok(false);
            };
            let patch = json_patch(finalizer_patch(&current.metadata, false))?;
            match vmis.patch(name, &PatchParams::default(), &patch).await {
                Err(e) if is_status(&e, 404) => Ok(false),
                other => other.map(|_| true).map_err(Error::from),
            }
        }
        VmAction::PatchVm(patch) => {
            let patched = vms
                .patch(&name, &PatchParams::default(), &json_patch(patch.clone())?)
                .await?;
            follow(vm, &patched);
            Ok(true)
        }
        VmAction::PatchVmStatus(status) => {
            match vms
                .patch_status(&name, &PatchParams::default(), &status_patch(vm, status)?)
                .await
            {
                Ok(patched) => {
                    follow(vm, &patched);
                    Ok(true)
                }
                Err(e) if is_status(&e, 404) => Ok(false),
                // The test on the resourceVersion failed (422, as the API server answers a
                // patch that does not apply; 409 on a conflict): someone wrote the VM
                // meanwhile. Said, as a schema's refusal is a 422 too and would repeat.
                Err(e) if is_status(&e, 409) || is_status(&e, 422) => {
                    tracing::info!(vm = %name, error = %e, "status not written; reading the VM again");
                    Err(Error::Stale)
                }
                Err(e) => Err(e.into()),
            }
        }
        VmAction::Event(_) | VmAction::RequeueAfter(_) => Ok(true),
    }
}

/// Takes on what a patch of the VM changed that later patches test.
fn follow(vm: &mut VirtualMachine, patched: &VirtualMachine) {
    vm.metadata.resource_version = patched.metadata.resource_version.clone();
    vm.metadata.finalizers = patched.metadata.finalizers.clone();
}

async fn reconcile(object: Arc<VirtualMachine>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let vms = Api::<VirtualMachine>::namespaced(ctx.client.clone(), &namespace);
    // Decide on the newest VM: a start or stop request written since the cache was filled
    // must not be overwritten by a stale status.
    let Some(mut vm) = vms.get_opt(&object.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let (vmi, data_volumes, claims) = observe(&ctx.client, &namespace, &vm).await?;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let before = vm.status.clone();
    let actions = plan(&Observed {
        vm: &vm,
        vmi: vmi.as_ref(),
        data_volumes: &data_volumes,
        claims: &claims,
        now: now.clone(),
    });
    let mut requeue = RESYNC;
    let mut publish_next = true;
    for action in &actions {
        match action {
            VmAction::Event(ev) => {
                if publish_next {
                    publish(&ctx, &vm, ev).await;
                }
            }
            VmAction::RequeueAfter(after) => requeue = requeue.min(*after),
            _ => match apply(&ctx, &namespace, &mut vm, action).await {
                Ok(done) => publish_next = done,
                Err(Error::Stale) => return Ok(Action::requeue(Duration::from_secs(1))),
                Err(Error::Action { reason, message }) => {
                    publish(
                        &ctx,
                        &vm,
                        &VmEvent {
                            warning: true,
                            reason,
                            message: message.clone(),
                        },
                    )
                    .await;
                    let planned = actions.iter().find_map(|a| match a {
                        VmAction::PatchVmStatus(s) => Some(s.as_ref().clone()),
                        _ => None,
                    });
                    let base = planned.or_else(|| before.clone()).unwrap_or_default();
                    let failed = with_failure(&base, reason, message.clone(), &now);
                    if before.as_ref() != Some(&failed) {
                        if let Err(err) = vms
                            .patch_status(
                                &vm.name_any(),
                                &PatchParams::default(),
                                &status_patch(&vm, &failed)?,
                            )
                            .await
                        {
                            tracing::warn!(vm = %vm.name_any(), %err, "cannot write the Failure condition");
                        }
                    }
                    return Err(Error::Action { reason, message });
                }
                Err(e) => return Err(e),
            },
        }
    }
    Ok(Action::requeue(requeue))
}

fn error_policy(vm: Arc<VirtualMachine>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(vm = %vm.name_any(), namespace = ?vm.namespace(), error = err.metric_label(), %err, "VirtualMachine reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the VirtualMachine controller until its watches end: VMs are watched, with the
/// VMIs and DataVolumes they own.
pub async fn run(client: Client, config: Arc<crate::config::ControllerConfig>) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: config.reporter.clone(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder,
    });
    Controller::new(
        Api::<VirtualMachine>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<VirtualMachineInstance>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<DataVolume>::all(client), watcher::Config::default())
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        match result {
            Ok((object, _)) => tracing::trace!(vm = %object.name, "reconciled"),
            Err(err) => tracing::debug!(%err, "VirtualMachine controller event"),
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::datavolume::{DataVolumeCondition, DataVolumeSpec, DataVolumeStatus};
    use api::kubevirt::vmi::{DataVolumeVolumeSource, Volume};
    use api::kubevirt::{
        DataVolumeTemplateSpec, VirtualMachineInstanceSpec, VirtualMachineInstanceStatus,
        VirtualMachineSpec,
    };
    use k8s_openapi::api::core::v1::PersistentVolumeClaimStatus;

    const NOW: i64 = 1_700_000_000;

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
    }

    fn vm(strategy: RunStrategy) -> VirtualMachine {
        let mut vm = VirtualMachine::new(
            "vm1",
            VirtualMachineSpec {
                run_strategy: Some(strategy),
                template: Some(VirtualMachineInstanceTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                        annotations: Some(BTreeMap::from([("note".into(), "x".into())])),
                        ..Default::default()
                    }),
                    spec: Some(VirtualMachineInstanceSpec::default()),
                }),
                ..Default::default()
            },
        );
        vm.metadata.namespace = Some("ns".into());
        vm.metadata.uid = Some("vm-uid".into());
        vm.metadata.generation = Some(3);
        vm.metadata.resource_version = Some("100".into());
        vm.metadata.finalizers = Some(vec![keys::VM_CONTROLLER_FINALIZER.into()]);
        vm
    }

    fn vmi(phase: VirtualMachineInstancePhase, uid: &str) -> VirtualMachineInstance {
        let mut vmi = instance_for(&vm(RunStrategy::Always)).unwrap();
        vmi.metadata.uid = Some(uid.into());
        vmi.metadata.creation_timestamp = Some(at(NOW - 5));
        vmi.status = Some(VirtualMachineInstanceStatus {
            phase: Some(phase),
            ..Default::default()
        });
        vmi
    }

    /// A VMI that reached Running at some point, as its timestamps record.
    fn ran(vmi: VirtualMachineInstance) -> VirtualMachineInstance {
        with_phases(vmi, &["Pending", "Running"])
    }

    /// A VMI whose timestamps show it never reached Running.
    fn never_ran(vmi: VirtualMachineInstance) -> VirtualMachineInstance {
        with_phases(vmi, &["Pending", "Failed"])
    }

    /// A VMI whose phaseTransitionTimestamps list `phases`.
    fn with_phases(mut vmi: VirtualMachineInstance, phases: &[&str]) -> VirtualMachineInstance {
        let transitions: Vec<Value> = phases.iter().map(|p| json!({"phase": p})).collect();
        let status = vmi.status.as_mut().unwrap();
        status
            .extra
            .insert("phaseTransitionTimestamps".into(), json!(transitions));
        vmi
    }

    fn condition(type_: &str, status: ConditionStatus, reason: &str) -> VirtualMachineCondition {
        VirtualMachineCondition {
            type_: type_.into(),
            status,
            last_probe_time: None,
            last_transition_time: Some(at(NOW - 100)),
            reason: Some(reason.into()),
            message: Some(format!("{type_} message")),
        }
    }

    fn with_requests(mut vm: VirtualMachine, requests: &[(&str, Option<&str>)]) -> VirtualMachine {
        let status = vm.status.get_or_insert_with(Default::default);
        status.state_change_requests = Some(
            requests
                .iter()
                .map(|(action, uid)| VirtualMachineStateChangeRequest {
                    action: action.to_string(),
                    data: None,
                    uid: uid.map(str::to_string),
                })
                .collect(),
        );
        vm
    }

    struct World {
        vm: VirtualMachine,
        vmi: Option<VirtualMachineInstance>,
        dvs: BTreeMap<String, DataVolume>,
        claims: BTreeMap<String, PersistentVolumeClaim>,
        now: i64,
    }

    impl World {
        fn new(vm: VirtualMachine, vmi: Option<VirtualMachineInstance>) -> Self {
            Self {
                vm,
                vmi,
                dvs: BTreeMap::new(),
                claims: BTreeMap::new(),
                now: NOW,
            }
        }

        fn plan(&self) -> Vec<VmAction> {
            plan(&Observed {
                vm: &self.vm,
                vmi: self.vmi.as_ref(),
                data_volumes: &self.dvs,
                claims: &self.claims,
                now: at(self.now),
            })
        }

        /// Plans, then takes the planned status as the VM's.
        fn step(&mut self) -> Vec<VmAction> {
            let actions = self.plan();
            if let Some(status) = planned_status(&actions) {
                self.vm.status = Some(status);
            }
            actions
        }
    }

    fn planned_status(actions: &[VmAction]) -> Option<VirtualMachineStatus> {
        actions.iter().find_map(|a| match a {
            VmAction::PatchVmStatus(s) => Some(s.as_ref().clone()),
            _ => None,
        })
    }

    fn printable(actions: &[VmAction]) -> VirtualMachinePrintableStatus {
        planned_status(actions)
            .and_then(|s| s.printable_status)
            .expect("a status is written")
    }

    fn created(actions: &[VmAction]) -> Option<&VirtualMachineInstance> {
        actions.iter().find_map(|a| match a {
            VmAction::CreateVmi(v) => Some(v.as_ref()),
            _ => None,
        })
    }

    fn deletes(actions: &[VmAction]) -> bool {
        actions
            .iter()
            .any(|a| matches!(a, VmAction::DeleteVmi { .. }))
    }

    fn events(actions: &[VmAction]) -> Vec<&'static str> {
        actions
            .iter()
            .filter_map(|a| match a {
                VmAction::Event(e) => Some(e.reason),
                _ => None,
            })
            .collect()
    }

    fn requests_of(actions: &[VmAction]) -> Vec<String> {
        planned_status(actions)
            .and_then(|s| s.state_change_requests)
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.action)
            .collect()
    }

    fn find_condition(actions: &[VmAction], type_: &str) -> Option<VirtualMachineCondition> {
        planned_status(actions)
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == type_))
    }

    #[test]
    fn always_creates_the_instance_from_the_template() {
        let actions = World::new(vm(RunStrategy::Always), None).plan();
        let vmi = created(&actions).expect("an instance is created");
        assert_eq!(vmi.metadata.name.as_deref(), Some("vm1"));
        assert_eq!(vmi.metadata.namespace.as_deref(), Some("ns"));
        let labels = vmi.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "web");
        assert_eq!(labels[keys::VM_NAME_LABEL], "vm1");
        let annotations = vmi.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations["note"], "x");
        assert_eq!(annotations[keys::VM_GENERATION_ANNOTATION], "3");
        let owner = &vmi.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.kind, "VirtualMachine");
        assert_eq!(owner.api_version, "kubevirt.io/v1");
        assert_eq!(owner.uid, "vm-uid");
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
        assert_eq!(
            vmi.metadata.finalizers,
            Some(vec![keys::VM_CONTROLLER_FINALIZER.to_string()])
        );
        assert!(!vmi.spec.extra.contains_key("startStrategy"));
        assert_eq!(events(&actions), vec![reasons::SUCCESSFUL_CREATE]);
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
        let status = planned_status(&actions).unwrap();
        assert_eq!(status.created, Some(false));
        assert_eq!(status.ready, Some(false));
        // The run strategy is reported once an instance was seen.
        assert_eq!(status.run_strategy, None);
        let ready = find_condition(&actions, condition_types::READY).unwrap();
        assert_eq!(ready.reason.as_deref(), Some(reasons::VMI_NOT_EXISTS));
    }

    #[test]
    fn the_finalizer_is_added_first() {
        let mut vm = vm(RunStrategy::Halted);
        vm.metadata.finalizers = None;
        let actions = World::new(vm.clone(), None).plan();
        assert_eq!(actions[0], VmAction::AddVmFinalizer);
        let patch = finalizer_patch(&vm.metadata, true);
        assert_eq!(patch[0]["path"], "/metadata/resourceVersion");
        assert_eq!(patch[1]["value"], json!([keys::VM_CONTROLLER_FINALIZER]));
        vm.metadata.finalizers = Some(vec!["other".into(), keys::VM_CONTROLLER_FINALIZER.into()]);
        let patch = finalizer_patch(&vm.metadata, false);
        assert_eq!(patch[0]["op"], "test");
        assert_eq!(patch[1]["value"], json!(["other"]));
    }

    #[test]
    fn halted_stays_stopped_and_stops_a_live_instance() {
        let actions = World::new(vm(RunStrategy::Halted), None).plan();
        assert!(created(&actions).is_none());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);

        let live = vmi(VirtualMachineInstancePhase::Running, "u1");
        let actions = World::new(vm(RunStrategy::Halted), Some(live)).plan();
        assert!(deletes(&actions));
        assert!(actions.contains(&VmAction::DeleteVmi {
            name: "vm1".into(),
            uid: Some("u1".into())
        }));
        assert_eq!(events(&actions), vec![reasons::SUCCESSFUL_DELETE]);
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopping);
        let status = planned_status(&actions).unwrap();
        assert_eq!(status.created, Some(true));
        assert_eq!(status.run_strategy, Some(RunStrategy::Halted));

        // Already being deleted: not deleted again, our finalizer released.
        let mut going = vmi(VirtualMachineInstancePhase::Running, "u1");
        going.metadata.deletion_timestamp = Some(at(NOW));
        let actions = World::new(vm(RunStrategy::Halted), Some(going)).plan();
        assert!(!deletes(&actions));
        assert!(actions.contains(&VmAction::RemoveVmiFinalizer { name: "vm1".into() }));
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopping);
    }

    #[test]
    fn deprecated_running_field_counts() {
        let mut running = vm(RunStrategy::Always);
        running.spec.run_strategy = None;
        running.spec.running = Some(true);
        assert!(created(&World::new(running.clone(), None).plan()).is_some());
        running.spec.running = Some(false);
        assert!(created(&World::new(running.clone(), None).plan()).is_none());
        // Both set (refused at admission, still coped with): runStrategy wins.
        running.spec.run_strategy = Some(RunStrategy::Always);
        assert!(created(&World::new(running, None).plan()).is_some());
    }

    #[test]
    fn always_restarts_a_finished_instance() {
        for phase in [
            VirtualMachineInstancePhase::Succeeded,
            VirtualMachineInstancePhase::Failed,
        ] {
            let done = ran(vmi(phase, "u1"));
            let actions = World::new(vm(RunStrategy::Always), Some(done)).plan();
            assert!(deletes(&actions), "{phase:?}");
            assert!(actions.contains(&VmAction::RemoveVmiFinalizer { name: "vm1".into() }));
            assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);
        }
        // A running one is left alone.
        let live = vmi(VirtualMachineInstancePhase::Running, "u1");
        let actions = World::new(vm(RunStrategy::Always), Some(live)).plan();
        assert!(!deletes(&actions) && created(&actions).is_none());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Running);
    }

    #[test]
    fn restart_request_stops_then_starts() {
        // Always: the stop request for the live instance deletes it.
        let mut world = World::new(
            with_requests(
                vm(RunStrategy::Always),
                &[("Stop", Some("u1")), ("Start", None)],
            ),
            Some(vmi(VirtualMachineInstancePhase::Running, "u1")),
        );
        let actions = world.step();
        assert!(deletes(&actions));
        assert_eq!(requests_of(&actions), vec!["Stop", "Start"]);
        // Gone: the stop request is done; Always starts at once.
        world.vmi = None;
        let actions = world.step();
        assert!(created(&actions).is_some());
        assert_eq!(requests_of(&actions), vec!["Start"]);
        // The new instance runs: the start request is done.
        world.vmi = Some(vmi(VirtualMachineInstancePhase::Running, "u2"));
        let actions = world.step();
        assert!(!deletes(&actions));
        assert_eq!(requests_of(&actions), Vec::<String>::new());
        assert_eq!(
            world.vm.status.as_ref().unwrap().state_change_requests,
            None
        );
    }

    #[test]
    fn manual_acts_on_requests_only() {
        let actions = World::new(vm(RunStrategy::Manual), None).plan();
        assert!(created(&actions).is_none());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);

        let mut world = World::new(
            with_requests(vm(RunStrategy::Manual), &[("Start", None)]),
            None,
        );
        let actions = world.step();
        assert!(created(&actions).is_some());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
        assert_eq!(requests_of(&actions), vec!["Start"]);
        world.vmi = Some(vmi(VirtualMachineInstancePhase::Scheduling, "u1"));
        let actions = world.step();
        assert_eq!(requests_of(&actions), Vec::<String>::new());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);

        // A finished instance is not restarted by itself.
        world.vmi = Some(ran(vmi(VirtualMachineInstancePhase::Succeeded, "u1")));
        let actions = world.step();
        assert!(!deletes(&actions) && created(&actions).is_none());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);

        // A stop request for another (older) instance is dropped, not acted on.
        let mut world = World::new(
            with_requests(vm(RunStrategy::Manual), &[("Stop", Some("old"))]),
            Some(vmi(VirtualMachineInstancePhase::Running, "u1")),
        );
        let actions = world.step();
        assert!(!deletes(&actions));
        assert_eq!(requests_of(&actions), Vec::<String>::new());

        // A stop request for this one deletes it.
        let world = World::new(
            with_requests(vm(RunStrategy::Manual), &[("Stop", Some("u1"))]),
            Some(vmi(VirtualMachineInstancePhase::Running, "u1")),
        );
        let actions = world.plan();
        assert!(deletes(&actions));
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopping);
    }

    #[test]
    fn paused_start_request_starts_paused() {
        let mut vm = vm(RunStrategy::Manual);
        vm.status = Some(VirtualMachineStatus {
            state_change_requests: Some(vec![VirtualMachineStateChangeRequest {
                action: state_change::START.into(),
                data: Some(BTreeMap::from([(
                    state_change::PAUSED.0.into(),
                    "true".into(),
                )])),
                uid: None,
            }]),
            ..Default::default()
        });
        let actions = World::new(vm.clone(), None).plan();
        assert_eq!(
            created(&actions).unwrap().spec.extra["startStrategy"],
            json!("Paused")
        );
        // Halted: the request switches the VM to Always.
        vm.spec.run_strategy = Some(RunStrategy::Halted);
        let actions = World::new(vm, None).plan();
        assert!(created(&actions).is_none());
        let patch = actions
            .iter()
            .find_map(|a| match a {
                VmAction::PatchVm(p) => Some(p.clone()),
                _ => None,
            })
            .expect("the spec is switched");
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/spec/runStrategy", "value": "Halted"},
                {"op": "replace", "path": "/spec/runStrategy", "value": "Always"},
            ])
        );
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
    }

    #[test]
    fn rerun_on_failure_restarts_only_failures() {
        // A new VM starts (its status shows no strategy yet).
        assert!(created(&World::new(vm(RunStrategy::RerunOnFailure), None).plan()).is_some());

        let mut seen = vm(RunStrategy::RerunOnFailure);
        seen.status = Some(VirtualMachineStatus {
            run_strategy: Some(RunStrategy::RerunOnFailure),
            ..Default::default()
        });
        // Failed: deleted and a start queued.
        let failed = ran(vmi(VirtualMachineInstancePhase::Failed, "u1"));
        let mut world = World::new(seen.clone(), Some(failed));
        let actions = world.step();
        assert!(deletes(&actions));
        assert_eq!(requests_of(&actions), vec!["Start"]);
        world.vmi = None;
        let actions = world.step();
        assert!(created(&actions).is_some());

        // Succeeded: deleted, not restarted.
        let succeeded = ran(vmi(VirtualMachineInstancePhase::Succeeded, "u1"));
        let mut world = World::new(seen, Some(succeeded));
        let actions = world.step();
        assert!(deletes(&actions));
        assert_eq!(requests_of(&actions), Vec::<String>::new());
        world.vmi = None;
        let actions = world.step();
        assert!(created(&actions).is_none());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);
    }

    #[test]
    fn once_never_restarts() {
        assert!(created(&World::new(vm(RunStrategy::Once), None).plan()).is_some());
        for phase in [
            VirtualMachineInstancePhase::Succeeded,
            VirtualMachineInstancePhase::Failed,
        ] {
            let done = ran(vmi(phase, "u1"));
            let actions = World::new(vm(RunStrategy::Once), Some(done)).plan();
            assert!(!deletes(&actions) && created(&actions).is_none());
            assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Stopped);
            assert!(actions.contains(&VmAction::RemoveVmiFinalizer { name: "vm1".into() }));
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let max = MAX_CRASH_LOOP_BACKOFF;
        for seed in [0, 1, 7, 12345, u64::MAX] {
            let d = |n| start_backoff(n, max, seed).as_secs();
            assert!((10..=15).contains(&d(1)), "{}", d(1));
            assert!((40..=60).contains(&d(2)));
            assert!((90..=135).contains(&d(3)));
            assert!((250..=300).contains(&d(5)));
            assert_eq!(d(10), 300);
            assert_eq!(d(i64::MAX), 300);
        }
        assert_eq!(start_backoff(0, max, 0).as_secs(), 10);
    }

    #[test]
    fn crash_loop_backs_off_and_resets() {
        let mut world = World::new(
            vm(RunStrategy::Always),
            Some(never_ran(vmi(VirtualMachineInstancePhase::Failed, "u1"))),
        );
        let actions = world.step();
        assert!(deletes(&actions));
        let record = start_failure(world.vm.status.as_ref()).expect("a failure is recorded");
        assert_eq!(record.consecutive_fail_count, 1);
        assert_eq!(record.last_failed_vmi_uid.as_deref(), Some("u1"));
        let retry = record.retry_after_timestamp.unwrap().0.as_second() - NOW;
        assert!((10..=15).contains(&retry), "{retry}");
        assert_eq!(
            printable(&actions),
            VirtualMachinePrintableStatus::CrashLoopBackOff
        );
        // Seen again while it goes away: counted once.
        let actions = world.step();
        assert!(
            planned_status(&actions).is_none()
                || start_failure(world.vm.status.as_ref())
                    .unwrap()
                    .consecutive_fail_count
                    == 1
        );

        // Gone: no start before the retry time; requeued for it.
        world.vmi = None;
        let actions = world.step();
        assert!(created(&actions).is_none());
        assert!(actions.contains(&VmAction::RequeueAfter(Duration::from_secs(retry as u64))));
        assert_eq!(
            printable(&actions),
            VirtualMachinePrintableStatus::CrashLoopBackOff
        );

        // After it: started.
        world.now = NOW + retry;
        let actions = world.step();
        assert!(created(&actions).is_some());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);

        // Fails again: the count grows.
        world.vmi = Some(never_ran(vmi(VirtualMachineInstancePhase::Failed, "u2")));
        world.step();
        let record = start_failure(world.vm.status.as_ref()).unwrap();
        assert_eq!(record.consecutive_fail_count, 2);
        let retry2 = record.retry_after_timestamp.clone().unwrap().0.as_second() - world.now;
        assert!((40..=60).contains(&retry2), "{retry2}");

        // One that reaches Running clears the record.
        world.vmi = Some(vmi(VirtualMachineInstancePhase::Running, "u3"));
        world.step();
        assert_eq!(start_failure(world.vm.status.as_ref()), None);

        // Switching to Manual clears it too.
        let mut manual = world.vm.clone();
        manual.spec.run_strategy = Some(RunStrategy::Manual);
        set_start_failure(manual.status.as_mut().unwrap(), Some(record));
        let actions = World::new(manual, None).plan();
        assert_eq!(start_failure(planned_status(&actions).as_ref()), None);
    }

    #[test]
    fn instance_without_timestamps_is_judged_by_its_age() {
        let mut quick = vmi(VirtualMachineInstancePhase::Failed, "u1");
        quick.metadata.creation_timestamp = Some(at(NOW - 10));
        assert!(!ever_ran(&quick, &at(NOW)));
        quick.metadata.creation_timestamp = Some(at(NOW - 600));
        assert!(ever_ran(&quick, &at(NOW)));
    }

    #[test]
    fn vm_deletion_deletes_the_instance_then_releases_the_vm() {
        let mut deleting = vm(RunStrategy::Always);
        deleting.metadata.deletion_timestamp = Some(at(NOW));
        let live = vmi(VirtualMachineInstancePhase::Running, "u1");
        let actions = World::new(deleting.clone(), Some(live)).plan();
        assert!(deletes(&actions));
        assert!(!actions.contains(&VmAction::RemoveVmFinalizer));
        assert!(created(&actions).is_none());
        assert_eq!(
            printable(&actions),
            VirtualMachinePrintableStatus::Terminating
        );

        let actions = World::new(deleting.clone(), None).plan();
        assert!(created(&actions).is_none());
        assert_eq!(actions.last(), Some(&VmAction::RemoveVmFinalizer));
        // No DataVolume is created for a VM being deleted.
        deleting.spec.data_volume_templates = Some(vec![dv_template("disk")]);
        let actions = World::new(deleting, None).plan();
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, VmAction::CreateDataVolume(_)))
        );
    }

    fn dv_template(name: &str) -> DataVolumeTemplateSpec {
        DataVolumeTemplateSpec {
            metadata: Some(ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([("tier".into(), "gold".into())])),
                ..Default::default()
            }),
            spec: DataVolumeSpec::default(),
            ..Default::default()
        }
    }

    fn vm_with_disk(strategy: RunStrategy) -> VirtualMachine {
        let mut vm = vm(strategy);
        vm.spec.data_volume_templates = Some(vec![dv_template("disk")]);
        vm.spec
            .template
            .as_mut()
            .unwrap()
            .spec
            .as_mut()
            .unwrap()
            .volumes = Some(vec![Volume {
            name: "root".into(),
            data_volume: Some(DataVolumeVolumeSource {
                name: "disk".into(),
                hotpluggable: None,
            }),
            ..Default::default()
        }]);
        vm
    }

    fn dv(phase: DataVolumePhase, progress: Option<&str>) -> DataVolume {
        let mut dv =
            data_volume_for(&vm_with_disk(RunStrategy::Always), &dv_template("disk")).unwrap();
        dv.status = Some(DataVolumeStatus {
            phase: Some(phase),
            progress: progress.map(str::to_string),
            ..Default::default()
        });
        dv
    }

    #[test]
    fn data_volumes_are_created_even_for_a_halted_vm() {
        let actions = World::new(vm_with_disk(RunStrategy::Halted), None).plan();
        let dv = actions
            .iter()
            .find_map(|a| match a {
                VmAction::CreateDataVolume(dv) => Some(dv.as_ref()),
                _ => None,
            })
            .expect("the DataVolume is created");
        assert_eq!(dv.metadata.name.as_deref(), Some("disk"));
        assert_eq!(dv.metadata.namespace.as_deref(), Some("ns"));
        let labels = dv.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[keys::CREATED_BY_LABEL], "vm-uid");
        assert_eq!(labels["tier"], "gold");
        assert_eq!(
            dv.metadata.annotations.as_ref().unwrap()[keys::ALLOW_CLAIM_ADOPTION_ANNOTATION],
            "true"
        );
        let owner = &dv.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            ("vm-uid", Some(true))
        );
        assert_eq!(
            events(&actions),
            vec![reasons::SUCCESSFUL_DATA_VOLUME_CREATE]
        );
        assert!(created(&actions).is_none());

        // Deferred creation: a halted VM creates none.
        let mut deferred = vm_with_disk(RunStrategy::Halted);
        deferred.metadata.annotations = Some(BTreeMap::from([(
            IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION.into(),
            "false".into(),
        )]));
        let actions = World::new(deferred, None).plan();
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, VmAction::CreateDataVolume(_)))
        );
    }

    #[test]
    fn the_instance_waits_for_its_data_volumes() {
        // Not created yet: created now, the VM provisions.
        let mut world = World::new(vm_with_disk(RunStrategy::Always), None);
        let actions = world.step();
        assert!(created(&actions).is_none());
        assert_eq!(
            printable(&actions),
            VirtualMachinePrintableStatus::Provisioning
        );

        // Importing: still waiting, and the condition says on what.
        world.dvs.insert(
            "disk".into(),
            dv(DataVolumePhase::ImportInProgress, Some("45.10%")),
        );
        let actions = world.step();
        assert!(created(&actions).is_none());
        assert_eq!(
            printable(&actions),
            VirtualMachinePrintableStatus::Provisioning
        );
        let c = find_condition(&actions, condition_types::DATA_VOLUMES_READY).unwrap();
        assert_eq!(c.status, ConditionStatus::False);
        assert_eq!(
            c.message.as_deref(),
            Some("Waiting for DataVolume disk (ImportInProgress, 45.10%)")
        );
        assert!(actions.contains(&VmAction::RequeueAfter(VOLUME_RECHECK)));

        // Done: started.
        world.dvs.insert(
            "disk".into(),
            dv(DataVolumePhase::Succeeded, Some("100.0%")),
        );
        let actions = world.step();
        assert!(created(&actions).is_some());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
        let c = find_condition(&actions, condition_types::DATA_VOLUMES_READY).unwrap();
        assert_eq!(c.status, ConditionStatus::True);

        // Waiting for its first consumer (the launcher pod): started too, not provisioning.
        let mut world = World::new(vm_with_disk(RunStrategy::Always), None);
        world.dvs.insert(
            "disk".into(),
            dv(DataVolumePhase::WaitForFirstConsumer, None),
        );
        let actions = world.step();
        assert!(created(&actions).is_some());
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Starting);
    }

    #[test]
    fn a_failed_data_volume_is_reported_once() {
        let mut world = World::new(vm_with_disk(RunStrategy::Always), None);
        world
            .dvs
            .insert("disk".into(), dv(DataVolumePhase::Failed, None));
        let actions = world.step();
        assert!(created(&actions).is_none());
        assert_eq!(events(&actions), vec![reasons::FAILED_DATA_VOLUME_IMPORT]);
        assert_eq!(
            printable(&actions),
            VirtualMachinePrintableStatus::DataVolumeError
        );
        let actions = world.step();
        assert!(events(&actions).is_empty());

        // A worker stopped on an error is an error too.
        let mut stuck = dv(DataVolumePhase::ImportInProgress, None);
        stuck.status.as_mut().unwrap().conditions = Some(vec![DataVolumeCondition {
            type_: DataVolumeConditionType::Running,
            status: ConditionStatus::False,
            last_transition_time: None,
            last_heartbeat_time: None,
            reason: Some("Error".into()),
            message: Some("boom".into()),
        }]);
        assert!(dv_error(&stuck).unwrap().contains("boom"));
    }

    #[test]
    fn unbound_claims_wait_for_binding() {
        let mut vm = vm(RunStrategy::Always);
        vm.spec
            .template
            .as_mut()
            .unwrap()
            .spec
            .as_mut()
            .unwrap()
            .volumes = Some(vec![Volume {
            name: "data".into(),
            persistent_volume_claim: Some(api::kubevirt::vmi::PersistentVolumeClaimVolumeSource {
                claim_name: "claim".into(),
                read_only: None,
                hotpluggable: None,
            }),
            ..Default::default()
        }]);
        let mut world = World::new(vm, Some(vmi(VirtualMachineInstancePhase::Pending, "u1")));
        let mut pvc = PersistentVolumeClaim {
            status: Some(PersistentVolumeClaimStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        world.claims.insert("claim".into(), pvc.clone());
        assert_eq!(
            printable(&world.plan()),
            VirtualMachinePrintableStatus::WaitingForVolumeBinding
        );
        pvc.status.as_mut().unwrap().phase = Some("Bound".into());
        world.claims.insert("claim".into(), pvc);
        assert_eq!(
            printable(&world.plan()),
            VirtualMachinePrintableStatus::Starting
        );
    }

    #[test]
    fn conditions_are_mirrored_from_the_instance() {
        let mut live = vmi(VirtualMachineInstancePhase::Running, "u1");
        live.status.as_mut().unwrap().conditions = Some(vec![
            condition(condition_types::READY, ConditionStatus::True, ""),
            condition(
                condition_types::PAUSED,
                ConditionStatus::True,
                "PausedByUser",
            ),
            condition(condition_types::AGENT_CONNECTED, ConditionStatus::True, ""),
        ]);
        let mut world = World::new(vm(RunStrategy::Always), Some(live.clone()));
        let actions = world.step();
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Paused);
        let status = planned_status(&actions).unwrap();
        assert_eq!(status.ready, Some(true));
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.desired_generation, Some(3));
        for t in [
            condition_types::READY,
            condition_types::PAUSED,
            condition_types::AGENT_CONNECTED,
        ] {
            assert_eq!(
                find_condition(&actions, t).unwrap().status,
                ConditionStatus::True,
                "{t}"
            );
        }
        // Unpaused: the mirrored condition goes away with the VMI's.
        live.status.as_mut().unwrap().conditions = Some(vec![condition(
            condition_types::READY,
            ConditionStatus::True,
            "",
        )]);
        world.vmi = Some(live);
        let actions = world.step();
        assert_eq!(printable(&actions), VirtualMachinePrintableStatus::Running);
        assert!(find_condition(&actions, condition_types::PAUSED).is_none());
    }

    #[test]
    fn a_stable_world_writes_nothing() {
        for (strategy, vmi) in [
            (RunStrategy::Halted, None),
            (RunStrategy::Manual, None),
            (
                RunStrategy::Always,
                Some(vmi(VirtualMachineInstancePhase::Running, "u1")),
            ),
            (
                RunStrategy::Once,
                Some(ran(vmi(VirtualMachineInstancePhase::Succeeded, "u1"))),
            ),
        ] {
            let mut world = World::new(vm(strategy), vmi);
            world.step();
            world.now += 30;
            let again = world.step();
            assert!(planned_status(&again).is_none(), "{strategy:?}: {again:?}");
        }
    }

    #[test]
    fn bad_input_is_reported_not_panicked_on() {
        let mut no_template = vm(RunStrategy::Always);
        no_template.spec.template = None;
        let actions = World::new(no_template.clone(), None).plan();
        assert!(created(&actions).is_none());
        let failure = find_condition(&actions, condition_types::FAILURE).unwrap();
        assert_eq!(failure.status, ConditionStatus::True);
        assert!(failure.message.unwrap().contains("spec.template"));

        no_template.spec.template = Some(VirtualMachineInstanceTemplateSpec::default());
        let actions = World::new(no_template, None).plan();
        let failure = find_condition(&actions, condition_types::FAILURE).unwrap();
        assert!(failure.message.unwrap().contains("spec.template.spec"));

        let mut nameless = vm(RunStrategy::Always);
        nameless.spec.data_volume_templates = Some(vec![DataVolumeTemplateSpec::default()]);
        let actions = World::new(nameless, None).plan();
        assert!(created(&actions).is_none());
        let failure = find_condition(&actions, condition_types::FAILURE).unwrap();
        assert!(
            failure
                .message
                .unwrap()
                .contains("spec.dataVolumeTemplates[0].metadata.name")
        );

        // An instance of another owner is not touched.
        let mut foreign = vmi(VirtualMachineInstancePhase::Running, "u1");
        foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "someone-else".into();
        let actions = World::new(vm(RunStrategy::Halted), Some(foreign)).plan();
        assert!(!deletes(&actions) && created(&actions).is_none());
        assert!(find_condition(&actions, condition_types::FAILURE).is_some());

        // A minimal VM (no namespace, uid, status) plans without panicking.
        let bare = VirtualMachine::new("x", VirtualMachineSpec::default());
        let _ = World::new(bare, None).plan();
    }

    #[test]
    fn unschedulable_and_errors_from_the_instance() {
        let mut pending = vmi(VirtualMachineInstancePhase::Scheduling, "u1");
        pending.status.as_mut().unwrap().conditions = Some(vec![condition(
            "PodScheduled",
            ConditionStatus::False,
            "Unschedulable",
        )]);
        let actions = World::new(vm(RunStrategy::Always), Some(pending.clone())).plan();
        assert_eq!(
            printable(&actions),
            VirtualMachinePrintableStatus::ErrorUnschedulable
        );
        pending.status.as_mut().unwrap().conditions = Some(vec![condition(
            "Synchronized",
            ConditionStatus::False,
            "FailedPvcNotFound",
        )]);
        let actions = World::new(vm(RunStrategy::Always), Some(pending)).plan();
        assert_eq!(
            printable(&actions),
            VirtualMachinePrintableStatus::ErrorPvcNotFound
        );
    }

    #[test]
    fn failure_condition_keeps_its_time() {
        let status = VirtualMachineStatus::default();
        let once = with_failure(&status, reasons::FAILED_CREATE, "x".into(), &at(NOW));
        let twice = with_failure(&once, reasons::FAILED_CREATE, "x".into(), &at(NOW + 50));
        assert_eq!(once, twice);
    }
}

/// The controller against the embedded API server: the runner's calls as a cluster sees
/// them (no VMI controller runs, so instance phases are written by the test).
#[cfg(test)]
mod cluster_tests {
    use super::*;
    use api::kubevirt::{
        VirtualMachineInstanceSpec, VirtualMachineInstanceStatus, VirtualMachineSpec,
    };
    use kube::CustomResourceExt;
    use standalone::apiserver::{ApiServer, ApiServerConfig};

    const DEADLINE: Duration = Duration::from_secs(30);

    async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let start = std::time::Instant::now();
        loop {
            if let Some(found) = check().await {
                return found;
            }
            assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_vm_is_started_stopped_and_deleted() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let crds = vec![
            serde_json::to_value(VirtualMachine::crd()).unwrap(),
            serde_json::to_value(VirtualMachineInstance::crd()).unwrap(),
            serde_json::to_value(DataVolume::crd()).unwrap(),
        ];
        let server = ApiServer::start(ApiServerConfig {
            data_dir: dir.path().join("data"),
            listen: "127.0.0.1:0".parse().unwrap(),
            crds,
            admission: vec![],
            virtual_creates: Default::default(),
            create_admission: Vec::new(),
        })
        .await
        .expect("the API server starts");
        let kubeconfig = kube::config::Kubeconfig::read_from(&server.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = Client::try_from(config).unwrap();
        let controller = tokio::spawn(run(
            client.clone(),
            Arc::new(crate::config::ControllerConfig::default()),
        ));

        let vms = Api::<VirtualMachine>::namespaced(client.clone(), "default");
        let vmis = Api::<VirtualMachineInstance>::namespaced(client.clone(), "default");
        let vm = VirtualMachine::new(
            "vm1",
            VirtualMachineSpec {
                run_strategy: Some(RunStrategy::Always),
                template: Some(VirtualMachineInstanceTemplateSpec {
                    metadata: None,
                    spec: Some(VirtualMachineInstanceSpec::default()),
                }),
                ..Default::default()
            },
        );
        vms.create(&PostParams::default(), &vm).await.unwrap();

        // Started: the instance exists, owned and held by the controller.
        let vmi = eventually("the VMI", || async { vmis.get_opt("vm1").await.unwrap() }).await;
        assert!(
            vmi.finalizers()
                .contains(&keys::VM_CONTROLLER_FINALIZER.to_string())
        );
        assert_eq!(vmi.owner_references()[0].kind, "VirtualMachine");
        eventually("Starting and the VM finalizer", || async {
            let vm = vms.get("vm1").await.unwrap();
            let status = vm.status.clone()?.printable_status?;
            (status == VirtualMachinePrintableStatus::Starting
                && vm
                    .finalizers()
                    .contains(&keys::VM_CONTROLLER_FINALIZER.to_string()))
            .then_some(())
        })
        .await;

        // Running, as the VMI controller would report it.
        let mut running = vmi.clone();
        running.status = Some(VirtualMachineInstanceStatus {
            phase: Some(VirtualMachineInstancePhase::Running),
            ..Default::default()
        });
        vmis.patch_status(
            "vm1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": running.status})),
        )
        .await
        .unwrap();
        eventually("Running", || async {
            let status = vms.get("vm1").await.unwrap().status?;
            (status.printable_status == Some(VirtualMachinePrintableStatus::Running)
                && status.created == Some(true))
            .then_some(())
        })
        .await;

        // Halted: the instance is deleted and, with no other finalizer, goes away.
        vms.patch(
            "vm1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"runStrategy": "Halted"}})),
        )
        .await
        .unwrap();
        eventually("the VMI gone", || async {
            vmis.get_opt("vm1").await.unwrap().is_none().then_some(())
        })
        .await;
        eventually("Stopped", || async {
            let status = vms.get("vm1").await.unwrap().status?;
            (status.printable_status == Some(VirtualMachinePrintableStatus::Stopped)
                && status.run_strategy == Some(RunStrategy::Halted))
            .then_some(())
        })
        .await;

        // Deleted: the finalizer is released.
        vms.delete("vm1", &DeleteParams::default()).await.unwrap();
        eventually("the VM gone", || async {
            vms.get_opt("vm1").await.unwrap().is_none().then_some(())
        })
        .await;
        controller.abort();
    }
}
