//! networkaddonsoperator.network.kubevirt.io/v1 NetworkAddonsConfig (cluster-scoped): which
//! network add-ons (multus, linux bridge, MAC pool, …) are deployed; the MAC address type
//! and the checks of the MAC pool's range, as the operator (CNAO) validates them.

use std::fmt;
use std::str::FromStr;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{NodePlacement, OperatorCondition, TlsSecurityProfile};
use crate::validation::{FieldPath, Problem, ValidationError, ValidationResult};

/// The API group.
pub const GROUP: &str = "networkaddonsoperator.network.kubevirt.io";

/// The one NetworkAddonsConfig the operator acts on; others are ignored, as CNAO does.
pub const CLUSTER: &str = "cluster";

/// The desired network add-ons: each add-on field present (even empty, `multus: {}`) means
/// the add-on is deployed, absent means it is not.
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
    /// Multus, the meta CNI plugin giving pods more than one network interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus: Option<Enabled>,
    /// Multus' dynamic networks controller, which adds and removes interfaces of running pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus_dynamic_networks: Option<MultusDynamicNetworks>,
    /// The Linux bridge CNI plugin, connecting pods to a bridge on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linux_bridge: Option<Enabled>,
    /// The Open vSwitch CNI plugin, connecting pods to OVS bridges present on the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ovs: Option<Enabled>,
    /// The MAC address pool; present means enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_mac_pool: Option<KubeMacPool>,
    /// When to pull add-on images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// The DNS server answering for virtual machines' secondary interfaces by name.
    #[serde(
        default,
        rename = "kubeSecondaryDNS",
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_secondary_dns: Option<KubeSecondaryDns>,
    /// The macvtap CNI plugin and its device plugin, attaching pods to a host interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub macvtap: Option<Macvtap>,
    /// The controller managing IP addresses of virtual machines on secondary networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt_ipam_controller: Option<KubevirtIpamController>,
    /// How long the add-ons' self-signed CA and serving certificates live and overlap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_sign_configuration: Option<SelfSignConfiguration>,
    /// The nodes the add-ons' control-plane and per-node pods are scheduled to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_configuration: Option<PlacementConfiguration>,
    /// The TLS settings of the add-ons' servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_security_profile: Option<TlsSecurityProfile>,
}

/// An add-on without settings of its own.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Enabled {}

/// Settings of Multus' dynamic networks controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MultusDynamicNetworks {
    /// Where the container runtime's socket is on the nodes.
    #[serde(
        default,
        rename = "hostCRISocketPath",
        skip_serializing_if = "Option::is_none"
    )]
    pub host_cri_socket_path: Option<String>,
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

/// Settings of the secondary-network DNS server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeSecondaryDns {
    /// The domain the names it answers for end in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The address of the name server the domain is delegated to.
    #[serde(
        default,
        rename = "nameServerIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub name_server_ip: Option<String>,
}

/// Settings of the macvtap add-on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Macvtap {
    /// The name of the ConfigMap holding the device plugin's configuration, in place of the
    /// default one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_plugin_config: Option<String>,
}

/// Settings of the secondary-network IPAM controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct KubevirtIpamController {
    /// The namespace of the NetworkAttachmentDefinition standing for the cluster's default
    /// network, which the controller uses for pods of virtual machines with persistent
    /// addresses on user-defined networks.
    #[serde(
        default,
        rename = "defaultNetworkNADNamespace",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_network_nad_namespace: Option<String>,
}

/// Lifetimes of the self-signed certificates, as Go durations (`168h`, `90m`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelfSignConfiguration {
    /// How long a CA certificate is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_rotate_interval: Option<String>,
    /// How long an expired CA certificate stays trusted next to its successor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_overlap_interval: Option<String>,
    /// How long a serving certificate is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_rotate_interval: Option<String>,
    /// How long an expired serving certificate stays in use next to its successor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_overlap_interval: Option<String>,
}

/// Where the add-ons' pods run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementConfiguration {
    /// Placement of the control-plane components (controllers, webhooks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<NodePlacement>,
    /// Placement of the components running on every workload node (CNI plugins, device
    /// plugins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<NodePlacement>,
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
    /// The version of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The version being deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// The containers of the deployed components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<Container>>,
}

/// A container of a deployed component.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// The kind of the workload running it (DaemonSet, Deployment).
    pub parent_kind: String,
    /// The name of that workload.
    pub parent_name: String,
    /// The container's name.
    pub name: String,
    /// Its image.
    pub image: String,
}

/// A 48-bit (EUI-48) MAC address, as a number so that ranges are intervals.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct MacAddress(u64);

impl MacAddress {
    /// The largest address, ff:ff:ff:ff:ff:ff.
    pub const MAX: MacAddress = MacAddress((1 << 48) - 1);

