//! CDI's annotation API on claims no DataVolume owns, as CDI's import, upload and clone
//! controllers serve it: a PVC annotated `cdi.kubevirt.io/storage.upload.target` gets an
//! upload server (what `virtctl image-upload pvc` creates and waits for), one annotated
//! `cdi.kubevirt.io/storage.import.endpoint` (with `storage.import.source`, `secretName`,
//! `certConfigMap`, `registryImportMethod` and `storage.contentType`) gets an importer, one
//! annotated `k8s.io/CloneRequest: NAMESPACE/NAME` a host-assisted copy of that claim
//! ([`clone`]). The worker's state is written back on the claim (`storage.pod.phase`,
//! `storage.pod.ready`, `storage.pod.restarts`, the running condition), and the worker goes
//! once it is done.
//!
//! Such a claim is handled as a DataVolume that lives only in memory: [`request`] reads it
//! from the annotations, and the DataVolume controller's observe, the claim's plan
//! ([`plan::plan_claim`], [`clone::plan`]) and the DataVolume's execute do the rest. The
//! in-memory DataVolume has no uid, so the workers are owned by the claim alone, as CDI's are.

pub mod clone;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::cdi::DataVolume;
use api::cdi::datavolume::annotations;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use uploadproxy::token::CLONE_TOKEN_ANNOTATION;

use super::OwnsWorkers;
use super::context::{Context, Error};
use super::keys::{ANN_CLONE_OF, CLONE_SOURCE_FINALIZER};
use super::observe::observe;
use super::plan::{self, DvAction, Observed};
use super::reconcile::{Outcome, execute};
use crate::config::ControllerConfig;
use crate::kit::{finalizer, publish};

/// CDI's annotation asking for a host-assisted clone into a bare claim (`NAMESPACE/NAME`).
pub const CLONE_REQUEST: &str = "k8s.io/CloneRequest";

/// What a claim's annotations ask of this controller.
#[derive(Debug, PartialEq)]
pub enum Request {
    /// Nothing: no CDI annotation, a DataVolume's claim, or a claim being deleted.
    None,
    /// Fill the claim as this in-memory DataVolume would.
    Fill(Box<DataVolume>),
    /// The annotations ask for what this controller cannot do; the message says why.
    Unsupported(String),
    /// A clone target that is deleted, done, or no longer asks for a clone, and still holds
    /// [`CLONE_SOURCE_FINALIZER`]: its source pod goes, then the finalizer.
    ReleaseCloneSource,
}

/// What `claim`'s annotations ask for.
pub fn request(claim: &PersistentVolumeClaim) -> Request {
    let filled_by_data_volume = claim
        .owner_references()
        .iter()
        .any(|o| o.kind == "DataVolume" && o.controller == Some(true));
    if filled_by_data_volume || claim.annotations().contains_key(annotations::POPULATED_FOR) {
        return Request::None;
    }
    let deleted = claim.metadata.deletion_timestamp.is_some();
    // As CDI's clone controller: a clone is done once `k8s.io/CloneOf` is on.
    let clone_done = claim.annotations().contains_key(ANN_CLONE_OF);
    let cloning = claim.annotations().contains_key(CLONE_REQUEST) && !clone_done;
    if finalizer::has(claim, CLONE_SOURCE_FINALIZER) && (deleted || !cloning) {
        return Request::ReleaseCloneSource;
    }
    if deleted || clone_done {
        return Request::None;
    }
    let (source, content_type) = match (source(claim), content_type(claim)) {
        (Ok(None), _) => return Request::None,
        (Err(message), _) | (_, Err(message)) => return Request::Unsupported(message),
        (Ok(Some(source)), Ok(content_type)) => (source, content_type),
    };
    // A clone's token is checked as the DataVolume's would be.
    let token: BTreeMap<&str, &String> = claim
        .annotations()
        .get(CLONE_TOKEN_ANNOTATION)
        .map(|token| (CLONE_TOKEN_ANNOTATION, token))
        .into_iter()
        .collect();
    let dv = json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {
            "name": claim.name_any(),
            "namespace": claim.namespace(),
            "annotations": token,
        },
        "spec": {"source": source, "contentType": content_type},
    });
    match serde_json::from_value(dv) {
        Ok(dv) => Request::Fill(Box::new(dv)),
        Err(err) => Request::Unsupported(format!("the claim's CDI annotations: {err}")),
    }
}

