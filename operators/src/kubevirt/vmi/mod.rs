//! The VirtualMachineInstance controller (virt-controller's VMI part): gives each VMI a
//! launcher pod once the claims it uses are ready, follows the pod through the phases
//! Pending, Scheduling and Scheduled (virt-handler takes it to Running), ends the VMI when the
//! launcher ends, and on deletion stops the pod before the VMI may go. The decisions are in
//! [`plan`]; this module observes and acts.

pub mod launcher_pod;
pub mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::cdi::{DataVolume, DataVolumePhase};
use api::kubevirt::cluster_config::SharedClusterConfig;
use api::kubevirt::{VirtualMachineInstance, keys};
use api::network_attachment::{
    NetworkAttachmentDefinition, RESOURCE_NAME_ANNOTATION, qualified_name,
};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::config::ControllerConfig;
use crate::kit::{events, finalizer, is_status};
use launcher_pod::{LauncherPodSettings, claim_of};
use plan::{Claim, Observed, SecondaryNetwork, VmiAction};

/// How often a VMI is looked at without a change.
const RESYNC: Duration = Duration::from_secs(30);

/// Errors of the VMI controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("VirtualMachineInstance {0} has no namespace")]
    MissingNamespace(String),
}

struct Context {
    client: Client,
    recorder: Recorder,
    /// The launcher pods' settings but emulation, which `kubevirt` says.
    settings: LauncherPodSettings,
    kubevirt: SharedClusterConfig,
}

/// Runs the VMI controller until its watches end.
pub async fn run(client: Client, config: Arc<ControllerConfig>) {
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "virtualmachineinstance-controller".into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        ),
        settings: LauncherPodSettings {
            image: config.image.clone(),
            image_pull_policy: config.image_pull_policy.clone(),
            extra_args: config.launcher_args.clone(),
            allow_emulation: true,
            cpu_allocation_ratio: api::kubevirt::cluster_config::DEFAULT_CPU_ALLOCATION_RATIO,
            cpu_limit_per_vcpu: false,
        },
        kubevirt: config.kubevirt.clone(),
    });
    let launcher_pods =
        watcher::Config::default().labels(&format!("{}={}", keys::APP_LABEL, keys::LAUNCHER_APP));
    let controller = Controller::new(
        Api::<VirtualMachineInstance>::all(client.clone()),
        watcher::Config::default(),
    );
    let vmis = controller.store();
    // A DataVolume or claim that changes wakes the VMIs of its namespace that wait for one.
    let waiting_in =
        move |namespace: Option<String>| {
            vmis.state()
                .into_iter()
                .filter(|vmi| {
                    vmi.namespace() == namespace
                        && vmi.status.as_ref().and_then(|s| s.phase).is_none_or(|p| {
                            p == api::kubevirt::VirtualMachineInstancePhase::Pending
                        })
                })
                .map(|vmi| ObjectRef::from_obj(&*vmi))
                .collect::<Vec<_>>()
        };
    let for_claims = waiting_in.clone();
    controller
        .owns(Api::<Pod>::all(client.clone()), launcher_pods)
        .watches(
            Api::<DataVolume>::all(client.clone()),
            watcher::Config::default(),
            move |dv| waiting_in(dv.namespace()),
        )
        .watches(
            Api::<PersistentVolumeClaim>::all(client),
            watcher::Config::default(),
            move |pvc| for_claims(pvc.namespace()),
        )
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "VMI controller event");
            }
        })
        .await;
}

fn error_policy(vmi: Arc<VirtualMachineInstance>, err: &Error, _: Arc<Context>) -> Action {
    // A conflict is the normal outcome of two writers (virt-handler writes the VMI too):
    // look again at once, quietly.
    if let Error::Kube(kube::Error::Api(status)) = err
        && status.code == 409
    {
        tracing::debug!(vmi = %vmi.name_any(), "VMI changed meanwhile; reconciling again");
        return Action::requeue(Duration::from_millis(100));
    }
    tracing::warn!(vmi = %vmi.name_any(), namespace = ?vmi.namespace(), %err, "VMI reconcile failed");
    Action::requeue(Duration::from_secs(1))
}

