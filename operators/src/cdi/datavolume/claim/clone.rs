//! CDI's clone controller on a claim no DataVolume owns: a claim annotated
//! `k8s.io/CloneRequest: NAMESPACE/NAME` is filled with a host-assisted copy of that claim,
//! by the machinery of a DataVolume's host-assisted clone ([`super::super::host_clone`]): an
//! upload server on the claim accepting only the clone's client certificate, then the source
//! pod `<claim uid>-source-pod` in the source's namespace streaming to it. The claim says
//! how it goes as CDI's upload and clone controllers write it (`storage.pod.phase` and the
//! running condition of the upload server, `storage.condition.source.running*` of the source
//! pod, `uploadClientName`, `storage.sourceClonePodName`) and gets `k8s.io/CloneOf: "true"`
//! and a `CloneSucceeded` event once the copy is complete. The claim carries CDI's finalizer
//! `cdi.kubevirt.io/cloneSource` while its source pod may exist, so that deleting it midway
//! removes that pod too ([`release_source`]).
//!
//! Nothing is made until the clone may go on ([`plan`]'s gate, checked again before the
//! source pod): from another namespace only with a clone token naming this source and this
//! claim (`cdi.kubevirt.io/storage.clone.token`; within a namespace none is needed, as
//! upstream); from a source that exists, is bound, is filled (its DataVolume succeeded, or
//! its own CDI annotations say so), is used by no pod, and fits the claim. What holds it back
//! is written on the claim's source running condition and published once as a warning Event,
//! with CDI's reasons (`CloneValidationFailed`, `ErrIncompatiblePVC`, `CloneSourceInUse`).

use std::collections::BTreeMap;
use std::time::Duration;

use api::cdi::datavolume::{STORAGE_RESOURCE, annotations};
use api::quantity::quantity_bytes;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::super::clone_objects;
use super::super::context::{Context, Error};
use super::super::keys::{
    ANN_CLONE_OF, ANN_CLONE_SOURCE_POD, ANN_PERMISSIVE_CLONE, ANN_RETAIN_AFTER_COMPLETION,
    ANN_UPLOAD_CLIENT_NAME, CLONE_SOURCE_FINALIZER,
};
use super::super::plan::{
    self, BLOCKED_INTERVAL, CloneSource, DvAction, Observed, PROGRESS_INTERVAL, RESYNC_INTERVAL,
    SOURCE_WAIT_INTERVAL,
};
use super::super::pod::{self, CLONE_UNIQUE_ID_LABEL};
use super::super::pvc::{self, BLOCK};
use super::super::status::StatusEvent;
use super::super::transfer::Transfer;
use super::CLONE_REQUEST;
use crate::config::ControllerConfig;
use crate::kit::{delete_ignoring_missing, finalizer};

/// The event of a completed clone (CDI's `CloneSucceededPVC` and `CloneComplete`).
pub const CLONE_SUCCEEDED: (&str, &str) = ("CloneSucceeded", "Clone Complete");
/// A clone refused for want of a valid clone token (CDI's reason).
pub const CLONE_VALIDATION_FAILED: &str = "CloneValidationFailed";
/// CDI's message of such a refusal, before what was wrong.
pub const CLONE_VALIDATION_FAILED_MESSAGE: &str =
    "The clone doesn't meet the validation requirements";
/// A source that cannot be copied into the claim (CDI's reason).
pub const INCOMPATIBLE: &str = "ErrIncompatiblePVC";
/// A source some pod uses (CDI's reason).
pub const SOURCE_IN_USE: &str = "CloneSourceInUse";
/// A source that is not filled yet.
pub const SOURCE_NOT_POPULATED: &str = "CloneSourceNotPopulated";
/// A source that does not exist.
pub const SOURCE_NOT_FOUND: &str = "NotFound";
/// No CA to sign the source pod's client certificate with.
pub const NO_CERTIFICATES: &str = "CloneWithoutCertificates";

/// Every reason a clone is held back with: a claim's source running condition with one of
/// them is cleared once the clone goes on.
const HOLD_REASONS: [&str; 6] = [
    CLONE_VALIDATION_FAILED,
    INCOMPATIBLE,
    SOURCE_IN_USE,
    SOURCE_NOT_POPULATED,
    SOURCE_NOT_FOUND,
    NO_CERTIFICATES,
];

