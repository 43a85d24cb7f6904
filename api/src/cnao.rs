//! networkaddonsoperator.network.kubevirt.io/v1 NetworkAddonsConfig (cluster-scoped): which
//! network add-ons (multus, linux bridge, MAC pool, …) are deployed.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Extra, OperatorCondition};

/// The API group.
pub const GROUP: &str = "networkaddonsoperator.network.kubevirt.io";

/// The desired network add-ons.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "networkaddonsoperator.network.kubevirt.io",
    version = "v1",
    kind = "NetworkAddonsConfig",
    status = "NetworkAddonsConfigStatus",
    derive = "PartialEq",
    doc = "NetworkAddonsConfig is the Schema for the networkaddonsconfig API"
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAddonsConfigSpec {
    /// The MAC address pool; present means enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_mac_pool: Option<KubeMacPool>,
    /// When to pull add-on images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Fields this version does not model (multus, linuxBridge, ovs, macvtap, …; present
    /// means enabled).
    #[serde(flatten)]
    pub extra: Extra,
}

/// The range MAC addresses are allocated from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeMacPool {
    /// The first address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_start: Option<String>,
    /// The last address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_end: Option<String>,
}

/// The deployed network add-ons.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAddonsConfigStatus {
    /// Available, Progressing, Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<OperatorCondition>>,
    /// The version deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_version: Option<String>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}
