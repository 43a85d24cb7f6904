//! The VirtualMachineInstance (kubevirt.io/v1): one running VM. The spec types here are also
//! the template of a VirtualMachine. The domain is typed where controllers and the launcher
//! read it (resources, CPU, memory, firmware, disks, interfaces) and every other field is kept
//! as it came, so a read-modify-write loses nothing.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{ConditionStatus, Extra};

mod devices;
mod devices_disks;
mod devices_interfaces;
mod domain;
mod domain_clock;
mod domain_cpu;
mod domain_features;
mod domain_firmware;
mod networks;
mod volumes;

pub use devices::*;
pub use devices_disks::*;
pub use devices_interfaces::*;
pub use domain::*;
pub use domain_clock::*;
pub use domain_cpu::*;
pub use domain_features::*;
pub use domain_firmware::*;
pub use networks::*;
pub use volumes::*;

/// The desired state of a VM instance.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "VirtualMachineInstance",
    namespaced,
    status = "VirtualMachineInstanceStatus",
    shortname = "vmi",
    shortname = "vmis",
    category = "all",
    derive = "PartialEq",
    doc = "VirtualMachineInstance is *the* VirtualMachineInstance Definition. It represents a virtual machine in the runtime environment of kubernetes.",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "IP",
        type_ = "string",
        json_path = ".status.interfaces[0].ipAddress"
    ),
    printcolumn(name = "NodeName", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "Live-Migratable",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='LiveMigratable')].status",
        priority = 1
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Paused')].status",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceSpec {
    /// The virtual hardware.
    pub domain: DomainSpec,
    /// Labels a node must have to run the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Seconds the guest gets to shut down before it is killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// The volumes disks are backed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    /// The networks interfaces attach to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<Network>>,
    /// The guest's host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// What happens to the VM when its node is drained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    /// Fields this version does not model (affinity, tolerations, probes, DNS, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A VM instance spec together with the metadata of the instance, as embedded in a
/// VirtualMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceTemplateSpec {
    /// Labels and annotations of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The instance spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<VirtualMachineInstanceSpec>,
}

/// The observed state of a VM instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceStatus {
    /// The lifecycle phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<VirtualMachineInstancePhase>,
    /// The node running the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Why the VM is in this phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Ready, Paused, LiveMigratable, AgentConnected, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<VirtualMachineCondition>>,
    /// The guest's interfaces and addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<VirtualMachineInstanceNetworkInterface>>,
    /// Fields this version does not model (migration state, guest OS info, volume status, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// The lifecycle phase of a VM instance.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum VirtualMachineInstancePhase {
    /// Accepted, not yet scheduled.
    Pending,
    /// The launcher pod is being scheduled.
    Scheduling,
    /// The launcher pod runs and the VM is being started.
    Scheduled,
    /// The VM runs.
    Running,
    /// The VM stopped on its own.
    Succeeded,
    /// The VM failed.
    Failed,
    /// The target of a cross-cluster migration waits for its source.
    WaitingForSync,
    /// The state cannot be determined.
    Unknown,
}

/// A condition of a VM or VM instance.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineCondition {
    /// The condition type, see [`condition_types`].
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// When it was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// A machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl VirtualMachineCondition {
    /// A condition as of `now`; an empty reason or message is left out.
    pub fn new(type_: &str, holds: bool, reason: &str, message: &str, now: &Time) -> Self {
        let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Self {
            type_: type_.to_owned(),
            status: if holds {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            last_probe_time: None,
            last_transition_time: Some(now.clone()),
            reason: text(reason),
            message: text(message),
        }
    }
}

/// Puts `condition` in place of the one of its type (or adds it). While the status holds,
/// the earlier transition time stays, as Kubernetes' conditions keep it.
pub fn set_condition(
    conditions: &mut Vec<VirtualMachineCondition>,
    mut condition: VirtualMachineCondition,
) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            if existing.status == condition.status {
                condition.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = condition;
        }
        None => conditions.push(condition),
    }
}

/// Whether `conditions` has a condition of `type_` that holds.
pub fn condition_holds(conditions: Option<&Vec<VirtualMachineCondition>>, type_: &str) -> bool {
    conditions.is_some_and(|c| {
        c.iter()
            .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
    })
}