/// The source (namespace, name) a clone request names, or why it names none: a value that is
/// not `NAMESPACE/NAME`, the claim itself, or a claim that also asks for an upload or an
/// import.
pub fn source_of(claim: &PersistentVolumeClaim, value: &str) -> Result<(String, String), String> {
    let ann = claim.annotations();
    if ann.contains_key(annotations::UPLOAD_REQUEST) {
        return Err("PVC has both clone and upload annotations".to_string());
    }
    if ann.contains_key(annotations::IMPORT_ENDPOINT)
        || ann.contains_key(annotations::IMPORT_SOURCE)
    {
        return Err("PVC has both clone and import annotations".to_string());
    }
    let Some((namespace, name)) = parse_request(value) else {
        return Err(format!(
            "error parsing clone request annotation: {CLONE_REQUEST} {value:?} is not NAMESPACE/NAME of a claim"
        ));
    };
    if Some(namespace) == claim.namespace().as_deref() && name == claim.name_any() {
        return Err(format!(
            "{CLONE_REQUEST} {value:?} names the claim itself: a claim cannot be cloned into itself"
        ));
    }
    Ok((namespace.to_string(), name.to_string()))
}

/// `NAMESPACE/NAME`, each a name Kubernetes allows (a DNS label, a DNS subdomain).
pub fn parse_request(value: &str) -> Option<(&str, &str)> {
    let (namespace, name) = value.split_once('/')?;
    let label = |s: &str| {
        let bytes = s.as_bytes();
        let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
        let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        bytes.iter().all(inner) && edge(bytes.first()) && edge(bytes.last())
    };
    let namespace_ok = namespace.len() <= 63 && label(namespace);
    let name_ok = name.len() <= 253 && name.split('.').all(label);
    (namespace_ok && name_ok).then_some((namespace, name))
}

/// What holds a clone back: CDI's reason, a message a person can act on, when to look again.
#[derive(Debug, Clone, PartialEq)]
struct Hold {
    reason: &'static str,
    message: String,
    retry: Duration,
}

/// The actions of a bare claim's clone (`obs.dv` is the claim's in-memory DataVolume, its
/// source a PVC; the transfer is always host-assisted).
pub fn plan(obs: &Observed, config: &ControllerConfig) -> Vec<DvAction> {
    let (Ok(source), Some(observed_claim)) = (&obs.source, &obs.pvc) else {
        return vec![DvAction::AwaitChange];
    };
    let transfer = plan::transfer(obs, source);
    let Transfer::HostClone {
        namespace, name, ..
    } = &transfer
    else {
        return vec![DvAction::AwaitChange];
    };
    let source = (namespace.as_str(), name.as_str());
    let mut claim = observed_claim.clone();
    let mut actions = Vec::new();
    let started = obs.host_clone.source_pod.is_some();
    if !started && !plan::transfer_finished(obs, &claim) {
        if let Some(hold) = hold(obs, &claim, source) {
            report_hold(&mut claim, &hold, &mut actions);
            if obs.worker.is_some() {
                // An upload server made before stays (as CDI's does), reported as ever.
                plan::worker_actions(obs, config, &transfer, &mut claim, &mut actions, false);
            }
            actions.push(DvAction::Requeue(hold.retry));
            return actions;
        }
        going_on(&mut claim, source, &mut actions);
    }
    plan::worker_actions(obs, config, &transfer, &mut claim, &mut actions, false);
    plan::host_clone_actions(obs, config, &transfer, &mut claim, &mut actions);
    let succeeded = claim
        .annotations()
        .get(annotations::POD_PHASE)
        .is_some_and(|p| p == "Succeeded");
    if succeeded && claim.annotations().get(ANN_CLONE_OF).map(String::as_str) != Some("true") {
        // Last, once the workers and the finalizer are gone: this ends the clone for good.
        let done = BTreeMap::from([(ANN_CLONE_OF.to_string(), "true".to_string())]);
        plan::annotate(&mut claim, done, &mut actions);
        actions.push(DvAction::PublishOnClaim(StatusEvent {
            warning: false,
            reason: CLONE_SUCCEEDED.0.to_string(),
            message: CLONE_SUCCEEDED.1.to_string(),
        }));
    }
    actions.push(if plan::transfer_finished(obs, &claim) {
        DvAction::AwaitChange
    } else if started {
        // A source pod in another namespace has no owner to wake the claim up.
        DvAction::Requeue(PROGRESS_INTERVAL)
    } else {
        DvAction::Requeue(RESYNC_INTERVAL)
    });
    actions
}

