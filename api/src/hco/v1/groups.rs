//! The sections of v1's spec, each holding the v1beta1 fields it groups.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::NodePlacement;
use crate::hco::sections::{
    CertConfig, ChangedBlockTrackingSelectors, CommonInstancetypesDeployment,
    DataImportCronTemplate, FilesystemOverhead, HigherWorkloadDensity, Hypervisor,
    InstancetypeConfig, InterfaceBindingPlugin, KsmConfiguration, KubeMacPoolConfig,
    LiveMigrationConfig, LiveUpdateConfiguration, LogVerbosityConfig,
    NodeMediatedDeviceTypesConfig, PermittedHostDevices, StorageImportConfig,
    StorageWorkloadResources, TlsSecurityProfile, WorkloadUpdateStrategy,
};

/// KubeVirt's settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Virtualization {
    /// Namespaces whose VMs get CPU limits set.
    #[serde(
        default,
        rename = "autoCPULimitNamespaceLabelSelector",
        skip_serializing_if = "Option::is_none"
    )]
    pub auto_cpu_limit_namespace_label_selector: Option<LabelSelector>,
    /// Which namespaces and VMs get changed block tracking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_block_tracking_label_selectors: Option<ChangedBlockTrackingSelectors>,
    /// What happens to VMs on node drain: `None`, `LiveMigrate`, `LiveMigrateIfPossible`,
    /// `External`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    /// Memory overcommit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub higher_workload_density: Option<HigherWorkloadDensity>,
    /// The hypervisors VMs may run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisors: Option<Vec<Hypervisor>>,
    /// Kernel samepage merging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ksm_configuration: Option<KsmConfiguration>,
    /// Live migration settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_migration_config: Option<LiveMigrationConfig>,
    /// Bounds of CPU and memory hotplug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_update_configuration: Option<LiveUpdateConfiguration>,
    /// Mediated device types to create on nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices_configuration: Option<MediatedDevicesConfiguration>,
    /// CPU models added to HCO's own obsolete ones.
    #[serde(
        default,
        rename = "obsoleteCPUModels",
        skip_serializing_if = "Option::is_none"
    )]
    pub obsolete_cpu_models: Option<Vec<String>>,
    /// Host devices VMs may be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permitted_host_devices: Option<PermittedHostDevices>,
    /// Whether KubeVirt's roles aggregate to the default ones: `AggregateToDefault`,
    /// `Manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_aggregation_strategy: Option<String>,
    /// KubeVirt's client rate limits: `annotation` or `highBurst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning_policy: Option<String>,
    /// VM options of KubeVirt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_options: Option<VirtualMachineOptions>,
    /// Virtual CPUs per physical CPU requested.
    #[serde(
        default,
        rename = "vmiCPUAllocationRatio",
        skip_serializing_if = "Option::is_none"
    )]
    pub vmi_cpu_allocation_ratio: Option<i32>,
    /// How running VMs move onto a new KubeVirt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_update_strategy: Option<WorkloadUpdateStrategy>,
}

/// v1's mediated devices: a switch, the cluster-wide types and per-node ones.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MediatedDevicesConfiguration {
    /// Whether HCO configures mediated devices at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The types to create on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_device_types: Option<Vec<String>>,
    /// Types for the nodes a selector picks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_mediated_device_types: Option<Vec<NodeMediatedDeviceTypesConfig>>,
}

/// v1's VM options, the default CPU model and runtime class among them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineOptions {
    /// The CPU model VMs get when they name none.
    #[serde(
        default,
        rename = "defaultCPUModel",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_cpu_model: Option<String>,
    /// The runtime class VMs' pods get when they name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_runtime_class: Option<String>,
    /// Turn off free page reporting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_free_page_reporting: Option<bool>,
    /// Turn off the serial console log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_serial_console_log: Option<bool>,
}

/// Storage settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// The share of volumes kept for filesystem metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem_overhead: Option<FilesystemOverhead>,
    /// SCSI persistent reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_reservation_configuration: Option<PersistentReservationConfiguration>,
    /// The storage class of CDI's scratch space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_space_storage_class: Option<String>,
    /// Import settings passed to CDI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_import: Option<StorageImportConfig>,
    /// The storage class of VM state (TPM, EFI) volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_state_storage_class: Option<String>,
    /// Resources of the storage workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_resource_requirements: Option<StorageWorkloadResources>,
}

/// Whether SCSI persistent reservation is on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentReservationConfiguration {
    /// Turn it on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Network settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Networking {
    /// The MAC address range of kubemacpool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_mac_pool_configuration: Option<KubeMacPoolConfig>,
    /// The IP the secondary DNS serves on.
    #[serde(
        default,
        rename = "kubeSecondaryDNSNameServerIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_secondary_dns_name_server_ip: Option<String>,
    /// Network binding plugins by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_binding: Option<BTreeMap<String, InterfaceBindingPlugin>>,
}

/// Common templates, boot sources and instance types.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSources {
    /// The namespace of the common boot sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_boot_image_namespace: Option<String>,
    /// Whether the common instance types are deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_instancetypes_deployment: Option<CommonInstancetypesDeployment>,
    /// The namespace of the common templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_templates_namespace: Option<String>,
    /// Boot source crons added to (or overriding) the common ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_import_cron_templates: Option<Vec<DataImportCronTemplate>>,
    /// Import the common boot sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_common_boot_image_import: Option<bool>,
    /// Boot sources for every workload architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_multi_arch_boot_image_import: Option<bool>,
    /// How VMs hold the instance types they name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instancetype_config: Option<InstancetypeConfig>,
}

/// Certificates and TLS.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Security {
    /// Certificate rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config: Option<CertConfig>,
    /// The TLS profile the components serve with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_security_profile: Option<TlsSecurityProfile>,
}

/// Placement, uninstalling, logging and optional components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// The application-aware quota operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_aware_config: Option<ApplicationAwareConfig>,
    /// Deploy the network resources injector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_network_resources_injector: Option<bool>,
    /// Deploy the VM console proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_vm_console_proxy: Option<bool>,
    /// Log verbosity of the components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_verbosity_config: Option<LogVerbosityConfig>,
    /// Placement of the control plane and of workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_placements: Option<NodePlacements>,
    /// What uninstalling does: `RemoveWorkloads` or `BlockUninstallIfWorkloadsExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall_strategy: Option<String>,
}

/// v1's application-aware quota settings: v1beta1's with the switch that deploys it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationAwareConfig {
    /// Also deploy the cluster-wide quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_application_aware_cluster_resource_quota: Option<bool>,
    /// Deploy the application-aware quota operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    /// The namespaces the quota applies in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// How a VM's usage is counted: `VmiPodUsage`, `VirtualResources`,
    /// `DedicatedVirtualResources`, `IgnoreVmiCalculator`, `GuestEffectiveResources`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmi_calc_config_name: Option<String>,
}

/// Placement of the two groups of components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacements {
    /// The control plane of every component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<NodePlacement>,
    /// Workloads (VMs, importer pods, node agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<NodePlacement>,
}

/// The metrics, alerts and recording rules kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Observability {
    /// The alerts kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_alerts: Option<Vec<String>>,
    /// The recording rules kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_recording_rules: Option<Vec<String>>,
    /// The workloads' metrics kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<WorkloadsObservability>,
}

/// The workloads' metrics kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadsObservability {
    /// The metric names kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_metrics: Option<Vec<String>>,
}