impl VirtualMachineInstancePhase {
    /// Whether an instance in this phase has ended for good.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

impl VirtualMachineInstance {
    /// `status.phase`, when there is one.
    pub fn phase(&self) -> Option<VirtualMachineInstancePhase> {
        self.status.as_ref().and_then(|s| s.phase)
    }

    /// Whether the instance has ended (Succeeded or Failed).
    pub fn is_final(&self) -> bool {
        self.phase()
            .is_some_and(VirtualMachineInstancePhase::is_final)
    }

    /// Whether its condition `type_` holds.
    pub fn condition_holds(&self, type_: &str) -> bool {
        condition_holds(
            self.status.as_ref().and_then(|s| s.conditions.as_ref()),
            type_,
        )
    }
}

/// Condition types of VMs and VM instances.
pub mod condition_types {
    /// The VM is running and ready.
    pub const READY: &str = "Ready";
    /// The VM is paused.
    pub const PAUSED: &str = "Paused";
    /// The VM failed to start or run.
    pub const FAILURE: &str = "Failure";
    /// The VM can be live-migrated.
    pub const LIVE_MIGRATABLE: &str = "LiveMigratable";
    /// The guest agent is connected.
    pub const AGENT_CONNECTED: &str = "AgentConnected";
    /// A spec change needs a restart to take effect.
    pub const RESTART_REQUIRED: &str = "RestartRequired";
    /// The data volumes of the VM are ready.
    pub const DATA_VOLUMES_READY: &str = "DataVolumesReady";
}

/// A guest network interface and its addresses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceNetworkInterface {
    /// The interface name from the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The primary IP address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
    /// All IP addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_addresses: Option<Vec<String>>,
    /// The MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The name inside the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_name: Option<String>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

impl VirtualMachineInstanceSpec {
    /// The vCPUs the guest gets, as KubeVirt counts them once virt-api has defaulted the
    /// topology: sockets × cores × threads (each 1 when left out) when any is given; without
    /// a topology one socket per CPU of `limits.cpu`, else of `requests.cpu` (a fraction
    /// rounded up), else one.
    pub fn vcpus(&self) -> u64 {
        let cpu = self.domain.cpu.as_ref();
        let given =
            cpu.is_some_and(|c| c.sockets.is_some() || c.cores.is_some() || c.threads.is_some());
        if let Some(cpu) = cpu.filter(|_| given) {
            let count = |n: Option<u32>| u64::from(n.unwrap_or(1).max(1));
            return count(cpu.sockets) * count(cpu.cores) * count(cpu.threads);
        }
        let resources = self.domain.resources.as_ref();
        [
            resources.and_then(|r| r.limits.as_ref()),
            resources.and_then(|r| r.requests.as_ref()),
        ]
        .into_iter()
        .flatten()
        .find_map(|list| list.get("cpu"))
        .and_then(crate::quantity::quantity_bytes)
        .and_then(|cpus| u64::try_from(cpus).ok())
        .map_or(1, |cpus| cpus.max(1))
    }

    /// Whether the guest's vCPUs are pinned to dedicated host CPUs
    /// (`domain.cpu.dedicatedCpuPlacement`).
    pub fn dedicated_cpus(&self) -> bool {
        self.domain
            .cpu
            .as_ref()
            .is_some_and(|c| c.dedicated_cpu_placement == Some(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).expect("time"))
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut list = Vec::new();
        set_condition(
            &mut list,
            VirtualMachineCondition::new("Ready", false, "A", "", &at(1)),
        );
        set_condition(
            &mut list,
            VirtualMachineCondition::new("Ready", false, "B", "m", &at(2)),
        );
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].last_transition_time, Some(at(1)));
        assert_eq!(
            (list[0].reason.as_deref(), list[0].message.as_deref()),
            (Some("B"), Some("m"))
        );
        set_condition(
            &mut list,
            VirtualMachineCondition::new("Ready", true, "", "", &at(3)),
        );
        assert_eq!(list[0].last_transition_time, Some(at(3)));
        assert_eq!(list[0].reason, None);
        assert!(condition_holds(Some(&list), "Ready"));
        assert!(!condition_holds(Some(&list), "Paused"));
    }
}
