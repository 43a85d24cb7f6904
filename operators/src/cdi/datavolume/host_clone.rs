//! The source side of a host-assisted clone. The target PVC gets an upload server pod as an
//! upload does (but accepting only this clone's client certificate); once that server is
//! ready, the source pod `<target uid>-source-pod` streams the source PVC to it. The source
//! pod goes when the clone is done (unless `retainAfterCompletion` keeps one in the target's
//! own namespace); its terminal failure fails the DataVolume. The decisions are in
//! [`super::plan`]; this module holds what they need from the API and the certificates.

use api::cdi::DataVolume;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};

use super::clone_objects::{self, NO_CLIENT_CA};
use super::context::{Context, Error};
use super::pod::{self, CLONE_OWNER_LABEL, CLONE_UNIQUE_ID_LABEL};
use crate::kit::{delete_ignoring_missing, finalizer};

/// How long a clone source's client certificate is valid: its clone's time, with margin.
const CLIENT_CERT_DAYS: i64 = 2;

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

/// Deletes the source pod of a deleted DataVolume's clone, wherever it is (one in another
/// namespace has no owner to take it along, and holds the DataVolume's finalizer).
pub async fn clean_up(ctx: &Context, dv: &DataVolume) -> Result<(), Error> {
    if !finalizer::has(dv, clone_objects::FINALIZER) {
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
