//! The domain: resources, CPU, memory, machine, firmware and hypervisor features.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Devices;
use crate::common::Extra;

/// The virtual hardware of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainSpec {
    /// Requests and limits of the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The virtual CPU topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// The guest memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// The machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// BIOS or EFI, serial, UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    /// The devices.
    pub devices: Devices,
    /// Hypervisor features: ACPI, SMM, APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    /// Fields this version does not model (clock, chassis, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// Requests and limits of the launcher pod (`memory`, `cpu`, …).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Requested resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
    /// Limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The virtual CPU topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Cores per socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub cores: Option<u32>,
    /// Sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub sockets: Option<u32>,
    /// Threads per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub threads: Option<u32>,
    /// The CPU model, `host-passthrough`, `host-model` or a named model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The guest memory.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// The memory the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Quantity>,
    /// Fields this version does not model (hugepages, maxGuest).
    #[serde(flatten)]
    pub extra: Extra,
}

/// The emulated machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// The QEMU machine type such as `q35`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// Firmware settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Firmware {
    /// The SMBIOS UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The SMBIOS serial number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The bootloader: `bios: {}` or `efi: {secureBoot: …}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootloader: Option<Bootloader>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The bootloader of a VM: one of BIOS and EFI.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootloader {
    /// Legacy BIOS (SeaBIOS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<BiosBootloader>,
    /// UEFI (OVMF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efi: Option<EfiBootloader>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Legacy BIOS settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BiosBootloader {
    /// Whether the BIOS writes its output to the serial console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_serial: Option<bool>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// UEFI settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EfiBootloader {
    /// Secure boot with Microsoft's keys enrolled; needs SMM. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
    /// Whether the EFI variables outlive the VM instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Hypervisor features.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// ACPI (on unless disabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<FeatureState>,
    /// APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apic: Option<FeatureState>,
    /// System management mode, required by secure boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smm: Option<FeatureState>,
    /// Fields this version does not model (hyperv, kvm, pvspinlock, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A feature switched on (the default when the field is present) or off.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureState {
    /// Whether the feature is on; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

impl FeatureState {
    /// Whether a feature given as this state is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}