/// The DataVolume source the annotations name, if any.
fn source(claim: &PersistentVolumeClaim) -> Result<Option<Value>, String> {
    let ann = claim.annotations();
    if let Some(value) = ann.get(CLONE_REQUEST) {
        let (namespace, name) = clone::source_of(claim, value)?;
        return Ok(Some(json!({"pvc": {"namespace": namespace, "name": name}})));
    }
    if ann.contains_key(annotations::UPLOAD_REQUEST) {
        return Ok(Some(json!({"upload": {}})));
    }
    let endpoint = ann.get(annotations::IMPORT_ENDPOINT);
    let kind = ann.get(annotations::IMPORT_SOURCE).map(String::as_str);
    if endpoint.is_none() && kind.is_none() {
        return Ok(None);
    }
    let kind = kind.unwrap_or("http");
    let secret = ann.get(annotations::SECRET);
    let certs = ann.get(annotations::CERT_CONFIG_MAP);
    let url = || {
        endpoint.ok_or_else(|| {
            format!(
                "import source {kind:?} needs the endpoint annotation {}",
                annotations::IMPORT_ENDPOINT
            )
        })
    };
    Ok(Some(match kind {
        "http" => json!({"http": {"url": url()?, "secretRef": secret, "certConfigMap": certs}}),
        "s3" => json!({"s3": {"url": url()?, "secretRef": secret, "certConfigMap": certs}}),
        "registry" => json!({"registry": {
            "url": url()?,
            "secretRef": secret,
            "certConfigMap": certs,
            "pullMethod": ann.get(annotations::REGISTRY_IMPORT_METHOD),
        }}),
        "none" | "blank" => json!({"blank": {}}),
        other => {
            return Err(format!(
                "import source {other:?} ({}) is not supported on a claim without a DataVolume: use http, s3, registry or none",
                annotations::IMPORT_SOURCE
            ));
        }
    }))
}

fn content_type(claim: &PersistentVolumeClaim) -> Result<Value, String> {
    match claim
        .annotations()
        .get(annotations::CONTENT_TYPE)
        .map(String::as_str)
    {
        None | Some("") => Ok(Value::Null),
        Some(known @ ("kubevirt" | "archive")) => Ok(json!(known)),
        Some(other) => Err(format!(
            "content type {other:?} ({}) is neither kubevirt nor archive",
            annotations::CONTENT_TYPE
        )),
    }
}

