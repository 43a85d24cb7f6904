//! The hypervisor features of a domain: ACPI, APIC, SMM, paravirtual spinlocks, KVM and
//! the Hyper-V enlightenments.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Hypervisor features.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// ACPI (on unless disabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<FeatureState>,
    /// APIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apic: Option<FeatureApic>,
    /// System management mode, required by secure boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smm: Option<FeatureState>,
    /// Paravirtual spinlocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvspinlock: Option<FeatureState>,
    /// The Hyper-V enlightenments, one by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperv: Option<FeatureHyperv>,
    /// Every Hyper-V enlightenment the host offers, instead of `hyperv`'s list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperv_passthrough: Option<HypervPassthrough>,
    /// KVM specific settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvm: Option<FeatureKvm>,
}

/// A feature switched on (the default when the field is present) or off.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureState {
    /// Whether the feature is on; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl FeatureState {
    /// Whether a feature given as this state is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// The APIC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureApic {
    /// Whether the APIC is on; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Whether the guest may skip end-of-interrupt writes for some interrupts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_of_interrupt: Option<bool>,
}

impl FeatureApic {
    /// Whether an APIC given as this state is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// The Hyper-V enlightenments offered to a Windows guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureHyperv {
    /// Relaxed timing: no watchdog timeouts in the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaxed: Option<FeatureState>,
    /// The virtual APIC assist page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vapic: Option<FeatureState>,
    /// Paravirtual spinlocks and their retry count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spinlocks: Option<FeatureSpinlocks>,
    /// The virtual processor index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpindex: Option<FeatureState>,
    /// The processor runtime counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<FeatureState>,
    /// The synthetic interrupt controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synic: Option<FeatureState>,
    /// The synthetic timers; need `synic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synictimer: Option<SynicTimer>,
    /// Reset through the Hyper-V interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<FeatureState>,
    /// The hypervisor vendor id the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendorid: Option<FeatureVendorId>,
    /// The TSC and APIC frequency MSRs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequencies: Option<FeatureState>,
    /// Re-enlightenment on TSC frequency changes after a migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reenlightenment: Option<FeatureState>,
    /// Paravirtual TLB flushes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlbflush: Option<FeatureState>,
    /// Paravirtual inter-processor interrupts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipi: Option<FeatureState>,
    /// Enlightened VMCS, for nested Hyper-V.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evmcs: Option<FeatureState>,
}

/// Hyper-V paravirtual spinlocks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureSpinlocks {
    /// Whether they are on; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// How often the guest retries a spinlock before it tells the hypervisor (4095 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spinlocks: Option<i64>,
}

/// Hyper-V synthetic timers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SynicTimer {
    /// Whether they are on; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Direct mode: timer expiry as an interrupt, not a message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<FeatureState>,
}

/// The hypervisor vendor id.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureVendorId {
    /// Whether it is set; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The id, at most 12 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendorid: Option<String>,
}

/// Hyper-V passthrough of the host's enlightenments.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HypervPassthrough {
    /// Whether it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// KVM specific settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureKvm {
    /// Hide the KVM signature from the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}
