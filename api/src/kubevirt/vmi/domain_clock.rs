//! The guest clock of a domain: its offset from the host and its timers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The guest clock: UTC with an offset or a named time zone, and the timers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Clock {
    /// The clock runs in UTC, shifted by an offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc: Option<ClockOffsetUtc>,
    /// The clock runs in this time zone, such as `Europe/Rome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The timers the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<Timer>,
}

/// A UTC guest clock.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClockOffsetUtc {
    /// Seconds added to UTC; the guest may change it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_seconds: Option<i32>,
}

/// The timers of the guest, each present or not.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timer {
    /// The high precision event timer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hpet: Option<HpetTimer>,
    /// The KVM paravirtual clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvm: Option<KvmTimer>,
    /// The programmable interval timer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pit: Option<PitTimer>,
    /// The real time clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtc: Option<RtcTimer>,
    /// The Hyper-V reference time counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperv: Option<HypervTimer>,
}

/// The HPET.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HpetTimer {
    /// What happens to missed ticks: `delay`, `catchup`, `merge` or `discard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_policy: Option<String>,
    /// Whether the guest has it; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
}

/// The PIT.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PitTimer {
    /// What happens to missed ticks: `delay`, `catchup` or `discard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_policy: Option<String>,
    /// Whether the guest has it; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
}

/// The RTC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RtcTimer {
    /// What happens to missed ticks: `delay` or `catchup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_policy: Option<String>,
    /// Whether the guest has it; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
    /// What the RTC follows: `guest` or `wall`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track: Option<String>,
}

/// The KVM clock.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KvmTimer {
    /// Whether the guest has it; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
}

/// The Hyper-V time counter.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HypervTimer {
    /// Whether the guest has it; true when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
}
