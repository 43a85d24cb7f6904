//! The network interfaces of a domain: the binding that connects each to its network, its
//! guest-visible identity (model, MAC, PCI and ACPI addresses) and DHCP settings.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A network interface of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// The name, the same as the network's.
    pub name: String,
    /// The device model such as `virtio` or `e1000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A fixed MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// Bridge binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<InterfaceBridge>,
    /// Masquerade (NAT) binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masquerade: Option<InterfaceMasquerade>,
    /// SR-IOV binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sriov: Option<InterfaceSriov>,
    /// User-mode (slirp) binding, no longer supported upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slirp: Option<DeprecatedInterfaceSlirp>,
    /// passt binding, replaced upstream by the passt binding plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passt: Option<DeprecatedInterfacePasst>,
    /// macvtap binding, replaced upstream by the macvtap binding plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub macvtap: Option<DeprecatedInterfaceMacvtap>,
    /// A network binding plugin, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<PluginBinding>,
    /// Ports forwarded to the guest with masquerade; all when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<Port>>,
    /// The boot order of the interface (network boot), lower first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub boot_order: Option<u32>,
    /// The guest PCI address, `domain:bus:slot.function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
    /// Extra settings of the DHCP server the binding runs for the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_options: Option<DhcpOptions>,
    /// The ACPI index, which gives the guest a stable interface name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi_index: Option<i32>,
    /// The link state asked for: `up` (default), `down` or `absent` (hot-unplug).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// A tag the guest sees in its device metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// The bridge binding (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct InterfaceBridge {}

/// The masquerade binding (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct InterfaceMasquerade {}

/// The SR-IOV binding (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct InterfaceSriov {}

/// The slirp binding (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedInterfaceSlirp {}

/// The core passt binding (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedInterfacePasst {}

/// The core macvtap binding (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedInterfaceMacvtap {}

/// A binding plugin, named as in the KubeVirt CR's network configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginBinding {
    /// The plugin's name.
    pub name: String,
}

/// A port forwarded to the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    /// A name for the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `TCP` (default) or `UDP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The port number.
    pub port: i32,
}

/// Settings the binding's DHCP server hands the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DhcpOptions {
    /// The boot file name (option 67).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_file_name: Option<String>,
    /// The TFTP server name (option 66).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tftp_server_name: Option<String>,
    /// NTP server addresses (option 42).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntp_servers: Option<Vec<String>>,
    /// Site-specific options (224 to 254) and their values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_options: Option<Vec<DhcpPrivateOptions>>,
}

/// One private DHCP option.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DhcpPrivateOptions {
    /// The option number, 224 to 254.
    pub option: i32,
    /// Its value.
    pub value: String,
}

impl Interface {
    /// The binding methods set on this interface, by their field names.
    pub fn binding_methods(&self) -> Vec<&'static str> {
        [
            ("bridge", self.bridge.is_some()),
            ("masquerade", self.masquerade.is_some()),
            ("sriov", self.sriov.is_some()),
            ("binding", self.binding.is_some()),
            ("slirp", self.slirp.is_some()),
            ("passt", self.passt.is_some()),
            ("macvtap", self.macvtap.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }
}
