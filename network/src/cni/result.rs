//! The CNI result: what ADD prints and what CHECK reads back as `prevResult`, in every
//! spec version the plugin speaks. Internally a result is always the current (1.x) shape;
//! it is read from and written to the 0.1.0/0.2.0 (`ip4`/`ip6`) and 0.3.x/0.4.0 (`ips` with a
//! `version`) shapes at the edges, as libcni's converters do.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::{CniError, code};
use super::version::SpecVersion;

/// An address with its prefix length, as CNI writes it ("10.1.2.3/24"); the address keeps
/// its host bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl IpPrefix {
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Self> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then_some(Self { addr, prefix })
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// The network address: the address with its host bits cleared.
    pub fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        }
    }

    /// Whether `ip` lies in this prefix's network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        if ip.is_ipv4() != self.is_ipv4() {
            return false;
        }
        IpPrefix {
            addr: ip,
            prefix: self.prefix,
        }
        .network()
            == self.network()
    }

    /// The all-zero prefix of this family ("0.0.0.0/0" or "::/0").
    pub fn default_route(ipv4: bool) -> Self {
        if ipv4 {
            Self {
                addr: IpAddr::V4(0.into()),
                prefix: 0,
            }
        } else {
            Self {
                addr: IpAddr::V6(0.into()),
                prefix: 0,
            }
        }
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for IpPrefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not an address/prefix"))?;
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} has no valid address"))?;
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| format!("{s:?} has no valid prefix length"))?;
        IpPrefix::new(addr, prefix).ok_or_else(|| format!("{s:?} has a prefix length too long"))
    }
}

impl Serialize for IpPrefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One interface of a result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mac: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sandbox: String,
}

/// One address of a result; `interface` indexes the result's `interfaces`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpConfig {
    pub interface: Option<usize>,
    pub address: IpPrefix,
    pub gateway: Option<IpAddr>,
}

/// One route of a result. The fields after `gw` are CNI 1.1's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Route {
    pub dst: IpPrefix,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(rename = "advmss", skip_serializing_if = "Option::is_none")]
    pub adv_mss: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<u8>,
}

impl Route {
    pub fn new(dst: IpPrefix, gw: Option<IpAddr>) -> Self {
        Route {
            dst,
            gw,
            mtu: None,
            adv_mss: None,
            priority: None,
            table: None,
            scope: None,
        }
    }
}

/// The `dns` object of a configuration or a result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Dns {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Dns {
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.is_empty()
            && self.search.is_empty()
            && self.options.is_empty()
    }

    /// Reads a `dns` object; `field` names it in errors ("dns", "prevResult.dns").
    pub fn from_value(value: &Value, field: &str) -> Result<Self, String> {
        let obj = value
            .as_object()
            .ok_or_else(|| format!("\"{field}\" must be an object"))?;
        let strings = |key: &str| -> Result<Vec<String>, String> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| format!("\"{field}.{key}\" must be a list of strings"))
                    })
                    .collect(),
                Some(_) => Err(format!("\"{field}.{key}\" must be a list of strings")),
            }
        };
        let domain = match obj.get("domain") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(format!("\"{field}.domain\" must be a string")),
        };
        Ok(Dns {
            nameservers: strings("nameservers")?,
            domain,
            search: strings("search")?,
            options: strings("options")?,
        })
    }
}

/// A result in the current shape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CniResult {
    pub interfaces: Vec<Interface>,
    pub ips: Vec<IpConfig>,
    pub routes: Vec<Route>,
    pub dns: Dns,
}

