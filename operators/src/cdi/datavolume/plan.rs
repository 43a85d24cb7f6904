//! The decisions of one reconcile of a DataVolume as a pure function: the objects observed
//! ([`Observed`]) in, the actions that bring the cluster to the DataVolume's state
//! ([`DvAction`]) out. [`super::observe`] reads the objects, [`super::reconcile`] carries the
//! actions out; the tests beside this module call [`plan`] case by case, with no server.
//!
//! A claim is made before anything that uses it: the worker pods are owned by it and need
//! its uid. A plan that makes the claim ([`DvAction::CreatePvc`], or a hand-over that
//! completes) is therefore made again, by the executor, once the claim exists.

use std::collections::BTreeMap;
use std::time::Duration;

use api::cdi::datavolume::{DataVolumePhase, DataVolumeSource, annotations};
use api::cdi::pod_contract::{FailureReason, WorkerFailure};
use api::cdi::{DataVolume, DataVolumeStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::SignedDuration;
use kube::ResourceExt;

use super::clone_objects::{self, FINALIZER};
use super::keys::{ANN_CLONE_TYPE, CLONE_SOURCE_FINALIZER, is_bare_claim, retain_after_completion};
use super::pod::{self, CloneConnection, UPLOAD_PORT, WorkerSettings};
use super::pvc::{self, BLOCK, PvcInputs};
use super::settings::ClusterSettings;
use super::status::{self, StatusEvent, StatusInputs};
use super::transfer::Transfer;
use crate::config::ControllerConfig;
use crate::kit::finalizer;

/// How often a running transfer is looked at again (progress).
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(3);
/// How often a blocked DataVolume is looked at again.
pub const BLOCKED_INTERVAL: Duration = Duration::from_secs(10);
/// How often a cross-namespace clone looks at its temporary claim.
pub const HANDOVER_INTERVAL: Duration = Duration::from_secs(1);
/// How often a clone looks at a source that is still being filled.
pub const SOURCE_WAIT_INTERVAL: Duration = Duration::from_secs(2);
/// How often a DataVolume is looked at with nothing under way.
pub const RESYNC_INTERVAL: Duration = Duration::from_secs(60);

/// Why a DataVolume cannot go on: the reason and message of its Bound condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// CDI's reason (`NotFound`, `ErrClaimNotValid`, ...).
    pub reason: String,
    /// What the user has to know or change.
    pub message: String,
}

/// What is known of a clone's source (a PVC, or a VolumeSnapshot and the claim it was taken
/// of).
#[derive(Clone, Debug, Default)]
pub struct CloneSource {
    /// Whether the source PVC or VolumeSnapshot exists.
    pub exists: bool,
    /// The source PVC, or the claim the snapshot was taken of.
    pub claim: Option<PersistentVolumeClaim>,
    /// Whether a DataVolume fills the source PVC.
    pub filled_by_data_volume: bool,
    /// That DataVolume's phase (`None`: it has none, or is gone).
    pub filling_phase: Option<DataVolumePhase>,
    /// The pods other than clone sources that use the source PVC.
    pub users: Vec<String>,
    /// Why a clone from another namespace is refused (no valid clone token), if it is.
    pub refusal: Option<String>,
}

/// What is known of a host-assisted clone's source side.
#[derive(Clone, Debug, Default)]
pub struct HostCloneSide {
    /// The claim a VolumeSnapshot is restored into to be copied.
    pub restore_claim: Option<PersistentVolumeClaim>,
    /// The source pod streaming to the target's upload server.
    pub source_pod: Option<Pod>,
    /// The progress that pod serves, while it runs.
    pub progress: Option<String>,
}

/// Everything one reconcile decides from.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The DataVolume.
    pub dv: DataVolume,
    /// The time written on conditions that change.
    pub now: Time,
    /// The source after a `sourceRef` is followed, or why it cannot be.
    pub source: Result<DataVolumeSource, Blocked>,
    /// The DataVolume's PVC.
    pub pvc: Option<PersistentVolumeClaim>,
    /// Its StorageClass, StorageProfile and the CDIConfig.
    pub settings: ClusterSettings,
    /// A clone's source.
    pub clone_source: Option<CloneSource>,
    /// The worker pod (importer or upload server).
    pub worker: Option<Pod>,
    /// The worker's progress, while it runs.
    pub progress: Option<String>,
    /// A host-assisted clone's source side.
    pub host_clone: HostCloneSide,
    /// Whether this controller can sign clone sources' certificates.
    pub can_sign_clones: bool,
}

