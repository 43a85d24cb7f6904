//! The component parts of the KubeVirt CR's `spec.configuration`: the components' API
//! client settings, per-architecture defaults, log verbosity, the launchers' seccomp profile
//! and support container resources, and TLS.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::kubevirt_config_devices::ResourceRequirementsWithoutClaims;

/// Settings of a component that take effect without a restart.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReloadableComponentConfiguration {
    /// The component's client of the Kubernetes API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest_client: Option<RestClientConfiguration>,
}

/// A client of the Kubernetes API.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestClientConfiguration {
    /// How fast the client may send requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limiter: Option<RateLimiter>,
}

/// A client's rate limiter.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimiter {
    /// A token bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_bucket_rate_limiter: Option<TokenBucketRateLimiter>,
}

/// A token bucket: a steady rate with bursts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenBucketRateLimiter {
    /// The most requests at once.
    pub burst: i32,
    /// Requests per second.
    pub qps: f64,
}

/// Defaults per CPU architecture.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArchConfiguration {
    /// x86-64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amd64: Option<ArchSpecificConfiguration>,
    /// AArch64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm64: Option<ArchSpecificConfiguration>,
    /// The architecture a VMI that names none gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_architecture: Option<String>,
    /// Deprecated: POWER.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppc64le: Option<ArchSpecificConfiguration>,
}

/// The defaults of one architecture.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArchSpecificConfiguration {
    /// Machine types VMIs may ask for (glob patterns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated_machines: Option<Vec<String>>,
    /// The machine type a VMI that names none gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// Where the OVMF firmware is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ovmf_path: Option<String>,
}

/// Log verbosity per component and per node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogVerbosity {
    /// virt-handler and launcher verbosity by node name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_verbosity: Option<BTreeMap<String, i32>>,
    /// virt-api's verbosity.
    #[serde(default, rename = "virtAPI", skip_serializing_if = "Option::is_none")]
    pub virt_api: Option<i32>,
    /// virt-controller's verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virt_controller: Option<i32>,
    /// virt-handler's verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virt_handler: Option<i32>,
    /// The launchers' verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virt_launcher: Option<i32>,
    /// virt-operator's verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virt_operator: Option<i32>,
    /// The synchronization controller's verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virt_synchronization_controller: Option<i32>,
}

/// The seccomp profile of launcher pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeccompConfiguration {
    /// The profile of the pods that run VMIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_instance_profile: Option<VirtualMachineInstanceProfile>,
}

/// The seccomp profile of VMI pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceProfile {
    /// A profile other than the container runtime's unconfined default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_profile: Option<CustomProfile>,
}

/// A seccomp profile: a file on the node or the runtime's default.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomProfile {
    /// A profile file under the kubelet's seccomp directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localhost_profile: Option<String>,
    /// The container runtime's default profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_default_profile: Option<bool>,
}

/// Resources of one type of the launcher's support containers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SupportContainerResources {
    /// The requests and limits.
    pub resources: ResourceRequirementsWithoutClaims,
    /// The container type: `hotplug-disk`, `container-disk`, `virtiofs`, `sidecar`, ….
    #[serde(rename = "type")]
    pub type_: String,
}

/// The TLS version and ciphers KubeVirt's servers accept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsConfiguration {
    /// Cipher suites (not with TLS 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ciphers: Option<Vec<String>>,
    /// `VersionTLS10` to `VersionTLS13`.
    #[serde(
        default,
        rename = "minTLSVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_tls_version: Option<String>,
}
