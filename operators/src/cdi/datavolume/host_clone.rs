//! The source side of a host-assisted clone. The target PVC gets an upload server pod as an
//! upload does (but accepting only this clone's client certificate); once that server is
//! ready, the source pod `<target uid>-source-pod` streams the source PVC to it. The source
//! pod goes when the clone is done (unless `retainAfterCompletion` keeps one in the target's
//! own namespace); its terminal failure fails the DataVolume.

use std::collections::BTreeMap;

use api::cdi::DataVolume;
use api::cdi::datavolume::annotations;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, TypedLocalObjectReference,
};
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};

use super::pod::{
    self, CLONE_OWNER_LABEL, CLONE_UNIQUE_ID_LABEL, CloneConnection, UPLOAD_PORT, WorkerSettings,
    clone_client_name, clone_source_pod_name, upload_pod_name,
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
    Waiting(Box<Pod>),
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
        // One in another namespace is never kept: nothing would ever remove it.
        let retain = !across && super::retain_after_completion(target.dv, Some(target.pvc));
        if existing.is_some() && !retain {
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
        return Ok(SourceState::Absent);
    };
    if let Some(message) = pod::terminal_failure(&existing) {
        delete_ignoring_missing(&pods, &name).await?;
        return Ok(SourceState::Failed(message));
    }
    Ok(if pod::phase(&existing) == "Running" {
        SourceState::Running(Box::new(existing))
    } else {
        SourceState::Waiting(Box::new(existing))
    })
}

/// How long a clone source's client certificate is valid: its clone's time, with margin.
const CLIENT_CERT_DAYS: i64 = 2;

/// Why a host-assisted clone cannot run without the upload client CA.
pub const NO_CLIENT_CA: &str = "a host-assisted clone needs the upload client CA to sign its source pod's certificate, and this controller has none (`ferrovirt up` keeps one)";

/// The CA of the upload servers' certificates and the CA that signs clone sources' client
/// certificates, when this controller holds both.
fn signing_authorities(
    ctx: &Context,
) -> Option<(
    &crate::certs::UploadCertificates,
    &crate::certs::CertificateAuthority,
)> {
    let certificates = ctx.config.upload_certificates.as_deref()?;
    Some((certificates, certificates.client_ca.as_ref()?))
}

/// Whether this controller can run a host-assisted clone.
pub fn can_sign(ctx: &Context) -> bool {
    signing_authorities(ctx).is_some()
}

/// Why a host-assisted clone cannot start yet, if it cannot: no CA to sign its source's
/// certificate, or its source PVC (`None` for a snapshot, restored into a claim of its own)
/// in use by another pod. A reason and a message for the DataVolume.
pub async fn not_ready(
    ctx: &Context,
    source: Option<&PersistentVolumeClaim>,
) -> Result<Option<(&'static str, String)>, Error> {
    if !can_sign(ctx) {
        return Ok(Some(("CloneWithoutCertificates", NO_CLIENT_CA.to_string())));
    }
    let Some(source) = source else {
        return Ok(None);
    };
    let users = pods_using(ctx, source).await?;
    Ok((!users.is_empty()).then(|| {
        (
            "CloneSourceInUse",
            format!(
                "source PVC {}/{} is in use by pod {}: the copy waits until it is not",
                source.namespace().unwrap_or_default(),
                source.name_any(),
                users.join(", ")
            ),
        )
    }))
}

/// The pods other than clone sources that use `claim`: a copy taken under a running VM
/// would not be consistent (CDI's `CloneSourceInUse`).
async fn pods_using(ctx: &Context, claim: &PersistentVolumeClaim) -> Result<Vec<String>, Error> {
    let namespace = claim.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = claim.name_any();
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| !p.labels().contains_key(CLONE_UNIQUE_ID_LABEL))
        .filter(|p| !matches!(pod::phase(p).as_str(), "Succeeded" | "Failed"))
        .filter(|p| {
            p.spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == name)
                })
        })
        .map(|p| p.name_any())
        .collect())
}

/// How the source pod reaches the target's upload server, once that server is ready.
fn connection(ctx: &Context, target: &Target<'_>) -> Result<Option<CloneConnection>, Error> {
    let Some(server) = target.upload_pod.filter(|p| pod::is_ready(p)) else {
        return Ok(None);
    };
    let Some((certificates, client_ca)) = signing_authorities(ctx) else {
        return Err(Error::CloneCertificate(NO_CLIENT_CA.into()));
    };
    let issued = client_ca
        .issue_short_lived_client(&client_name(target.source, target.pvc), CLIENT_CERT_DAYS)
        .map_err(|e| Error::CloneCertificate(e.to_string()))?;
    let target_name = target.pvc.name_any();
    let target_namespace = target.pvc.namespace().unwrap_or_default();
    // Through the Service where there is cluster DNS (an upload pod recreated elsewhere is
    // still found); at the pod's own address where there is not.
    let server_address = server
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_ref())
        .filter(|_| ctx.config.no_cluster_dns)
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
/// namespace has no owner to take it along, and holds the DataVolume's finalizer).
pub async fn clean_up(ctx: &Context, dv: &DataVolume) -> Result<(), Error> {
    if !cross_namespace::has_finalizer(dv) {
        return Ok(());
    }
    let uid = dv.metadata.uid.clone().unwrap_or_default();
    let selector = format!("{CLONE_OWNER_LABEL}={uid}");
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

/// A worker's Running condition annotations and the clone source's counterparts.
pub const SOURCE_RUNNING_KEYS: [(&str, &str); 3] = [
    (
        annotations::RUNNING_CONDITION,
        annotations::SOURCE_RUNNING_CONDITION,
    ),
    (
        annotations::RUNNING_CONDITION_MESSAGE,
        annotations::SOURCE_RUNNING_CONDITION_MESSAGE,
    ),
    (
        annotations::RUNNING_CONDITION_REASON,
        annotations::SOURCE_RUNNING_CONDITION_REASON,
    ),
];

/// The target PVC's annotations of the source pod's Running condition (CDI's
/// `storage.condition.source.running*`): a source that fails and restarts says why on the
/// DataVolume, not only in its own pod.
pub fn source_annotations(
    source_pod: &Pod,
    current: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let from_pod = pod::pvc_annotations_from_pod(source_pod, &BTreeMap::new());
    SOURCE_RUNNING_KEYS
        .into_iter()
        .filter_map(|(from, to)| Some((to.to_string(), from_pod.get(from)?.clone())))
        .filter(|(k, v)| current.get(k) != Some(v))
        .collect()
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
