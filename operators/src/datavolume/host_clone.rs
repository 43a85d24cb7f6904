//! The source side of a host-assisted clone. The target PVC gets an upload server pod as an
//! upload does (but accepting only this clone's client certificate); once that server is
//! ready, the source pod `<target uid>-source-pod` streams the source PVC to it. The source
//! pod goes when the clone is done; its terminal failure fails the DataVolume.

use std::collections::BTreeMap;

use api::cdi::DataVolume;
use api::cdi::datavolume::annotations;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, TypedLocalObjectReference,
};
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};

use super::pod::{
    self, CLONE_UNIQUE_ID_LABEL, CloneConnection, UPLOAD_PORT, WorkerSettings, clone_client_name,
    clone_source_pod_name, upload_pod_name,
};
use super::reconcile::delete_ignoring_missing;
use super::{CDI_LABEL, Context, Error, cross_namespace};

/// What the target's side looks like to the source pod.
pub struct Target<'a> {
    pub dv: &'a DataVolume,
    pub pvc: &'a PersistentVolumeClaim,
    /// The clone's source as the DataVolume names it (`namespace`, `name`): its client
    /// certificate's name.
    pub source: (&'a str, &'a str),
    /// The target's upload server pod, if it exists.
    pub upload_pod: Option<&'a Pod>,
    /// The clone has finished (or failed for good): the source pod is no longer needed.
    pub finished: bool,
}

/// What became of the source pod.
pub enum SourceState {
    /// Not created yet, or gone.
    Absent,
    /// Created and not running yet, or between restarts.
    Waiting,
    /// Streaming: its progress is served by this pod.
    Running(Box<Pod>),
    /// Failed in a way no retry fixes; the message says why.
    Failed(String),
}

/// The common name the target's upload server requires of its client.
pub fn client_name(source: (&str, &str), target: &PersistentVolumeClaim) -> String {
    clone_client_name(
        source,
        (&target.namespace().unwrap_or_default(), &target.name_any()),
    )
}

/// Brings the source pod to the state the target asks for.
pub async fn drive_source(
    ctx: &Context,
    target: &Target<'_>,
    source: Option<&PersistentVolumeClaim>,
    settings: &WorkerSettings<'_>,
) -> Result<SourceState, Error> {
    let namespace = target.source.0;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let name = clone_source_pod_name(target.pvc.metadata.uid.as_deref().unwrap_or_default());
    let existing = pods.get_opt(&name).await?;
    let across = Some(namespace) != target.pvc.namespace().as_deref();
    if target.finished {
        if existing.is_some() && !super::retain_after_completion(target.dv, Some(target.pvc)) {
            tracing::info!(pod = %name, %namespace, "deleting finished clone source pod");
            delete_ignoring_missing(&pods, &name).await?;
        }
        return Ok(SourceState::Absent);
    }
    let Some(existing) = existing else {
        let (Some(source), Some(connection)) = (source, connection(ctx, target)?) else {
            return Ok(SourceState::Absent);
        };
        if across {
            // Nothing in the target namespace can own a pod in the source namespace.
            cross_namespace::add_finalizer(ctx, target.dv).await?;
        }
        let desired = pod::clone_source_pod(target.dv, target.pvc, source, &connection, settings);
        tracing::info!(pod = %name, %namespace, "creating clone source pod");
        pods.create(&PostParams::default(), &desired).await?;
        return Ok(SourceState::Waiting);
    };
    if let Some(message) = pod::terminal_failure(&existing) {
        delete_ignoring_missing(&pods, &name).await?;
        return Ok(SourceState::Failed(message));
    }
    Ok(if pod::phase(&existing) == "Running" {
        SourceState::Running(Box::new(existing))
    } else {
        SourceState::Waiting
    })
}

/// How the source pod reaches the target's upload server, once that server is ready.
fn connection(ctx: &Context, target: &Target<'_>) -> Result<Option<CloneConnection>, Error> {
    let Some(server) = target.upload_pod.filter(|p| pod::is_ready(p)) else {
        return Ok(None);
    };
    let certificates = ctx.config.upload_certificates.as_ref();
    let Some((certificates, client_ca)) =
        certificates.and_then(|c| Some((c, c.client_ca.as_ref()?)))
    else {
        return Err(Error::Certificate(
            "a host-assisted clone needs the upload client CA to sign its source's certificate, and this controller has none".into(),
        ));
    };
    let issued = client_ca
        .issue_client(&client_name(target.source, target.pvc))
        .map_err(|e| Error::Certificate(e.to_string()))?;
    let target_name = target.pvc.name_any();
    let target_namespace = target.pvc.namespace().unwrap_or_default();
    let server_address = server
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_ref())
        .map(|ip| format!("{ip}:{UPLOAD_PORT}"));
    Ok(Some(CloneConnection {
        upload_url: format!(
            "https://{}.{target_namespace}.svc/v1beta1/upload",
            upload_pod_name(&target_name)
        ),
        server_address,
        client_cert_pem: issued.cert_pem,
        client_key_pem: issued.key_pem,
        server_ca_pem: certificates.server_ca.cert_pem().to_string(),
    }))
}

