//! The VirtualMachine controller (virt-controller's VM part): it keeps a VM's instance
//! (VMI) created or deleted as its run strategy and its pending start/stop requests say,
//! creates the DataVolumes of its `dataVolumeTemplates`, backs off a VMI that keeps failing
//! to start, and mirrors the instance into the VM's status with KubeVirt's printable status.
//!
//! [`plan`] is the whole decision: the observed objects in, a list of [`VmAction`]s out,
//! with no I/O. [`run`] gathers what `plan` needs and applies what it returns.
//!
//! - [`plan`](mod@plan): the decision, step by step: [`instance`] (what becomes of the
//!   instance), [`volumes`] (the DataVolumes and claims), [`status`] (what is written back,
//!   with [`printable`]'s status).
//! - [`observed`]: what the plan looks at; [`actions`]: what it returns.
//! - [`requests`]: the pending start and stop requests; [`backoff`]: the crash-loop back-off.
//! - [`objects`]: the instance, DataVolumes and patches the VM makes; [`reasons`]: upstream's
//!   event and condition reasons.

pub mod actions;
pub mod backoff;
pub mod expansion;
pub mod instance;
pub mod objects;
pub mod observed;
pub mod plan;
pub mod printable;
pub mod reasons;
pub mod requests;
pub mod status;
pub mod volumes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::cdi::DataVolume;
use api::kubevirt::{VirtualMachine, VirtualMachineInstance, VirtualMachineStatus};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

pub use actions::{VmAction, VmEvent};
pub use backoff::{MAX_CRASH_LOOP_BACKOFF, StartFailure, start_backoff, start_failure};
pub use objects::{data_volume_for, finalizer_patch, instance_for, owner_reference};
pub use observed::Observed;
pub use plan::plan;
pub use status::with_failure;
pub use volumes::{IMMEDIATE_DATA_VOLUME_CREATION_ANNOTATION, data_volume_names, template_claims};

use crate::kit::objects::status_replace_patch;
use crate::kit::{events, is_status};
use crate::kubevirt::instancetype;
use k8s_openapi::api::apps::v1::ControllerRevision;

/// How often any VM is looked at again without a change.
const RESYNC: Duration = Duration::from_secs(300);

/// Errors of the VirtualMachine controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// A patch this controller built is not a JSON patch (a bug).
    #[error("invalid JSON patch: {0}")]
    Patch(#[from] serde_json::Error),
    /// The VM changed while it was reconciled; it is looked at again.
    #[error("the VirtualMachine changed while it was reconciled")]
    Stale,
    /// Creating or deleting an object the VM needs failed.
    #[error("{reason}: {message}")]
    Action {
        /// Upstream's reason.
        reason: &'static str,
        /// What failed.
        message: String,
    },
}

impl Error {
    /// The variant's name, for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube(_) => "Kube",
            Self::Patch(_) => "Patch",
            Self::Stale => "Stale",
            Self::Action { .. } => "Action",
        }
    }
}

struct Context {
    client: Client,
    recorder: Recorder,
}

fn json_patch(value: Value) -> Result<Patch<()>, Error> {
    Ok(Patch::Json(serde_json::from_value(value)?))
}

/// Replaces the status, failing if the VM changed since it was read.
fn status_patch(vm: &VirtualMachine, status: &VirtualMachineStatus) -> Result<Patch<()>, Error> {
    Ok(status_replace_patch(vm, status)?)
}

async fn observe(
    client: &Client,
    namespace: &str,
    vm: &VirtualMachine,
) -> Result<
    (
        Option<VirtualMachineInstance>,
        BTreeMap<String, DataVolume>,
        BTreeMap<String, PersistentVolumeClaim>,
    ),
    Error,
> {
    let vmi = Api::<VirtualMachineInstance>::namespaced(client.clone(), namespace)
        .get_opt(&vm.name_any())
        .await?;
    let dv_api = Api::<DataVolume>::namespaced(client.clone(), namespace);
    let mut data_volumes = BTreeMap::new();
    for name in data_volume_names(vm) {
        if let Some(dv) = dv_api.get_opt(&name).await? {
            data_volumes.insert(name, dv);
        }
    }
    let pvc_api = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
    let mut claims = BTreeMap::new();
    for name in template_claims(vm) {
        if claims.contains_key(&name) {
            continue;
        }
        if let Some(pvc) = pvc_api.get_opt(&name).await? {
            claims.insert(name, pvc);
        }
    }
    Ok((vmi, data_volumes, claims))
}

