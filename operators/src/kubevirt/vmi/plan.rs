//! The VMI controller's decisions, as a pure function: the VMI, its launcher pods and the
//! claims it uses in; the pod to create or delete, the finalizer to add or drop, and the
//! status to write out.
//!
//! The controller owns the phases up to Scheduled and the final ones (from the launcher
//! pod's end), and the conditions Ready, PodScheduled, DataVolumesReady and LiveMigratable;
//! virt-handler owns Running and the conditions it learns from the domain (Paused,
//! AgentConnected), which are kept as they are.

use std::collections::BTreeMap;

use api::cdi::DataVolumePhase;
use api::kubevirt::keys;
use api::kubevirt::vmi::{
    PersistentVolumeClaimInfo, VirtualMachineCondition,
    VirtualMachineInstancePhaseTransitionTimestamp, VolumeStatus, condition_types, set_condition,
};
use api::kubevirt::{
    VirtualMachineInstance, VirtualMachineInstancePhase as Phase, VirtualMachineInstanceStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::launcher_pod::{
    ClaimModes, LauncherPodSettings, NetworkResources, claim_of, launcher_pod,
};

/// The conditions this controller writes; others on the VMI are virt-handler's.
const OWN_CONDITIONS: [&str; 4] = [
    condition_types::READY,
    POD_SCHEDULED,
    condition_types::DATA_VOLUMES_READY,
    condition_types::LIVE_MIGRATABLE,
];
const POD_SCHEDULED: &str = "PodScheduled";
/// The condition of a VMI whose launcher pod cannot be made, and its reason when the API
/// server refused the pod (KubeVirt's sync error).
pub const SYNCHRONIZED: &str = "Synchronized";
pub const FAILED_CREATE: &str = "FailedCreate";
/// DataVolume phases in which a launcher pod may start: done, or waiting for the pod itself
/// to pick the node.
/// What is known of one claim a VMI uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Claim {
    /// Whether the PVC exists.
    pub exists: bool,
    /// Whether it is a block-mode claim.
    pub block: bool,
    /// Its access modes, for the LiveMigratable condition.
    pub access_modes: Vec<String>,
    /// The phase of the DataVolume of that name, when one exists.
    pub data_volume_phase: Option<String>,
}

/// What is known of the NetworkAttachmentDefinition a secondary (Multus) network names.
#[derive(Clone, Debug, PartialEq)]
pub enum SecondaryNetwork {
    /// It does not exist: `namespace/name`.
    Missing(String),
    /// It exists; the node resource its pods request, if it names one.
    Found { resource: Option<String> },
}

/// Everything the plan looks at.
#[derive(Clone, Debug)]
pub struct Observed {
    pub vmi: VirtualMachineInstance,
    /// The VMI's launcher pods (label `kubevirt.io/created-by` = its UID).
    pub pods: Vec<Pod>,
    /// The claims the VMI's volumes name, by claim name.
    pub claims: BTreeMap<String, Claim>,
    /// The secondary networks, by the VMI's network name (looked up only while the VMI has
    /// no launcher pod).
    pub networks: BTreeMap<String, SecondaryNetwork>,
    pub now: Time,
}

/// One thing to do.
#[derive(Clone, Debug, PartialEq)]
pub enum VmiAction {
    AddFinalizer,
    RemoveFinalizer,
    CreatePod(Box<Pod>),
    DeletePod(String),
    /// Label the VMI with the node that runs it.
    LabelNode(String),
    WriteStatus(Box<VirtualMachineInstanceStatus>),
    Event {
        warning: bool,
        reason: &'static str,
        message: String,
    },
}