impl Observed {
    /// A DataVolume observed with nothing around it yet.
    pub fn new(dv: DataVolume, now: Time) -> Self {
        Self {
            dv,
            now,
            source: Ok(DataVolumeSource::default()),
            pvc: None,
            settings: ClusterSettings::default(),
            clone_source: None,
            worker: None,
            progress: None,
            host_clone: HostCloneSide::default(),
            can_sign_clones: false,
        }
    }
}

/// One step towards the DataVolume's state.
#[derive(Clone, Debug, PartialEq)]
pub enum DvAction {
    /// Delete a deleted DataVolume's clone source pods, wherever they are.
    DeleteCloneSourcePods,
    /// Delete a deleted DataVolume's temporary clone claim, release a volume handed over to
    /// its claim, and take [`FINALIZER`] off.
    ReleaseCrossNamespaceClaims,
    /// Create the DataVolume's claim.
    CreatePvc(Box<PersistentVolumeClaim>),
    /// Make the claim of a cross-namespace CSI clone through a temporary claim in the source
    /// namespace (`source`: namespace and name).
    HandOverClaim {
        source: (String, String),
        desired: Box<PersistentVolumeClaim>,
    },
    /// Give the volume handed over to the claim its reclaim policy back.
    RestoreReclaimPolicy,
    /// Create the upload server's service, and its certificate and client CA when this
    /// controller holds the CAs.
    PrepareUploadServer,
    /// Create a worker pod (importer or upload server).
    CreatePod(Box<Pod>),
    /// Create a host-assisted clone's source pod, once given a client certificate for
    /// `client_name`.
    CreateCloneSourcePod { pod: Box<Pod>, client_name: String },
    /// Delete a pod.
    DeletePod { namespace: String, name: String },
    /// Delete a service.
    DeleteService { namespace: String, name: String },
    /// Merge these annotations into the claim's.
    AnnotatePvc(BTreeMap<String, String>),
    /// Put [`FINALIZER`] on the DataVolume.
    AddFinalizer,
    /// Take [`FINALIZER`] off the DataVolume.
    RemoveFinalizer,
    /// Put [`CLONE_SOURCE_FINALIZER`] on a bare claim (its clone source pod is about to be
    /// made).
    AddClaimFinalizer,
    /// Take [`CLONE_SOURCE_FINALIZER`] off a bare claim.
    RemoveClaimFinalizer,
    /// Create the claim a VolumeSnapshot is restored into to be copied.
    CreateRestoreClaim(Box<PersistentVolumeClaim>),
    /// Delete that claim.
    DeleteRestoreClaim { namespace: String, name: String },
    /// Write the DataVolume's status.
    WriteStatus(Box<DataVolumeStatus>),
    /// Publish an event of a status change (CDI's reasons and messages).
    Publish(StatusEvent),
    /// Publish an event on the claim (a bare claim, which has no DataVolume to carry it).
    PublishOnClaim(StatusEvent),
    /// Look at the DataVolume again after this long.
    Requeue(Duration),
    /// Look at the DataVolume again only when something changes.
    AwaitChange,
}

/// The actions that bring the cluster to `obs.dv`'s state.
pub fn plan(obs: &Observed, config: &ControllerConfig) -> Vec<DvAction> {
    if obs.dv.metadata.deletion_timestamp.is_some() {
        return deletion(obs);
    }
    let source = match &obs.source {
        Ok(source) => source,
        Err(blocked) => {
            let transfer = Transfer::Unsupported(blocked.message.clone());
            return report_blocked(obs, &transfer, blocked, BLOCKED_INTERVAL);
        }
    };
    if let Some(pvc) = obs.pvc.as_ref().filter(|p| !controlled_by(p, &obs.dv)) {
        let message = format!(
            "Resource {:?} already exists and is not managed by DataVolume",
            pvc.name_any()
        );
        let blocked = blocked("ErrResourceExists", message);
        let transfer = Transfer::Unsupported(blocked.message.clone());
        return report_blocked(obs, &transfer, &blocked, BLOCKED_INTERVAL);
    }
    let transfer = transfer(obs, source);
    if let Some(actions) = clone_gate(obs, source, &transfer) {
        return actions;
    }
    let mut actions = Vec::new();
    let mut claim = obs.pvc.clone();
    if claim.is_none() {
        match claim_to_make(obs, source, &transfer) {
            Ok(Some(action)) => actions.push(action),
            Ok(None) => {}
            Err(blocked) => return report_blocked(obs, &transfer, &blocked, BLOCKED_INTERVAL),
        }
    }
    let cross_namespace = cross_namespace_csi_clone(obs, source, &transfer);
    if let (Some(target), Some(_)) = (&claim, &cross_namespace) {
        if is_bound(target) && finalizer::has(&obs.dv, FINALIZER) {
            actions.push(DvAction::RestoreReclaimPolicy);
            actions.push(DvAction::RemoveFinalizer);
        }
    }
    let mut progress = None;
    if let Some(target) = claim.as_mut() {
        progress = worker_actions(obs, config, &transfer, target, &mut actions, true);
        if let Transfer::HostClone { .. } = &transfer {
            let source_progress = host_clone_actions(obs, config, &transfer, target, &mut actions);
            progress = source_progress.or(progress);
        }
    }
    let inputs = StatusInputs {
        current: obs.dv.status.as_ref(),
        transfer: &transfer,
        pvc: claim.as_ref(),
        wait_for_first_consumer: obs.settings.wait_for_first_consumer()
            && claim.as_ref().is_some_and(|p| !is_bound(p)),
        progress: progress.as_deref(),
        blocked: None,
        now: &obs.now,
    };
    let phase = push_status(obs, &inputs, &mut actions);
    actions.push(match phase {
        Some(p) if p.is_final() => DvAction::AwaitChange,
        Some(DataVolumePhase::ImportInProgress | DataVolumePhase::CloneInProgress) => {
            DvAction::Requeue(PROGRESS_INTERVAL)
        }
        _ if matches!(transfer, Transfer::Unsupported(_)) => DvAction::Requeue(BLOCKED_INTERVAL),
        // The temporary claim of a cross-namespace clone has no owner to wake us up.
        _ if cross_namespace.is_some() && claim.is_none() => DvAction::Requeue(HANDOVER_INTERVAL),
        _ => DvAction::Requeue(RESYNC_INTERVAL),
    });
    actions
}

