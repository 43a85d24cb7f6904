//! networkaddonsoperator.network.kubevirt.io/v1 NetworkAddonsConfig (cluster-scoped): which
//! network add-ons (multus, linux bridge, MAC pool, …) are deployed; the MAC address type
//! and the checks of the MAC pool's range, as the operator (CNAO) validates them.

use std::fmt;
use std::str::FromStr;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Extra, OperatorCondition};
use crate::validation::{FieldPath, Problem, ValidationError, ValidationResult};

/// The API group.
pub const GROUP: &str = "networkaddonsoperator.network.kubevirt.io";

/// The one NetworkAddonsConfig the operator acts on; others are ignored, as CNAO does.
pub const CLUSTER: &str = "cluster";

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
    /// The version of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The version being deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// The containers of the deployed components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<Container>>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
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
