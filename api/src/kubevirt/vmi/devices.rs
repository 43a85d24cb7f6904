//! The devices of a domain: the switches of `devices`, and the small devices (inputs,
//! watchdog, RNG, GPUs, host devices, filesystems, sound, TPM, video, panic devices). Disks
//! are in `devices_disks`, network interfaces in `devices_interfaces`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Disk, FeatureState, Interface};

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
    /// Whether a tablet input device is attached when none is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoattach_input_device: Option<bool>,
    /// Whether a virtio VSOCK device is attached.
    #[serde(
        default,
        rename = "autoattachVSOCK",
        skip_serializing_if = "Option::is_none"
    )]
    pub autoattach_vsock: Option<bool>,
    /// Whether the serial console's output is also written to the launcher's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_serial_console: Option<bool>,
    /// Whether virtio-blk disks get one queue per vCPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_multi_queue: Option<bool>,
    /// Whether virtio NICs get one queue pair per vCPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interface_multiqueue: Option<bool>,
    /// Whether virtio devices are transitional (usable by guests with legacy drivers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_virtio_transitional: Option<bool>,
    /// Whether no spare PCIe ports are reserved for hotplug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_hotplug: Option<bool>,
    /// A virtio random number generator fed from the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng: Option<Rng>,
    /// Input devices such as a USB or virtio tablet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Input>>,
    /// A watchdog device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<Watchdog>,
    /// GPUs passed through from the host or mediated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<Vec<Gpu>>,
    /// Host devices (PCI or mediated) passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_devices: Option<Vec<HostDevice>>,
    /// Directories shared with the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystems: Option<Vec<Filesystem>>,
    /// A sound card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sound: Option<SoundDevice>,
    /// An emulated TPM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<TpmDevice>,
    /// The video device of the display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<VideoDevice>,
    /// Devices through which the guest reports a panic to the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panic_devices: Option<Vec<PanicDevice>>,
    /// USB devices of a client's machine passed through the console connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_passthrough: Option<ClientPassthroughDevices>,
    /// A virtio-serial port through which the guest reads host metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downward_metrics: Option<DownwardMetrics>,
}

/// A virtio random number generator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Rng {}

/// Client USB passthrough through the console connection (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClientPassthroughDevices {}

/// The downward metrics serial device (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DownwardMetrics {}

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
    /// An s390x diag288 watchdog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diag288: Option<Diag288Watchdog>,
}

/// An Intel 6300ESB watchdog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct I6300esbWatchdog {
    /// What happens when it fires: `reset` (default), `poweroff` or `shutdown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// An s390x diag288 watchdog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Diag288Watchdog {
    /// What happens when it fires: `reset` (default), `poweroff` or `shutdown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// A GPU given to the guest, by device (resource) name or by resource claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    /// The device name in the VM.
    pub name: String,
    /// The extended resource that provides the GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The pod resource claim that provides the GPU (dynamic resource allocation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// The request within that claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_name: Option<String>,
    /// A tag the guest sees in its device metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Settings of a mediated (virtual) GPU.
    #[serde(
        default,
        rename = "virtualGPUOptions",
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_gpu_options: Option<VgpuOptions>,
}

/// Settings of a mediated GPU.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VgpuOptions {
    /// Whether and how the vGPU drives the VM's display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<VgpuDisplayOptions>,
}

/// The display of a mediated GPU.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VgpuDisplayOptions {
    /// Whether the vGPU is the display (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Whether a ramfb device shows the boot screen before the guest driver loads.
    #[serde(default, rename = "ramFB", skip_serializing_if = "Option::is_none")]
    pub ram_fb: Option<FeatureState>,
}

/// A host device passed through, by resource name or by resource claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostDevice {
    /// The device name in the VM.
    pub name: String,
    /// The extended resource that provides the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The pod resource claim that provides the device (dynamic resource allocation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// The request within that claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_name: Option<String>,
    /// A tag the guest sees in its device metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// A directory shared with the guest, backed by the volume of the same name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Filesystem {
    /// The name, the same as the volume's.
    pub name: String,
    /// Shared over virtiofs.
    pub virtiofs: FilesystemVirtiofs,
}

/// Sharing over virtiofs (no settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct FilesystemVirtiofs {}

/// A sound card.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SoundDevice {
    /// The device name.
    pub name: String,
    /// The model: `ich9` (default) or `ac97`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// An emulated TPM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TpmDevice {
    /// Whether the TPM is attached (default true; false turns off one a preference adds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Whether the TPM's state outlives the VM instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
}

/// The video device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VideoDevice {
    /// The model: `virtio`, `vga`, `bochs`, `ramfb`, …; the architecture's default when unset.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// A panic notifier device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PanicDevice {
    /// The model: `isa`, `hyperv` or `pvpanic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

#[cfg(test)]
#[path = "devices_tests.rs"]
mod tests;