/// The actions for a claim no DataVolume owns, annotated for an import or an upload
/// ([`super::claim`]): its worker, created at once (it is the claim's first consumer, so a
/// WaitForFirstConsumer class binds for it), mirrored onto the claim's annotations and
/// removed once done. There is no DataVolume status to write and no claim to make.
pub fn plan_claim(obs: &Observed, config: &ControllerConfig) -> Vec<DvAction> {
    let (Ok(source), Some(claim)) = (&obs.source, &obs.pvc) else {
        return vec![DvAction::AwaitChange];
    };
    let transfer = transfer(obs, source);
    if !matches!(transfer, Transfer::Import(_) | Transfer::Upload) {
        return vec![DvAction::AwaitChange];
    }
    let mut claim = claim.clone();
    let mut actions = Vec::new();
    worker_actions(obs, config, &transfer, &mut claim, &mut actions, false);
    actions.push(if transfer_finished(obs, &claim) {
        DvAction::AwaitChange
    } else {
        DvAction::Requeue(RESYNC_INTERVAL)
    });
    actions
}

/// A deleted DataVolume: the garbage collector removes the PVC and pods through their owner
/// references; what is in another namespace (a temporary claim, a clone source pod) is
/// removed here while the finalizer holds the DataVolume.
fn deletion(obs: &Observed) -> Vec<DvAction> {
    let mut actions = Vec::new();
    if finalizer::has(&obs.dv, FINALIZER) {
        actions.push(DvAction::DeleteCloneSourcePods);
        actions.push(DvAction::ReleaseCrossNamespaceClaims);
    }
    actions.push(DvAction::AwaitChange);
    actions
}

fn blocked(reason: &str, message: String) -> Blocked {
    Blocked {
        reason: reason.to_string(),
        message,
    }
}

/// The status of a DataVolume that cannot go on, and when to look again.
fn report_blocked(
    obs: &Observed,
    transfer: &Transfer,
    blocked: &Blocked,
    requeue: Duration,
) -> Vec<DvAction> {
    let inputs = StatusInputs {
        current: obs.dv.status.as_ref(),
        transfer,
        pvc: None,
        wait_for_first_consumer: false,
        progress: None,
        blocked: Some((blocked.reason.as_str(), blocked.message.as_str())),
        now: &obs.now,
    };
    let mut actions = Vec::new();
    push_status(obs, &inputs, &mut actions);
    actions.push(DvAction::Requeue(requeue));
    actions
}

/// Adds the status write and its events when the status changes; returns the phase.
fn push_status(
    obs: &Observed,
    inputs: &StatusInputs<'_>,
    actions: &mut Vec<DvAction>,
) -> Option<DataVolumePhase> {
    let (status, event) = status::desired_status(inputs);
    let phase = status.phase;
    if obs.dv.status.as_ref() == Some(&status) {
        return phase;
    }
    // As CDI: the events once the status is written.
    let events = status::status_events(obs.dv.status.as_ref(), &status, event);
    actions.push(DvAction::WriteStatus(Box::new(status)));
    actions.extend(events.into_iter().map(DvAction::Publish));
    phase
}

