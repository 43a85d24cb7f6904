//! The KubeVirt CR's `spec.configuration` (upstream's `v1.KubeVirtConfiguration`): the
//! cluster-wide settings of virt-api, virt-controller, virt-handler and the launchers.
//! Devices, network bindings and the components' client settings are in
//! [`super::kubevirt_config_devices`] and [`super::kubevirt_config_components`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::kubevirt_config_components::{
    ArchConfiguration, LogVerbosity, ReloadableComponentConfiguration, SeccompConfiguration,
    SupportContainerResources, TlsConfiguration,
};
use super::kubevirt_config_devices::{
    MediatedDevicesConfiguration, NetworkConfiguration, PermittedHostDevices,
};

/// Cluster-wide configuration of KubeVirt.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtConfiguration {
    /// Scales the launcher's memory overhead by this ratio (a decimal string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_guest_memory_overhead_ratio: Option<String>,
    /// Client settings of virt-api.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_configuration: Option<ReloadableComponentConfiguration>,
    /// Machine type, firmware and emulated machines per CPU architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture_configuration: Option<ArchConfiguration>,
    /// Namespaces whose launcher pods get a CPU limit of one CPU per vCPU.
    #[serde(
        default,
        rename = "autoCPULimitNamespaceLabelSelector",
        skip_serializing_if = "Option::is_none"
    )]
    pub auto_cpu_limit_namespace_label_selector: Option<LabelSelector>,
    /// Whether virt-operator deploys the common instance types and preferences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_instancetypes_deployment: Option<CommonInstancetypesDeployment>,
    /// Client settings of virt-controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_configuration: Option<ReloadableComponentConfiguration>,
    /// The CPU model a VMI that names none gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// The CPU a launcher pod requests per vCPU when the VMI asks for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<Quantity>,
    /// The runtime class a VMI that names none runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_runtime_class: Option<String>,
    /// Feature gates, emulation, verbosity and other developer settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer_configuration: Option<DeveloperConfiguration>,
    /// Deprecated: the machine types a VMI may ask for (now per architecture).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated_machines: Option<Vec<String>>,
    /// The eviction strategy of VMIs that name none: `None`, `LiveMigrate`,
    /// `LiveMigrateIfPossible` or `External`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    /// Client settings of virt-handler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_configuration: Option<ReloadableComponentConfiguration>,
    /// Pull policy of the images VMIs use: `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// How VMs refer to their instance types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instancetype: Option<InstancetypeConfiguration>,
    /// The nodes where kernel samepage merging is turned on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ksm_configuration: Option<KsmConfiguration>,
    /// Limits of CPU and memory hotplug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_update_configuration: Option<LiveUpdateConfiguration>,
    /// Deprecated: the default machine type (now per architecture).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// Mediated device types to create on the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices_configuration: Option<MediatedDevicesConfiguration>,
    /// Seconds between memory balloon statistics polls (0 turns them off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_balloon_stats_period: Option<i64>,
    /// Cluster-wide live migration settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrations: Option<MigrationConfiguration>,
    /// The oldest CPU model node labelling considers.
    #[serde(
        default,
        rename = "minCPUModel",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_cpu_model: Option<String>,
    /// Pod network defaults and the network binding plugins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkConfiguration>,
    /// CPU model names mapped to whether they count as obsolete.
    #[serde(
        default,
        rename = "obsoleteCPUModels",
        skip_serializing_if = "Option::is_none"
    )]
    pub obsolete_cpu_models: Option<BTreeMap<String, bool>>,
    /// Deprecated: where the OVMF firmware is (now per architecture).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ovmf_path: Option<String>,
    /// Host devices VMIs may be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permitted_host_devices: Option<PermittedHostDevices>,
    /// The seccomp profile of launcher pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_configuration: Option<SeccompConfiguration>,
    /// The SELinux type of launcher pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selinux_launcher_type: Option<String>,
    /// The SMBIOS values guests see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smbios: Option<SmBiosConfiguration>,
    /// Resources of the support containers of launcher pods, by container type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub support_container_resources: Option<Vec<SupportContainerResources>>,
    /// Guest agent versions reported as supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported_guest_agent_versions: Option<Vec<String>>,
    /// The TLS version and ciphers KubeVirt's servers accept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_configuration: Option<TlsConfiguration>,
    /// The most VMIs one node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_instances_per_node: Option<i32>,
    /// Defaults of VMs' domain options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_options: Option<VirtualMachineOptions>,
    /// How a changed VM reaches its running VMI: `Stage` or `LiveUpdate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_rollout_strategy: Option<String>,
    /// The storage class of VMs' persistent state (TPM, EFI variables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_state_storage_class: Option<String>,
    /// Client settings of virt-api's webhooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_configuration: Option<ReloadableComponentConfiguration>,
}

