//! One reconcile of a DataVolume: observe ([`super::observe`]), decide ([`super::plan`]),
//! and carry the actions out, one API call each. A plan that makes the DataVolume's claim
//! is made again once the claim exists, as its worker pods need its uid.

use std::sync::Arc;

use api::cdi::DataVolume;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::clone_objects::FINALIZER;
use super::context::{Context, Error};
use super::cross_namespace;
use super::host_clone;
use super::keys::CLONE_SOURCE_FINALIZER;
use super::observe::observe;
use super::plan::{self, DvAction, Observed};
use super::upload;
use crate::kit::{delete_ignoring_missing, finalizer, patch_annotations, patch_status, publish};

/// How many times a reconcile plans: once, and once more after making the claim.
const ROUNDS: usize = 2;

/// What carrying out a plan came to.
pub(super) enum Outcome {
    /// The plan ran to its end: look again as it says.
    Done(Action),
    /// The claim was made: plan again with it.
    ClaimMade,
}

/// Reconciles one DataVolume.
pub async fn reconcile(dv: Arc<DataVolume>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut observed = observe(&dv, &ctx).await?;
    for _ in 0..ROUNDS {
        let actions = plan::plan(&observed, &ctx.config);
        if let Outcome::Done(action) = execute(&ctx, &mut observed, actions).await? {
            return Ok(action);
        }
    }
    Ok(Action::requeue(plan::HANDOVER_INTERVAL))
}

/// Carries `actions` out in order, keeping `observed` up to date with what they return.
pub(super) async fn execute(
    ctx: &Context,
    observed: &mut Observed,
    actions: Vec<DvAction>,
) -> Result<Outcome, Error> {
    let mut next = Action::await_change();
    for action in actions {
        match action {
            DvAction::Requeue(after) => next = Action::requeue(after),
            DvAction::AwaitChange => next = Action::await_change(),
            DvAction::CreatePvc(desired) => {
                observed.pvc = Some(create_pvc(ctx, &observed.dv, *desired).await?);
                return Ok(Outcome::ClaimMade);
            }
            DvAction::HandOverClaim { source, desired } => {
                let source = (source.0.as_str(), source.1.as_str());
                let made = cross_namespace::hand_over(ctx, &observed.dv, source, *desired).await?;
                if made.is_some() {
                    observed.pvc = made;
                    return Ok(Outcome::ClaimMade);
                }
            }
            action => apply(ctx, observed, action).await?,
        }
    }
    Ok(Outcome::Done(next))
}

async fn create_pvc(
    ctx: &Context,
    dv: &DataVolume,
    desired: PersistentVolumeClaim,
) -> Result<PersistentVolumeClaim, Error> {
    let namespace = dv.namespace().unwrap_or_default();
    tracing::info!(datavolume = %dv.name_any(), %namespace, "creating PVC");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    Ok(pvcs.create(&PostParams::default(), &desired).await?)
}

/// Carries out one action that does not make the claim.
async fn apply(ctx: &Context, observed: &mut Observed, action: DvAction) -> Result<(), Error> {
    let dv = &observed.dv.clone();
    let name = dv.name_any();
    let namespace = dv.namespace().unwrap_or_default();
    let client = ctx.client.clone();
    let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &namespace);
    match action {
        DvAction::DeleteCloneSourcePods => host_clone::clean_up(ctx, dv).await?,
        DvAction::ReleaseCrossNamespaceClaims => cross_namespace::clean_up(ctx, dv).await?,
        DvAction::RestoreReclaimPolicy => {
            if let Some(claim) = &observed.pvc {
                cross_namespace::restore_reclaim_policy(ctx, claim).await?;
            }
        }
        DvAction::PrepareUploadServer => {
            if let Some(claim) = &observed.pvc {
                upload::ensure_upload_server_prerequisites(ctx, dv, claim, &namespace).await?;
            }
        }
        DvAction::CreatePod(pod) => {
            let pods: Api<Pod> = Api::namespaced(client, &pod.namespace().unwrap_or_default());
            tracing::info!(datavolume = %name, pod = %pod.name_any(), "creating worker pod");
            pods.create(&PostParams::default(), &pod).await?;
        }
        DvAction::CreateCloneSourcePod { pod, client_name } => {
            host_clone::create_source_pod(ctx, *pod, &client_name).await?;
        }
        DvAction::DeletePod {
            namespace,
            name: pod,
        } => {
            tracing::info!(datavolume = %name, %pod, %namespace, "deleting finished pod");
            delete_ignoring_missing(&Api::<Pod>::namespaced(client, &namespace), &pod).await?;
        }
        DvAction::DeleteService { namespace, name } => {
            let services = Api::<Service>::namespaced(client, &namespace);
            delete_ignoring_missing(&services, &name).await?;
        }
        DvAction::AnnotatePvc(changes) => {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client, &namespace);
            observed.pvc = Some(patch_annotations(&pvcs, &name, &changes).await?);
        }
        DvAction::AddFinalizer => {
            if let Some(patched) = finalizer::set(&dvs, dv, FINALIZER, true).await? {
                observed.dv = patched;
            }
        }
        DvAction::RemoveFinalizer => finalizer::remove_from_latest(&dvs, dv, FINALIZER).await?,
        DvAction::AddClaimFinalizer => {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client, &namespace);
            if let Some(claim) = &observed.pvc {
                if let Some(patched) =
                    finalizer::set(&pvcs, claim, CLONE_SOURCE_FINALIZER, true).await?
                {
                    observed.pvc = Some(patched);
                }
            }
        }
        DvAction::RemoveClaimFinalizer => {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client, &namespace);
            if let Some(claim) = &observed.pvc {
                finalizer::remove_from_latest(&pvcs, claim, CLONE_SOURCE_FINALIZER).await?;
            }
        }
        DvAction::CreateRestoreClaim(claim) => {
            let claim_namespace = claim.namespace().unwrap_or_default();
            tracing::info!(claim = %claim.name_any(), namespace = %claim_namespace, "restoring the snapshot to copy it");
            Api::<PersistentVolumeClaim>::namespaced(client, &claim_namespace)
                .create(&PostParams::default(), &claim)
                .await?;
        }
        DvAction::DeleteRestoreClaim { namespace, name } => {
            let claims = Api::<PersistentVolumeClaim>::namespaced(client, &namespace);
            delete_ignoring_missing(&claims, &name).await?;
        }
        DvAction::WriteStatus(status) => {
            patch_status(&dvs, &name, &status).await?;
            tracing::debug!(datavolume = %name, phase = ?status.phase, "status written");
        }
        DvAction::Publish(event) => {
            publish(
                &ctx.recorder,
                dv,
                event.warning,
                &event.reason,
                &event.message,
            )
            .await;
        }
        DvAction::PublishOnClaim(event) => {
            if let Some(claim) = &observed.pvc {
                publish(
                    &ctx.recorder,
                    claim,
                    event.warning,
                    &event.reason,
                    &event.message,
                )
                .await;
            }
        }
        DvAction::CreatePvc(_)
        | DvAction::HandOverClaim { .. }
        | DvAction::Requeue(_)
        | DvAction::AwaitChange => {}
    }
    Ok(())
}
