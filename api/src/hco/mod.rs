//! hco.kubevirt.io HyperConverged: the single object that configures KubeVirt, CDI, HPP,
//! SSP and CNAO together. This module's types are v1beta1's, the version HCO's checks and
//! controller here read (the API server converts); [`v1`] is the storage version and
//! [`conversion`] moves an HC between the two. Every field upstream's CRD declares is
//! typed, so a misspelt one is refused; [`sections`] holds the settings both versions share.

pub mod conversion;
pub mod schema;
pub mod sections;
pub mod status;
pub mod v1;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::NodePlacement;
pub use sections::*;
pub use status::HyperConvergedStatus;

/// The API group.
pub const GROUP: &str = "hco.kubevirt.io";

/// The default HCO's CRD gives `spec.certConfig.<part>.<field>` (`ca` or `server`;
/// `duration` or `renewBefore`), in Go's duration syntax.
pub fn default_cert_duration(part: &str, field: &str) -> &'static str {
    match (part, field) {
        ("ca", "duration") => "48h0m0s",
        ("ca", _) | ("server", "duration") => "24h0m0s",
        _ => "12h0m0s",
    }
}

/// The desired state of the whole platform.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hco.kubevirt.io",
    version = "v1beta1",
    kind = "HyperConverged",
    namespaced,
    status = "HyperConvergedStatus",
    shortname = "hco",
    shortname = "hcos",
    derive = "PartialEq",
    doc = "HyperConverged is the Schema for the hyperconvergeds API"
)]
#[serde(rename_all = "camelCase")]
pub struct HyperConvergedSpec {
    /// Whether the common instance types are deployed (upstream's capital C).
    #[serde(
        default,
        rename = "CommonInstancetypesDeployment",
        skip_serializing_if = "Option::is_none"
    )]
    pub common_instancetypes_deployment: Option<CommonInstancetypesDeployment>,
    /// The application-aware quota operator's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_aware_config: Option<ApplicationAwareConfig>,
    /// Certificate rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config: Option<CertConfig>,
    /// Which namespaces and VMs get changed block tracking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_block_tracking_label_selectors: Option<ChangedBlockTrackingSelectors>,
    /// The namespace of the common boot sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_boot_image_namespace: Option<String>,
    /// The namespace of the common templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_templates_namespace: Option<String>,
    /// Boot source crons added to (or overriding) the common ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_import_cron_templates: Option<Vec<DataImportCronTemplate>>,
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
    /// Deploy the VM console proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_vm_console_proxy: Option<bool>,
    /// Deploy the application-aware quota operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_application_aware_quota: Option<bool>,
    /// Import the common boot sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_common_boot_image_import: Option<bool>,
    /// What happens to VMs on node drain: `None`, `LiveMigrate`, `LiveMigrateIfPossible`,
    /// `External`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<String>,
    /// Feature gates by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<HyperConvergedFeatureGates>,
    /// The share of volumes kept for filesystem metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem_overhead: Option<FilesystemOverhead>,
    /// Memory overcommit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub higher_workload_density: Option<HigherWorkloadDensity>,
    /// The hypervisors VMs may run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisors: Option<Vec<Hypervisor>>,
    /// Placement of the control plane of every component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<HyperConvergedConfig>,
    /// How VMs hold the instance types they name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instancetype_config: Option<InstancetypeConfig>,
    /// Kernel samepage merging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ksm_configuration: Option<KsmConfiguration>,
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
    /// Live migration settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_migration_config: Option<LiveMigrationConfig>,
    /// Bounds of CPU and memory hotplug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_update_configuration: Option<LiveUpdateConfiguration>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_storage_class_name: Option<String>,
    /// Log verbosity of the components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_verbosity_config: Option<LogVerbosityConfig>,
    /// Mediated device types to create on nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices_configuration: Option<MediatedDevicesConfiguration>,
    /// Network binding plugins by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_binding: Option<BTreeMap<String, InterfaceBindingPlugin>>,
    /// CPU models VMs are not scheduled for.
    #[serde(
        default,
        rename = "obsoleteCPUs",
        skip_serializing_if = "Option::is_none"
    )]
    pub obsolete_cpus: Option<ObsoleteCpus>,
    /// Host devices VMs may be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permitted_host_devices: Option<PermittedHostDevices>,
    /// CPU allocation and the storage workloads' resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_requirements: Option<OperandResourceRequirements>,
    /// Whether KubeVirt's roles aggregate to the default ones: `AggregateToDefault`,
    /// `Manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_aggregation_strategy: Option<String>,
    /// The storage class of CDI's scratch space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_space_storage_class: Option<String>,
    /// Import settings passed to CDI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_import: Option<StorageImportConfig>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tekton_pipelines_namespace: Option<String>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tekton_tasks_namespace: Option<String>,
    /// The TLS profile the components serve with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_security_profile: Option<TlsSecurityProfile>,
    /// KubeVirt's client rate limits: `annotation` or `highBurst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning_policy: Option<String>,
    /// What uninstalling does: `RemoveWorkloads` or `BlockUninstallIfWorkloadsExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall_strategy: Option<String>,
    /// Deprecated: the VDDK init image of CDI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vddk_init_image: Option<String>,
    /// VM options of KubeVirt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_options: Option<VirtualMachineOptions>,
    /// The storage class of VM state (TPM, EFI) volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_state_storage_class: Option<String>,
    /// How running VMs move onto a new KubeVirt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_update_strategy: Option<WorkloadUpdateStrategy>,
    /// Placement of workloads (VMs, importer pods, node agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<HyperConvergedConfig>,
}