/// Whether the common instance types are deployed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonInstancetypesDeployment {
    /// Deploy them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Developer settings: feature gates, emulation, overcommit, log verbosity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeveloperConfiguration {
    /// Turns on the cluster profiler endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_profiler: Option<bool>,
    /// vCPUs per node CPU a launcher pod requests for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_allocation_ratio: Option<i32>,
    /// Limits of disk image verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_verification: Option<DiskVerification>,
    /// The gated features turned on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<Vec<String>>,
    /// Log verbosity per component and per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_verbosity: Option<LogVerbosity>,
    /// Percent of guest memory the launcher requests (100 asks for all of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_overcommit: Option<i32>,
    /// The lowest TSC frequency a node must have for VMs needing an invariant TSC.
    #[serde(
        default,
        rename = "minimumClusterTSCFrequency",
        skip_serializing_if = "Option::is_none"
    )]
    pub minimum_cluster_tsc_frequency: Option<i64>,
    /// Bytes of a claim left free of the disk image.
    #[serde(
        default,
        rename = "minimumReservePVCBytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub minimum_reserve_pvc_bytes: Option<i64>,
    /// Labels launcher pods select nodes by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<BTreeMap<String, String>>,
    /// Percent by which a claim may be smaller than its disk image.
    #[serde(
        default,
        rename = "pvcTolerateLessSpaceUpToPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub pvc_tolerate_less_space_up_to_percent: Option<i32>,
    /// Run guests under software emulation when the node has no usable KVM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_emulation: Option<bool>,
}

/// Limits of disk image verification.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskVerification {
    /// The memory the verifying process may use.
    pub memory_limit: Quantity,
}

/// How VMs refer to instance types.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstancetypeConfiguration {
    /// `reference`, `expand` or `expandAll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_policy: Option<String>,
}

/// The nodes where kernel samepage merging is turned on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KsmConfiguration {
    /// Selects those nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_label_selector: Option<LabelSelector>,
}

/// Limits of CPU and memory hotplug.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveUpdateConfiguration {
    /// The most CPU sockets a VM may grow to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cpu_sockets: Option<i64>,
    /// The most guest memory a VM may grow to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_guest: Option<Quantity>,
    /// The factor of the initial size hotplug may grow to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hotplug_ratio: Option<i64>,
}

/// Cluster-wide live migration settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationConfiguration {
    /// Let QEMU throttle the guest CPU so a migration converges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_auto_converge: Option<bool>,
    /// Let a migration switch to post-copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_post_copy: Option<bool>,
    /// Let a stalled migration pause the guest to finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_workload_disruption: Option<bool>,
    /// Bandwidth one migration may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_per_migration: Option<Quantity>,
    /// Seconds per GiB of guest memory before a migration is cancelled.
    #[serde(
        default,
        rename = "completionTimeoutPerGiB",
        skip_serializing_if = "Option::is_none"
    )]
    pub completion_timeout_per_gib: Option<i64>,
    /// Migrate without TLS.
    #[serde(
        default,
        rename = "disableTLS",
        skip_serializing_if = "Option::is_none"
    )]
    pub disable_tls: Option<bool>,
    /// Give the target pod the source's SELinux level.
    #[serde(
        default,
        rename = "matchSELinuxLevelOnMigration",
        skip_serializing_if = "Option::is_none"
    )]
    pub match_selinux_level_on_migration: Option<bool>,
    /// The network attachment migrations use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// The node taint that makes VMIs migrate away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_drain_taint_key: Option<String>,
    /// Migrations the cluster runs at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_migrations_per_cluster: Option<i64>,
    /// Outgoing migrations one node runs at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_outbound_migrations_per_node: Option<i64>,
    /// Seconds without progress before a migration is cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_timeout: Option<i64>,
    /// Migrate VMIs even where it is deemed unsafe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsafe_migration_override: Option<bool>,
}

/// The SMBIOS values guests see.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SmBiosConfiguration {
    /// System family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// System manufacturer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// Product name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    /// Stock keeping unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    /// Product version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Defaults of VMs' domain options.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineOptions {
    /// Present: the balloon does not report free pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_free_page_reporting: Option<DisableFreePageReporting>,
    /// Present: the serial console is not logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_serial_console_log: Option<DisableSerialConsoleLog>,
}

/// A marker: free page reporting is off.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DisableFreePageReporting {}

/// A marker: serial console logging is off.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DisableSerialConsoleLog {}

#[cfg(test)]
#[path = "kubevirt_config_tests.rs"]
mod tests;
