//! The bridge plugin's network configuration: read field by field from the configuration
//! JSON and `CNI_ARGS`, each bad value refused with a message that names its field.

use serde_json::{Map, Value};

use crate::cni::error::{CniError, code};
use crate::cni::protocol::{Invocation, check_interface_name};
use crate::cni::result::{CniResult, Dns};

/// The lowest MTU the kernel accepts on an Ethernet device (IPv4's minimum) and the highest
/// a bridge or veth takes.
const MTU_RANGE: std::ops::RangeInclusive<u64> = 68..=65535;
/// 0 and 4095 are reserved VLAN IDs.
const VLAN_MAX: u64 = 4094;

/// The configuration of one ADD or CHECK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeConfig {
    pub name: String,
    pub bridge: String,
    pub is_gateway: bool,
    pub is_default_gateway: bool,
    pub force_address: bool,
    pub ip_masq: bool,
    pub mtu: Option<u32>,
    pub hairpin_mode: bool,
    pub promisc_mode: bool,
    /// The access VLAN (the port's PVID, untagged).
    pub vlan: Option<u16>,
    /// Trunk VLANs (tagged), sorted and without duplicates.
    pub vlan_trunk: Vec<u16>,
    pub preserve_default_vlan: bool,
    pub mac_spoof_check: bool,
    pub enable_dad: bool,
    pub disable_container_interface: bool,
    /// The container interface's MAC: `runtimeConfig.mac`, else `args.cni.mac`, else
    /// `MAC` in `CNI_ARGS`.
    pub mac: Option<[u8; 6]>,
    /// The configuration's own `dns`, which replaces the IPAM plugin's when set.
    pub dns: Option<Dns>,
}

impl BridgeConfig {
    /// Reads and validates everything; ADD, CHECK and STATUS use this.
    pub fn parse(inv: &Invocation) -> Result<Self, CniError> {
        let conf = object(&inv.config);
        let bridge = match conf.get("bridge") {
            None | Some(Value::Null) => {
                return Err(CniError::config(
                    "\"bridge\" is required: name the Linux bridge to attach the container to",
                ));
            }
            Some(Value::String(name)) => name.clone(),
            Some(other) => {
                return Err(CniError::config(format!(
                    "\"bridge\" must be a string, not {other}"
                )));
            }
        };
        check_interface_name(&bridge)
            .map_err(|why| CniError::config(format!("\"bridge\" {bridge:?}: {why}")))?;

        let mtu = match number(conf, "mtu")? {
            None | Some(0) => None,
            Some(mtu) if MTU_RANGE.contains(&mtu) => Some(mtu as u32),
            Some(mtu) => {
                return Err(CniError::config(format!(
                    "\"mtu\" {mtu} is out of range: it must be between {} and {} (or 0 for the kernel's default)",
                    MTU_RANGE.start(),
                    MTU_RANGE.end()
                )));
            }
        };
        let vlan = match number(conf, "vlan")? {
            None | Some(0) => None,
            Some(vid) if vid <= VLAN_MAX => Some(vid as u16),
            Some(vid) => {
                return Err(CniError::config(format!(
                    "invalid VLAN ID: \"vlan\" {vid} must be between 0 and {VLAN_MAX}"
                )));
            }
        };
        let vlan_trunk = vlan_trunk(conf.get("vlanTrunk"))?;
        if vlan.is_some() && !vlan_trunk.is_empty() {
            return Err(CniError::config(
                "cannot set \"vlan\" and \"vlanTrunk\" at the same time",
            ));
        }
        match conf.get("ipMasqBackend") {
            None | Some(Value::Null) => {}
            Some(Value::String(backend)) if backend == "iptables" => {}
            Some(other) => {
                return Err(CniError::new(
                    code::UNSUPPORTED_FIELD,
                    format!(
                        "unsupported field \"ipMasqBackend\": {other} (only \"iptables\" is implemented)"
                    ),
                ));
            }
        }
        if flag(conf, "portIsolation")?.unwrap_or(false) {
            return Err(CniError::new(
                code::UNSUPPORTED_FIELD,
                "unsupported field \"portIsolation\": true (port isolation is not implemented)",
            ));
        }
        let dns = match conf.get("dns") {
            None | Some(Value::Null) => None,
            Some(value) => Some(Dns::from_value(value, "dns").map_err(CniError::config)?),
        };
        Ok(BridgeConfig {
            name: conf
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            bridge,
            is_gateway: flag(conf, "isGateway")?.unwrap_or(false),
            is_default_gateway: flag(conf, "isDefaultGateway")?.unwrap_or(false),
            force_address: flag(conf, "forceAddress")?.unwrap_or(false),
            ip_masq: flag(conf, "ipMasq")?.unwrap_or(false),
            mtu,
            hairpin_mode: flag(conf, "hairpinMode")?.unwrap_or(false),
            promisc_mode: flag(conf, "promiscMode")?.unwrap_or(false),
            vlan,
            vlan_trunk,
            preserve_default_vlan: flag(conf, "preserveDefaultVlan")?.unwrap_or(true),
            mac_spoof_check: flag(conf, "macspoofchk")?.unwrap_or(false),
            enable_dad: flag(conf, "enabledad")?.unwrap_or(false),
            disable_container_interface: flag(conf, "disableContainerInterface")?.unwrap_or(false),
            mac: container_mac(conf, &inv.args)?,
            dns: dns.filter(|dns| !dns.is_empty()),
        })
    }

