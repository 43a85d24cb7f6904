//! HyperConverged settings both versions carry with the same shape: v1beta1 puts them at
//! the top of its spec, v1 in its sections (see [`super::v1`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cdi::DataImportCronSpec;
// HCO embeds these from KubeVirt, CDI and OpenShift unchanged: one definition each.
pub use crate::cdi::operator::FilesystemOverhead;
pub use crate::common::{CustomTlsProfile, EmptyProfile, TlsSecurityProfile};
pub use crate::kubevirt::kubevirt_config::{
    CommonInstancetypesDeployment, KsmConfiguration, LiveUpdateConfiguration,
};
pub use crate::kubevirt::kubevirt_config_components::LogVerbosity;
pub use crate::kubevirt::kubevirt_config_devices::{
    InterfaceBindingMigration, InterfaceBindingPlugin, ResourceRequirementsWithoutClaims,
    UsbSelector,
};

/// Rotation of the CA and server certificates HCO's components serve with.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertConfig {
    /// The CA certificate's lifetime and renewal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CertRotateConfig>,
    /// The server certificates' lifetime and renewal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<CertRotateConfig>,
}

/// A certificate's lifetime and how long before its end it is renewed (Go durations).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertRotateConfig {
    /// How long a certificate is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// How long before its end a certificate is renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before: Option<String>,
}

/// Which namespaces and VMs get changed block tracking.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedBlockTrackingSelectors {
    /// Namespaces whose VMs are tracked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_label_selector: Option<LabelSelector>,
    /// VMs tracked whatever their namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_label_selector: Option<LabelSelector>,
}

/// A DataImportCron HCO creates for a boot source: its metadata and spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataImportCronTemplate {
    /// The cron's name, labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The cron's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<DataImportCronSpec>,
}

/// Memory overcommit for a denser placement of VMs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HigherWorkloadDensity {
    /// The guest memory given per 100 units of requested memory (100: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_overcommit_percentage: Option<i32>,
}

/// A hypervisor VMs may run on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hypervisor {
    /// `kvm` or `hyperv-direct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// How VMs hold the instance types they name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstancetypeConfig {
    /// `reference`, `expand` or `expandAll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_policy: Option<String>,
}

/// The MAC address range kubemacpool allocates from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeMacPoolConfig {
    /// The last address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_end: Option<String>,
    /// The first address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_start: Option<String>,
}

/// Live migration settings passed to KubeVirt.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveMigrationConfig {
    /// Throttle the guest's CPU when a migration does not converge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_auto_converge: Option<bool>,
    /// Switch to post-copy when a migration does not converge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_post_copy: Option<bool>,
    /// Let a stuck migration pause or post-copy the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_workload_disruption: Option<bool>,
    /// The bandwidth each migration may use, as a quantity string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_per_migration: Option<String>,
    /// Seconds per GiB of guest memory before a migration is cancelled.
    #[serde(
        default,
        rename = "completionTimeoutPerGiB",
        skip_serializing_if = "Option::is_none"
    )]
    pub completion_timeout_per_gib: Option<i64>,
    /// The network attachment migrations use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Migrations running at once in the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_migrations_per_cluster: Option<i32>,
    /// Migrations leaving one node at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_outbound_migrations_per_node: Option<i32>,
    /// Seconds without progress before a migration is cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_timeout: Option<i64>,
}

/// Log verbosity of the components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogVerbosityConfig {
    /// CDI's verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdi: Option<i32>,
    /// KubeVirt's verbosity, by component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<LogVerbosity>,
}

/// Mediated device types for the nodes a selector picks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMediatedDeviceTypesConfig {
    /// The types to create on these nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_device_types: Option<Vec<String>>,
    /// The labels a node must have.
    pub node_selector: BTreeMap<String, String>,
}

/// Host devices VMs may be given.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermittedHostDevices {
    /// Mediated devices by type name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices: Option<Vec<MediatedHostDevice>>,
    /// PCI devices by vendor and device ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_host_devices: Option<Vec<PciHostDevice>>,
    /// USB devices by vendor and product IDs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb_host_devices: Option<Vec<UsbHostDevice>>,
}

/// A permitted mediated device type.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MediatedHostDevice {
    /// Leaves the device out of KubeVirt's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Whether a device plugin outside KubeVirt serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_resource_provider: Option<bool>,
    /// The mediated device type's name.
    pub mdev_name_selector: String,
    /// The resource the device is requested by.
    pub resource_name: String,
}

/// A permitted PCI device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PciHostDevice {
    /// Leaves the device out of KubeVirt's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Whether a device plugin outside KubeVirt serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_resource_provider: Option<bool>,
    /// The vendor and device IDs, `vendor:device`.
    pub pci_device_selector: String,
    /// The resource the device is requested by.
    pub resource_name: String,
}

/// A permitted USB device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsbHostDevice {
    /// Leaves the device out of KubeVirt's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Whether a device plugin outside KubeVirt serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_resource_provider: Option<bool>,
    /// The resource the device is requested by.
    pub resource_name: String,
    /// The vendor and product IDs the device matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectors: Option<Vec<UsbSelector>>,
}

/// Import settings passed to CDI.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageImportConfig {
    /// Registries reached without TLS verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_registries: Option<Vec<String>>,
}

/// How running VMs are moved onto a new KubeVirt.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadUpdateStrategy {
    /// The wait between batches of evictions, a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_eviction_interval: Option<String>,
    /// VMs evicted per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_eviction_size: Option<i32>,
    /// `LiveMigrate` and/or `Evict`, tried in order; empty leaves VMs alone.
    pub workload_update_methods: Vec<String>,
}

/// Resources of the storage workloads (importer, uploader, cloner pods).
pub type StorageWorkloadResources = ResourceRequirements;
