//! k8s.cni.cncf.io/v1 NetworkAttachmentDefinition: a secondary network as Multus reads it,
//! a CNI configuration (`spec.config`, JSON in a string) that pods and VMIs attach to by
//! name. The CRD is the Network Plumbing Working Group's; CNAO deploys it with Multus.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The API group.
pub const GROUP: &str = "k8s.cni.cncf.io";

/// The pod annotation naming the secondary networks a pod attaches to, as Multus reads it:
/// a JSON list of `{"name", "namespace", "interface"}`.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";

/// The NetworkAttachmentDefinition annotation naming the node resource a pod attached to
/// it requests (for the linux bridge, `bridge.network.kubevirt.io/<bridge>`).
pub const RESOURCE_NAME_ANNOTATION: &str = "k8s.v1.cni.cncf.io/resourceName";

/// The node resource prefix the bridge marker reports Linux bridges under.
pub const BRIDGE_RESOURCE_PREFIX: &str = "bridge.network.kubevirt.io/";

/// One entry of the networks annotation: which network, and the interface name in the pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkSelection {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The interface in the pod (`interface` in Multus's selection element).
    #[serde(
        rename = "interface",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub interface: String,
    /// The MAC address asked for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
}

/// The namespace and name of the NetworkAttachmentDefinition a VMI network names:
/// `name` (in the VMI's namespace) or `namespace/name`.
pub fn qualified_name<'a>(vmi_namespace: &'a str, network_name: &'a str) -> (&'a str, &'a str) {
    network_name
        .split_once('/')
        .unwrap_or((vmi_namespace, network_name))
}

/// The pod interface of a secondary network, as KubeVirt names it: `pod` and the first 11
/// hex digits of the SHA-256 of the VMI's network name (the hash is short enough for the
/// names made from it, `k6t-<hash>` and `<hash>-nic`, to keep within the kernel's 15
/// characters).
pub fn pod_interface_name(network_name: &str) -> String {
    let digest = Sha256::digest(network_name.as_bytes());
    format!("pod{}", &hex::encode(digest)[..11])
}

/// A secondary network.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "k8s.cni.cncf.io",
    version = "v1",
    kind = "NetworkAttachmentDefinition",
    plural = "network-attachment-definitions",
    shortname = "net-attach-def",
    namespaced,
    derive = "PartialEq",
    doc = "NetworkAttachmentDefinition is a CRD schema specified by the Network Plumbing Working Group to express the intent for attaching pods to one or more logical or physical networks."
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAttachmentDefinitionSpec {
    /// The CNI configuration, JSON in a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// What a network's CNI configuration says, as far as a VM's attachment needs it.
#[derive(Deserialize, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CniConfig {
    /// The plugin (`bridge`, `cnv-bridge`, ...); for a configuration list, the first
    /// plugin's.
    #[serde(rename = "type", default)]
    pub plugin_type: String,
    /// The Linux bridge, for the bridge plugins.
    #[serde(default)]
    pub bridge: Option<String>,
    /// The plugins of a configuration list.
    #[serde(default)]
    pub plugins: Vec<CniConfig>,
}

/// Why a network's CNI configuration cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CniConfigError {
    #[error("spec.config is empty")]
    Missing,
    #[error("spec.config is not a CNI configuration: {0}")]
    Malformed(String),
    #[error("spec.config: plugin type {0:?} is not a Linux bridge plugin (bridge, cnv-bridge)")]
    NotABridge(String),
    #[error("spec.config: the bridge plugin's \"bridge\" (the Linux bridge's name) is missing")]
    NoBridgeName,
}

impl NetworkAttachmentDefinition {
    /// The Linux bridge this network attaches to, for a `bridge` or `cnv-bridge` network.
    pub fn linux_bridge(&self) -> Result<String, CniConfigError> {
        let text = self
            .spec
            .config
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .ok_or(CniConfigError::Missing)?;
        let config: CniConfig =
            serde_json::from_str(text).map_err(|e| CniConfigError::Malformed(e.to_string()))?;
        // A configuration list: the first plugin attaches; the rest (tuning, ...) adjust.
        let plugin = config.plugins.into_iter().next().unwrap_or(CniConfig {
            plugin_type: config.plugin_type,
            bridge: config.bridge,
            plugins: Vec::new(),
        });
        if !matches!(plugin.plugin_type.as_str(), "bridge" | "cnv-bridge") {
            return Err(CniConfigError::NotABridge(plugin.plugin_type));
        }
        plugin
            .bridge
            .filter(|b| !b.is_empty())
            .ok_or(CniConfigError::NoBridgeName)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nad(config: &str) -> NetworkAttachmentDefinition {
        NetworkAttachmentDefinition::new(
            "br",
            NetworkAttachmentDefinitionSpec {
                config: Some(config.into()),
            },
        )
    }

    #[test]
    fn pod_interfaces_are_named_as_kubevirt_names_them() {
        // sha256("blue") = 16477688c0e00699...
        assert_eq!(pod_interface_name("blue"), "pod16477688c0e");
        assert_eq!(qualified_name("default", "other/br"), ("other", "br"));
        assert_eq!(qualified_name("default", "br"), ("default", "br"));
    }

    #[test]
    fn a_bridge_network_names_its_bridge() {
        let single = r#"{"cniVersion":"0.3.1","name":"br","type":"cnv-bridge","bridge":"br1"}"#;
        assert_eq!(nad(single).linux_bridge(), Ok("br1".into()));
        let list = r#"{"cniVersion":"1.0.0","name":"br","plugins":[
            {"type":"bridge","bridge":"br2"},{"type":"tuning"}]}"#;
        assert_eq!(nad(list).linux_bridge(), Ok("br2".into()));
    }

    #[test]
    fn other_networks_are_named_as_such() {
        assert_eq!(
            nad(r#"{"type":"macvlan","master":"eth0"}"#).linux_bridge(),
            Err(CniConfigError::NotABridge("macvlan".into()))
        );
        assert_eq!(
            nad(r#"{"type":"bridge"}"#).linux_bridge(),
            Err(CniConfigError::NoBridgeName)
        );
        assert_eq!(nad("").linux_bridge(), Err(CniConfigError::Missing));
        assert!(matches!(
            nad("{").linux_bridge(),
            Err(CniConfigError::Malformed(_))
        ));
    }
}
