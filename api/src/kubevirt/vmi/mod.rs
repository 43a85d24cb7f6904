//! The VirtualMachineInstance (kubevirt.io/v1): one running VM. The spec types here are also
//! the template of a VirtualMachine. The top level of the spec is typed as upstream's; the
//! domain, devices, volumes and networks in their own modules, the status in `status`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, PodDNSConfig, PodResourceClaim, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ConditionStatus;

mod credentials;
mod devices;
mod devices_disks;
mod devices_interfaces;
mod domain;
mod domain_clock;
mod domain_cpu;
mod domain_features;
mod domain_firmware;
mod migration_state;
mod networks;
mod probe;
mod status;
mod volumes;

pub use credentials::*;
pub use devices::*;
pub use devices_disks::*;
pub use devices_interfaces::*;
pub use domain::*;
pub use domain_clock::*;
pub use domain_cpu::*;
pub use domain_features::*;
pub use domain_firmware::*;
pub use migration_state::*;
pub use networks::*;
pub use probe::*;
pub use status::*;
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
    /// SSH keys and passwords put into the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_credentials: Option<Vec<AccessCredential>>,
    /// Scheduling constraints of the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// The guest's CPU architecture (`amd64`, `arm64`, `s390x`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// DNS settings of the launcher pod, merged with those `dnsPolicy` gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_config: Option<PodDNSConfig>,
    /// The launcher pod's DNS policy: `ClusterFirst`, `ClusterFirstWithHostNet`, `Default`
    /// or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_policy: Option<String>,
    /// When the guest counts as dead and is restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Probe>,
    /// The priority class of the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// When the guest counts as ready for traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    /// Dynamic resource claims the launcher pod makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claims: Option<Vec<PodResourceClaim>>,
    /// The scheduler that places the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    /// `Paused`: the guest starts paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_strategy: Option<String>,
    /// The subdomain of the guest's host name (`<hostname>.<subdomain>.<namespace>.svc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    /// Taints the launcher pod tolerates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// How launcher pods spread over topology domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
}

/// The `startStrategy` that starts the guest paused.
pub const START_STRATEGY_PAUSED: &str = "Paused";

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
    /// The guest agent put `spec.accessCredentials` into the guest (or why not).
    pub const ACCESS_CREDENTIALS_SYNCHRONIZED: &str = "AccessCredentialsSynchronized";
    /// A spec change needs a restart to take effect.
    pub const RESTART_REQUIRED: &str = "RestartRequired";
    /// The data volumes of the VM are ready.
    pub const DATA_VOLUMES_READY: &str = "DataVolumesReady";
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
