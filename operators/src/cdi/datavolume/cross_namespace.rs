//! A CSI clone into another namespace. A claim's `dataSource` must be in its own namespace,
//! so, as CDI does, the clone is made by a temporary claim in the source namespace and its
//! volume is then handed to the target claim: the PersistentVolume's `claimRef` is pointed at
//! the target (reclaim policy Retain while no claim holds it), the temporary claim deleted,
//! and the target claim created bound to that volume by name. Once the target is bound the
//! volume gets its reclaim policy back.
//!
//! Nothing in the target namespace can own the temporary claim, so the DataVolume carries
//! [`FINALIZER`] from the temporary claim's creation until the target is bound: deleting the
//! DataVolume in between ends in [`clean_up`], which deletes the temporary claim and releases
//! a volume already handed to a target claim that will now never be created.
//!
//! Only a DataVolume whose clone token (put on by the admission that checked its creator's
//! permission in the source namespace) names this source and this DataVolume is cloned.

use api::cdi::DataVolume;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Secret};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use uploadproxy::UploadTokenValidator;
use uploadproxy::token::CLONE_TOKEN_ANNOTATION;

use super::clone_objects::{FINALIZER, temporary_claim_name};
use super::context::{Context, Error};
use super::keys::is_bare_claim;
use crate::config::{CLONE_TOKEN_PUBLIC_KEY, CLONE_TOKEN_SECRET};
use crate::kit::{delete_ignoring_missing, finalizer};

/// PersistentVolume annotation: the reclaim policy to restore once the target is bound.
pub const ANN_HANDOVER_RECLAIM_POLICY: &str = "cdi.kubevirt.io/storage.clone.reclaimPolicy";

/// The validator of clone tokens: configured, or from the signing key's Secret.
async fn validator(ctx: &Context) -> Result<Option<UploadTokenValidator>, Error> {
    if let Some(validator) = &ctx.config.clone_tokens {
        return Ok(Some(validator.clone()));
    }
    let Some(namespace) = &ctx.config.cdi_namespace else {
        return Ok(None);
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let pem = secrets
        .get_opt(CLONE_TOKEN_SECRET)
        .await?
        .and_then(|secret| {
            let key = secret.data?.remove(CLONE_TOKEN_PUBLIC_KEY)?;
            String::from_utf8(key.0).ok()
        });
    Ok(pem.and_then(|pem| UploadTokenValidator::from_public_key_pem(&pem).ok()))
}

/// Why the DataVolume may not clone across namespaces, if it may not.
pub async fn refusal(
    ctx: &Context,
    dv: &DataVolume,
    source: (&str, &str),
) -> Result<Option<String>, Error> {
    let target = (dv.namespace().unwrap_or_default(), dv.name_any());
    let Some(validator) = validator(ctx).await? else {
        return Ok(Some(format!(
            "cross-namespace clone needs clone tokens, and this controller has no key to check them (Secret {CLONE_TOKEN_SECRET}, kept by `ferrovirt webhook`)"
        )));
    };
    let Some(token) = dv.annotations().get(CLONE_TOKEN_ANNOTATION) else {
        return Ok(Some(format!(
            "cross-namespace clone from {}/{} has no clone token (annotation {CLONE_TOKEN_ANNOTATION}, set when the creator's permission was checked)",
            source.0, source.1
        )));
    };
    // A bare claim's token is good for its lifetime only: its request is not fixed in an
    // immutable spec as a DataVolume's is.
    let checked = if is_bare_claim(dv) {
        validator.validate_unexpired_clone(token, source, (&target.0, &target.1))
    } else {
        validator.validate_clone(token, source, (&target.0, &target.1))
    };
    Ok(checked.err().map(|err| {
        format!(
            "cross-namespace clone from {}/{}: {err}",
            source.0, source.1
        )
    }))
}

/// Moves the clone along; returns the target claim once it exists (`desired` with the volume
/// named), `None` while the temporary claim is still being provisioned.
pub async fn hand_over(
    ctx: &Context,
    dv: &DataVolume,
    source: (&str, &str),
    mut desired: PersistentVolumeClaim,
) -> Result<Option<PersistentVolumeClaim>, Error> {
    let target_ns = dv.namespace().unwrap_or_default();
    let target_name = dv.name_any();
    // Before anything the target namespace cannot own exists.
    let dvs: Api<DataVolume> = Api::namespaced(ctx.client.clone(), &target_ns);
    finalizer::set(&dvs, dv, FINALIZER, true).await?;
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let handed = volumes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|pv| {
            pv.spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .is_some_and(|r| {
                    r.namespace.as_deref() == Some(&target_ns)
                        && r.name.as_deref() == Some(&target_name)
                })
        });
    let volume_name = match handed {
        Some(pv) => pv.name_any(),
        None => match take_from_temporary_claim(ctx, dv, source, &desired).await? {
            Some(name) => name,
            None => return Ok(None),
        },
    };
    let spec = desired.spec.get_or_insert_with(Default::default);
    spec.volume_name = Some(volume_name);
    spec.data_source = None;
    spec.data_source_ref = None;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &target_ns);
    tracing::info!(datavolume = %target_name, namespace = %target_ns, "creating the clone's claim on the handed-over volume");
    Ok(Some(claims.create(&PostParams::default(), &desired).await?))
}

