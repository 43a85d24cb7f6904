//! The source side of a host-assisted clone. The target PVC gets an upload server pod as an
//! upload does (but accepting only this clone's client certificate); once that server is
//! ready, the source pod `<target uid>-source-pod` streams the source PVC to it. The source
//! pod goes when the clone is done (unless `retainAfterCompletion` keeps one in the target's
//! own namespace); its terminal failure fails the DataVolume. The decisions are in
//! [`super::plan`]; this module holds what they need from the API and the certificates.

use api::cdi::DataVolume;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, TypedLocalObjectReference,
};
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};

use super::context::{Context, Error};
use super::cross_namespace;
use super::keys::CDI_LABEL;
use super::pod::{self, CLONE_OWNER_LABEL, CLONE_UNIQUE_ID_LABEL, clone_client_name};
use crate::kube::{delete_ignoring_missing, finalizer};

/// The common name the target's upload server requires of its client.
pub fn client_name(source: (&str, &str), target: &PersistentVolumeClaim) -> String {
    clone_client_name(
        source,
        (&target.namespace().unwrap_or_default(), &target.name_any()),
    )
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

/// The pods other than clone sources that use `claim`: a copy taken under a running VM
/// would not be consistent (CDI's `CloneSourceInUse`).
pub async fn pods_using(
    ctx: &Context,
    claim: &PersistentVolumeClaim,
) -> Result<Vec<String>, Error> {
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

/// Creates a clone source pod as planned, with a client certificate for `client_name`
/// issued now and the CA of the upload servers.
pub async fn create_source_pod(
    ctx: &Context,
    mut pod: Pod,
    client_name: &str,
) -> Result<(), Error> {
    let Some((certificates, client_ca)) = signing_authorities(ctx) else {
        return Err(Error::CloneCertificate(NO_CLIENT_CA.into()));
    };
    let issued = client_ca
        .issue_short_lived_client(client_name, CLIENT_CERT_DAYS)
        .map_err(|e| Error::CloneCertificate(e.to_string()))?;
    pod::set_clone_credentials(
        &mut pod,
        &issued.cert_pem,
        &issued.key_pem,
        certificates.server_ca.cert_pem(),
    );
    let namespace = pod.namespace().unwrap_or_default();
    tracing::info!(pod = %pod.name_any(), %namespace, "creating clone source pod");
    Api::<Pod>::namespaced(ctx.client.clone(), &namespace)
        .create(&PostParams::default(), &pod)
        .await?;
    Ok(())
}

/// The restore claim's name: the cross-namespace clone's temporary claim's, so that its
/// clean-up on deletion covers both.
pub fn restore_claim_name(dv: &DataVolume) -> String {
    cross_namespace::temporary_claim_name(dv.metadata.uid.as_deref().unwrap_or_default())
}

/// The claim a VolumeSnapshot is restored into to be copied, in the snapshot's namespace and
/// of its source claim's class and mode (CDI's host-assisted fallback of a snapshot clone),
/// shaped like the claim it was taken of.
pub fn restore_claim_for(
    dv: &DataVolume,
    snapshot: (&str, &str),
    source: &PersistentVolumeClaim,
) -> PersistentVolumeClaim {
    let name = restore_claim_name(dv);
    let spec = source.spec.clone().unwrap_or_default();
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name),
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
    if !finalizer::has(dv, cross_namespace::FINALIZER) {
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
