//! ADD: bridge, veth pair, port settings, spoof check, IPAM addresses, gateway, NAT; then the
//! result. A failure after the veth pair exists undoes what was done (the veth, the spoof
//! check, the IPAM allocation, NAT rules) before the error is returned.

use crate::cni::error::CniError;
use crate::cni::ipam::Ipam;
use crate::cni::ipmasq::IpMasq;
use crate::cni::netns::{Netns, run_in};
use crate::cni::protocol::Invocation;
use crate::cni::result::{CniResult, Interface};
use crate::cni::spoofcheck::SpoofCheck;

use super::addressing::{
    Gateways, calc_gateways, configure_container, enable_forwarding, ensure_gateway_address,
};
use super::config::BridgeConfig;
use super::links::{self, PortSettings};

/// What ADD has done so far that a failure must undo.
#[derive(Default)]
struct Undo {
    container_link: bool,
    spoof_check: Option<SpoofCheck>,
    ipam_allocated: bool,
    masquerade: Vec<crate::cni::result::IpPrefix>,
}

pub fn add(inv: &Invocation) -> Result<CniResult, CniError> {
    let mut conf = BridgeConfig::parse(inv)?;
    let ipam = Ipam::of(inv)?;
    if conf.is_default_gateway {
        conf.is_gateway = true;
    }
    if conf.hairpin_mode && conf.promisc_mode {
        return Err(CniError::config(
            "cannot set \"hairpinMode\" and \"promiscMode\" at the same time",
        ));
    }
    if conf.disable_container_interface {
        if let Some(ipam) = &ipam {
            return Err(CniError::config(format!(
                "cannot use IPAM (\"ipam.type\" {:?}) when \"disableContainerInterface\" is set",
                ipam.name()
            )));
        }
    }
    if let Some(ipam) = &ipam {
        // Before anything is created: a plugin that is not there is a configuration error.
        ipam.find()?;
    }
    let netns = Netns::open(&inv.netns)?;
    let host = Netns::current()
        .map_err(|e| CniError::internal(format!("cannot open the host network namespace: {e}")))?;

    let vlan_filtering = conf.vlan.is_some() || !conf.vlan_trunk.is_empty();
    let bridge = links::ensure_bridge(&conf.bridge, conf.mtu, conf.promisc_mode, vlan_filtering)?;

    let mut undo = Undo::default();
    let outcome = attach(inv, &conf, ipam.as_ref(), &netns, &host, &bridge, &mut undo);
    if outcome.is_err() {
        roll_back(inv, &conf, ipam.as_ref(), &netns, undo);
    }
    outcome
}