/// Placement of a group of components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperConvergedConfig {
    /// Node selector, affinity and tolerations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_placement: Option<NodePlacement>,
}

/// The application-aware quota operator's settings (v1 adds `enable`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationAwareConfig {
    /// Also deploy the cluster-wide quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_application_aware_cluster_resource_quota: Option<bool>,
    /// The namespaces the quota applies in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// How a VM's usage is counted: `VmiPodUsage`, `VirtualResources`,
    /// `DedicatedVirtualResources`, `IgnoreVmiCalculator`, `GuestEffectiveResources`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmi_calc_config_name: Option<String>,
}

/// v1beta1's feature gates, one flag each.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperConvergedFeatureGates {
    /// Pin a VM's vCPUs to whole host cores.
    #[serde(default, rename = "alignCPUs", skip_serializing_if = "Option::is_none")]
    pub align_cpus: Option<bool>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_resource_limits: Option<bool>,
    /// Volumes from a path in the VM's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_path_volumes: Option<bool>,
    /// Migrations between clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decentralized_live_migration: Option<bool>,
    /// Hotplug volumes by editing the VM spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declarative_hotplug_volumes: Option<bool>,
    /// Deploy the secondary DNS.
    #[serde(
        default,
        rename = "deployKubeSecondaryDNS",
        skip_serializing_if = "Option::is_none"
    )]
    pub deploy_kube_secondary_dns: Option<bool>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_kubevirt_ipam_controller: Option<bool>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_tekton_task_resources: Option<bool>,
    /// Deprecated: use `deployVmConsoleProxy` of the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_vm_console_proxy: Option<bool>,
    /// Leave mediated devices unconfigured.
    #[serde(
        default,
        rename = "disableMDevConfiguration",
        skip_serializing_if = "Option::is_none"
    )]
    pub disable_mdev_configuration: Option<bool>,
    /// Host metrics shown to guests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downward_metrics: Option<bool>,
    /// Deprecated: use `enableApplicationAwareQuota` of the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_application_aware_quota: Option<bool>,
    /// Deprecated: use `enableCommonBootImageImport` of the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_common_boot_image_import: Option<bool>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_managed_tenant_quota: Option<bool>,
    /// Boot sources for every workload architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_multi_arch_boot_image_import: Option<bool>,
    /// Incremental VM backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental_backup: Option<bool>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_root: Option<bool>,
    /// The object graph subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_graph: Option<bool>,
    /// SCSI persistent reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_reservation: Option<bool>,
    /// Deprecated and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_user_defined_network_binding: Option<bool>,
    /// The video device's type chosen per VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_config: Option<bool>,
    /// Deprecated and ignored.
    #[serde(
        default,
        rename = "withHostPassthroughCPU",
        skip_serializing_if = "Option::is_none"
    )]
    pub with_host_passthrough_cpu: Option<bool>,
}

/// v1beta1's mediated devices: v1's without `enabled`, with the deprecated spelling.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MediatedDevicesConfiguration {
    /// The types to create on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_device_types: Option<Vec<String>>,
    /// Deprecated: use `mediatedDeviceTypes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices_types: Option<Vec<String>>,
    /// Types for the nodes a selector picks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_mediated_device_types: Option<Vec<NodeMediatedDeviceTypes>>,
}

/// v1beta1's mediated device types for the nodes a selector picks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMediatedDeviceTypes {
    /// The types to create on these nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_device_types: Option<Vec<String>>,
    /// Deprecated: use `mediatedDeviceTypes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices_types: Option<Vec<String>>,
    /// The labels a node must have.
    pub node_selector: BTreeMap<String, String>,
}

/// CPU models VMs are not scheduled for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObsoleteCpus {
    /// Models added to HCO's own obsolete ones.
    #[serde(default, rename = "cpuModels", skip_serializing_if = "Option::is_none")]
    pub cpu_models: Option<Vec<String>>,
    /// Deprecated and ignored.
    #[serde(
        default,
        rename = "minCPUModel",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_cpu_model: Option<String>,
}

/// v1beta1's resource settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperandResourceRequirements {
    /// Namespaces whose VMs get CPU limits set.
    #[serde(
        default,
        rename = "autoCPULimitNamespaceLabelSelector",
        skip_serializing_if = "Option::is_none"
    )]
    pub auto_cpu_limit_namespace_label_selector: Option<LabelSelector>,
    /// Resources of the storage workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_workloads: Option<StorageWorkloadResources>,
    /// Virtual CPUs per physical CPU requested.
    #[serde(
        default,
        rename = "vmiCPUAllocationRatio",
        skip_serializing_if = "Option::is_none"
    )]
    pub vmi_cpu_allocation_ratio: Option<i32>,
}

/// v1beta1's VM options.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineOptions {
    /// Turn off free page reporting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_free_page_reporting: Option<bool>,
    /// Turn off the serial console log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_serial_console_log: Option<bool>,
}

#[cfg(test)]
mod tests;