fn controlled_by(pvc: &PersistentVolumeClaim, dv: &DataVolume) -> bool {
    pvc.owner_references()
        .iter()
        .any(|o| Some(&o.uid) == dv.metadata.uid.as_ref() && o.controller == Some(true))
}

/// Whether a claim is bound to a volume.
pub fn is_bound(pvc: &PersistentVolumeClaim) -> bool {
    pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// A clone's source as the DataVolume names it: namespace, name, and whether it is a
/// VolumeSnapshot.
pub fn clone_reference(source: &DataVolumeSource) -> Option<(String, String, bool)> {
    match Transfer::from_source(source) {
        Transfer::CsiClone {
            namespace,
            name,
            snapshot,
        } => Some((namespace, name, snapshot)),
        _ => None,
    }
}

/// What fills the PVC: as the source says, except that a clone a CSI clone cannot make (a
/// source of another class or mode), one that was started as a copy, or one into a bare
/// claim (CDI's clone controller only copies), is host-assisted.
pub fn transfer(obs: &Observed, source: &DataVolumeSource) -> Transfer {
    let transfer = Transfer::from_source(source);
    let (Some((namespace, name, snapshot)), Some(clone)) =
        (clone_reference(source), obs.clone_source.as_ref())
    else {
        return transfer;
    };
    if !clone.exists && obs.pvc.is_none() {
        return transfer;
    }
    // A host-assisted copy, once started, stays one whatever becomes of its source.
    let copying = obs.pvc.as_ref().is_some_and(|p| {
        p.annotations()
            .get(ANN_CLONE_TYPE)
            .is_some_and(|t| t == "copy")
    });
    let host = copying
        || is_bare_claim(&obs.dv)
        || clone
            .claim
            .as_ref()
            .is_some_and(|claim| !csi_clone_possible(&obs.dv, claim, &obs.settings));
    if host {
        Transfer::HostClone {
            namespace,
            name,
            snapshot,
        }
    } else {
        transfer
    }
}

fn csi_clone_possible(
    dv: &DataVolume,
    source_pvc: &PersistentVolumeClaim,
    settings: &ClusterSettings,
) -> bool {
    let class = settings.class.as_ref().map(|c| c.name_any());
    let profile = settings.profile.as_ref().and_then(|p| p.status.as_ref());
    let mode = pvc::desired_volume_mode(dv, profile);
    pvc::csi_clone_possible(source_pvc, class.as_deref(), &mode)
}

/// The name of the worker pod of a transfer into `pvc`, when it has one.
pub fn worker_pod_name(transfer: &Transfer, pvc: &str) -> Option<String> {
    match transfer {
        Transfer::Import(_) => Some(pod::importer_pod_name(pvc)),
        Transfer::Upload | Transfer::HostClone { .. } => Some(pod::upload_pod_name(pvc)),
        Transfer::CsiClone { .. } | Transfer::Unsupported(_) => None,
    }
}

/// What keeps a clone from starting before its claim is made: a source still being filled,
/// a source that does not exist, a host-assisted copy that cannot run yet, a clone from
/// another namespace without permission there.
fn clone_gate(
    obs: &Observed,
    source: &DataVolumeSource,
    transfer: &Transfer,
) -> Option<Vec<DvAction>> {
    let (src_ns, src_name, snapshot) = clone_reference(source)?;
    let clone = obs.clone_source.as_ref()?;
    if obs.pvc.is_some() {
        return None;
    }
    let what = if snapshot { "VolumeSnapshot" } else { "PVC" };
    if let Some(message) = unpopulated(clone, snapshot) {
        let blocked = blocked("CloneSourceNotPopulated", message);
        return Some(report_blocked(
            obs,
            transfer,
            &blocked,
            SOURCE_WAIT_INTERVAL,
        ));
    }
    if !clone.exists {
        let blocked = blocked(
            "NotFound",
            format!("Source {what} {src_ns}/{src_name} not found"),
        );
        return Some(report_blocked(obs, transfer, &blocked, BLOCKED_INTERVAL));
    }
    if matches!(transfer, Transfer::HostClone { .. }) {
        if let Some(blocked) = host_clone_not_ready(obs, clone, snapshot) {
            return Some(report_blocked(
                obs,
                transfer,
                &blocked,
                SOURCE_WAIT_INTERVAL,
            ));
        }
    }
    let across = Some(&src_ns) != obs.dv.metadata.namespace.as_ref();
    match &clone.refusal {
        Some(message) if across => {
            let blocked = blocked("CloneValidationFailed", message.clone());
            Some(report_blocked(obs, transfer, &blocked, BLOCKED_INTERVAL))
        }
        _ => None,
    }
}

/// Why a clone source PVC is not ready to be copied: its DataVolume has not succeeded yet (a
/// copy now would take a half-written image). A claim no DataVolume fills is ready as it is.
pub(super) fn unpopulated(clone: &CloneSource, snapshot: bool) -> Option<String> {
    let claim = clone.claim.as_ref().filter(|_| !snapshot)?;
    if !clone.filled_by_data_volume || clone.filling_phase == Some(DataVolumePhase::Succeeded) {
        return None;
    }
    Some(format!(
        "source PVC {}/{} is not populated yet: its DataVolume is {}",
        claim.namespace().unwrap_or_default(),
        claim.name_any(),
        clone.filling_phase.map_or("Pending", |p| p.as_str())
    ))
}

/// Why a host-assisted clone cannot start yet: no CA to sign its source's certificate, or
/// its source PVC in use by another pod (a snapshot is restored into a claim of its own).
fn host_clone_not_ready(obs: &Observed, clone: &CloneSource, snapshot: bool) -> Option<Blocked> {
    if !obs.can_sign_clones {
        return Some(blocked(
            "CloneWithoutCertificates",
            clone_objects::NO_CLIENT_CA.to_string(),
        ));
    }
    let source = clone.claim.as_ref().filter(|_| !snapshot)?;
    if clone.users.is_empty() {
        return None;
    }
    Some(blocked(
        "CloneSourceInUse",
        format!(
            "source PVC {}/{} is in use by pod {}: the copy waits until it is not",
            source.namespace().unwrap_or_default(),
            source.name_any(),
            clone.users.join(", ")
        ),
    ))
}

/// The source of a CSI clone from another namespace, which goes through a temporary claim.
fn cross_namespace_csi_clone(
    obs: &Observed,
    source: &DataVolumeSource,
    transfer: &Transfer,
) -> Option<(String, String)> {
    let (src_ns, src_name, _) = clone_reference(source)?;
    let across = Some(&src_ns) != obs.dv.metadata.namespace.as_ref();
    (across && matches!(transfer, Transfer::CsiClone { .. })).then_some((src_ns, src_name))
}

/// The action that makes the DataVolume's claim, unless it is final or cannot be filled; or
/// why the claim it asks for cannot be made (the user has to change the spec).
fn claim_to_make(
    obs: &Observed,
    source: &DataVolumeSource,
    transfer: &Transfer,
) -> Result<Option<DvAction>, Blocked> {
    let final_phase = obs.dv.status.as_ref().and_then(|s| s.phase);
    if final_phase.is_some_and(|p| p.is_final()) || matches!(transfer, Transfer::Unsupported(_)) {
        return Ok(None);
    }
    let class_name = obs.settings.class.as_ref().map(|c| c.name_any());
    let inputs = PvcInputs {
        transfer,
        storage_class: class_name.as_deref(),
        profile: obs
            .settings
            .profile
            .as_ref()
            .and_then(|p| p.status.as_ref()),
        filesystem_overhead: obs.settings.overhead(),
        clone_source: obs.clone_source.as_ref().and_then(|c| c.claim.as_ref()),
        preallocation: obs.settings.preallocation(&obs.dv),
        wait_for_first_consumer: obs.settings.wait_for_first_consumer(),
    };
    let desired = pvc::desired_pvc(&obs.dv, &inputs)
        .map_err(|err| blocked("ErrClaimNotValid", err.to_string()))?;
    Ok(Some(
        match cross_namespace_csi_clone(obs, source, transfer) {
            Some(source) => DvAction::HandOverClaim {
                source,
                desired: Box::new(desired),
            },
            None => DvAction::CreatePvc(Box::new(desired)),
        },
    ))
}

/// The settings of the worker pods of `claim`.
fn worker_settings<'a>(
    obs: &'a Observed,
    config: &'a ControllerConfig,
    claim: &PersistentVolumeClaim,
    insecure_tls: bool,
) -> WorkerSettings<'a> {
    let block = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) == Some(BLOCK);
    WorkerSettings {
        config,
        filesystem_overhead: if block { 0.0 } else { obs.settings.overhead() },
        preallocation: obs.settings.preallocation(&obs.dv),
        insecure_tls,
        placement: &obs.settings.workload,
        resources: obs.settings.pod_resources(),
    }
}