/// Creates the temporary claim, or, once it is bound, points its volume at the target and
/// deletes it; returns the volume's name then.
async fn take_from_temporary_claim(
    ctx: &Context,
    dv: &DataVolume,
    source: (&str, &str),
    desired: &PersistentVolumeClaim,
) -> Result<Option<String>, Error> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), source.0);
    let name = temporary_claim_name(dv.metadata.uid.as_deref().unwrap_or_default());
    let Some(temporary) = claims.get_opt(&name).await? else {
        let mut claim = desired.clone();
        claim.metadata.name = Some(name.clone());
        claim.metadata.namespace = Some(source.0.to_string());
        // An owner in another namespace is not allowed; the claim lives only until bound.
        claim.metadata.owner_references = None;
        tracing::info!(datavolume = %dv.name_any(), claim = %name, namespace = %source.0, "creating the temporary clone claim");
        claims.create(&PostParams::default(), &claim).await?;
        return Ok(None);
    };
    let bound = temporary.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let Some(volume_name) = temporary.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
        return Ok(None);
    };
    if !bound {
        return Ok(None);
    }
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let volume = volumes.get(&volume_name).await?;
    let policy = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.clone())
        .unwrap_or_else(|| "Delete".into());
    // Retain first, then the new claimRef, in one write: deleting the temporary claim must
    // never release (and so delete) the volume.
    let handover = json!({
        "metadata": {"annotations": {ANN_HANDOVER_RECLAIM_POLICY: policy}},
        "spec": {
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {
                "namespace": dv.namespace(), "name": dv.name_any(),
                "uid": null, "resourceVersion": null,
            },
        },
    });
    volumes
        .patch(
            &volume_name,
            &PatchParams::default(),
            &Patch::Merge(&handover),
        )
        .await?;
    delete_ignoring_missing(&claims, &name).await?;
    Ok(Some(volume_name))
}

/// Gives a handed-over volume its reclaim policy back once the target claim holds it; the
/// DataVolume's [`FINALIZER`] can come off then: nothing is left to clean up.
pub async fn restore_reclaim_policy(
    ctx: &Context,
    target: &PersistentVolumeClaim,
) -> Result<(), Error> {
    let bound = target.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let Some(volume_name) = target.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
        return Ok(());
    };
    if !bound {
        return Ok(());
    }
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let volume = volumes.get_opt(&volume_name).await?;
    if let Some(policy) = volume
        .as_ref()
        .and_then(|v| v.annotations().get(ANN_HANDOVER_RECLAIM_POLICY))
    {
        let restore = json!({
            "metadata": {"annotations": {ANN_HANDOVER_RECLAIM_POLICY: null}},
            "spec": {"persistentVolumeReclaimPolicy": policy},
        });
        volumes
            .patch(
                &volume_name,
                &PatchParams::default(),
                &Patch::Merge(&restore),
            )
            .await?;
    }
    Ok(())
}

