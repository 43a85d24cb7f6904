//! The VirtualMachinePool controller (virt-controller's pool part): it keeps
//! `spec.replicas` VMs named `<pool>-<index>` made from the pool's VM template, each with
//! its own DataVolumes, scales in by the pool's selection policy, and reports counts and
//! conditions in the status as KubeVirt does.
//!
//! [`plan`](mod@plan) is the whole decision, with no I/O; [`run`] reads the pool and the VMs
//! of its namespace, and applies what the plan returns.

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use api::kubevirt::VirtualMachine;
use api::pool::conditions;
use api::pool::{VirtualMachinePool, VirtualMachinePoolStatus};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{reflector::ObjectRef, watcher};
use kube::{Api, Client, ResourceExt};

pub use plan::{Observed, PoolAction, plan};

use crate::kit::{events, is_status, objects};
use crate::kubevirt::claims;

/// How often a pool is looked at again without a change.
const RESYNC: Duration = Duration::from_secs(300);

/// Errors of the pool controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// A patch this controller built is not a JSON patch (a bug).
    #[error("invalid JSON patch: {0}")]
    Patch(#[from] serde_json::Error),
    /// Creating or deleting a VM failed; the status says so.
    #[error("{1}")]
    Scale(&'static str, String),
}

impl Error {
    /// The variant's name, for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube(_) => "Kube",
            Self::Patch(_) => "Patch",
            Self::Scale(..) => "Scale",
        }
    }
}

struct Context {
    client: Client,
    recorder: Recorder,
}

async fn event(
    ctx: &Context,
    pool: &VirtualMachinePool,
    warning: bool,
    reason: &str,
    message: &str,
) {
    events::publish(&ctx.recorder, pool, warning, reason, message).await;
}

/// Applies one action; `Err((reason, message))` when a create or delete of a VM failed.
async fn apply(
    ctx: &Context,
    pool: &VirtualMachinePool,
    action: &PoolAction,
) -> Result<Result<(), (&'static str, String)>, Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let vms = Api::<VirtualMachine>::namespaced(ctx.client.clone(), &namespace);
    match action {
        PoolAction::Release { name, uid } => {
            let Some(current) = vms.get_opt(name).await? else {
                return Ok(Ok(()));
            };
            let patch =
                claims::release_patch(uid, &pool.uid().unwrap_or_default(), &current.metadata);
            let patch = Patch::Json::<()>(serde_json::from_value(patch)?);
            match vms.patch(name, &PatchParams::default(), &patch).await {
                Err(e) if !(is_status(&e, 404) || is_status(&e, 422)) => Err(e.into()),
                _ => Ok(Ok(())),
            }
        }
        PoolAction::CreateVm(vm) => match vms.create(&PostParams::default(), vm).await {
            Ok(created) => {
                let message = format!("Created VM {namespace}/{}", created.name_any());
                event(ctx, pool, false, "SuccessfulCreate", &message).await;
                Ok(Ok(()))
            }
            Err(e) => {
                event(
                    ctx,
                    pool,
                    true,
                    "FailedCreate",
                    &format!("Error creating VM: {e}"),
                )
                .await;
                Ok(Err((
                    conditions::FAILED_SCALE_OUT,
                    format!("Error during scale out: {e}"),
                )))
            }
        },
        PoolAction::DeleteVm { name, uid } => {
            let params = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Foreground),
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match vms.delete(name, &params).await {
                Ok(_) => {
                    let message = format!("Deleted VM {namespace}/{name} with uid {uid} from pool");
                    event(ctx, pool, false, "SuccessfulDelete", &message).await;
                    Ok(Ok(()))
                }
                Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(Ok(())),
                Err(e) => {
                    let message = format!("Error deleting virtual machine {namespace}/{name}: {e}");
                    event(ctx, pool, true, "FailedDelete", &message).await;
                    Ok(Err((
                        conditions::FAILED_SCALE_IN,
                        format!("Error during scale in: {e}"),
                    )))
                }
            }
        }
        PoolAction::WriteStatus(status) => {
            write_status(ctx, pool, status).await?;
            Ok(Ok(()))
        }
        PoolAction::Event { reason, message } => {
            event(ctx, pool, false, reason, message).await;
            Ok(Ok(()))
        }
    }
}

/// Replaces the status (a conflict is left to the next reconcile).
async fn write_status(
    ctx: &Context,
    pool: &VirtualMachinePool,
    status: &VirtualMachinePoolStatus,
) -> Result<(), Error> {
    let api = Api::<VirtualMachinePool>::namespaced(
        ctx.client.clone(),
        &pool.namespace().unwrap_or_default(),
    );
    objects::replace_status_if_unchanged(&api, pool, status).await?;
    Ok(())
}

/// A seed for the `Random` scale-in order.
fn shuffle_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

async fn reconcile(object: Arc<VirtualMachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let api = Api::<VirtualMachinePool>::namespaced(ctx.client.clone(), &namespace);
    let Some(pool) = api.get_opt(&object.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let vms = Api::<VirtualMachine>::namespaced(ctx.client.clone(), &namespace)
        .list(&ListParams::default())
        .await?
        .items;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let observed = Observed {
        pool: &pool,
        vms: &vms,
        now: now.clone(),
        shuffle_seed: shuffle_seed(),
    };
    let actions = match plan(&observed) {
        Ok(actions) => actions,
        Err(invalid) => {
            tracing::warn!(pool = %pool.name_any(), %namespace, %invalid, "not acted on");
            return Ok(Action::await_change());
        }
    };
    let mut failure = None;
    for action in &actions {
        if matches!(action, PoolAction::WriteStatus(_)) && failure.is_some() {
            continue;
        }
        if let Err(failed) = apply(&ctx, &pool, action).await? {
            failure.get_or_insert(failed);
        }
    }
    if let Some((reason, message)) = failure {
        let mine = plan::claim_vms(&pool, &vms, &mut Vec::new());
        let status = plan::status(&pool, &mine, Some((reason, &message)), &now);
        event(&ctx, &pool, true, reason, &message).await;
        write_status(&ctx, &pool, &status).await?;
        return Err(Error::Scale(reason, message));
    }
    Ok(Action::requeue(RESYNC))
}

fn error_policy(pool: Arc<VirtualMachinePool>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(pool = %pool.name_any(), namespace = ?pool.namespace(), error = err.metric_label(), %err, "VirtualMachinePool reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// The pool a VM belongs to, by its controller reference.
fn pool_of(vm: VirtualMachine) -> Option<ObjectRef<VirtualMachinePool>> {
    let owner = claims::controller_of(&vm.metadata)?;
    (owner.kind == "VirtualMachinePool")
        .then(|| ObjectRef::new(&owner.name).within(&vm.namespace().unwrap_or_default()))
}

/// Runs the pool controller until its watches end: pools are watched, with the VMs they
/// control.
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
    Controller::new(
        Api::<VirtualMachinePool>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches(
        Api::<VirtualMachine>::all(client),
        watcher::Config::default(),
        pool_of,
    )
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        match result {
            Ok((object, _)) => tracing::trace!(pool = %object.name, "reconciled"),
            Err(err) => tracing::debug!(%err, "VirtualMachinePool controller event"),
        }
    })
    .await;
}