/// Whether the transfer into `claim` has ended: the DataVolume's phase is final, or the
/// worker succeeded or failed for good.
pub(super) fn transfer_finished(obs: &Observed, claim: &PersistentVolumeClaim) -> bool {
    let final_phase = obs.dv.status.as_ref().and_then(|s| s.phase);
    final_phase.is_some_and(|p| p.is_final())
        || claim
            .annotations()
            .get(annotations::POD_PHASE)
            .is_some_and(|p| p == "Succeeded")
        || pod::recorded_terminal_failure(claim).is_some()
}

/// Adds `changes` to `claim`'s annotations as the patch will, and the patch to `actions`.
pub(super) fn annotate(
    claim: &mut PersistentVolumeClaim,
    changes: BTreeMap<String, String>,
    actions: &mut Vec<DvAction>,
) {
    if changes.is_empty() {
        return;
    }
    claim.annotations_mut().extend(changes.clone());
    actions.push(DvAction::AnnotatePvc(changes));
}

/// The worker pod of an import, upload or host-assisted clone: created when missing (after
/// a consumer bound the claim, when `honor_wffc` and its class waits for one), mirrored onto
/// the claim, deleted once done. Returns the progress to report.
pub(super) fn worker_actions(
    obs: &Observed,
    config: &ControllerConfig,
    transfer: &Transfer,
    claim: &mut PersistentVolumeClaim,
    actions: &mut Vec<DvAction>,
    honor_wffc: bool,
) -> Option<String> {
    let pod_name = worker_pod_name(transfer, &claim.name_any())?;
    let namespace = claim.namespace().unwrap_or_default();
    let is_upload = !matches!(transfer, Transfer::Import(_));
    let done = transfer_finished(obs, claim);
    let wffc = honor_wffc && obs.settings.wait_for_first_consumer() && !is_bound(claim);
    let Some(worker) = &obs.worker else {
        if done || wffc {
            return None;
        }
        let desired = desired_worker(obs, config, transfer, claim);
        if is_upload {
            actions.push(DvAction::PrepareUploadServer);
        }
        actions.push(DvAction::CreatePod(Box::new(desired)));
        let mut changes = BTreeMap::from([(annotations::POD_PHASE.into(), "Pending".into())]);
        if !is_upload {
            changes.insert(annotations::IMPORT_POD.into(), pod_name);
        }
        annotate(claim, changes, actions);
        return None;
    };
    let delete = |actions: &mut Vec<DvAction>, service: bool| {
        actions.push(DvAction::DeletePod {
            namespace: namespace.clone(),
            name: pod_name.clone(),
        });
        if service {
            actions.push(DvAction::DeleteService {
                namespace: namespace.clone(),
                name: pod_name.clone(),
            });
        }
    };
    if matches!(transfer, Transfer::HostClone { .. })
        && pod::recorded_terminal_failure(claim).is_some()
    {
        // The clone source failed for good: the upload server waits for nothing.
        delete(actions, true);
        return None;
    }
    let from_pod = pod::pvc_annotations_from_pod(worker, claim.annotations());
    let changed = from_pod
        .into_iter()
        .filter(|(k, v)| claim.annotations().get(k) != Some(v))
        .collect();
    annotate(claim, changed, actions);
    let phase = pod::phase(worker);
    let terminal = pod::terminal_failure(worker).is_some();
    if terminal || (phase == "Succeeded" && !retain_after_completion(&obs.dv, Some(claim))) {
        delete(actions, is_upload);
        return None;
    }
    (phase == "Running" && !is_upload)
        .then(|| obs.progress.clone())
        .flatten()
}