/// Whether `selector` (the KubeVirt CR's `autoCPULimitNamespaceLabelSelector`) selects
/// namespace `name` by its labels; a namespace that is gone, or cannot be read, is not (no
/// limit rather than no reconcile).
async fn namespace_selected(client: &Client, name: &str, selector: &LabelSelector) -> bool {
    match Api::<Namespace>::all(client.clone()).get_opt(name).await {
        Ok(namespace) => {
            let labels = namespace.map(|ns| ns.labels().clone()).unwrap_or_default();
            api::label_selector::selects(selector, &labels)
        }
        Err(err) => {
            tracing::warn!(namespace = %name, %err, "cannot read the namespace's labels; no automatic CPU limit");
            false
        }
    }
}

async fn reconcile(vmi: Arc<VirtualMachineInstance>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = vmi
        .namespace()
        .ok_or_else(|| Error::MissingNamespace(vmi.name_any()))?;
    let observed = observe(&ctx.client, &namespace, &vmi).await?;
    let cluster = ctx.kubevirt.get();
    let cpu_limit_per_vcpu = match &cluster.auto_cpu_limit_namespaces {
        Some(selector) => namespace_selected(&ctx.client, &namespace, selector).await,
        None => false,
    };
    let settings = LauncherPodSettings {
        allow_emulation: cluster.use_emulation,
        cpu_allocation_ratio: cluster.cpu_allocation_ratio,
        cpu_limit_per_vcpu,
        ..ctx.settings.clone()
    };
    let actions = plan::plan(&observed, &settings);
    let mut current = (*vmi).clone();
    // The status first, against the version it was computed from: a write virt-handler made
    // meanwhile makes it fail and the VMI is looked at again, rather than lost.
    for action in &actions {
        if let VmiAction::WriteStatus(status) = action {
            let mut updated = current.clone();
            updated.status = Some((**status).clone());
            current = vmis(&ctx.client, &namespace)
                .replace_status(&vmi.name_any(), &PostParams::default(), &updated)
                .await?;
        }
    }
    for action in actions {
        apply(&ctx, &namespace, &mut current, action).await?;
    }
    Ok(Action::requeue(RESYNC))
}

fn vmis(client: &Client, namespace: &str) -> Api<VirtualMachineInstance> {
    Api::namespaced(client.clone(), namespace)
}

async fn observe(
    client: &Client,
    namespace: &str,
    vmi: &VirtualMachineInstance,
) -> Result<Observed, Error> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!(
            "{}={}",
            keys::CREATED_BY_LABEL,
            vmi.uid().unwrap_or_default()
        )))
        .await?
        .items;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
    let dvs = Api::<DataVolume>::namespaced(client.clone(), namespace);
    let mut claims = BTreeMap::new();
    for volume in vmi.spec.volumes.iter().flatten() {
        let Some((name, _)) = claim_of(volume) else {
            continue;
        };
        let pvc = pvcs.get_opt(name).await?;
        let spec = pvc
            .as_ref()
            .and_then(|p| p.spec.clone())
            .unwrap_or_default();
        // A claim filled by a DataVolume of its name waits for it, however the volume names
        // it: a launcher must not open a disk that is still being imported.
        let data_volume_phase = dvs.get_opt(name).await?.map(|dv| data_volume_phase(&dv));
        claims.insert(
            name.to_owned(),
            Claim {
                exists: pvc.is_some(),
                block: spec.volume_mode.as_deref() == Some("Block"),
                access_modes: spec.access_modes.unwrap_or_default(),
                data_volume_phase,
            },
        );
    }
    // The definitions matter only to the launcher pod about to be made.
    let networks = if pods.is_empty() && vmi.metadata.deletion_timestamp.is_none() {
        lookup_network_attachments(client, namespace, vmi).await?
    } else {
        BTreeMap::new()
    };
    Ok(Observed {
        vmi: vmi.clone(),
        pods,
        claims,
        networks,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
    })
}