/// The actions for `observed`, in the order to take them.
pub fn plan(observed: &Observed, settings: &LauncherPodSettings) -> Vec<VmiAction> {
    let vmi = &observed.vmi;
    let live_pods: Vec<&Pod> = observed
        .pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let has_finalizer = vmi.finalizers().iter().any(|f| f == keys::VMI_FINALIZER);
    let mut actions = Vec::new();
    if vmi.metadata.deletion_timestamp.is_some() {
        // The pod goes first; the VMI only once no launcher is left, so a VM restarted from
        // the same disks never runs beside its old instance.
        actions.extend(live_pods.iter().map(|p| VmiAction::DeletePod(p.name_any())));
        if observed.pods.is_empty() && has_finalizer {
            actions.push(VmiAction::RemoveFinalizer);
        }
        return actions;
    }
    let phase = vmi.phase().unwrap_or(Phase::Pending);
    if !has_finalizer && !phase.is_final() {
        actions.push(VmiAction::AddFinalizer);
    }
    if phase.is_final() {
        // A launcher that outlived its domain (a failed start) is stopped.
        actions.extend(
            live_pods
                .iter()
                .filter(|p| !pod_finished(p))
                .map(|p| VmiAction::DeletePod(p.name_any())),
        );
        return actions;
    }
    let pod = newest(&live_pods);
    if pod.is_none() && !observed.pods.is_empty() {
        // A launcher is still stopping: no second one beside it.
        return actions;
    }
    let mut status = vmi.status.clone().unwrap_or_default();
    let mut conditions = Conditions::new(&status, &observed.now);
    match pod {
        None => plan_without_pod(
            observed,
            phase,
            &mut status,
            &mut conditions,
            &mut actions,
            settings,
        ),
        Some(pod) => plan_with_pod(pod, phase, &mut status, &mut conditions, &mut actions),
    }
    let new_phase = status.phase.unwrap_or(Phase::Pending);
    conditions.set(
        condition_types::READY,
        new_phase == Phase::Running && pod.is_some_and(pod_ready),
        if new_phase == Phase::Running {
            ""
        } else {
            "GuestNotRunning"
        },
        if new_phase == Phase::Running {
            ""
        } else {
            "Guest VM is not reported as running"
        },
    );
    conditions.set_live_migratable(observed);
    status.conditions = Some(conditions.into_list());
    record_transition(&mut status, &observed.now);
    status.volume_status = Some(volume_status(observed));
    if status.phase.is_none() {
        status.phase = Some(Phase::Pending);
    }
    if vmi.status.as_ref() != Some(&status) {
        actions.push(VmiAction::WriteStatus(Box::new(status)));
    }
    actions
}

fn plan_without_pod(
    observed: &Observed,
    phase: Phase,
    status: &mut VirtualMachineInstanceStatus,
    conditions: &mut Conditions,
    actions: &mut Vec<VmiAction>,
    settings: &LauncherPodSettings,
) {
    if matches!(phase, Phase::Scheduled | Phase::Running) {
        // The launcher pod vanished under a running VMI.
        status.phase = Some(Phase::Failed);
        status.reason = Some("PodNotExists".into());
        actions.push(VmiAction::Event {
            warning: true,
            reason: "Stopped",
            message: "The VirtualMachineInstance's launcher pod was deleted".into(),
        });
        return;
    }
    let vmi = &observed.vmi;
    let namespace = vmi.namespace().unwrap_or_default();
    for (claim, state) in &observed.claims {
        if !state.exists && state.data_volume_phase.is_none() {
            status.phase = Some(Phase::Pending);
            conditions.set(
                "Synchronized",
                false,
                "FailedPvcNotFound",
                &format!("PVC {namespace}/{claim} does not exist, waiting for it to appear"),
            );
            return;
        }
    }
    // A launcher pod the API server refused stays reported until one is made.
    conditions.remove_unless_reason(SYNCHRONIZED, FAILED_CREATE);
    let waiting: Vec<String> = observed
        .claims
        .iter()
        .filter_map(|(claim, state)| {
            let phase = state.data_volume_phase.as_deref()?;
            let usable = serde_json::from_value::<DataVolumePhase>(phase.into())
                .is_ok_and(DataVolumePhase::usable_by_consumer);
            (!usable).then(|| format!("{claim} ({phase})"))
        })
        .collect();
    let has_data_volumes = observed
        .claims
        .values()
        .any(|c| c.data_volume_phase.is_some());
    if !waiting.is_empty() {
        status.phase = Some(Phase::Pending);
        conditions.set(
            condition_types::DATA_VOLUMES_READY,
            false,
            "NotAllDataVolumesReady",
            &format!("Not all of the VMI's DVs are ready: {}", waiting.join(", ")),
        );
        return;
    }
    if has_data_volumes {
        conditions.set(
            condition_types::DATA_VOLUMES_READY,
            true,
            "AllDataVolumesReady",
            "All of the VMI's DVs are bound and ready",
        );
    }
    let mut resources = NetworkResources::new();
    for (network, state) in &observed.networks {
        match state {
            SecondaryNetwork::Missing(nad) => {
                // KubeVirt cannot render the launcher pod without it, and says so.
                status.phase = Some(Phase::Pending);
                conditions.set(
                    "Synchronized",
                    false,
                    "FailedCreate",
                    &format!(
                        "failed to render launch manifest: failed to locate network attachment definition {nad}"
                    ),
                );
                return;
            }
            SecondaryNetwork::Found {
                resource: Some(resource),
            } if !resource.is_empty() => {
                resources.insert(network.clone(), resource.clone());
            }
            SecondaryNetwork::Found { .. } => {}
        }
    }
    let block: ClaimModes = observed
        .claims
        .iter()
        .map(|(name, claim)| (name.clone(), claim.block))
        .collect();
    actions.push(VmiAction::CreatePod(Box::new(launcher_pod(
        vmi, &block, &resources, settings,
    ))));
    actions.push(VmiAction::Event {
        warning: false,
        reason: "SuccessfulCreate",
        message: format!(
            "Created virtual machine pod virt-launcher-{}",
            vmi.name_any()
        ),
    });
    status.phase = Some(Phase::Scheduling);
    conditions.set(
        POD_SCHEDULED,
        false,
        "Pending",
        "the launcher pod waits for a node",
    );
}

