//! The device and network parts of the KubeVirt CR's `spec.configuration`: host devices VMIs
//! may be given, mediated device types, pod network defaults and network binding plugins.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Mediated device types to create, cluster-wide and per node group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MediatedDevicesConfiguration {
    /// Types created on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_device_types: Option<Vec<String>>,
    /// Deprecated spelling of `mediatedDeviceTypes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices_types: Option<Vec<String>>,
    /// Types created on the nodes a selector matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_mediated_device_types: Option<Vec<NodeMediatedDeviceTypesConfig>>,
}

/// Mediated device types for the nodes with some labels.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMediatedDeviceTypesConfig {
    /// Types created on those nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_device_types: Option<Vec<String>>,
    /// Deprecated spelling of `mediatedDeviceTypes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices_types: Option<Vec<String>>,
    /// The labels those nodes have.
    pub node_selector: BTreeMap<String, String>,
}

/// Pod network defaults and the network binding plugins.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkConfiguration {
    /// Binding plugins by the name interfaces refer to them with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<BTreeMap<String, InterfaceBindingPlugin>>,
    /// The binding of the pod network interface virt-api adds: `bridge`, `masquerade`, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_network_interface: Option<String>,
    /// Allow the bridge binding on the pod network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permit_bridge_interface_on_pod_network: Option<bool>,
    /// Allow the deprecated slirp binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permit_slirp_interface: Option<bool>,
}

/// A network binding plugin.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceBindingPlugin {
    /// Resources the plugin adds to the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_resource_overhead: Option<ResourceRequirementsWithoutClaims>,
    /// How the interface attaches to the domain: `tap` or `managedTap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_attachment_type: Option<String>,
    /// Which downward API the plugin reads: `device-info`.
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<String>,
    /// How interfaces of this binding migrate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<InterfaceBindingMigration>,
    /// The network attachment definition (`namespace/name`) of the plugin's CNI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_attachment_definition: Option<String>,
    /// The sidecar image the plugin runs in the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar_image: Option<String>,
}

/// How interfaces of a binding plugin migrate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceBindingMigration {
    /// `link-refresh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// Requests and limits of a container, without resource claims.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirementsWithoutClaims {
    /// Limits by resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Requests by resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}

/// The host devices VMIs may be given, by kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermittedHostDevices {
    /// Mediated devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mediated_devices: Option<Vec<MediatedHostDevice>>,
    /// PCI devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_host_devices: Option<Vec<PciHostDevice>>,
    /// USB devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb: Option<Vec<UsbHostDevice>>,
}

/// A permitted mediated device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MediatedHostDevice {
    /// Another device plugin than virt-handler's advertises it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_resource_provider: Option<bool>,
    /// The mediated device type name it matches.
    pub mdev_name_selector: String,
    /// The resource name pods request it by.
    pub resource_name: String,
}

/// A permitted PCI device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PciHostDevice {
    /// Another device plugin than virt-handler's advertises it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_resource_provider: Option<bool>,
    /// `vendor:device` in hex.
    pub pci_vendor_selector: String,
    /// The resource name pods request it by.
    pub resource_name: String,
}

/// A permitted USB device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsbHostDevice {
    /// Another device plugin than virt-handler's advertises it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_resource_provider: Option<bool>,
    /// The resource name pods request it by.
    pub resource_name: String,
    /// The vendor and product pairs that make up the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectors: Option<Vec<UsbSelector>>,
}

/// A USB vendor and product, in hex.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsbSelector {
    /// The product ID.
    pub product: String,
    /// The vendor ID.
    pub vendor: String,
}