impl CniResult {
    /// Reads a result printed in any supported version; `field` names where it came from
    /// ("prevResult", "the IPAM plugin's result") in errors. A result without a
    /// `cniVersion` is read in `fallback`'s shape.
    pub fn from_value(value: &Value, field: &str, fallback: SpecVersion) -> Result<Self, CniError> {
        let invalid =
            |msg: String| CniError::new(code::DECODING_FAILURE, format!("{field}: {msg}"));
        let obj = value
            .as_object()
            .ok_or_else(|| invalid("must be an object".to_owned()))?;
        let version = match obj.get("cniVersion") {
            None | Some(Value::Null) => fallback,
            Some(Value::String(v)) if v.is_empty() => fallback,
            Some(Value::String(v)) => SpecVersion::parse(v).ok_or_else(|| {
                CniError::new(
                    code::INCOMPATIBLE_VERSION,
                    format!("{field}: cniVersion {v:?} is not a version this plugin reads"),
                )
            })?,
            Some(_) => return Err(invalid("\"cniVersion\" must be a string".to_owned())),
        };
        let dns = match obj.get("dns") {
            None | Some(Value::Null) => Dns::default(),
            Some(v) => Dns::from_value(v, &format!("{field}.dns")).map_err(invalid)?,
        };
        if version.has_ip_list() {
            Self::read_current(obj, dns).map_err(invalid)
        } else {
            Self::read_legacy(obj, dns).map_err(invalid)
        }
    }

    fn read_current(obj: &Map<String, Value>, dns: Dns) -> Result<Self, String> {
        let mut result = CniResult {
            dns,
            ..Default::default()
        };
        for item in list(obj, "interfaces")? {
            let iface = item
                .as_object()
                .ok_or("\"interfaces\" entries must be objects")?;
            result.interfaces.push(Interface {
                name: string(iface, "name", "interfaces[].name")?.unwrap_or_default(),
                mac: string(iface, "mac", "interfaces[].mac")?.unwrap_or_default(),
                sandbox: string(iface, "sandbox", "interfaces[].sandbox")?.unwrap_or_default(),
            });
        }
        for item in list(obj, "ips")? {
            let ip = item.as_object().ok_or("\"ips\" entries must be objects")?;
            let address = string(ip, "address", "ips[].address")?
                .ok_or("an \"ips\" entry has no \"address\"")?;
            let interface = match ip.get("interface") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_u64()
                        .and_then(|i| usize::try_from(i).ok())
                        .ok_or("\"ips[].interface\" must be a non-negative integer")?,
                ),
            };
            result.ips.push(IpConfig {
                interface,
                address: address
                    .parse()
                    .map_err(|e| format!("\"ips[].address\": {e}"))?,
                gateway: ip_addr(ip, "gateway", "ips[].gateway")?,
            });
        }
        for item in list(obj, "routes")? {
            result.routes.push(read_route(item, "routes")?);
        }
        Ok(result)
    }

    fn read_legacy(obj: &Map<String, Value>, dns: Dns) -> Result<Self, String> {
        let mut result = CniResult {
            dns,
            ..Default::default()
        };
        for key in ["ip4", "ip6"] {
            let Some(config) = obj.get(key).filter(|v| !v.is_null()) else {
                continue;
            };
            let config = config
                .as_object()
                .ok_or(format!("\"{key}\" must be an object"))?;
            let address = string(config, "ip", &format!("{key}.ip"))?
                .ok_or(format!("\"{key}\" has no \"ip\""))?;
            result.ips.push(IpConfig {
                interface: None,
                address: address.parse().map_err(|e| format!("\"{key}.ip\": {e}"))?,
                gateway: ip_addr(config, "gateway", &format!("{key}.gateway"))?,
            });
            for route in list(config, "routes")? {
                result
                    .routes
                    .push(read_route(route, &format!("{key}.routes"))?);
            }
        }
        Ok(result)
    }

    /// The result as JSON in `version`'s shape, or why it cannot be written so (0.2.0 and
    /// older need an address).
    pub fn to_value(&self, version: &str) -> Result<Value, CniError> {
        serde_json::to_value(self.printable(version)?)
            .map_err(|e| CniError::internal(format!("cannot encode the result: {e}")))
    }

    /// The result in `version`'s shape, fields in the spec's order, ready to print.
    pub fn printable<'a>(&'a self, version: &'a str) -> Result<Printable<'a>, CniError> {
        let parsed = SpecVersion::parse(version).unwrap_or(SpecVersion::CURRENT);
        if parsed.has_ip_list() {
            let with_version = !parsed.is_1x();
            return Ok(Printable::Current(CurrentOut {
                cni_version: version,
                interfaces: &self.interfaces,
                ips: self
                    .ips
                    .iter()
                    .map(|ip| IpOut {
                        version: with_version.then_some(if ip.address.is_ipv4() {
                            "4"
                        } else {
                            "6"
                        }),
                        interface: ip.interface,
                        address: ip.address,
                        gateway: ip.gateway,
                    })
                    .collect(),
                routes: self
                    .routes
                    .iter()
                    .map(|r| self.route_out(r, parsed))
                    .collect(),
                dns: &self.dns,
            }));
        }
        let mut ip4: Option<LegacyIpOut> = None;
        let mut ip6: Option<LegacyIpOut> = None;
        for ip in &self.ips {
            let slot = if ip.address.is_ipv4() {
                &mut ip4
            } else {
                &mut ip6
            };
            if slot.is_none() {
                *slot = Some(LegacyIpOut {
                    ip: ip.address,
                    gateway: ip.gateway,
                    routes: Vec::new(),
                });
            }
        }
        for route in &self.routes {
            let slot = if route.dst.is_ipv4() {
                &mut ip4
            } else {
                &mut ip6
            };
            if let Some(slot) = slot {
                slot.routes.push(Route::new(route.dst, route.gw));
            }
        }
        if ip4.is_none() && ip6.is_none() {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!("cannot write the result as CNI {version}: it has no IP address"),
            ));
        }
        Ok(Printable::Legacy(LegacyOut {
            cni_version: version,
            ip4,
            ip6,
            dns: &self.dns,
        }))
    }

    fn route_out(&self, route: &Route, version: SpecVersion) -> Route {
        if version.is_at_least(SpecVersion::V1_1) {
            route.clone()
        } else {
            Route::new(route.dst, route.gw)
        }
    }
}

