//! The virtual CPU of a domain: topology, model, features, pinning, NUMA and realtime.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The virtual CPU topology, model and placement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Cores per socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub cores: Option<u32>,
    /// Sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub sockets: Option<u32>,
    /// The most sockets CPU hotplug may grow the guest to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub max_sockets: Option<u32>,
    /// Threads per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub threads: Option<u32>,
    /// The CPU model, `host-passthrough`, `host-model` or a named model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// CPU flags added to or removed from the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<CpuFeature>>,
    /// Whether each vCPU is pinned to a host CPU of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedicated_cpu_placement: Option<bool>,
    /// Whether the emulator thread gets a dedicated host CPU of its own too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolate_emulator_thread: Option<bool>,
    /// The guest NUMA topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<Numa>,
    /// Realtime scheduling of the vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime: Option<Realtime>,
}

/// A CPU flag and what to do with it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuFeature {
    /// The flag, such as `vmx` or `pcid`.
    pub name: String,
    /// `force`, `require` (the default), `optional`, `disable` or `forbid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// The guest NUMA topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Numa {
    /// Mirror the host NUMA cells the pinned vCPUs and huge pages land on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_mapping_passthrough: Option<NumaGuestMappingPassthrough>,
}

/// The guest's NUMA cells follow the host's; no settings, present or absent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NumaGuestMappingPassthrough {}

/// Realtime scheduling of the vCPUs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Realtime {
    /// The vCPUs that run realtime, as a libvirt CPU set such as `0-3,^1`; all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<String>,
}