/// The NetworkAttachmentDefinitions of the VMI's secondary networks, looked up as KubeVirt
/// does before it renders the launcher pod.
async fn lookup_network_attachments(
    client: &Client,
    namespace: &str,
    vmi: &VirtualMachineInstance,
) -> Result<BTreeMap<String, SecondaryNetwork>, Error> {
    let mut networks = BTreeMap::new();
    for network in vmi.spec.networks.iter().flatten() {
        let Some(multus) = network.multus.as_ref().filter(|m| m.default != Some(true)) else {
            continue;
        };
        let (nad_namespace, nad_name) = qualified_name(namespace, &multus.network_name);
        let nad = Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), nad_namespace)
            .get_opt(nad_name)
            .await?;
        let state = match nad {
            None => SecondaryNetwork::Missing(format!("{nad_namespace}/{nad_name}")),
            Some(nad) => SecondaryNetwork::Found {
                resource: nad.annotations().get(RESOURCE_NAME_ANNOTATION).cloned(),
            },
        };
        networks.insert(network.name.clone(), state);
    }
    Ok(networks)
}

async fn apply(
    ctx: &Context,
    namespace: &str,
    current: &mut VirtualMachineInstance,
    action: VmiAction,
) -> Result<(), Error> {
    let api = vmis(&ctx.client, namespace);
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), namespace);
    let name = current.name_any();
    match action {
        VmiAction::WriteStatus(_) => {}
        VmiAction::AddFinalizer | VmiAction::RemoveFinalizer => {
            let add = matches!(action, VmiAction::AddFinalizer);
            if let Some(patched) = finalizer::set(&api, current, keys::VMI_FINALIZER, add).await? {
                *current = patched;
            }
        }
        VmiAction::LabelNode(node) => {
            if current.labels().get(keys::NODE_NAME_LABEL) != Some(&node) {
                let patch = json!({"metadata": {"labels": {keys::NODE_NAME_LABEL: node}}});
                *current = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
        VmiAction::CreatePod(pod) => match pods.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                tracing::info!(vmi = %name, pod = %created.name_any(), "created the launcher pod");
            }
            Err(kube::Error::Api(status)) if refused_for_good(status.code) => {
                tracing::warn!(vmi = %name, reason = %status.message, "the launcher pod was refused");
                report_refused_pod(ctx, &api, current, &status.message).await?;
            }
            Err(err) => return Err(err.into()),
        },
        VmiAction::DeletePod(pod) => match pods.delete(&pod, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(vmi = %name, %pod, "deleting the launcher pod"),
            Err(err) if is_status(&err, 404) => {}
            Err(err) => return Err(err.into()),
        },
        VmiAction::Event {
            warning,
            reason,
            message,
        } => events::publish(&ctx.recorder, &*current, warning, reason, &message).await,
    }
    Ok(())
}

/// Whether the API server's refusal of a pod stands until something else changes (an
/// admission refusal, an invalid pod), rather than a passing conflict or throttling.
fn refused_for_good(code: u16) -> bool {
    (400..500).contains(&code) && code != 409 && code != 429
}

/// Reports a launcher pod the API server refused as KubeVirt reports its sync error: a
/// `FailedCreate` warning event, and the VMI's `Synchronized` condition false with the
/// reason (written only when it changes, so the VMI is not woken again by it).
async fn report_refused_pod(
    ctx: &Context,
    api: &Api<VirtualMachineInstance>,
    current: &mut VirtualMachineInstance,
    reason: &str,
) -> Result<(), Error> {
    let event = format!("Error creating pod: {reason}");
    events::publish(&ctx.recorder, &*current, true, plan::FAILED_CREATE, &event).await;
    let message = format!("failed to create virtual machine pod: {reason}");
    let mut status = current.status.clone().unwrap_or_default();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let reported = conditions.iter().any(|c| {
        c.type_ == plan::SYNCHRONIZED
            && c.status == api::common::ConditionStatus::False
            && c.reason.as_deref() == Some(plan::FAILED_CREATE)
            && c.message.as_deref() == Some(message.as_str())
    });
    if reported {
        return Ok(());
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let condition = api::kubevirt::vmi::VirtualMachineCondition::new(
        plan::SYNCHRONIZED,
        false,
        plan::FAILED_CREATE,
        &message,
        &now,
    );
    api::kubevirt::vmi::set_condition(conditions, condition);
    let mut updated = current.clone();
    updated.status = Some(status);
    *current = api
        .replace_status(&current.name_any(), &PostParams::default(), &updated)
        .await?;
    Ok(())
}

/// A DataVolume's phase as written in its status ("" before it has one).
fn data_volume_phase(dv: &DataVolume) -> String {
    dv.status
        .as_ref()
        .and_then(|s| s.phase)
        .map_or("", DataVolumePhase::as_str)
        .to_owned()
}