/// A result in one version's shape.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Printable<'a> {
    Current(CurrentOut<'a>),
    Legacy(LegacyOut<'a>),
}

#[derive(Serialize)]
pub struct CurrentOut<'a> {
    #[serde(rename = "cniVersion")]
    cni_version: &'a str,
    #[serde(skip_serializing_if = "<[Interface]>::is_empty")]
    interfaces: &'a [Interface],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ips: Vec<IpOut>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<Route>,
    dns: &'a Dns,
}

#[derive(Serialize)]
struct IpOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interface: Option<usize>,
    address: IpPrefix,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
}

#[derive(Serialize)]
pub struct LegacyOut<'a> {
    #[serde(rename = "cniVersion")]
    cni_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip4: Option<LegacyIpOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip6: Option<LegacyIpOut>,
    dns: &'a Dns,
}

#[derive(Serialize)]
struct LegacyIpOut {
    ip: IpPrefix,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<IpAddr>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<Route>,
}

fn list<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(format!("\"{key}\" must be a list")),
    }
}

fn string(obj: &Map<String, Value>, key: &str, field: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("\"{field}\" must be a string")),
    }
}

fn ip_addr(obj: &Map<String, Value>, key: &str, field: &str) -> Result<Option<IpAddr>, String> {
    match string(obj, key, field)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|_| format!("\"{field}\" is not an IP address: {s:?}")),
    }
}

