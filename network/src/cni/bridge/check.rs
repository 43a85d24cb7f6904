//! CHECK: the attachment `prevResult` describes is still in place: the bridge (a bridge,
//! same MAC, the configured promiscuous mode), the container veth (in the sandbox, same
//! MAC), the host veth that is its peer and a port of the bridge, the addresses and routes
//! inside the container, the spoof check and NAT rules, and the IPAM plugin's own CHECK.

use crate::cni::error::CniError;
use crate::cni::ipam::Ipam;
use crate::cni::ipmasq::IpMasq;
use crate::cni::netlink::{Link, LinkKind, Netlink};
use crate::cni::netns::{Netns, run_in};
use crate::cni::protocol::Invocation;
use crate::cni::result::{Interface, IpConfig, IpPrefix, Route};
use crate::cni::spoofcheck::SpoofCheck;

use super::config::BridgeConfig;

fn failed(msg: impl Into<String>) -> CniError {
    CniError::internal(msg)
}

pub fn check(inv: &Invocation) -> Result<(), CniError> {
    let conf = BridgeConfig::parse(inv)?;
    let netns = Netns::open(&inv.netns)?;
    if let Some(ipam) = Ipam::of(inv)? {
        ipam.check()?;
    }
    let prev = BridgeConfig::prev_result(inv)?;

    let bridge_entry = prev
        .interfaces
        .iter()
        .find(|i| i.name == conf.bridge)
        .cloned()
        .unwrap_or_default();
    let container_entry = prev
        .interfaces
        .iter()
        .find(|i| i.name == inv.ifname && i.sandbox == inv.netns)
        .cloned()
        .unwrap_or_default();

    let bridge = {
        let (entry, promisc) = (bridge_entry.clone(), conf.promisc_mode);
        run_in(None, move |nl| async move {
            validate_bridge(&nl, &entry, promisc).await
        })?
    };
    if inv.netns != container_entry.sandbox {
        return Err(failed(format!(
            "Sandbox in prevResult {} doesn't match configured netns: {}",
            container_entry.sandbox, inv.netns
        )));
    }
    let container = {
        let entry = container_entry.clone();
        run_in(Some(&netns), move |nl| async move {
            validate_container(&nl, &entry).await
        })?
    };

    let others: Vec<Interface> = prev
        .interfaces
        .iter()
        .filter(|i| i.name != bridge_entry.name && i.name != container_entry.name)
        .cloned()
        .collect();
    let (bridge_index, container_index, container_peer) =
        (bridge.index, container.index, container.peer);
    let host_veth = run_in(None, move |nl| async move {
        for entry in &others {
            if let Some(veth) =
                find_host_veth(&nl, entry, bridge_index, container_index, container_peer).await?
            {
                return Ok(Some(veth));
            }
        }
        Ok(None)
    })?;
    let Some(host_veth) = host_veth else {
        return Err(failed(format!(
            "CNI veth created for bridge {} was not found",
            conf.bridge
        )));
    };

    let (ifname, ips, routes) = (inv.ifname.clone(), prev.ips.clone(), prev.routes.clone());
    run_in(Some(&netns), move |nl| async move {
        validate_addresses(&nl, &ifname, &ips).await?;
        validate_routes(&nl, &routes).await
    })?;

    if conf.mac_spoof_check
        && !SpoofCheck::new(&inv.container_id, &inv.ifname).is_set_up(&host_veth.name)?
    {
        return Err(failed(format!(
            "the macspoofchk rules of {} are missing",
            host_veth.name
        )));
    }
    if conf.ip_masq {
        let masq = IpMasq::new(&conf.name, &inv.container_id);
        if let Some(ip) = prev.ips.iter().find(|ip| !masq.is_set_up(ip.address)) {
            return Err(failed(format!(
                "the ipMasq rules of {} are missing",
                ip.address
            )));
        }
    }
    Ok(())
}

async fn lookup_listed(
    nl: &Netlink,
    entry: &Interface,
    in_sandbox: bool,
) -> Result<Link, CniError> {
    if entry.name.is_empty() {
        return Err(failed("Interface name missing in prevResult"));
    }
    let link = nl
        .link_by_name(&entry.name)
        .await
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| failed(format!("Interface name {} not found", entry.name)))?;
    if in_sandbox && entry.sandbox.is_empty() {
        return Err(failed(format!(
            "Interface {} is expected to be in a sandbox",
            entry.name
        )));
    }
    if !in_sandbox && !entry.sandbox.is_empty() {
        return Err(failed(format!(
            "Interface {} should not be in sandbox",
            entry.name
        )));
    }
    Ok(link)
}