/// The claim a VolumeSnapshot is restored into to be copied, in the snapshot's namespace and
/// of its source claim's class and mode (CDI's host-assisted fallback of a snapshot clone),
/// created when missing; the DataVolume then holds the cross-namespace finalizer, as nothing
/// else owns the claim. `None` while the snapshot's claim, which sizes it, is unknown.
pub async fn ensure_restore_claim(
    ctx: &Context,
    dv: &DataVolume,
    snapshot: (&str, &str),
    snapshot_source: Option<&PersistentVolumeClaim>,
) -> Result<Option<PersistentVolumeClaim>, Error> {
    let name = restore_claim_name(dv);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), snapshot.0);
    if let Some(existing) = claims.get_opt(&name).await? {
        return Ok(Some(existing));
    }
    let Some(source) = snapshot_source else {
        return Ok(None);
    };
    cross_namespace::add_finalizer(ctx, dv).await?;
    let claim = restore_claim_for(&name, snapshot, source);
    tracing::info!(claim = %name, namespace = %snapshot.0, "restoring the snapshot to copy it");
    Ok(Some(claims.create(&PostParams::default(), &claim).await?))
}

/// Deletes the restore claim of a finished clone of a snapshot in `namespace`.
pub async fn delete_restore_claim(
    ctx: &Context,
    dv: &DataVolume,
    namespace: &str,
) -> Result<(), Error> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
    delete_ignoring_missing(&claims, &restore_claim_name(dv)).await
}

/// The restore claim's name: the cross-namespace clone's temporary claim's, so that its
/// clean-up on deletion covers both.
fn restore_claim_name(dv: &DataVolume) -> String {
    cross_namespace::temporary_claim_name(dv.metadata.uid.as_deref().unwrap_or_default())
}

/// A claim named `name` restoring `snapshot`, shaped like the claim it was taken of.
fn restore_claim_for(
    name: &str,
    snapshot: (&str, &str),
    source: &PersistentVolumeClaim,
) -> PersistentVolumeClaim {
    let spec = source.spec.clone().unwrap_or_default();
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(snapshot.0.to_string()),
            labels: Some([(CDI_LABEL.0.to_string(), CDI_LABEL.1.to_string())].into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: spec.access_modes,
            volume_mode: spec.volume_mode,
            storage_class_name: spec.storage_class_name,
            resources: spec.resources,
            data_source: Some(TypedLocalObjectReference {
                api_group: Some("snapshot.storage.k8s.io".to_string()),
                kind: "VolumeSnapshot".to_string(),
                name: snapshot.1.to_string(),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// Deletes the source pod of a deleted DataVolume's clone, wherever it is (one in another
/// namespace has no owner to take it along).
pub async fn clean_up(ctx: &Context, dv: &DataVolume) -> Result<(), Error> {
    let namespace = dv.namespace().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(uid) = claims
        .get_opt(&dv.name_any())
        .await?
        .and_then(|claim| claim.metadata.uid)
    else {
        return Ok(());
    };
    let selector = format!("{CLONE_UNIQUE_ID_LABEL}={}", clone_source_pod_name(&uid));
    let all: Api<Pod> = Api::all(ctx.client.clone());
    for pod in all
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let pods: Api<Pod> =
            Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
        tracing::info!(pod = %pod.name_any(), "deleting the clone source pod of a deleted DataVolume");
        delete_ignoring_missing(&pods, &pod.name_any()).await?;
    }
    Ok(())
}

/// The PVC annotations that record the source's terminal failure, as a worker's would.
pub fn failure_annotations(message: &str) -> BTreeMap<String, String> {
    [
        (annotations::POD_PHASE, "Failed"),
        (annotations::RUNNING_CONDITION, "false"),
        (annotations::RUNNING_CONDITION_MESSAGE, message),
        (annotations::RUNNING_CONDITION_REASON, "Error"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}