fn error_policy(claim: Arc<PersistentVolumeClaim>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(claim = %claim.name_any(), namespace = ?claim.namespace(), %err, "claim reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// The actions for a bare claim: a clone's as CDI's clone controller decides them
/// ([`clone::plan`]), an import's or an upload's as [`plan::plan_claim`].
pub fn plan(obs: &Observed, config: &ControllerConfig) -> Vec<DvAction> {
    let clones = obs.dv.spec.source.as_ref().is_some_and(|s| s.pvc.is_some());
    if clones {
        clone::plan(obs, config)
    } else {
        plan::plan_claim(obs, config)
    }
}

/// Reconciles one claim.
async fn reconcile(claim: Arc<PersistentVolumeClaim>, ctx: Arc<Context>) -> Result<Action, Error> {
    let dv = match request(&claim) {
        Request::None => return Ok(Action::await_change()),
        Request::ReleaseCloneSource => {
            clone::release_source(&ctx, &claim).await?;
            return Ok(Action::await_change());
        }
        Request::Unsupported(message) => {
            publish(
                &ctx.recorder,
                claim.as_ref(),
                true,
                "ErrClaimNotValid",
                &message,
            )
            .await;
            return Ok(Action::await_change());
        }
        Request::Fill(dv) => dv,
    };
    let mut observed = observe(&dv, &ctx).await?;
    let actions = plan(&observed, &ctx.config);
    match execute(&ctx, &mut observed, actions).await? {
        Outcome::Done(action) => Ok(action),
        // A claim's plan never makes a claim.
        Outcome::ClaimMade => Ok(Action::requeue(Duration::from_secs(1))),
    }
}

/// Runs the claim controller until its watches end.
pub async fn run(client: Client, config: Arc<ControllerConfig>) {
    let ctx = Arc::new(Context::new(client.clone(), config));
    Controller::new(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns_workers(&client)
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        if let Err(err) = result {
            tracing::debug!(%err, "claim controller event");
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {
                "name": "disk",
                "namespace": "ns",
                "uid": "pvc-uid",
                "annotations": annotations.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            },
        }))
        .unwrap()
    }

    fn filled(annotations: &[(&str, &str)]) -> DataVolume {
        match request(&claim(annotations)) {
            Request::Fill(dv) => *dv,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_upload_target_is_an_upload_without_a_uid() {
        let dv = filled(&[
            (annotations::UPLOAD_REQUEST, ""),
            (annotations::CONTENT_TYPE, "archive"),
        ]);
        assert_eq!(dv.name_any(), "disk");
        assert_eq!(dv.namespace().as_deref(), Some("ns"));
        assert!(
            dv.metadata.uid.is_none(),
            "the workers are the claim's alone"
        );
        let spec = serde_json::to_value(&dv.spec).unwrap();
        assert_eq!(spec["source"], json!({"upload": {}}));
        assert_eq!(spec["contentType"], "archive");
    }

    #[test]
    fn import_annotations_name_the_source() {
        let spec = |ann: &[(&str, &str)]| serde_json::to_value(filled(ann).spec).unwrap();
        let http = spec(&[
            (annotations::IMPORT_ENDPOINT, "https://example.com/d.qcow2"),
            (annotations::SECRET, "creds"),
        ]);
        assert_eq!(http["source"]["http"]["url"], "https://example.com/d.qcow2");
        assert_eq!(http["source"]["http"]["secretRef"], "creds");
        let registry = spec(&[
            (annotations::IMPORT_SOURCE, "registry"),
            (annotations::IMPORT_ENDPOINT, "docker://r/disk:1"),
            (annotations::REGISTRY_IMPORT_METHOD, "node"),
        ]);
        assert_eq!(registry["source"]["registry"]["url"], "docker://r/disk:1");
        assert_eq!(registry["source"]["registry"]["pullMethod"], "node");
        let s3 = spec(&[
            (annotations::IMPORT_SOURCE, "s3"),
            (annotations::IMPORT_ENDPOINT, "s3://b/o"),
        ]);
        assert_eq!(s3["source"]["s3"]["url"], "s3://b/o");
        let blank = spec(&[(annotations::IMPORT_SOURCE, "none")]);
        assert_eq!(blank["source"], json!({"blank": {}}));
    }

    #[test]
    fn what_cannot_be_done_says_why() {
        let unsupported = |ann: &[(&str, &str)]| match request(&claim(ann)) {
            Request::Unsupported(message) => message,
            other => panic!("{other:?}"),
        };
        assert!(unsupported(&[(annotations::IMPORT_SOURCE, "http")]).contains("endpoint"));
        assert!(unsupported(&[(annotations::IMPORT_SOURCE, "vddk")]).contains("vddk"));
        assert!(unsupported(&[(CLONE_REQUEST, "src-disk")]).contains("src-disk"));
        let bad_type = unsupported(&[
            (annotations::UPLOAD_REQUEST, ""),
            (annotations::CONTENT_TYPE, "iso"),
        ]);
        assert!(bad_type.contains("iso"), "{bad_type}");
    }

    #[test]
    fn claims_of_data_volumes_and_plain_claims_are_left_alone() {
        assert_eq!(request(&claim(&[])), Request::None);
        let mut owned = claim(&[(annotations::UPLOAD_REQUEST, "")]);
        owned.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({
                "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                "name": "disk", "uid": "dv-uid", "controller": true,
            }))
            .unwrap(),
        ]);
        assert_eq!(request(&owned), Request::None);
        let populated = claim(&[
            (annotations::UPLOAD_REQUEST, ""),
            (annotations::POPULATED_FOR, "disk"),
        ]);
        assert_eq!(request(&populated), Request::None);
    }
}
