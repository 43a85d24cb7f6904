//! The firmware of a domain: bootloader, SMBIOS identity, ACPI tables and direct kernel boot.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// A kernel and initrd booted directly, without a bootloader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_boot: Option<KernelBoot>,
    /// Extra ACPI tables taken from volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<Acpi>,
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
}

/// Legacy BIOS settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BiosBootloader {
    /// Whether the BIOS writes its output to the serial console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_serial: Option<bool>,
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
}

/// A kernel booted directly.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelBoot {
    /// The kernel command line; only with a kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_args: Option<String>,
    /// The container image holding the kernel and initrd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<KernelBootContainer>,
}

/// The container image a directly booted kernel and its initrd come from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelBootContainer {
    /// The image reference.
    pub image: String,
    /// The secret holding the registry credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secret: Option<String>,
    /// `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Always", "IfNotPresent", "Never"]))]
    pub image_pull_policy: Option<String>,
    /// The kernel's path inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_path: Option<String>,
    /// The initrd's path inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initrd_path: Option<String>,
}

/// ACPI tables handed to the guest, each read from a Secret volume of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Acpi {
    /// The volume holding the software licensing (SLIC) table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slic_name_ref: Option<String>,
    /// The volume holding the Microsoft data management (MSDM) table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msdm_name_ref: Option<String>,
}