async fn publish(ctx: &Context, vm: &VirtualMachine, ev: &VmEvent) {
    events::publish(&ctx.recorder, vm, ev.warning, ev.reason, &ev.message).await;
}

/// Applies one action; `Ok(false)` when it had nothing to do (its event is not published).
async fn apply(
    ctx: &Context,
    namespace: &str,
    vm: &mut VirtualMachine,
    action: &VmAction,
) -> Result<bool, Error> {
    let vms = Api::<VirtualMachine>::namespaced(ctx.client.clone(), namespace);
    let vmis = Api::<VirtualMachineInstance>::namespaced(ctx.client.clone(), namespace);
    let name = vm.name_any();
    match action {
        VmAction::AddVmFinalizer | VmAction::RemoveVmFinalizer => {
            let add = matches!(action, VmAction::AddVmFinalizer);
            let patch = json_patch(finalizer_patch(&vm.metadata, add))?;
            match vms.patch(&name, &PatchParams::default(), &patch).await {
                Ok(patched) => {
                    follow(vm, &patched);
                    Ok(true)
                }
                Err(e) if !add && is_status(&e, 404) => Ok(false),
                Err(e) => Err(e.into()),
            }
        }
        VmAction::CreateDataVolume(dv) => {
            let api = Api::<DataVolume>::namespaced(ctx.client.clone(), namespace);
            match api.create(&PostParams::default(), dv).await {
                Ok(_) => Ok(true),
                Err(e) if is_status(&e, 409) => Ok(false),
                Err(e) => Err(Error::Action {
                    reason: reasons::FAILED_DATA_VOLUME_CREATE,
                    message: format!("Error creating DataVolume {}: {e}", dv.name_any()),
                }),
            }
        }
        VmAction::CreateVmi(vmi) => match vmis.create(&PostParams::default(), vmi).await {
            Ok(_) => Ok(true),
            Err(e) if is_status(&e, 409) => Ok(false),
            Err(e) => Err(Error::Action {
                reason: reasons::FAILED_CREATE,
                message: format!("Error creating virtual machine instance: {e}"),
            }),
        },
        VmAction::CreateControllerRevision(revision) => {
            let api = Api::<ControllerRevision>::namespaced(ctx.client.clone(), namespace);
            match api.create(&PostParams::default(), revision).await {
                Ok(_) => Ok(true),
                // Named after the object's UID and generation: the same content.
                Err(e) if is_status(&e, 409) => Ok(false),
                Err(e) => Err(Error::Action {
                    reason: reasons::FAILED_CREATE,
                    message: format!(
                        "error encountered while storing instancetype.kubevirt.io controllerRevisions: {e}"
                    ),
                }),
            }
        }
        VmAction::DeleteVmi { name, uid } => {
            let params = DeleteParams {
                preconditions: uid.clone().map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match vmis.delete(name, &params).await {
                Ok(_) => Ok(true),
                Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(false),
                Err(e) => Err(Error::Action {
                    reason: reasons::FAILED_DELETE,
                    message: format!("Error deleting virtual machine instance {name}: {e}"),
                }),
            }
        }
        VmAction::RemoveVmiFinalizer { name } => {
            let Some(current) = vmis.get_opt(name).await? else {
                return Ok(false);
            };
            let patch = json_patch(finalizer_patch(&current.metadata, false))?;
            match vmis.patch(name, &PatchParams::default(), &patch).await {
                Err(e) if is_status(&e, 404) => Ok(false),
                other => other.map(|_| true).map_err(Error::from),
            }
        }
        VmAction::PatchVm(patch) => {
            let patched = vms
                .patch(&name, &PatchParams::default(), &json_patch(patch.clone())?)
                .await?;
            follow(vm, &patched);
            Ok(true)
        }
        VmAction::PatchVmStatus(status) => {
            match vms
                .patch_status(&name, &PatchParams::default(), &status_patch(vm, status)?)
                .await
            {
                Ok(patched) => {
                    follow(vm, &patched);
                    Ok(true)
                }
                Err(e) if is_status(&e, 404) => Ok(false),
                // The test on the resourceVersion failed (422, as the API server answers a
                // patch that does not apply; 409 on a conflict): someone wrote the VM
                // meanwhile. Said, as a schema's refusal is a 422 too and would repeat.
                Err(e) if is_status(&e, 409) || is_status(&e, 422) => {
                    tracing::info!(vm = %name, error = %e, "status not written; reading the VM again");
                    Err(Error::Stale)
                }
                Err(e) => Err(e.into()),
            }
        }
        VmAction::Event(_) | VmAction::RequeueAfter(_) => Ok(true),
    }
}

/// Takes on what a patch of the VM changed that later patches test.
fn follow(vm: &mut VirtualMachine, patched: &VirtualMachine) {
    vm.metadata.resource_version = patched.metadata.resource_version.clone();
    vm.metadata.finalizers = patched.metadata.finalizers.clone();
}

async fn reconcile(object: Arc<VirtualMachine>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let vms = Api::<VirtualMachine>::namespaced(ctx.client.clone(), &namespace);
    // Decide on the newest VM: a start or stop request written since the cache was filled
    // must not be overwritten by a stale status.
    let Some(mut vm) = vms.get_opt(&object.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let (vmi, data_volumes, claims) = observe(&ctx.client, &namespace, &vm).await?;
    let instancetypes = instancetype::resolve(&ctx.client, &vm, &owner_reference(&vm)).await;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let before = vm.status.clone();
    let actions = plan(&Observed {
        vm: &vm,
        vmi: vmi.as_ref(),
        data_volumes: &data_volumes,
        claims: &claims,
        instancetypes: &instancetypes,
        now: now.clone(),
    });
    let mut requeue = RESYNC;
    let mut publish_next = true;
    for action in &actions {
        match action {
            VmAction::Event(ev) => {
                if publish_next {
                    publish(&ctx, &vm, ev).await;
                }
            }
            VmAction::RequeueAfter(after) => requeue = requeue.min(*after),
            _ => match apply(&ctx, &namespace, &mut vm, action).await {
                Ok(done) => publish_next = done,
                Err(Error::Stale) => return Ok(Action::requeue(Duration::from_secs(1))),
                Err(Error::Action { reason, message }) => {
                    publish(
                        &ctx,
                        &vm,
                        &VmEvent {
                            warning: true,
                            reason,
                            message: message.clone(),
                        },
                    )
                    .await;
                    let planned = actions.iter().find_map(|a| match a {
                        VmAction::PatchVmStatus(s) => Some(s.as_ref().clone()),
                        _ => None,
                    });
                    let base = planned.or_else(|| before.clone()).unwrap_or_default();
                    let failed = with_failure(&base, reason, message.clone(), &now);
                    if before.as_ref() != Some(&failed) {
                        if let Err(err) = vms
                            .patch_status(
                                &vm.name_any(),
                                &PatchParams::default(),
                                &status_patch(&vm, &failed)?,
                            )
                            .await
                        {
                            tracing::warn!(vm = %vm.name_any(), %err, "cannot write the Failure condition");
                        }
                    }
                    return Err(Error::Action { reason, message });
                }
                Err(e) => return Err(e),
            },
        }
    }
    Ok(Action::requeue(requeue))
}

fn error_policy(vm: Arc<VirtualMachine>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(vm = %vm.name_any(), namespace = ?vm.namespace(), error = err.metric_label(), %err, "VirtualMachine reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the VirtualMachine controller until its watches end: VMs are watched, with the
/// VMIs and DataVolumes they own.
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
        Api::<VirtualMachine>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<VirtualMachineInstance>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<DataVolume>::all(client), watcher::Config::default())
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        match result {
            Ok((object, _)) => tracing::trace!(vm = %object.name, "reconciled"),
            Err(err) => tracing::debug!(%err, "VirtualMachine controller event"),
        }
    })
    .await;
}

#[cfg(test)]
mod cluster_tests;
