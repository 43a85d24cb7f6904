//! Layer 3 of ADD: the gateways a result implies, the container interface's addresses and
//! routes (libcni's `ipam.ConfigureIface`), and the gateway addresses on the bridge.

use std::net::IpAddr;
use std::time::Duration;

use crate::cni::error::CniError;
use crate::cni::netlink::{Link, Netlink};
use crate::cni::netns::{Netns, run_in};
use crate::cni::result::{CniResult, IpPrefix, Route};
use crate::cni::sysctl;

use super::config::BridgeConfig;
use super::links::lookup;

/// The gateway addresses (with their prefix) the bridge must carry, per family.
#[derive(Debug, Default)]
pub struct Gateways {
    pub v4: Vec<IpPrefix>,
    pub v6: Vec<IpPrefix>,
}

/// Points every address at the container interface (index 2 of the result), fills in
/// gateways for a gateway bridge (the network's first address when IPAM gave none), adds a
/// default route per family for a default gateway, and returns the bridge's gateways.
pub fn calc_gateways(result: &mut CniResult, conf: &BridgeConfig) -> Gateways {
    let mut gateways = Gateways::default();
    let mut default_route_found = [false, false];
    for ip in &mut result.ips {
        ip.interface = Some(2);
        let ipv4 = ip.address.is_ipv4();
        if ip.gateway.is_none() && conf.is_gateway {
            ip.gateway = Some(next_ip(ip.address.network()));
        }
        let family = usize::from(!ipv4);
        if conf.is_default_gateway && !default_route_found[family] {
            let default = IpPrefix::default_route(ipv4);
            let listed = result
                .routes
                .iter()
                .any(|r| r.gw.is_some() && r.dst == default);
            if !listed {
                result.routes.push(Route::new(default, ip.gateway));
            }
            default_route_found[family] = true;
        }
        if conf.is_gateway {
            if let Some(gw) = ip.gateway {
                let list = if ipv4 {
                    &mut gateways.v4
                } else {
                    &mut gateways.v6
                };
                list.push(IpPrefix {
                    addr: gw,
                    prefix: ip.address.prefix,
                });
            }
        }
    }
    gateways
}

fn next_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(u32::from(v4).wrapping_add(1).into()),
        IpAddr::V6(v6) => IpAddr::V6(u128::from(v6).wrapping_add(1).into()),
    }
}

/// Sets the container interface's DAD and ARP sysctls, brings it up and gives it the
/// result's addresses and routes.
pub fn configure_container(
    netns: &Netns,
    ifname: &str,
    result: &CniResult,
    enable_dad: bool,
) -> Result<(), CniError> {
    let ifname = ifname.to_owned();
    let result = result.clone();
    run_in(Some(netns), move |nl| async move {
        if enable_dad {
            sysctl::set_best_effort(&format!("net/ipv6/conf/{ifname}/enhanced_dad"), "1");
            sysctl::set_best_effort(&format!("net/ipv6/conf/{ifname}/accept_dad"), "1");
        } else {
            sysctl::set_best_effort(&format!("net/ipv6/conf/{ifname}/accept_dad"), "0");
        }
        sysctl::set_best_effort(&format!("net/ipv4/conf/{ifname}/arp_notify"), "1");
        configure_iface(&nl, &ifname, &result).await
    })
}

async fn configure_iface(nl: &Netlink, ifname: &str, result: &CniResult) -> Result<(), CniError> {
    if result.interfaces.is_empty() {
        return Err(CniError::internal("no interfaces to configure"));
    }
    let link = lookup(nl, ifname).await?;
    nl.set_up(&link)
        .await
        .map_err(|e| CniError::internal(format!("failed to set {ifname:?} UP: {e}")))?;
    let mut v4_gateway = None;
    let mut v6_gateway = None;
    let mut ipv6_enabled = false;
    for ip in &result.ips {
        let Some(index) = ip.interface else { continue };
        if result
            .interfaces
            .get(index)
            .is_none_or(|iface| iface.name != ifname)
        {
            return Err(CniError::internal(format!(
                "failed to add IP addr {} to {ifname:?}: invalid interface index",
                ip.address
            )));
        }
        if !ipv6_enabled && !ip.address.is_ipv4() {
            for iface in ["lo", ifname] {
                let key = format!("net/ipv6/conf/{iface}/disable_ipv6");
                match sysctl::get(&key) {
                    Ok(value) if value == "0" => {}
                    Ok(value) => sysctl::set(&key, "0").map_err(|e| {
                        CniError::internal(format!(
                            "failed to enable IPv6 for interface {iface:?} ({key}={value}): {e}"
                        ))
                    })?,
                    Err(e) => tracing::debug!("cannot read {key}: {e}"),
                }
            }
            ipv6_enabled = true;
        }
        nl.add_address(&link, ip.address).await.map_err(|e| {
            CniError::internal(format!(
                "failed to add IP addr {} to {ifname:?}: {e}",
                ip.address
            ))
        })?;
        match ip.gateway {
            Some(gw @ IpAddr::V4(_)) if v4_gateway.is_none() => v4_gateway = Some(gw),
            Some(gw @ IpAddr::V6(_)) if v6_gateway.is_none() => v6_gateway = Some(gw),
            _ => {}
        }
    }
    if v6_gateway.is_some() {
        settle_addresses(nl, &link, Duration::from_secs(10)).await?;
    }
    for route in &result.routes {
        let mut route = route.clone();
        if route.gw.is_none() {
            route.gw = if route.dst.is_ipv4() {
                v4_gateway
            } else {
                v6_gateway
            };
        }
        if let Err(e) = nl.add_route(&link, &route).await {
            // A duplicate route is skipped: the first one wins.
            if !e.is_exists() {
                return Err(CniError::internal(format!("failed to add route: {e}")));
            }
        }
    }
    Ok(())
}