fn attach(
    inv: &Invocation,
    conf: &BridgeConfig,
    ipam: Option<&Ipam<'_>>,
    netns: &Netns,
    host: &Netns,
    bridge: &crate::cni::netlink::Link,
    undo: &mut Undo,
) -> Result<CniResult, CniError> {
    let (host_name, container) =
        links::create_veth_pair(Some(netns), host, &inv.ifname, conf.mtu, conf.mac)?;
    undo.container_link = true;
    let settings = PortSettings {
        hairpin: conf.hairpin_mode,
        vlan: conf.vlan,
        vlan_trunk: conf.vlan_trunk.clone(),
        preserve_default_vlan: conf.preserve_default_vlan,
    };
    let port = links::attach_port(&host_name, bridge, settings)?;

    let mut result = CniResult {
        interfaces: vec![
            Interface {
                name: bridge.name.clone(),
                mac: bridge.mac_string(),
                sandbox: String::new(),
            },
            Interface {
                name: port.name.clone(),
                mac: port.mac_string(),
                sandbox: String::new(),
            },
            Interface {
                name: container.name.clone(),
                mac: container.mac_string(),
                sandbox: inv.netns.clone(),
            },
        ],
        ..Default::default()
    };

    if conf.mac_spoof_check {
        let check = SpoofCheck::new(&inv.container_id, &inv.ifname);
        undo.spoof_check = Some(SpoofCheck::new(&inv.container_id, &inv.ifname));
        check.setup(&port.name, &container.mac_string())?;
    }

    if let Some(ipam) = ipam {
        let allocated = ipam.add()?;
        undo.ipam_allocated = true;
        result.ips = allocated.ips;
        result.routes = allocated.routes;
        result.dns = allocated.dns;
        if result.ips.is_empty() {
            return Err(CniError::internal("IPAM plugin returned missing IP config"));
        }
        let gateways = calc_gateways(&mut result, conf);
        configure_container(netns, &inv.ifname, &result, conf.enable_dad)?;

        if conf.is_gateway {
            give_bridge_gateways(conf, host, bridge, &gateways, &mut result)?;
        }

        if conf.ip_masq {
            let masq = IpMasq::new(&conf.name, &inv.container_id);
            for ip in &result.ips {
                undo.masquerade.push(ip.address);
                masq.setup(ip.address)?;
            }
        }
    } else if !conf.disable_container_interface {
        links::set_up_in(netns, &inv.ifname)?;
    }

    if !conf.disable_container_interface {
        let port = links::wait_port_up(&port.name)?;
        // The host end's MAC can change once it is a port.
        result.interfaces[1].mac = port.mac_string();
    }
    // The bridge's MAC changes with its first port, or when it is given an address.
    let bridge_name = bridge.name.clone();
    let bridge_now = run_in(None, move |nl| async move {
        links::lookup(&nl, &bridge_name).await
    })?;
    result.interfaces[0].mac = bridge_now.mac_string();

    if let Some(dns) = &conf.dns {
        result.dns = dns.clone();
    }
    Ok(result)
}

/// `isGateway`: the gateways go on the bridge (or on its VLAN interface, listed once in the
/// result), and forwarding is enabled for each family that has one.
fn give_bridge_gateways(
    conf: &BridgeConfig,
    host: &Netns,
    bridge: &crate::cni::netlink::Link,
    gateways: &Gateways,
    result: &mut CniResult,
) -> Result<(), CniError> {
    let mut vlan_interface_listed = false;
    for (ipv4, list) in [(true, &gateways.v4), (false, &gateways.v6)] {
        for gw in list {
            if let Some(vid) = conf.vlan {
                let vlan_link =
                    links::ensure_vlan_interface(host, bridge, vid, conf.preserve_default_vlan)
                        .map_err(|e| e.context("failed to create vlan interface"))?;
                if !vlan_interface_listed {
                    result.interfaces.push(Interface {
                        name: vlan_link.name.clone(),
                        mac: vlan_link.mac_string(),
                        sandbox: String::new(),
                    });
                    vlan_interface_listed = true;
                }
                ensure_gateway_address(&vlan_link, *gw, conf.force_address)
                    .map_err(|e| e.context("failed to set vlan interface for bridge with addr"))?;
            } else {
                ensure_gateway_address(bridge, *gw, conf.force_address)
                    .map_err(|e| e.context("failed to set bridge addr"))?;
            }
        }
        if !list.is_empty() {
            enable_forwarding(ipv4)?;
        }
    }
    Ok(())
}

/// Best effort: each step that fails is logged and the others still run.
fn roll_back(
    inv: &Invocation,
    conf: &BridgeConfig,
    ipam: Option<&Ipam<'_>>,
    netns: &Netns,
    undo: Undo,
) {
    if !undo.masquerade.is_empty() {
        let masq = IpMasq::new(&conf.name, &inv.container_id);
        for address in undo.masquerade {
            if let Err(e) = masq.teardown(address) {
                tracing::warn!("undoing ADD: {e}");
            }
        }
    }
    if undo.ipam_allocated {
        if let Some(ipam) = ipam {
            if let Err(e) = ipam.del() {
                tracing::warn!("undoing ADD: IPAM DEL: {e}");
            }
        }
    }
    if let Some(check) = undo.spoof_check {
        if let Err(e) = check.teardown() {
            tracing::warn!("undoing ADD: {e}");
        }
    }
    if undo.container_link {
        if let Err(e) = links::delete_link_in(netns, &inv.ifname) {
            tracing::warn!("undoing ADD: {e}");
        }
    }
}