fn plan_with_pod(
    pod: &Pod,
    phase: Phase,
    status: &mut VirtualMachineInstanceStatus,
    conditions: &mut Conditions,
    actions: &mut Vec<VmiAction>,
) {
    conditions.remove_if_reason(SYNCHRONIZED, FAILED_CREATE);
    let pod_status = pod.status.clone().unwrap_or_default();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    status.active_pods = Some(BTreeMap::from([(
        pod.uid().unwrap_or_default(),
        node.clone().unwrap_or_default(),
    )]));
    if let Some(image) = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
    {
        status.launcher_container_image_version = Some(image);
    }
    match pod_status.phase.as_deref() {
        Some("Succeeded") | Some("Failed") => {
            let succeeded = pod_status.phase.as_deref() == Some("Succeeded");
            let message = termination_message(pod);
            status.phase = Some(if succeeded {
                Phase::Succeeded
            } else {
                Phase::Failed
            });
            status.reason = (!message.is_empty()).then_some(message.clone());
            actions.push(VmiAction::Event {
                warning: !succeeded,
                reason: if succeeded { "Stopped" } else { "Failed" },
                message: if message.is_empty() {
                    "The VirtualMachineInstance stopped".into()
                } else {
                    format!("The VirtualMachineInstance stopped: {message}")
                },
            });
        }
        Some("Running") => {
            conditions.set(POD_SCHEDULED, true, "", "");
            if matches!(phase, Phase::Pending | Phase::Scheduling) {
                status.phase = Some(Phase::Scheduled);
            }
            if let Some(node) = node {
                if status.node_name.as_deref() != Some(&node) {
                    status.node_name = Some(node.clone());
                }
                actions.push(VmiAction::LabelNode(node));
            }
        }
        _ => {
            // Never back: a VMI already Scheduled or Running stays so until its pod ends.
            if matches!(phase, Phase::Pending | Phase::Scheduling) {
                status.phase = Some(Phase::Scheduling);
            }
            let scheduled = pod_status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == POD_SCHEDULED);
            match scheduled {
                Some(c) if c.status == "False" => conditions.set(
                    POD_SCHEDULED,
                    false,
                    c.reason.as_deref().unwrap_or("Unschedulable"),
                    c.message.as_deref().unwrap_or(""),
                ),
                _ => conditions.set(
                    POD_SCHEDULED,
                    false,
                    "Pending",
                    "the launcher pod waits for a node",
                ),
            }
        }
    }
}