/// What a deleted DataVolume leaves of its clone: its temporary claim is deleted, wherever it
/// is, and a volume handed to its target claim gets its reclaim policy back and is released
/// (a claimRef without uid reserves it for a claim that will never come); then the
/// [`FINALIZER`] comes off. Called while the DataVolume has a deletionTimestamp.
pub async fn clean_up(ctx: &Context, dv: &DataVolume) -> Result<(), Error> {
    if !finalizer::has(dv, FINALIZER) {
        return Ok(());
    }
    let uid = dv.metadata.uid.clone().unwrap_or_default();
    let temporary = temporary_claim_name(&uid);
    // The source namespace, found by the claim's unique name: a DataSource source may have
    // moved since the claim was made.
    let all_claims: Api<PersistentVolumeClaim> = Api::all(ctx.client.clone());
    let found = all_claims
        .list(&ListParams::default().fields(&format!("metadata.name={temporary}")))
        .await?;
    for claim in found.items {
        let Some(namespace) = claim.namespace() else {
            continue;
        };
        tracing::info!(datavolume = %dv.name_any(), claim = %temporary, %namespace, "deleting the temporary clone claim of a deleted DataVolume");
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
        delete_ignoring_missing(&claims, &temporary).await?;
    }
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    for volume in volumes.list(&ListParams::default()).await?.items {
        let Some(release) = release_patch(&volume, dv) else {
            continue;
        };
        tracing::info!(datavolume = %dv.name_any(), volume = %volume.name_any(), "releasing the volume handed to a deleted DataVolume's claim");
        volumes
            .patch(
                &volume.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&release),
            )
            .await?;
    }
    let dvs: Api<DataVolume> =
        Api::namespaced(ctx.client.clone(), &dv.namespace().unwrap_or_default());
    Ok(finalizer::remove_from_latest(&dvs, dv, FINALIZER).await?)
}

/// The merge patch that releases `volume` when it was handed over to the target claim of
/// `dv`: its reclaim policy back and, if no claim holds it yet, a claimRef uid that no claim
/// has (the DataVolume's own), so the provisioner reclaims it as released.
fn release_patch(volume: &PersistentVolume, dv: &DataVolume) -> Option<Value> {
    let policy = volume.annotations().get(ANN_HANDOVER_RECLAIM_POLICY)?;
    let claim_ref = volume.spec.as_ref()?.claim_ref.as_ref()?;
    let target = claim_ref.namespace == dv.namespace()
        && claim_ref.name.as_deref() == Some(dv.name_any().as_str());
    if !target {
        return None;
    }
    let mut patch = json!({
        "metadata": {"annotations": {ANN_HANDOVER_RECLAIM_POLICY: null}},
        "spec": {"persistentVolumeReclaimPolicy": policy},
    });
    if claim_ref.uid.is_none() {
        patch["spec"]["claimRef"] = json!({"uid": dv.metadata.uid});
    }
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::DataVolumeSpec;

    fn dv() -> DataVolume {
        let mut dv = DataVolume::new("copy", DataVolumeSpec::default());
        dv.metadata.namespace = Some("team".into());
        dv.metadata.uid = Some("dv-uid".into());
        dv.metadata.resource_version = Some("7".into());
        dv
    }

    fn handed_volume(claim_uid: Option<&str>) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {
                "name": "pvc-1",
                "annotations": {ANN_HANDOVER_RECLAIM_POLICY: "Delete"},
            },
            "spec": {
                "persistentVolumeReclaimPolicy": "Retain",
                "claimRef": {"namespace": "team", "name": "copy", "uid": claim_uid},
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_volume_handed_to_a_claim_never_created_is_released_with_its_policy() {
        let patch = release_patch(&handed_volume(None), &dv()).expect("released");
        assert_eq!(patch["spec"]["persistentVolumeReclaimPolicy"], "Delete");
        assert_eq!(patch["spec"]["claimRef"]["uid"], "dv-uid");
        assert!(patch["metadata"]["annotations"][ANN_HANDOVER_RECLAIM_POLICY].is_null());
    }

    #[test]
    fn a_volume_its_target_claim_holds_only_gets_its_policy_back() {
        let patch = release_patch(&handed_volume(Some("claim-uid")), &dv()).expect("restored");
        assert_eq!(patch["spec"]["persistentVolumeReclaimPolicy"], "Delete");
        assert!(patch["spec"].get("claimRef").is_none(), "{patch}");
    }

    #[test]
    fn other_volumes_are_left_alone() {
        let mut elsewhere = handed_volume(None);
        let claim_ref = elsewhere.spec.as_mut().unwrap().claim_ref.as_mut().unwrap();
        claim_ref.namespace = Some("other".into());
        assert!(release_patch(&elsewhere, &dv()).is_none());
        let mut not_handed = handed_volume(None);
        not_handed.metadata.annotations = None;
        assert!(release_patch(&not_handed, &dv()).is_none());
    }
}
