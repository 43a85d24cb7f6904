//! The VirtualMachineInstanceReplicaSet controller (virt-controller's replica set part): it
//! keeps `spec.replicas` VMIs made from the replica set's template, adopting orphans its
//! selector selects and releasing those it no longer selects, and reports counts and
//! conditions in the status as KubeVirt does.
//!
//! [`plan`](mod@plan) is the whole decision, with no I/O; [`run`] reads the replica set and
//! the VMIs of its namespace, and applies what the plan returns.

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use api::kubevirt::{
    VirtualMachineInstance, VirtualMachineInstanceReplicaSet,
    VirtualMachineInstanceReplicaSetStatus,
};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{reflector::ObjectRef, watcher};
use kube::{Api, Client, ResourceExt};

pub use plan::{Observed, ReplicaSetAction, plan};

use crate::kit::{events, is_status, objects};
use crate::kubevirt::claims;

/// How often a replica set is looked at again without a change.
const RESYNC: Duration = Duration::from_secs(300);

/// Errors of the replica set controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// A patch this controller built is not a JSON patch (a bug).
    #[error("invalid JSON patch: {0}")]
    Patch(#[from] serde_json::Error),
    /// Creating or deleting an instance failed; the status says so.
    #[error("{0}")]
    Scale(String),
}

impl Error {
    /// The variant's name, for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube(_) => "Kube",
            Self::Patch(_) => "Patch",
            Self::Scale(_) => "Scale",
        }
    }
}

struct Context {
    client: Client,
    recorder: Recorder,
}

async fn event(
    ctx: &Context,
    rs: &VirtualMachineInstanceReplicaSet,
    warning: bool,
    reason: &str,
    message: &str,
) {
    events::publish(&ctx.recorder, rs, warning, reason, message).await;
}

/// Applies one action; `Err(message)` when a create or delete of an instance failed.
async fn apply(
    ctx: &Context,
    rs: &VirtualMachineInstanceReplicaSet,
    action: &ReplicaSetAction,
) -> Result<Result<(), String>, Error> {
    let namespace = rs.namespace().unwrap_or_default();
    let vmis = Api::<VirtualMachineInstance>::namespaced(ctx.client.clone(), &namespace);
    match action {
        ReplicaSetAction::Adopt { name, uid } | ReplicaSetAction::Release { name, uid } => {
            let Some(current) = vmis.get_opt(name).await? else {
                return Ok(Ok(()));
            };
            let patch = match action {
                ReplicaSetAction::Adopt { .. } => {
                    claims::adopt_patch(uid, &plan::owner_reference(rs), &current.metadata)
                }
                _ => claims::release_patch(uid, &rs.uid().unwrap_or_default(), &current.metadata),
            };
            let patch = Patch::Json::<()>(serde_json::from_value(patch)?);
            match vmis.patch(name, &PatchParams::default(), &patch).await {
                Ok(_) => Ok(Ok(())),
                // Gone or replaced meanwhile: the next reconcile sees it as it is.
                Err(e) if is_status(&e, 404) || is_status(&e, 422) => Ok(Ok(())),
                Err(e) => Err(e.into()),
            }
        }
        ReplicaSetAction::CreateVmi(vmi) => match vmis.create(&PostParams::default(), vmi).await {
            Ok(created) => {
                let message = format!(
                    "Started the virtual machine by creating the new virtual machine instance {}",
                    created.name_any()
                );
                event(ctx, rs, false, "SuccessfulCreate", &message).await;
                Ok(Ok(()))
            }
            Err(e) => {
                let message = format!("Error creating virtual machine instance: {e}");
                event(ctx, rs, true, "FailedCreate", &message).await;
                Ok(Err(e.to_string()))
            }
        },
        ReplicaSetAction::DeleteVmi { name, uid }
        | ReplicaSetAction::DeleteFinishedVmi { name, uid } => {
            let finished = matches!(action, ReplicaSetAction::DeleteFinishedVmi { .. });
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match vmis.delete(name, &params).await {
                Ok(_) => {
                    let message = if finished {
                        format!("Deleted finished virtual machine: {uid}")
                    } else {
                        format!(
                            "Stopped the virtual machine by deleting the virtual machine instance {uid}"
                        )
                    };
                    event(ctx, rs, false, "SuccessfulDelete", &message).await;
                    Ok(Ok(()))
                }
                Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(Ok(())),
                Err(e) => {
                    let what = if finished {
                        "finished virtual machine"
                    } else {
                        "virtual machine instance"
                    };
                    let message = format!("Error deleting {what} {name}: {e}");
                    event(ctx, rs, true, "FailedDelete", &message).await;
                    Ok(Err(e.to_string()))
                }
            }
        }
        ReplicaSetAction::WriteStatus(status) => {
            write_status(ctx, rs, status).await?;
            Ok(Ok(()))
        }
        ReplicaSetAction::Event { reason, message } => {
            event(ctx, rs, false, reason, message).await;
            Ok(Ok(()))
        }
    }
}