fn pod_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod created last (a VMI has one; a restarted node agent may leave a finished one).
fn newest<'a>(pods: &[&'a Pod]) -> Option<&'a Pod> {
    pods.iter()
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .copied()
}

/// The compute container's termination message (how the launcher's domain ended).
fn termination_message(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.message.clone())
        .unwrap_or_default()
}

/// Records when the VMI entered its phase (each phase once: a VMI never goes back).
fn record_transition(status: &mut VirtualMachineInstanceStatus, now: &Time) {
    let Some(phase) = status.phase else { return };
    let entries = status
        .phase_transition_timestamps
        .get_or_insert_with(Vec::new);
    if !entries.iter().any(|e| e.phase == Some(phase)) {
        entries.push(VirtualMachineInstancePhaseTransitionTimestamp {
            phase: Some(phase),
            phase_transition_timestamp: Some(now.clone()),
        });
    }
}

/// `status.volumeStatus`: each volume with its target and, for claims, the claim's facts.
fn volume_status(observed: &Observed) -> Vec<VolumeStatus> {
    let volumes = observed.vmi.spec.volumes.iter().flatten().map(|volume| {
        let claim_info = claim_of(volume).map(|(claim, _)| {
            let facts = observed.claims.get(claim).cloned().unwrap_or_default();
            let mode = if facts.block { "Block" } else { "Filesystem" };
            PersistentVolumeClaimInfo {
                claim_name: Some(claim.to_owned()),
                volume_mode: Some(mode.to_owned()),
                access_modes: Some(facts.access_modes),
                ..Default::default()
            }
        });
        VolumeStatus {
            name: volume.name.clone(),
            target: String::new(),
            persistent_volume_claim_info: claim_info,
            ..Default::default()
        }
    });
    volumes.collect()
}

/// The VMI's conditions being rewritten: this controller's own are set, the others kept.
struct Conditions {
    list: Vec<VirtualMachineCondition>,
    now: Time,
}

impl Conditions {
    fn new(status: &VirtualMachineInstanceStatus, now: &Time) -> Self {
        Self {
            list: status.conditions.clone().unwrap_or_default(),
            now: now.clone(),
        }
    }

    fn set(&mut self, type_: &str, holds: bool, reason: &str, message: &str) {
        let condition = VirtualMachineCondition::new(type_, holds, reason, message, &self.now);
        set_condition(&mut self.list, condition);
    }

    fn remove_if_reason(&mut self, type_: &str, reason: &str) {
        self.list
            .retain(|c| c.type_ != type_ || c.reason.as_deref() != Some(reason));
    }

    fn remove_unless_reason(&mut self, type_: &str, reason: &str) {
        self.list
            .retain(|c| c.type_ != type_ || c.reason.as_deref() == Some(reason));
    }

    /// False, as every VMI here: live migration is not implemented, and hostpath claims
    /// are ReadWriteOnce (KubeVirt's reason for those).
    fn set_live_migratable(&mut self, observed: &Observed) {
        let not_shared = observed
            .claims
            .iter()
            .find(|(_, c)| !c.access_modes.iter().any(|m| m == "ReadWriteMany"));
        match not_shared {
            Some((claim, _)) => self.set(
                condition_types::LIVE_MIGRATABLE,
                false,
                "DisksNotLiveMigratable",
                &format!(
                    "cannot migrate VMI: PVC {claim} is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"
                ),
            ),
            None => self.set(
                condition_types::LIVE_MIGRATABLE,
                false,
                "NotMigratable",
                "live migration is not supported by this version of Ferrovirt",
            ),
        }
    }

    fn into_list(mut self) -> Vec<VirtualMachineCondition> {
        // This controller's conditions first, in a fixed order, then the handler's.
        self.list.sort_by_key(|c| {
            OWN_CONDITIONS
                .iter()
                .position(|t| *t == c.type_)
                .unwrap_or(OWN_CONDITIONS.len())
        });
        self.list
    }
}

#[cfg(test)]
mod tests;
