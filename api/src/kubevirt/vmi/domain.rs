//! The domain: resources, CPU, memory, machine, firmware, clock, hypervisor features and
//! the rest of the virtual hardware but its devices (see `devices.rs`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Clock, Cpu, Devices, Features, Firmware};

/// The virtual hardware of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainSpec {
    /// Requests and limits of the launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The virtual CPU topology, model and placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// The guest memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// The machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// BIOS or EFI, serial, UUID, ACPI tables, direct kernel boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    /// The guest clock and its timers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Clock>,
    /// Hypervisor features: ACPI, APIC, SMM, Hyper-V, KVM, paravirtual spinlocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Features>,
    /// The SMBIOS chassis information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis: Option<Chassis>,
    /// The devices.
    pub devices: Devices,
    /// How disks get I/O threads: `shared`, `auto` or `supplementalPool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_threads_policy: Option<String>,
    /// The I/O thread pool of the `supplementalPool` policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_threads: Option<DiskIoThreads>,
    /// Memory encryption of the guest (AMD SEV).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_security: Option<LaunchSecurity>,
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
    /// Whether the launcher's own overhead is left out of the memory request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overcommit_guest_overhead: Option<bool>,
}

/// The guest memory.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// The memory the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Quantity>,
    /// Back the guest memory with huge pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<Hugepages>,
    /// The most the guest memory may grow to by hotplug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_guest: Option<Quantity>,
}

/// Huge pages backing the guest memory.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hugepages {
    /// The page size, such as `2Mi` or `1Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<String>,
}

/// The emulated machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// The QEMU machine type such as `q35`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// SMBIOS chassis information shown to the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Chassis {
    /// The chassis maker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// The chassis version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The chassis serial number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The asset tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asset: Option<String>,
    /// The stock keeping unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
}

/// The shared I/O thread pool of the `supplementalPool` policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskIoThreads {
    /// How many I/O threads the pool has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supplemental_pool_thread_count: Option<i64>,
}

/// Memory encryption of the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaunchSecurity {
    /// AMD Secure Encrypted Virtualization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sev: Option<Sev>,
}

/// AMD SEV settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sev {
    /// The guest policy bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SevPolicy>,
    /// Ask for remote attestation before the guest starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<SevAttestation>,
    /// The guest owner's session blob, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The guest owner's Diffie-Hellman certificate, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dh_cert: Option<String>,
}

/// The SEV guest policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SevPolicy {
    /// Whether the CPU register state is encrypted too (SEV-ES).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_state: Option<bool>,
}

/// Remote attestation of an SEV guest; no settings, present or absent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SevAttestation {}

#[cfg(test)]
#[path = "domain_tests.rs"]
mod tests;
