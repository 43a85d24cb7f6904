//! VirtualMachinePreference and VirtualMachineClusterPreference: what a guest OS prefers
//! (CPU topology, device buses and models, firmware, machine type, clock, features), applied
//! where the VM leaves a field unset, and what it needs (`requirements`) of the instancetype.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kubevirt::vmi::{
    BlockSize, ClockOffsetUtc, CpuFeature, EfiBootloader, FeatureApic, FeatureHyperv, FeatureKvm,
    FeatureState, InterfaceMasquerade, Rng, Timer, TpmDevice, VgpuOptions,
};

/// A guest OS's preferences, all optional.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "instancetype.kubevirt.io",
    version = "v1beta1",
    kind = "VirtualMachinePreference",
    plural = "virtualmachinepreferences",
    singular = "virtualmachinepreference",
    namespaced,
    shortname = "vmpref",
    shortname = "vmprefs",
    shortname = "vmp",
    shortname = "vmps",
    category = "all",
    derive = "PartialEq",
    doc = "VirtualMachinePreference resource contains optional preferences related to the VirtualMachine."
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePreferenceSpec {
    /// Annotations the instance gets where it has none of the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// The guest clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockPreferences>,
    /// The guest CPU topology and features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuPreferences>,
    /// Device buses, models and switches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<DevicePreferences>,
    /// Hypervisor features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<FeaturePreferences>,
    /// Firmware.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<FirmwarePreferences>,
    /// Machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachinePreferences>,
    /// Deprecated: `cpu.spreadOptions.ratio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub prefer_spread_socket_to_core_ratio: Option<u32>,
    /// The instance's subdomain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_subdomain: Option<String>,
    /// The instance's termination grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_termination_grace_period_seconds: Option<i64>,
    /// The least vCPUs and memory the instancetype (or the VM) must give.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<PreferenceRequirements>,
    /// Volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<VolumePreferences>,
}

/// The guest clock a preference asks for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClockPreferences {
    /// UTC with an offset, or a time zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_clock_offset: Option<ClockOffset>,
    /// The timers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_timer: Option<Timer>,
}

/// A clock offset: UTC (with seconds) or a named time zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClockOffset {
    /// UTC, shifted by an offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc: Option<ClockOffsetUtc>,
    /// A time zone such as `Europe/Rome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// The CPU a preference asks for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuPreferences {
    /// CPU features.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "preferredCPUFeatures"
    )]
    pub preferred_cpu_features: Option<Vec<CpuFeature>>,
    /// How the instancetype's vCPUs are laid out: `sockets` (the default), `cores`,
    /// `threads`, `spread` or `any` (the older `preferSockets`... forms are read too).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "preferredCPUTopology"
    )]
    pub preferred_cpu_topology: Option<String>,
    /// How `spread` lays them out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_options: Option<SpreadOptions>,
}

/// The layout of a `spread` topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadOptions {
    /// `SocketsCores` (the default), `SocketsCoresThreads` or `CoresThreads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across: Option<String>,
    /// The ratio between the first two levels (2 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub ratio: Option<u32>,
}