    /// The `prevResult` CHECK compares against.
    pub fn prev_result(inv: &Invocation) -> Result<CniResult, CniError> {
        match object(&inv.config).get("prevResult") {
            None | Some(Value::Null) => Err(CniError::config(
                "Required prevResult missing: CHECK needs \"prevResult\"",
            )),
            Some(value) => CniResult::from_value(value, "prevResult", inv.version()),
        }
    }
}

/// What DEL needs, read leniently: DEL must clean up after any ADD, even one refused for a
/// bad field, so only the fields it uses are read and a bad one falls back to its default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TeardownConfig {
    pub name: String,
    pub ip_masq: bool,
    pub mac_spoof_check: bool,
}

impl TeardownConfig {
    pub fn parse(inv: &Invocation) -> Self {
        let conf = object(&inv.config);
        TeardownConfig {
            name: conf
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            ip_masq: conf.get("ipMasq").and_then(Value::as_bool).unwrap_or(false),
            mac_spoof_check: conf
                .get("macspoofchk")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }
    }
}

fn object(config: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    config
        .as_object()
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

fn flag(conf: &Map<String, Value>, key: &str) -> Result<Option<bool>, CniError> {
    match conf.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(CniError::config(format!(
            "\"{key}\" must be true or false, not {other}"
        ))),
    }
}

fn number(conf: &Map<String, Value>, key: &str) -> Result<Option<u64>, CniError> {
    match conf.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| {
            CniError::config(format!("\"{key}\" must be a non-negative integer, not {n}"))
        }),
        Some(other) => Err(CniError::config(format!(
            "\"{key}\" must be an integer, not {other}"
        ))),
    }
}

fn vlan_trunk(value: Option<&Value>) -> Result<Vec<u16>, CniError> {
    let entries = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(other) => {
            return Err(CniError::config(format!(
                "\"vlanTrunk\" must be a list, not {other}"
            )));
        }
    };
    let mut vids = std::collections::BTreeSet::new();
    for entry in entries {
        let entry = entry.as_object().ok_or_else(|| {
            CniError::config(
                "\"vlanTrunk\" entries must be objects with \"id\" or \"minID\"/\"maxID\"",
            )
        })?;
        let vid = |key: &str| -> Result<Option<u16>, CniError> {
            match number(entry, key).map_err(|e| e.context("in \"vlanTrunk\""))? {
                None => Ok(None),
                Some(v) if (1..=VLAN_MAX).contains(&v) => Ok(Some(v as u16)),
                Some(v) => Err(CniError::config(format!(
                    "incorrect \"vlanTrunk\" {key} {v}: it must be between 1 and {VLAN_MAX}"
                ))),
            }
        };
        match (vid("minID")?, vid("maxID")?) {
            (Some(min), Some(max)) if max < min => {
                return Err(CniError::config(format!(
                    "\"vlanTrunk\" minID {min} is greater than maxID {max}"
                )));
            }
            (Some(min), Some(max)) => vids.extend(min..=max),
            (None, Some(_)) => {
                return Err(CniError::config(
                    "\"vlanTrunk\" minID and maxID go together: minID is missing",
                ));
            }
            (Some(_), None) => {
                return Err(CniError::config(
                    "\"vlanTrunk\" minID and maxID go together: maxID is missing",
                ));
            }
            (None, None) => {}
        }
        if let Some(id) = vid("id")? {
            vids.insert(id);
        }
    }
    Ok(vids.into_iter().collect())
}