/// What the claim says of a clone that goes on: the client its upload server accepts and
/// its source pod, as CDI names them, and no longer what held it back.
fn going_on(claim: &mut PersistentVolumeClaim, source: (&str, &str), actions: &mut Vec<DvAction>) {
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let mut changes = BTreeMap::from([
        (
            ANN_UPLOAD_CLIENT_NAME.to_string(),
            clone_objects::client_name(source, claim),
        ),
        (
            ANN_CLONE_SOURCE_POD.to_string(),
            pod::clone_source_pod_name(&uid),
        ),
    ]);
    let held = claim
        .annotations()
        .get(annotations::SOURCE_RUNNING_CONDITION_REASON)
        .is_some_and(|r| HOLD_REASONS.contains(&r.as_str()));
    if held {
        for key in [
            annotations::SOURCE_RUNNING_CONDITION_REASON,
            annotations::SOURCE_RUNNING_CONDITION_MESSAGE,
        ] {
            changes.insert(key.to_string(), String::new());
        }
    }
    changes.retain(|k, v| claim.annotations().get(k) != Some(v));
    plan::annotate(claim, changes, actions);
}

/// Writes what holds the clone back on the claim's source running condition, with a warning
/// Event when that is news.
fn report_hold(claim: &mut PersistentVolumeClaim, hold: &Hold, actions: &mut Vec<DvAction>) {
    let changes: BTreeMap<String, String> = [
        (annotations::SOURCE_RUNNING_CONDITION, "false"),
        (annotations::SOURCE_RUNNING_CONDITION_REASON, hold.reason),
        (
            annotations::SOURCE_RUNNING_CONDITION_MESSAGE,
            hold.message.as_str(),
        ),
    ]
    .into_iter()
    .filter(|(k, v)| claim.annotations().get(*k).map(String::as_str) != Some(*v))
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let news = changes.contains_key(annotations::SOURCE_RUNNING_CONDITION_REASON)
        || changes.contains_key(annotations::SOURCE_RUNNING_CONDITION_MESSAGE);
    plan::annotate(claim, changes, actions);
    if news {
        actions.push(DvAction::PublishOnClaim(StatusEvent {
            warning: true,
            reason: hold.reason.to_string(),
            message: hold.message.clone(),
        }));
    }
}

/// What holds back a clone of `source` into `target` that has no source pod yet, checked in
/// the order that tells nothing of a source in another namespace to whoever may not clone it.
fn hold(obs: &Observed, target: &PersistentVolumeClaim, source: (&str, &str)) -> Option<Hold> {
    let (src_ns, src_name) = source;
    let clone = obs.clone_source.clone().unwrap_or_default();
    let held = |reason, message, retry| {
        Some(Hold {
            reason,
            message,
            retry,
        })
    };
    let across = Some(src_ns) != target.namespace().as_deref();
    if let Some(refusal) = clone.refusal.as_ref().filter(|_| across) {
        let message = format!("{CLONE_VALIDATION_FAILED_MESSAGE}: {refusal}");
        return held(CLONE_VALIDATION_FAILED, message, BLOCKED_INTERVAL);
    }
    let Some(source_claim) = clone.claim.as_ref().filter(|_| clone.exists) else {
        let message = format!("Source PVC {src_ns}/{src_name} not found");
        return held(SOURCE_NOT_FOUND, message, BLOCKED_INTERVAL);
    };
    if !obs.can_sign_clones {
        let message = clone_objects::NO_CLIENT_CA.to_string();
        return held(NO_CERTIFICATES, message, BLOCKED_INTERVAL);
    }
    if let Some(message) = incompatible(obs, source_claim, target) {
        return held(INCOMPATIBLE, message, BLOCKED_INTERVAL);
    }
    if let Some(message) = unfilled(&clone, source_claim) {
        return held(SOURCE_NOT_POPULATED, message, SOURCE_WAIT_INTERVAL);
    }
    if !clone.users.is_empty() {
        let message = clone
            .users
            .iter()
            .map(|user| format!("pod {src_ns}/{user} using PersistentVolumeClaim {src_name}"))
            .collect::<Vec<_>>()
            .join("; ");
        return held(SOURCE_IN_USE, message, SOURCE_WAIT_INTERVAL);
    }
    None
}

/// The content type of a claim as CDI reads it: `archive`, else `kubevirt`.
fn content_type(claim: &PersistentVolumeClaim) -> &'static str {
    match claim.annotations().get(annotations::CONTENT_TYPE) {
        Some(t) if t == "archive" => "archive",
        _ => "kubevirt",
    }
}