/// The devices a preference asks for; each applies where the VM leaves the field unset.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevicePreferences {
    /// `autoattachGraphicsDevice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_autoattach_graphics_device: Option<bool>,
    /// `autoattachInputDevice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_autoattach_input_device: Option<bool>,
    /// `autoattachMemBalloon`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_autoattach_mem_balloon: Option<bool>,
    /// `autoattachPodInterface`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_autoattach_pod_interface: Option<bool>,
    /// `autoattachSerialConsole`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_autoattach_serial_console: Option<bool>,
    /// `blockMultiQueue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_block_multi_queue: Option<bool>,
    /// The bus of CD-ROMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_cdrom_bus: Option<String>,
    /// `disableHotplug`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_disable_hotplug: Option<bool>,
    /// The block size of disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_disk_block_size: Option<BlockSize>,
    /// The bus of disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_disk_bus: Option<String>,
    /// The cache mode of disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_disk_cache: Option<String>,
    /// A dedicated IOThread per virtio disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_disk_dedicated_io_thread: Option<bool>,
    /// The IO mode of disks.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "preferredDiskIO"
    )]
    pub preferred_disk_io: Option<String>,
    /// The bus of input devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_input_bus: Option<String>,
    /// The type of input devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_input_type: Option<String>,
    /// Masquerade binding for interfaces with no binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_interface_masquerade: Option<InterfaceMasquerade>,
    /// The model of interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_interface_model: Option<String>,
    /// The bus of LUNs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_lun_bus: Option<String>,
    /// `networkInterfaceMultiqueue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_network_interface_multi_queue: Option<bool>,
    /// The model of panic devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_panic_device_model: Option<String>,
    /// An RNG device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_rng: Option<Rng>,
    /// The model of sound devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_sound_model: Option<String>,
    /// A TPM.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "preferredTPM"
    )]
    pub preferred_tpm: Option<TpmDevice>,
    /// `useVirtioTransitional`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_use_virtio_transitional: Option<bool>,
    /// Options of virtual GPUs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "preferredVirtualGPUOptions"
    )]
    pub preferred_virtual_gpu_options: Option<VgpuOptions>,
}

/// The hypervisor features a preference asks for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeaturePreferences {
    /// ACPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_acpi: Option<FeatureState>,
    /// The APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_apic: Option<FeatureApic>,
    /// Hyper-V enlightenments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_hyperv: Option<FeatureHyperv>,
    /// KVM features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_kvm: Option<FeatureKvm>,
    /// Paravirtual spinlocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_pvspinlock: Option<FeatureState>,
    /// System management mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_smm: Option<FeatureState>,
}

/// The firmware a preference asks for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FirmwarePreferences {
    /// EFI, with its settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_efi: Option<EfiBootloader>,
    /// BIOS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_use_bios: Option<bool>,
    /// BIOS output on the serial console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_use_bios_serial: Option<bool>,
    /// Deprecated: `preferredEfi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_use_efi: Option<bool>,
    /// Deprecated: `preferredEfi.secureBoot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_use_secure_boot: Option<bool>,
}

/// The machine a preference asks for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePreferences {
    /// The machine type, such as `q35`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_machine_type: Option<String>,
}

/// The volumes a preference asks for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumePreferences {
    /// The storage class of DataVolume templates that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_storage_class_name: Option<String>,
}

/// What a preference needs of the instancetype (or of the VM without one).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreferenceRequirements {
    /// The fewest vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuPreferenceRequirement>,
    /// The least memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryPreferenceRequirement>,
}

/// The fewest vCPUs a preference needs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuPreferenceRequirement {
    /// vCPUs.
    #[schemars(with = "i64")]
    pub guest: u32,
}

/// The least memory a preference needs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryPreferenceRequirement {
    /// Memory.
    pub guest: Quantity,
}

/// The cluster-wide twin of [`VirtualMachinePreferenceSpec`] (one spec type upstream; see
/// [`ClusterInstancetypeSpec`](super::ClusterInstancetypeSpec) for why it wraps).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "instancetype.kubevirt.io",
    version = "v1beta1",
    kind = "VirtualMachineClusterPreference",
    plural = "virtualmachineclusterpreferences",
    singular = "virtualmachineclusterpreference",
    shortname = "vmcp",
    shortname = "vmcps",
    derive = "PartialEq",
    doc = "VirtualMachineClusterPreference is a cluster scoped version of the VirtualMachinePreference resource."
)]
pub struct ClusterPreferenceSpec {
    /// The spec, as a namespaced preference's.
    #[serde(flatten)]
    pub spec: VirtualMachinePreferenceSpec,
}

impl Deref for ClusterPreferenceSpec {
    type Target = VirtualMachinePreferenceSpec;
    fn deref(&self) -> &Self::Target {
        &self.spec
    }
}

impl DerefMut for ClusterPreferenceSpec {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.spec
    }
}