async fn validate_bridge(nl: &Netlink, entry: &Interface, promisc: bool) -> Result<Link, CniError> {
    let link = lookup_listed(nl, entry, false).await?;
    if link.kind != LinkKind::Bridge {
        return Err(failed(format!(
            "Interface {} does not have link type of bridge",
            entry.name
        )));
    }
    if !entry.mac.is_empty() && entry.mac != link.mac_string() {
        return Err(failed(format!(
            "Bridge interface {} Mac doesn't match: {}",
            entry.name, entry.mac
        )));
    }
    if link.promisc != promisc {
        return Err(failed(format!(
            "Bridge interface {} configured Promisc Mode {promisc} doesn't match current state: {}",
            entry.name, link.promisc
        )));
    }
    Ok(link)
}

async fn validate_container(nl: &Netlink, entry: &Interface) -> Result<Link, CniError> {
    let link = lookup_listed(nl, entry, true).await?;
    if link.kind != LinkKind::Veth {
        return Err(failed(format!(
            "Error: Container interface {} not of type veth",
            link.name
        )));
    }
    if link.peer.is_none() {
        return Err(failed(format!(
            "Unable to obtain veth peer index for veth {}",
            link.name
        )));
    }
    if !entry.mac.is_empty() && entry.mac != link.mac_string() {
        return Err(failed(format!(
            "Interface {} Mac {} doesn't match container Mac: {}",
            entry.name,
            entry.mac,
            link.mac_string()
        )));
    }
    Ok(link)
}

/// The listed host interface if it is the container veth's peer and a port of the bridge.
async fn find_host_veth(
    nl: &Netlink,
    entry: &Interface,
    bridge_index: u32,
    container_index: u32,
    container_peer: Option<u32>,
) -> Result<Option<Link>, CniError> {
    let link = lookup_listed(nl, entry, false).await?;
    if link.kind != LinkKind::Veth {
        // Not something this plugin created.
        return Ok(None);
    }
    let Some(peer) = link.peer else {
        return Err(failed(format!(
            "Unable to obtain veth peer index for veth {}",
            link.name
        )));
    };
    if Some(link.index) != container_peer
        || peer != container_index
        || link.controller != Some(bridge_index)
    {
        return Ok(None);
    }
    if !entry.mac.is_empty() && entry.mac != link.mac_string() {
        return Err(failed(format!(
            "Interface {} Mac doesn't match: {} not found",
            entry.name, entry.mac
        )));
    }
    Ok(Some(link))
}

/// Every address of the result is on the interface, with a route to its network.
async fn validate_addresses(nl: &Netlink, ifname: &str, ips: &[IpConfig]) -> Result<(), CniError> {
    if ips.is_empty() {
        return Ok(());
    }
    let link = nl
        .link_by_name(ifname)
        .await
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| failed(format!("Cannot find container link {ifname}")))?;
    let present = nl
        .addresses(&link)
        .await
        .map_err(|e| failed(e.to_string()))?;
    for ip in ips {
        if !present.iter().any(|a| a.prefix == ip.address) {
            return Err(failed(format!(
                "Failed to match addr {} on interface {ifname}",
                ip.address
            )));
        }
        let network = IpPrefix {
            addr: ip.address.network(),
            prefix: ip.address.prefix,
        };
        let routes = nl
            .routes(ip.address.is_ipv4())
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !routes.iter().any(|r| r.dst == Some(network)) {
            let gateway = ip.gateway.map(|g| g.to_string()).unwrap_or_default();
            return Err(failed(format!(
                "Failed to find Gateway {gateway} for interface {ifname}"
            )));
        }
    }
    Ok(())
}

/// Every route of the result is in the container's main table (a default route by
/// destination only, as the reference matches it).
async fn validate_routes(nl: &Netlink, routes: &[Route]) -> Result<(), CniError> {
    for route in routes {
        let table = nl
            .routes(route.dst.is_ipv4())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let found = if route.dst.prefix == 0 {
            table.iter().any(|r| r.dst.is_none())
        } else {
            let dst = IpPrefix {
                addr: route.dst.network(),
                prefix: route.dst.prefix,
            };
            table
                .iter()
                .any(|r| r.dst == Some(dst) && (route.gw.is_none() || r.gw == route.gw))
        };
        if !found {
            let via = route.gw.map(|g| format!(" via {g}")).unwrap_or_default();
            return Err(failed(format!(
                "Expected Route {}{via} not found in routing table",
                route.dst
            )));
        }
    }
    Ok(())
}