/// The container MAC from its three sources, the later winning as in the reference.
fn container_mac(conf: &Map<String, Value>, cni_args: &str) -> Result<Option<[u8; 6]>, CniError> {
    let mut mac = None;
    for (key, value) in parse_cni_args(cni_args)? {
        if key == "MAC" && !value.is_empty() {
            mac = Some(parse_mac(&value).map_err(|why| {
                CniError::new(
                    code::INVALID_ENVIRONMENT,
                    format!("CNI_ARGS MAC {value:?}: {why}"),
                )
            })?);
        }
    }
    let nested = |outer: &str, inner: &str| -> Result<Option<String>, CniError> {
        let Some(mut value) = conf.get(outer) else {
            return Ok(None);
        };
        let path: Vec<&str> = inner.split('.').collect();
        for key in &path {
            match value {
                Value::Null => return Ok(None),
                Value::Object(obj) => match obj.get(*key) {
                    Some(v) => value = v,
                    None => return Ok(None),
                },
                other => {
                    return Err(CniError::config(format!(
                        "\"{outer}\" must be an object, not {other}"
                    )));
                }
            }
        }
        match value {
            Value::Null => Ok(None),
            Value::String(s) if s.is_empty() => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            other => Err(CniError::config(format!(
                "\"{outer}.{inner}\" must be a string, not {other}"
            ))),
        }
    };
    for (outer, inner) in [("args", "cni.mac"), ("runtimeConfig", "mac")] {
        if let Some(value) = nested(outer, inner)? {
            mac = Some(parse_mac(&value).map_err(|why| {
                CniError::config(format!("\"{outer}.{inner}\" {value:?}: {why}"))
            })?);
        }
    }
    Ok(mac)
}

/// `CNI_ARGS` as key/value pairs; unknown keys are refused unless `IgnoreUnknown` is set, as
/// libcni's `LoadArgs` does.
fn parse_cni_args(args: &str) -> Result<Vec<(String, String)>, CniError> {
    let invalid = |msg: String| CniError::new(code::INVALID_ENVIRONMENT, msg);
    let mut pairs = Vec::new();
    for pair in args.split(';').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| {
            invalid(format!(
                "CNI_ARGS: invalid pair {pair:?} (expected KEY=VALUE)"
            ))
        })?;
        pairs.push((key.to_owned(), value.to_owned()));
    }
    let mut ignore_unknown = false;
    for (key, value) in &pairs {
        if key == "IgnoreUnknown" {
            ignore_unknown = match value.to_ascii_lowercase().as_str() {
                "1" | "true" => true,
                "0" | "false" => false,
                _ => {
                    return Err(invalid(format!(
                        "CNI_ARGS: IgnoreUnknown {value:?} is not a boolean"
                    )));
                }
            };
        }
    }
    if !ignore_unknown {
        let unknown: Vec<&str> = pairs
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !matches!(*k, "IgnoreUnknown" | "MAC"))
            .collect();
        if !unknown.is_empty() {
            return Err(invalid(format!(
                "CNI_ARGS: unknown args {unknown:?} (set IgnoreUnknown=1 to pass arguments for other plugins)"
            )));
        }
    }
    Ok(pairs)
}