    /// The address of six octets.
    pub fn from_octets(octets: [u8; 6]) -> Self {
        Self(octets.iter().fold(0, |acc, o| acc << 8 | u64::from(*o)))
    }

    /// The address `value` (its low 48 bits) stands for; `None` beyond 48 bits.
    pub fn from_u64(value: u64) -> Option<Self> {
        (value <= Self::MAX.0).then_some(Self(value))
    }

    /// The address as a number.
    pub fn as_u64(self) -> u64 {
        self.0
    }

    /// The six octets, first on the wire first.
    pub fn octets(self) -> [u8; 6] {
        let bytes = self.0.to_be_bytes();
        [bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]]
    }

    /// Whether the group bit (the least significant bit of the first octet) is set.
    pub fn is_multicast(self) -> bool {
        self.octets()[0] & 1 == 1
    }
}

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.octets();
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// Text that is not a 48-bit MAC address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("address {0}: invalid MAC address")]
pub struct InvalidMacAddress(pub String);

impl FromStr for MacAddress {
    type Err = InvalidMacAddress;

    /// The 48-bit forms Go's `net.ParseMAC` reads (which KubeVirt and kubemacpool use):
    /// `02:00:5e:10:00:01`, `02-00-5E-10-00-01` and `0200.5e10.0001`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidMacAddress(text.to_owned());
        let hex = |pair: &str| -> Option<u8> {
            (pair.len() == 2 && pair.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u8::from_str_radix(pair, 16).ok())
                .flatten()
        };
        let mut octets = [0u8; 6];
        if text.len() == 17 {
            let separator = text.as_bytes()[2];
            if separator != b':' && separator != b'-' {
                return Err(invalid());
            }
            let parts: Vec<&str> = text.split(char::from(separator)).collect();
            if parts.len() != 6 {
                return Err(invalid());
            }
            for (octet, part) in octets.iter_mut().zip(parts) {
                *octet = hex(part).ok_or_else(invalid)?;
            }
        } else if text.len() == 14 {
            let parts: Vec<&str> = text.split('.').collect();
            if parts.len() != 3 || parts.iter().any(|p| p.len() != 4 || !p.is_ascii()) {
                return Err(invalid());
            }
            for (i, part) in parts.iter().enumerate() {
                octets[2 * i] = hex(&part[..2]).ok_or_else(invalid)?;
                octets[2 * i + 1] = hex(&part[2..]).ok_or_else(invalid)?;
            }
        } else {
            return Err(invalid());
        }
        Ok(Self::from_octets(octets))
    }
}

/// Which end of the MAC pool's range a problem is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeEnd {
    /// `rangeStart`, the first address.
    Start,
    /// `rangeEnd`, the last address.
    End,
}

impl RangeEnd {
    /// The field's name in `spec.kubeMacPool`.
    pub fn field(self) -> &'static str {
        match self {
            RangeEnd::Start => "rangeStart",
            RangeEnd::End => "rangeEnd",
        }
    }

    /// The name CNAO's messages give it when the address cannot be used.
    fn setting(self) -> &'static str {
        match self {
            RangeEnd::Start => "RangeStart",
            RangeEnd::End => "RangeEnd",
        }
    }
}

/// Why a MAC pool range is refused, worded as CNAO words it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MacRangeProblem {
    /// One end is set and the other is not.
    #[error("both or none of the KubeMacPool ranges needs to be configured")]
    OnlyOneEnd {
        /// The end that is missing.
        missing: RangeEnd,
    },
    /// An end is not a MAC address.
    #[error("failed to parse {} because the mac address is invalid", .end.field())]
    Invalid {
        /// The end that does not parse.
        end: RangeEnd,
    },
    /// An end is a multicast address.
    #[error(
        "failed to set {}: invalid mac address. Multicast addressing is not supported. Unicast addressing must be used. The first octet is 0X{first_octet:X}",
        .end.setting()
    )]
    Multicast {
        /// The end that is multicast.
        end: RangeEnd,
        /// Its first octet.
        first_octet: u8,
    },
    /// The last address is not after the first.
    #[error(
        "failed to set mac address range: invalid range. Range end is lesser than or equal to its start. start: {start} end: {end}"
    )]
    NotAscending {
        /// The first address.
        start: MacAddress,
        /// The last address.
        end: MacAddress,
    },
}

impl MacRangeProblem {
    /// The end of the range the problem is reported against.
    pub fn end(&self) -> RangeEnd {
        match self {
            MacRangeProblem::OnlyOneEnd { missing } => *missing,
            MacRangeProblem::Invalid { end } | MacRangeProblem::Multicast { end, .. } => *end,
            MacRangeProblem::NotAscending { .. } => RangeEnd::End,
        }
    }
}