fn read_route(item: &Value, field: &str) -> Result<Route, String> {
    let route = item
        .as_object()
        .ok_or(format!("\"{field}\" entries must be objects"))?;
    let dst = string(route, "dst", &format!("{field}[].dst"))?
        .ok_or(format!("a \"{field}\" entry has no \"dst\""))?;
    let number = |key: &str| -> Result<Option<u64>, String> {
        match route.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or(format!(
                "\"{field}[].{key}\" must be a non-negative integer"
            )),
        }
    };
    let small = |key: &str, value: Option<u64>| -> Result<Option<u32>, String> {
        value
            .map(|v| u32::try_from(v).map_err(|_| format!("\"{field}[].{key}\" is too large")))
            .transpose()
    };
    Ok(Route {
        dst: dst.parse().map_err(|e| format!("\"{field}[].dst\": {e}"))?,
        gw: ip_addr(route, "gw", &format!("{field}[].gw"))?,
        mtu: small("mtu", number("mtu")?)?,
        adv_mss: small("advmss", number("advmss")?)?,
        priority: small("priority", number("priority")?)?,
        table: small("table", number("table")?)?,
        scope: number("scope")?
            .map(|v| u8::try_from(v).map_err(|_| format!("\"{field}[].scope\" is too large")))
            .transpose()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> CniResult {
        CniResult {
            interfaces: vec![
                Interface {
                    name: "br0".into(),
                    mac: "02:00:00:00:00:01".into(),
                    sandbox: String::new(),
                },
                Interface {
                    name: "eth0".into(),
                    mac: "02:00:00:00:00:02".into(),
                    sandbox: "/run/netns/x".into(),
                },
            ],
            ips: vec![IpConfig {
                interface: Some(1),
                address: "10.1.2.3/24".parse().unwrap(),
                gateway: Some("10.1.2.1".parse().unwrap()),
            }],
            routes: vec![Route::new(
                "0.0.0.0/0".parse().unwrap(),
                Some("10.1.2.1".parse().unwrap()),
            )],
            dns: Dns::default(),
        }
    }

    #[test]
    fn current_shape_round_trips() {
        let value = sample().to_value("1.0.0").unwrap();
        assert_eq!(
            value,
            json!({
                "cniVersion": "1.0.0",
                "interfaces": [
                    {"name": "br0", "mac": "02:00:00:00:00:01"},
                    {"name": "eth0", "mac": "02:00:00:00:00:02", "sandbox": "/run/netns/x"}
                ],
                "ips": [{"interface": 1, "address": "10.1.2.3/24", "gateway": "10.1.2.1"}],
                "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}],
                "dns": {}
            })
        );
        let back = CniResult::from_value(&value, "test", SpecVersion::CURRENT).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn zero_four_has_ip_versions_and_zero_two_has_ip4() {
        let v040 = sample().to_value("0.4.0").unwrap();
        assert_eq!(v040["ips"][0]["version"], "4");
        let v020 = sample().to_value("0.2.0").unwrap();
        assert_eq!(
            v020,
            json!({
                "cniVersion": "0.2.0",
                "ip4": {"ip": "10.1.2.3/24", "gateway": "10.1.2.1",
                        "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}]},
                "dns": {}
            })
        );
        let back = CniResult::from_value(&v020, "test", SpecVersion::CURRENT).unwrap();
        assert_eq!(back.ips[0].address, sample().ips[0].address);
        assert_eq!(back.routes, sample().routes);
    }

    #[test]
    fn legacy_without_addresses_is_refused() {
        let l2 = CniResult {
            interfaces: sample().interfaces,
            ..Default::default()
        };
        let err = l2.to_value("0.2.0").unwrap_err();
        assert_eq!(err.code, code::INCOMPATIBLE_VERSION);
    }

    #[test]
    fn prefixes() {
        let p: IpPrefix = "10.1.2.3/24".parse().unwrap();
        assert_eq!(p.network().to_string(), "10.1.2.0");
        assert!(p.contains("10.1.2.200".parse().unwrap()));
        assert!(!p.contains("10.1.3.1".parse().unwrap()));
        let v6: IpPrefix = "fd00:1::5/64".parse().unwrap();
        assert_eq!(v6.network().to_string(), "fd00:1::");
        assert!("10.0.0.1/33".parse::<IpPrefix>().is_err());
        assert!("nonsense".parse::<IpPrefix>().is_err());
    }
}