/// A 48-bit MAC address written with ':' or '-' between its six bytes.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let separator = if s.contains('-') { '-' } else { ':' };
    let parts: Vec<&str> = s.split(separator).collect();
    if parts.len() != 6 {
        return Err("a MAC address has six bytes, like 02:00:00:00:00:01".to_owned());
    }
    let mut mac = [0u8; 6];
    for (byte, part) in mac.iter_mut().zip(parts) {
        if part.len() != 2 {
            return Err("each byte of a MAC address is two hex digits".to_owned());
        }
        *byte = u8::from_str_radix(part, 16)
            .map_err(|_| "a MAC address is made of hex digits".to_owned())?;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cni::protocol::Command;

    fn invocation(config: Value, args: &str) -> Invocation {
        Invocation {
            command: Command::Add,
            container_id: "c".into(),
            netns: "/x".into(),
            ifname: "eth0".into(),
            args: args.into(),
            path: "/usr/lib/cni".into(),
            stdin: config.to_string().into_bytes(),
            cni_version: "1.0.0".into(),
            config,
        }
    }

    fn parse(config: Value) -> Result<BridgeConfig, CniError> {
        BridgeConfig::parse(&invocation(config, ""))
    }

    #[test]
    fn defaults() {
        let conf = parse(json!({"name": "n", "bridge": "br0"})).unwrap();
        assert_eq!(conf.bridge, "br0");
        assert!(conf.preserve_default_vlan);
        assert_eq!((conf.mtu, conf.vlan, conf.mac), (None, None, None));
    }

    #[test]
    fn errors_name_their_field() {
        let cases = [
            (json!({"name": "n"}), "\"bridge\""),
            (
                json!({"name": "n", "bridge": "a-name-longer-than-15"}),
                "\"bridge\"",
            ),
            (
                json!({"name": "n", "bridge": "br0", "mtu": 70000}),
                "\"mtu\"",
            ),
            (json!({"name": "n", "bridge": "br0", "mtu": -5}), "\"mtu\""),
            (
                json!({"name": "n", "bridge": "br0", "mtu": "1500"}),
                "\"mtu\"",
            ),
            (
                json!({"name": "n", "bridge": "br0", "vlan": 4095}),
                "\"vlan\"",
            ),
            (
                json!({"name": "n", "bridge": "br0", "isGateway": "yes"}),
                "\"isGateway\"",
            ),
            (
                json!({"name": "n", "bridge": "br0", "vlan": 5, "vlanTrunk": [{"id": 6}]}),
                "\"vlanTrunk\"",
            ),
            (
                json!({"name": "n", "bridge": "br0", "vlanTrunk": [{"minID": 9, "maxID": 3}]}),
                "\"vlanTrunk\"",
            ),
            (
                json!({"name": "n", "bridge": "br0", "runtimeConfig": {"mac": "zz"}}),
                "\"runtimeConfig.mac\"",
            ),
        ];
        for (config, field) in cases {
            let err = parse(config.clone()).unwrap_err();
            assert!(err.msg.contains(field), "{config}: {}", err.msg);
            assert_eq!(err.code, code::INVALID_CONFIG, "{config}");
        }
    }

    #[test]
    fn trunk_and_mac_sources() {
        let conf = parse(json!({"name": "n", "bridge": "br0",
            "vlanTrunk": [{"minID": 10, "maxID": 12}, {"id": 11}, {"id": 20}]}))
        .unwrap();
        assert_eq!(conf.vlan_trunk, vec![10, 11, 12, 20]);
        let inv = invocation(
            json!({"name": "n", "bridge": "br0", "args": {"cni": {"mac": "02:00:00:00:00:02"}}}),
            "IgnoreUnknown=1;MAC=02:00:00:00:00:01;K8S_POD_NAME=x",
        );
        assert_eq!(
            BridgeConfig::parse(&inv).unwrap().mac,
            Some([2, 0, 0, 0, 0, 2])
        );
        let inv = invocation(
            json!({"name": "n", "bridge": "br0"}),
            "MAC=02-00-00-00-00-01",
        );
        assert_eq!(
            BridgeConfig::parse(&inv).unwrap().mac,
            Some([2, 0, 0, 0, 0, 1])
        );
        let inv = invocation(json!({"name": "n", "bridge": "br0"}), "FOO=bar");
        assert_eq!(
            BridgeConfig::parse(&inv).unwrap_err().code,
            code::INVALID_ENVIRONMENT
        );
    }

    #[test]
    fn teardown_reads_leniently() {
        let inv = invocation(json!({"name": "n", "mtu": "nonsense", "ipMasq": true}), "");
        let conf = TeardownConfig::parse(&inv);
        assert!(conf.ip_masq);
        assert_eq!(conf.name, "n");
    }
}
