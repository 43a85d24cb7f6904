//! VirtualMachineInstancetype and VirtualMachineClusterInstancetype: the resources of a VM
//! (vCPUs, memory, devices that need them) so that its template need not state them.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kubevirt::vmi::{Gpu, HostDevice, Hugepages, LaunchSecurity, Numa, Realtime};

/// What an instancetype gives a VM: required vCPUs and memory, optional devices and
/// scheduling.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "instancetype.kubevirt.io",
    version = "v1beta1",
    kind = "VirtualMachineInstancetype",
    plural = "virtualmachineinstancetypes",
    singular = "virtualmachineinstancetype",
    namespaced,
    shortname = "vminstancetype",
    shortname = "vminstancetypes",
    shortname = "vmf",
    shortname = "vmfs",
    category = "all",
    derive = "PartialEq",
    doc = "VirtualMachineInstancetype resource contains quantitative and resource related VirtualMachine configuration that can be used by multiple VirtualMachine resources."
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstancetypeSpec {
    /// The vCPUs and their placement.
    pub cpu: CpuInstancetype,
    /// The guest's memory.
    pub memory: MemoryInstancetype,
    /// GPUs given to the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<Vec<Gpu>>,
    /// Host devices given to the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_devices: Option<Vec<HostDevice>>,
    /// The IOThreads policy of the domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_threads_policy: Option<String>,
    /// The launch security (SEV) of the domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_security: Option<LaunchSecurity>,
    /// Annotations the instance gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Node labels the instance's node must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// The scheduler that places the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
}

/// The vCPUs of an instancetype.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuInstancetype {
    /// vCPUs the guest sees; the preference's topology spreads them.
    #[schemars(with = "i64")]
    pub guest: u32,
    /// The most sockets CPU hotplug may reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub max_sockets: Option<u32>,
    /// The CPU model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Dedicated host CPUs for the vCPUs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "dedicatedCPUPlacement"
    )]
    pub dedicated_cpu_placement: Option<bool>,
    /// A further dedicated host CPU for the emulator thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolate_emulator_thread: Option<bool>,
    /// The guest's NUMA topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<Numa>,
    /// Tuning for real-time workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime: Option<Realtime>,
}

/// The memory of an instancetype.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryInstancetype {
    /// Memory the guest sees.
    pub guest: Quantity,
    /// Hugepages backing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<Hugepages>,
    /// The most memory hotplug may reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_guest: Option<Quantity>,
    /// The percentage of the guest memory not requested from the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub overcommit_percent: Option<u32>,
}

/// The cluster-wide twin of [`VirtualMachineInstancetypeSpec`]. Upstream's two kinds share
/// one spec type; a derived kind needs a spec type of its own, so this one wraps it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "instancetype.kubevirt.io",
    version = "v1beta1",
    kind = "VirtualMachineClusterInstancetype",
    plural = "virtualmachineclusterinstancetypes",
    singular = "virtualmachineclusterinstancetype",
    shortname = "vmclusterinstancetype",
    shortname = "vmclusterinstancetypes",
    shortname = "vmcf",
    shortname = "vmcfs",
    derive = "PartialEq",
    doc = "VirtualMachineClusterInstancetype is a cluster scoped version of VirtualMachineInstancetype resource."
)]
pub struct ClusterInstancetypeSpec {
    /// The spec, as a namespaced instancetype's.
    #[serde(flatten)]
    pub spec: VirtualMachineInstancetypeSpec,
}

impl Deref for ClusterInstancetypeSpec {
    type Target = VirtualMachineInstancetypeSpec;
    fn deref(&self) -> &Self::Target {
        &self.spec
    }
}

impl DerefMut for ClusterInstancetypeSpec {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.spec
    }
}
