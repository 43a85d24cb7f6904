//! The devices of a domain: disks, interfaces, inputs, watchdog, RNG.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Extra;

/// The devices of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Devices {
    /// The disks, each backed by the volume of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Vec<Disk>>,
    /// The network interfaces, each attached to the network of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<Interface>>,
    /// Whether a network interface is added automatically (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_pod_interface: Option<bool>,
    /// Whether a VNC display is attached (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_graphics_device: Option<bool>,
    /// Whether a serial console is attached (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_serial_console: Option<bool>,
    /// Whether a memory balloon is attached (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_mem_balloon: Option<bool>,
    /// A virtio random number generator fed from the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng: Option<Rng>,
    /// Input devices such as a USB or virtio tablet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Input>>,
    /// A watchdog device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<Watchdog>,
    /// Fields this version does not model (tpm, gpus, hostDevices, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A virtio random number generator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Rng {
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An input device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// The device name.
    pub name: String,
    /// The device type; only `tablet`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The bus: `usb` (default) or `virtio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
}

/// A watchdog device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Watchdog {
    /// The device name.
    pub name: String,
    /// An Intel 6300ESB watchdog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i6300esb: Option<I6300esbWatchdog>,
    /// Fields this version does not model (diag288).
    #[serde(flatten)]
    pub extra: Extra,
}

/// An Intel 6300ESB watchdog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct I6300esbWatchdog {
    /// What happens when it fires: `reset` (default), `poweroff` or `shutdown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// A disk of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// The name, the same as the volume's.
    pub name: String,
    /// Attached as a disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskTarget>,
    /// Attached as a CD-ROM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<DiskTarget>,
    /// Attached as a LUN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun: Option<DiskTarget>,
    /// The boot order, lower first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub boot_order: Option<u32>,
    /// The serial number the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The cache mode: `none`, `writethrough` or `writeback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// How a disk is attached.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskTarget {
    /// The bus: `virtio`, `sata`, `scsi` or `usb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

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
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub bridge: Option<serde_json::Value>,
    /// Masquerade (NAT) binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub masquerade: Option<serde_json::Value>,
    /// SR-IOV binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub sriov: Option<serde_json::Value>,
    /// A network binding plugin, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub binding: Option<serde_json::Value>,
    /// Ports forwarded to the guest with masquerade; all when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<Port>>,
    /// The boot order of the interface (network boot), lower first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub boot_order: Option<u32>,
    /// Fields this version does not model (pciAddress, dhcpOptions, …).
    #[serde(flatten)]
    pub extra: Extra,
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

impl Interface {
    /// The binding methods set on this interface.
    pub fn binding_methods(&self) -> Vec<&'static str> {
        let mut methods = Vec::new();
        for (name, set) in [
            ("bridge", self.bridge.is_some()),
            ("masquerade", self.masquerade.is_some()),
            ("sriov", self.sriov.is_some()),
            ("binding", self.binding.is_some()),
        ] {
            if set {
                methods.push(name);
            }
        }
        for name in ["slirp", "passt", "macvtap"] {
            if self.extra.contains_key(name) {
                methods.push(name);
            }
        }
        methods
    }
}