/// Replaces the status (a conflict is left to the next reconcile).
async fn write_status(
    ctx: &Context,
    rs: &VirtualMachineInstanceReplicaSet,
    status: &VirtualMachineInstanceReplicaSetStatus,
) -> Result<(), Error> {
    let api = Api::<VirtualMachineInstanceReplicaSet>::namespaced(
        ctx.client.clone(),
        &rs.namespace().unwrap_or_default(),
    );
    objects::replace_status_if_unchanged(&api, rs, status).await?;
    Ok(())
}

async fn reconcile(
    object: Arc<VirtualMachineInstanceReplicaSet>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let api = Api::<VirtualMachineInstanceReplicaSet>::namespaced(ctx.client.clone(), &namespace);
    let Some(rs) = api.get_opt(&object.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let vmis = Api::<VirtualMachineInstance>::namespaced(ctx.client.clone(), &namespace)
        .list(&ListParams::default())
        .await?
        .items;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let actions = match plan(&Observed {
        replica_set: &rs,
        vmis: &vmis,
        now: now.clone(),
    }) {
        Ok(actions) => actions,
        Err(invalid) => {
            tracing::warn!(replicaset = %rs.name_any(), %namespace, %invalid, "not acted on");
            return Ok(Action::await_change());
        }
    };
    let mut failure = None;
    for action in &actions {
        if let ReplicaSetAction::WriteStatus(_) = action
            && failure.is_some()
        {
            continue;
        }
        if let Err(message) = apply(&ctx, &rs, action).await? {
            failure.get_or_insert(message);
        }
    }
    if let Some(message) = failure {
        let active = plan::active_instances(&rs, &vmis);
        let status = plan::status(&rs, &active, Some(&message), &now);
        write_status(&ctx, &rs, &status).await?;
        return Err(Error::Scale(message));
    }
    Ok(Action::requeue(RESYNC))
}

fn error_policy(
    rs: Arc<VirtualMachineInstanceReplicaSet>,
    err: &Error,
    _ctx: Arc<Context>,
) -> Action {
    tracing::warn!(replicaset = %rs.name_any(), namespace = ?rs.namespace(), error = err.metric_label(), %err, "VirtualMachineInstanceReplicaSet reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// The replica sets an instance may concern: its controller, else every replica set of its
/// namespace (an orphan may be adopted by any whose selector selects it).
fn replica_sets_of(
    vmi: VirtualMachineInstance,
    sets: &[Arc<VirtualMachineInstanceReplicaSet>],
) -> Vec<ObjectRef<VirtualMachineInstanceReplicaSet>> {
    let namespace = vmi.namespace().unwrap_or_default();
    if let Some(owner) = claims::controller_of(&vmi.metadata) {
        if owner.kind != "VirtualMachineInstanceReplicaSet" {
            return Vec::new();
        }
        return vec![ObjectRef::new(&owner.name).within(&namespace)];
    }
    sets.iter()
        .filter(|rs| rs.namespace().as_deref() == Some(namespace.as_str()))
        .map(|rs| ObjectRef::from_obj(rs.as_ref()))
        .collect()
}

/// Runs the replica set controller until its watches end: replica sets are watched, with
/// every VMI (owned ones wake their owner, orphans every replica set of their namespace).
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
    let controller = Controller::new(
        Api::<VirtualMachineInstanceReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = controller.store();
    controller
        .watches(
            Api::<VirtualMachineInstance>::all(client),
            watcher::Config::default(),
            move |vmi| replica_sets_of(vmi, &store.state()),
        )
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::trace!(replicaset = %object.name, "reconciled"),
                Err(err) => {
                    tracing::debug!(%err, "VirtualMachineInstanceReplicaSet controller event")
                }
            }
        })
        .await;
}