/// The range `start`..=`end` (empty text counts as unset, as in CNAO): `None` when neither
/// end is set (the operator then picks a random range), else both ends, unicast, the last
/// after the first. Ends are compared as numbers (CNAO compares octet by octet and lets
/// 02:00:00:00:01:00 – 00:ff:ff:ff:ff:ff through).
pub fn parse_mac_range(
    start: Option<&str>,
    end: Option<&str>,
) -> Result<Option<(MacAddress, MacAddress)>, MacRangeProblem> {
    let start = start.filter(|s| !s.is_empty());
    let end = end.filter(|s| !s.is_empty());
    let (start, end) = match (start, end) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(MacRangeProblem::OnlyOneEnd {
                missing: RangeEnd::End,
            });
        }
        (None, Some(_)) => {
            return Err(MacRangeProblem::OnlyOneEnd {
                missing: RangeEnd::Start,
            });
        }
        (Some(start), Some(end)) => (start, end),
    };
    let parse = |text: &str, which: RangeEnd| {
        text.parse::<MacAddress>()
            .map_err(|_| MacRangeProblem::Invalid { end: which })
    };
    let start = parse(start, RangeEnd::Start)?;
    let end = parse(end, RangeEnd::End)?;
    for (address, which) in [(start, RangeEnd::Start), (end, RangeEnd::End)] {
        if address.is_multicast() {
            return Err(MacRangeProblem::Multicast {
                end: which,
                first_octet: address.octets()[0],
            });
        }
    }
    if end <= start {
        return Err(MacRangeProblem::NotAscending { start, end });
    }
    Ok(Some((start, end)))
}

/// Checks a NetworkAddonsConfig as the operator does before deploying it: the MAC pool's
/// range, reported against the field at fault.
pub fn validate_network_addons_config(config: &NetworkAddonsConfig) -> ValidationResult {
    validate_spec(&config.spec)
}