/// Waits until no address of `link` is tentative (IPv6 duplicate address detection), so
/// routes through an IPv6 gateway can be added.
async fn settle_addresses(nl: &Netlink, link: &Link, timeout: Duration) -> Result<(), CniError> {
    let step = Duration::from_millis(100);
    let mut waited = Duration::ZERO;
    loop {
        let addresses = nl
            .addresses(link)
            .await
            .map_err(|e| CniError::internal(e.to_string()))?;
        if let Some(failed) = addresses.iter().find(|a| a.dad_failed) {
            return Err(CniError::internal(format!(
                "link {} has duplicate address {} (duplicate address detection failed)",
                link.name, failed.prefix
            )));
        }
        if !addresses.iter().any(|a| a.tentative) {
            return Ok(());
        }
        if waited >= timeout {
            return Err(CniError::internal(format!(
                "link {} still has tentative addresses after {} seconds",
                link.name,
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(step).await;
        waited += step;
    }
}

/// Gives `link` (the bridge or its VLAN interface) the gateway address `gw`, replacing a
/// conflicting one only with `forceAddress`, and pins the link's MAC (a bridge otherwise
/// takes the lowest MAC of its ports, which changes as ports come and go).
pub fn ensure_gateway_address(link: &Link, gw: IpPrefix, force: bool) -> Result<(), CniError> {
    let link = link.clone();
    run_in(None, move |nl| async move {
        let internal = |e: crate::cni::netlink::NlError| CniError::internal(e.to_string());
        for existing in nl.addresses(&link).await.map_err(internal)? {
            let prefix = existing.prefix;
            if prefix.is_ipv4() != gw.is_ipv4() {
                continue;
            }
            if prefix == gw {
                return Ok(());
            }
            // IPv4 allows one address; IPv6 several, as long as their networks do not overlap.
            if gw.is_ipv4() || prefix.contains(gw.addr) || gw.contains(prefix.addr) {
                if force {
                    nl.delete_address(&link, &existing)
                        .await
                        .map_err(internal)?;
                } else {
                    return Err(CniError::internal(format!(
                        "{:?} already has an IP address different from {gw}",
                        link.name
                    )));
                }
            }
        }
        if let Err(e) = nl.add_address(&link, gw).await {
            if !e.is_exists() {
                return Err(CniError::internal(format!(
                    "could not add IP address to {:?}: {e}",
                    link.name
                )));
            }
        }
        nl.set_mac(&link, &link.mac)
            .await
            .map_err(|e| CniError::internal(format!("could not set bridge's mac: {e}")))
    })
}

/// Turns on forwarding for a family in the host namespace.
pub fn enable_forwarding(ipv4: bool) -> Result<(), CniError> {
    let key = if ipv4 {
        "net/ipv4/ip_forward"
    } else {
        "net/ipv6/conf/all/forwarding"
    };
    if sysctl::get(key).is_ok_and(|v| v == "1") {
        return Ok(());
    }
    sysctl::set(key, "1")
        .map_err(|e| CniError::internal(format!("failed to enable forwarding ({key}): {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::result::{Interface, IpConfig};

    fn conf(gateway: bool, default: bool) -> BridgeConfig {
        BridgeConfig {
            name: "n".into(),
            bridge: "br0".into(),
            is_gateway: gateway || default,
            is_default_gateway: default,
            force_address: false,
            ip_masq: false,
            mtu: None,
            hairpin_mode: false,
            promisc_mode: false,
            vlan: None,
            vlan_trunk: Vec::new(),
            preserve_default_vlan: true,
            mac_spoof_check: false,
            enable_dad: false,
            disable_container_interface: false,
            mac: None,
            dns: None,
        }
    }

    fn result() -> CniResult {
        CniResult {
            interfaces: vec![Interface::default(); 3],
            ips: vec![
                IpConfig {
                    interface: None,
                    address: "10.1.2.7/24".parse().unwrap(),
                    gateway: None,
                },
                IpConfig {
                    interface: None,
                    address: "fd00:5::7/64".parse().unwrap(),
                    gateway: None,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn default_gateway_fills_gateways_and_default_routes() {
        let mut r = result();
        let gws = calc_gateways(&mut r, &conf(false, true));
        assert_eq!(r.ips[0].gateway, Some("10.1.2.1".parse().unwrap()));
        assert_eq!(r.ips[1].gateway, Some("fd00:5::1".parse().unwrap()));
        assert!(r.ips.iter().all(|ip| ip.interface == Some(2)));
        assert_eq!(r.routes.len(), 2);
        assert_eq!(r.routes[0].dst.to_string(), "0.0.0.0/0");
        assert_eq!(r.routes[1].dst.to_string(), "::/0");
        assert_eq!(gws.v4[0].to_string(), "10.1.2.1/24");
        assert_eq!(gws.v6[0].to_string(), "fd00:5::1/64");
    }

    #[test]
    fn no_gateway_leaves_gateways_alone() {
        let mut r = result();
        let gws = calc_gateways(&mut r, &conf(false, false));
        assert!(r.ips.iter().all(|ip| ip.gateway.is_none()));
        assert!(r.routes.is_empty() && gws.v4.is_empty() && gws.v6.is_empty());
    }
}