/// The worker pod a transfer into `claim` needs.
fn desired_worker(
    obs: &Observed,
    config: &ControllerConfig,
    transfer: &Transfer,
    claim: &PersistentVolumeClaim,
) -> Pod {
    match transfer {
        Transfer::Import(source) => {
            let insecure =
                source.insecure_skip_verify || obs.settings.insecure(source.endpoint.as_deref());
            let settings = worker_settings(obs, config, claim, insecure);
            pod::importer_pod(&obs.dv, claim, source, &settings)
        }
        Transfer::HostClone {
            namespace, name, ..
        } => {
            let settings = worker_settings(obs, config, claim, false);
            let client = clone_objects::client_name((namespace, name), claim);
            pod::upload_pod(&obs.dv, claim, &settings, &client)
        }
        _ => {
            let settings = worker_settings(obs, config, claim, false);
            pod::upload_pod(&obs.dv, claim, &settings, &config.upload_client_name)
        }
    }
}

/// What became of a host-assisted clone's source pod.
enum SourceState<'a> {
    /// Not created yet, or gone.
    Absent,
    /// Created and not running yet, or between restarts.
    Waiting(&'a Pod),
    /// Streaming: its progress is served by this pod.
    Running(&'a Pod),
    /// Failed in a way no retry fixes.
    Failed(WorkerFailure),
}

/// The source side of a host-assisted clone: its restore claim (for a snapshot), its source
/// pod, the source's state on the target `claim`, the clean-up once finished. Returns the
/// progress the running source pod serves.
pub(super) fn host_clone_actions(
    obs: &Observed,
    config: &ControllerConfig,
    transfer: &Transfer,
    claim: &mut PersistentVolumeClaim,
    actions: &mut Vec<DvAction>,
) -> Option<String> {
    let Transfer::HostClone {
        namespace: src_ns,
        name: src_name,
        snapshot,
    } = transfer
    else {
        return None;
    };
    let clone = obs.clone_source.clone().unwrap_or_default();
    let finished = transfer_finished(obs, claim);
    let restored = match (&obs.host_clone.restore_claim, clone.claim.as_ref()) {
        _ if !*snapshot || finished => None,
        (Some(existing), _) => Some(existing.clone()),
        (None, None) => None,
        (None, Some(snapshot_source)) => {
            let desired =
                clone_objects::restore_claim_for(&obs.dv, (src_ns, src_name), snapshot_source);
            push_once(actions, DvAction::AddFinalizer);
            actions.push(DvAction::CreateRestoreClaim(Box::new(desired.clone())));
            Some(desired)
        }
    };
    let pod_source = if *snapshot {
        restored.as_ref()
    } else {
        clone.claim.as_ref()
    };
    let state = if !finished && pod_source.is_none() && !clone.exists {
        let what = if *snapshot { "VolumeSnapshot" } else { "PVC" };
        SourceState::Failed(WorkerFailure::new(
            FailureReason::SourceDeleted,
            format!("Source {what} {src_ns}/{src_name} {}", pod::SOURCE_DELETED),
        ))
    } else {
        source_pod_actions(
            obs,
            config,
            (src_ns, src_name),
            claim,
            pod_source,
            finished,
            actions,
        )
    };
    let mut progress = None;
    match state {
        SourceState::Running(source_pod) => {
            let changes = pod::source_annotations(source_pod, claim.annotations());
            annotate(claim, changes, actions);
            progress = obs.host_clone.progress.clone();
        }
        SourceState::Waiting(source_pod) => {
            let changes = pod::source_annotations(source_pod, claim.annotations());
            annotate(claim, changes, actions);
        }
        SourceState::Failed(failure) => {
            annotate(claim, pod::failure_annotations(&failure), actions);
        }
        SourceState::Absent => {}
    }
    if finished {
        if let Some(restore) = obs.host_clone.restore_claim.as_ref().filter(|_| *snapshot) {
            actions.push(DvAction::DeleteRestoreClaim {
                namespace: restore.namespace().unwrap_or_default(),
                name: restore.name_any(),
            });
        }
        // Its source pod and restore claim are gone: nothing is left to clean up.
        if finalizer::has(&obs.dv, FINALIZER) {
            push_once(actions, DvAction::RemoveFinalizer);
        }
        if finalizer::has(&*claim, CLONE_SOURCE_FINALIZER) {
            push_once(actions, DvAction::RemoveClaimFinalizer);
        }
    }
    progress
}

fn push_once(actions: &mut Vec<DvAction>, action: DvAction) {
    if !actions.contains(&action) {
        actions.push(action);
    }
}

/// Brings the source pod to the state the target asks for: created once the target's upload
/// server is ready, deleted when the clone is finished or the pod failed for good.
fn source_pod_actions<'a>(
    obs: &'a Observed,
    config: &ControllerConfig,
    source: (&str, &str),
    target: &PersistentVolumeClaim,
    source_claim: Option<&PersistentVolumeClaim>,
    finished: bool,
    actions: &mut Vec<DvAction>,
) -> SourceState<'a> {
    let namespace = source.0.to_string();
    let name = pod::clone_source_pod_name(target.metadata.uid.as_deref().unwrap_or_default());
    let across = Some(source.0) != target.namespace().as_deref();
    let existing = obs.host_clone.source_pod.as_ref();
    if finished {
        // One in another namespace is never kept: nothing would ever remove it.
        let retain = !across && retain_after_completion(&obs.dv, Some(target));
        if existing.is_some() && !retain {
            actions.push(DvAction::DeletePod { namespace, name });
        }
        return SourceState::Absent;
    }
    let Some(existing) = existing else {
        let server = obs.worker.as_ref().filter(|p| pod::is_ready(p));
        if let (Some(source_claim), Some(server)) = (source_claim, server) {
            if is_bare_claim(&obs.dv) {
                // As CDI's clone controller: the claim holds its source pod, wherever it is.
                push_once(actions, DvAction::AddClaimFinalizer);
            } else if across {
                // Nothing in the target namespace can own a pod in the source namespace.
                push_once(actions, DvAction::AddFinalizer);
            }
            let connection = connection(config, target, server);
            let settings = worker_settings(obs, config, target, false);
            let pod = pod::clone_source_pod(&obs.dv, target, source_claim, &connection, &settings);
            actions.push(DvAction::CreateCloneSourcePod {
                pod: Box::new(pod),
                client_name: clone_objects::client_name(source, target),
            });
        }
        return SourceState::Absent;
    };
    if let Some(failure) = pod::worker_failure(existing) {
        actions.push(DvAction::DeletePod { namespace, name });
        return SourceState::Failed(failure);
    }
    if calls_a_former_server(config, target, obs.worker.as_ref(), existing) {
        // The upload server came back at another address (its node restarted): this pod
        // would keep calling the old one. A new one is made with the new address.
        actions.push(DvAction::DeletePod { namespace, name });
        return SourceState::Waiting(existing);
    }
    if streamed_to_a_lost_server(obs.worker.as_ref(), existing, &obs.now) {
        // The upload server was restarted before it could report the stream this pod sent
        // it: it waits for one that never comes. A new source pod sends it again.
        actions.push(DvAction::DeletePod { namespace, name });
        return SourceState::Waiting(existing);
    }
    if pod::phase(existing) == "Running" {
        SourceState::Running(existing)
    } else {
        SourceState::Waiting(existing)
    }
}