/// [`validate_network_addons_config`] of a spec alone.
pub fn validate_spec(spec: &NetworkAddonsConfigSpec) -> ValidationResult {
    let Some(pool) = &spec.kube_mac_pool else {
        return Ok(());
    };
    parse_mac_range(pool.range_start.as_deref(), pool.range_end.as_deref())
        .map(|_| ())
        .map_err(|problem| {
            let field = FieldPath::new("spec")
                .child("kubeMacPool")
                .child(problem.end().field());
            ValidationError::new(field, Problem::Invalid(problem.to_string()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(text: &str) -> MacAddress {
        text.parse().expect("a MAC address")
    }

    #[test]
    fn addresses_parse_in_go_forms_and_print_lowercase_with_colons() {
        for text in ["02:00:5E:10:00:01", "02-00-5e-10-00-01", "0200.5e10.0001"] {
            assert_eq!(mac(text).to_string(), "02:00:5e:10:00:01", "{text}");
        }
        for bad in [
            "",
            "02:00:5e:10:00",
            "02:00:5e:10:00:01:02",
            "02:00:5e:10:00:zz",
            "02:00-5e:10:00:01",
            "020:0:5e:10:00:01",
            "0200.5e10.00011",
            "+2:00:5e:10:00:01",
        ] {
            assert!(bad.parse::<MacAddress>().is_err(), "{bad:?}");
        }
        assert_eq!(
            "x".parse::<MacAddress>().unwrap_err().to_string(),
            "address x: invalid MAC address"
        );
        assert_eq!(mac("ff:ff:ff:ff:ff:ff"), MacAddress::MAX);
        assert_eq!(MacAddress::from_u64(1 << 48), None);
        assert!(mac("03:00:00:00:00:00").is_multicast());
        assert!(!mac("02:00:00:00:00:00").is_multicast());
    }

    #[test]
    fn ranges_need_both_ends_unicast_and_ascending() {
        assert_eq!(parse_mac_range(None, Some("")), Ok(None));
        assert_eq!(
            parse_mac_range(Some("02:00:00:00:00:00"), Some("02:00:00:00:00:ff")),
            Ok(Some((mac("02:00:00:00:00:00"), mac("02:00:00:00:00:ff"))))
        );
        let only_start = parse_mac_range(Some("02:00:00:00:00:00"), None).unwrap_err();
        assert_eq!(only_start.end(), RangeEnd::End);
        assert_eq!(
            only_start.to_string(),
            "both or none of the KubeMacPool ranges needs to be configured"
        );
        let bad = parse_mac_range(Some("02:00:00:00:00:zz"), Some("02:00:00:00:00:ff"));
        assert_eq!(
            bad.unwrap_err().to_string(),
            "failed to parse rangeStart because the mac address is invalid"
        );
        let multicast = parse_mac_range(Some("02:00:00:00:00:00"), Some("03:00:00:00:00:00"));
        assert_eq!(
            multicast.unwrap_err().to_string(),
            "failed to set RangeEnd: invalid mac address. Multicast addressing is not supported. Unicast addressing must be used. The first octet is 0X3"
        );
        let backwards = parse_mac_range(Some("02:00:00:00:01:00"), Some("00:ff:ff:ff:ff:fe"));
        assert_eq!(
            backwards.unwrap_err(),
            MacRangeProblem::NotAscending {
                start: mac("02:00:00:00:01:00"),
                end: mac("00:ff:ff:ff:ff:fe")
            }
        );
        let same = parse_mac_range(Some("02:00:00:00:00:01"), Some("02:00:00:00:00:01"));
        assert!(
            same.unwrap_err()
                .to_string()
                .contains("Range end is lesser than or equal to its start")
        );
    }

    /// `api/tests/examples/nac.yaml`: a NetworkAddonsConfig as a cluster holds it, every
    /// field of its spec and status set.
    const FULL_EXAMPLE: &str = include_str!("../tests/examples/nac.yaml");

    /// The names of the properties of `schema`, sorted.
    fn property_names(schema: &serde_json::Value) -> Vec<String> {
        let mut names: Vec<String> = schema["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_full_upstream_shaped_config_round_trips_unchanged() {
        let written: serde_json::Value =
            serde_saphyr::from_str(FULL_EXAMPLE).expect("the example is YAML");
        let typed: NetworkAddonsConfig =
            serde_json::from_value(written.clone()).expect("the example reads typed");
        assert_eq!(serde_json::to_value(&typed).unwrap(), written);

        // Every field the schema declares is set, so the round trip above covers them all.
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(NetworkAddonsConfig::crd()).unwrap();
        let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        for part in ["spec", "status"] {
            let mut set: Vec<String> = written[part].as_object().unwrap().keys().cloned().collect();
            set.sort();
            assert_eq!(set, property_names(&root["properties"][part]), "{part}");
        }

        // The add-ons without settings are objects that are present, and stay so.
        let spec = &typed.spec;
        assert_eq!(spec.multus, Some(Enabled {}));
        assert_eq!(spec.linux_bridge, Some(Enabled {}));
        assert_eq!(spec.ovs, Some(Enabled {}));
        assert_eq!(
            spec.kube_secondary_dns
                .as_ref()
                .and_then(|d| d.name_server_ip.as_deref()),
            Some("192.0.2.53")
        );
        let infra = spec
            .placement_configuration
            .as_ref()
            .and_then(|p| p.infra.as_ref())
            .expect("infra placement");
        assert!(
            infra
                .affinity
                .as_ref()
                .is_some_and(|a| a.node_affinity.is_some())
        );
        let status = typed.status.as_ref().expect("status");
        assert_eq!(status.containers.as_ref().map(Vec::len), Some(2));
        assert_eq!(validate_network_addons_config(&typed), Ok(()));
    }

    #[test]
    fn every_object_of_the_schema_declares_its_fields() {
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(NetworkAddonsConfig::crd()).unwrap();
        let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let mut keeping = Vec::new();
        find_preserved("", root, &mut keeping);
        assert!(
            keeping.is_empty(),
            "objects keeping unknown fields: {keeping:?}"
        );
        let multus = &root["properties"]["spec"]["properties"]["multus"];
        assert_eq!(multus["type"], "object");
        assert!(multus["properties"].is_null() && multus["additionalProperties"].is_null());
    }

    fn find_preserved(path: &str, schema: &serde_json::Value, found: &mut Vec<String>) {
        if schema["x-kubernetes-preserve-unknown-fields"] == true {
            found.push(path.to_owned());
        }
        for (name, child) in schema["properties"].as_object().into_iter().flatten() {
            find_preserved(&format!("{path}.{name}"), child, found);
        }
        if schema["items"].is_object() {
            find_preserved(&format!("{path}[]"), &schema["items"], found);
        }
        if schema["additionalProperties"].is_object() {
            find_preserved(
                &format!("{path}{{}}"),
                &schema["additionalProperties"],
                found,
            );
        }
    }

    #[test]
    fn validation_names_the_field_at_fault() {
        let config = |start: Option<&str>, end: Option<&str>| NetworkAddonsConfig {
            metadata: Default::default(),
            spec: NetworkAddonsConfigSpec {
                kube_mac_pool: Some(KubeMacPool {
                    range_start: start.map(str::to_owned),
                    range_end: end.map(str::to_owned),
                }),
                ..Default::default()
            },
            status: None,
        };
        let err =
            validate_network_addons_config(&config(Some("02:00:00:00:00:00"), None)).unwrap_err();
        assert_eq!(err.field.as_str(), "spec.kubeMacPool.rangeEnd");
        let err = validate_network_addons_config(&config(Some("nope"), Some("02:00:00:00:00:01")))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.kubeMacPool.rangeStart: failed to parse rangeStart because the mac address is invalid"
        );
        assert_eq!(validate_network_addons_config(&config(None, None)), Ok(()));
    }
}