fn volume_mode(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or(pvc::FILESYSTEM)
}

/// Why `source` cannot be copied into `target` (CDI's `ValidateCanCloneSourceAndTarget*`):
/// another content type, another volume mode for an archive, or less usable space.
fn incompatible(
    obs: &Observed,
    source: &PersistentVolumeClaim,
    target: &PersistentVolumeClaim,
) -> Option<String> {
    let (source_type, target_type) = (content_type(source), content_type(target));
    if source_type != target_type {
        return Some(format!(
            "source contentType ({source_type}) and target contentType ({target_type}) do not match"
        ));
    }
    if volume_mode(source) != volume_mode(target) && source_type != "kubevirt" {
        return Some(
            "Source and target volume modes do not match, and content type is not kubevirt"
                .to_string(),
        );
    }
    if target.annotations().contains_key(ANN_PERMISSIVE_CLONE) {
        return None;
    }
    let source_class = source
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref());
    let source_space = usable_space(source, obs.settings.overhead_of(source_class));
    let target_space = usable_space(target, obs.settings.overhead());
    (source_space > target_space).then(|| {
        format!(
            "target resources requests storage size is smaller than the source ({} < {})",
            pod::requested_size(target).unwrap_or_else(|| "none".into()),
            pod::requested_size(source).unwrap_or_else(|| "none".into()),
        )
    })
}

/// The space an image may take on `claim` (none when its request cannot be read).
fn usable_space(claim: &PersistentVolumeClaim, overhead: f64) -> u128 {
    let bytes = claim
        .spec
        .as_ref()
        .and_then(|s| {
            s.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get(STORAGE_RESOURCE)
        })
        .and_then(quantity_bytes)
        .unwrap_or(0);
    if volume_mode(claim) == BLOCK {
        bytes
    } else {
        pvc::usable_space(overhead, bytes)
    }
}

/// Why the source holds nothing to copy yet: its DataVolume has not succeeded, the import,
/// upload or clone its own CDI annotations ask for has not, or it is not bound (a copy would
/// bind it empty).
fn unfilled(clone: &CloneSource, source: &PersistentVolumeClaim) -> Option<String> {
    if let Some(message) = plan::unpopulated(clone, false) {
        return Some(message);
    }
    let source_name = format!(
        "source PVC {}/{}",
        source.namespace().unwrap_or_default(),
        source.name_any()
    );
    let ann = source.annotations();
    let filled_by_annotations = !clone.filled_by_data_volume
        && [
            annotations::IMPORT_ENDPOINT,
            annotations::IMPORT_SOURCE,
            annotations::UPLOAD_REQUEST,
            CLONE_REQUEST,
        ]
        .iter()
        .any(|k| ann.contains_key(*k));
    let phase = ann.get(annotations::POD_PHASE).map(String::as_str);
    if filled_by_annotations && phase != Some("Succeeded") {
        return Some(format!(
            "{source_name} is not populated yet: its worker is {}",
            phase.unwrap_or("Pending")
        ));
    }
    if !plan::is_bound(source) {
        return Some(format!(
            "{source_name} is not bound yet: the copy waits until it is"
        ));
    }
    None
}

/// Deletes the source pod of `claim`'s clone wherever it is (kept only when the claim asks
/// for it to be retained, is not being deleted and the pod is in its own namespace), then
/// takes [`CLONE_SOURCE_FINALIZER`] off (CDI's clone controller's clean-up).
pub async fn release_source(ctx: &Context, claim: &PersistentVolumeClaim) -> Result<(), Error> {
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let selector = format!(
        "{CLONE_UNIQUE_ID_LABEL}={}",
        pod::clone_source_pod_name(&uid)
    );
    let retain = claim.metadata.deletion_timestamp.is_none()
        && claim
            .annotations()
            .get(ANN_RETAIN_AFTER_COMPLETION)
            .is_some_and(|v| v == "true");
    let all: Api<Pod> = Api::all(ctx.client.clone());
    for source_pod in all
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let namespace = source_pod.namespace().unwrap_or_default();
        if retain && Some(&namespace) == claim.namespace().as_ref() {
            continue;
        }
        tracing::info!(claim = %claim.name_any(), pod = %source_pod.name_any(), %namespace, "deleting the clone source pod");
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
        delete_ignoring_missing(&pods, &source_pod.name_any()).await?;
    }
    let claims: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    Ok(finalizer::remove_from_latest(&claims, claim, CLONE_SOURCE_FINALIZER).await?)
}

#[cfg(test)]
mod tests;