/// Whether the source pod was told an upload server address that is no longer the server's
/// (only where there is no cluster DNS: elsewhere it calls the Service, which follows the pod).
fn calls_a_former_server(
    config: &ControllerConfig,
    target: &PersistentVolumeClaim,
    server: Option<&Pod>,
    source_pod: &Pod,
) -> bool {
    let Some(server) = server.filter(|p| pod::is_ready(p)) else {
        return false;
    };
    let told = pod::told_upload_server_address(source_pod);
    let current = connection(config, target, server).server_address;
    told.is_some() && current.is_some() && told != current
}

/// How long an upload server may still run after its source pod finished streaming to it
/// before the stream counts as lost. It answers only once the volume is complete and exits
/// right after, so this is only reached when it was restarted meanwhile (and its start time,
/// in whole seconds, could not tell).
pub const LOST_STREAM_GRACE: SignedDuration = SignedDuration::from_secs(20);

/// Whether the source pod finished its stream (the server answered: the volume was complete)
/// and the upload server is running again, waiting, instead of finishing: its node restarted
/// between its answer and its exit, and the restarted server knows nothing of the stream.
/// Told by the server's start after the source finished, or by the server still running
/// [`LOST_STREAM_GRACE`] after it.
fn streamed_to_a_lost_server(server: Option<&Pod>, source_pod: &Pod, now: &Time) -> bool {
    let Some(server) = server.filter(|p| pod::is_ready(p)) else {
        return false;
    };
    let first_state = |p: &Pod| {
        p.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .state
            .clone()
    };
    let Some(finished) = first_state(source_pod)
        .and_then(|s| s.terminated)
        .filter(|t| t.exit_code == 0)
        .and_then(|t| t.finished_at)
    else {
        return false;
    };
    let restarted_since = first_state(server)
        .and_then(|s| s.running)
        .and_then(|r| r.started_at)
        .is_some_and(|started| started.0 > finished.0);
    let overdue = finished
        .0
        .checked_add(LOST_STREAM_GRACE)
        .is_ok_and(|deadline| now.0 >= deadline);
    restarted_since || overdue
}

/// How the source pod reaches the target's upload server `server`; the credentials are
/// issued when the pod is created.
fn connection(
    config: &ControllerConfig,
    target: &PersistentVolumeClaim,
    server: &Pod,
) -> CloneConnection {
    let target_namespace = target.namespace().unwrap_or_default();
    // Through the Service where there is cluster DNS (an upload pod recreated elsewhere is
    // still found); at the pod's own address where there is not.
    let server_address = server
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_ref())
        .filter(|_| config.no_cluster_dns)
        .map(|ip| format!("{ip}:{UPLOAD_PORT}"));
    CloneConnection {
        upload_url: format!(
            "https://{}.{target_namespace}.svc/v1beta1/upload",
            pod::upload_pod_name(&target.name_any())
        ),
        server_address,
        client_cert_pem: String::new(),
        client_key_pem: String::new(),
        server_ca_pem: String::new(),
    }
}

#[cfg(test)]
mod tests;
