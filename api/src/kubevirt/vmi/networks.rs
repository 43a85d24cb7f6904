//! The networks a VM's interfaces attach to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A network a VM attaches to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// The name interfaces refer to.
    pub name: String,
    /// The pod network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodNetwork>,
    /// A Multus network attachment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus: Option<MultusNetwork>,
}

/// The pod network.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PodNetwork {
    /// The guest's IPv4 CIDR with masquerade.
    #[serde(
        default,
        rename = "vmNetworkCIDR",
        skip_serializing_if = "Option::is_none"
    )]
    pub vm_network_cidr: Option<String>,
    /// The guest's IPv6 CIDR with masquerade.
    #[serde(
        default,
        rename = "vmIPv6NetworkCIDR",
        skip_serializing_if = "Option::is_none"
    )]
    pub vm_ipv6_network_cidr: Option<String>,
}

/// A Multus network attachment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultusNetwork {
    /// The NetworkAttachmentDefinition, `name` or `namespace/name`.
    pub network_name: String,
    /// Whether this replaces the pod network as the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
}
