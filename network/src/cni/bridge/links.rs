//! The links ADD wires up: the bridge (created if missing), the veth pair (made inside the
//! container's namespace with its host end moved out, so the container name never meets the
//! host's names), the host end as a bridge port (hairpin, VLANs), and a bridge's VLAN
//! gateway interface.

use std::time::Duration;

use crate::cni::error::CniError;
use crate::cni::netlink::{Link, LinkKind, Netlink};
use crate::cni::netns::{Netns, run_in};
use crate::cni::sysctl;

/// How a host veth becomes a port of the bridge.
#[derive(Clone, Debug)]
pub struct PortSettings {
    pub hairpin: bool,
    pub vlan: Option<u16>,
    pub vlan_trunk: Vec<u16>,
    pub preserve_default_vlan: bool,
}

fn nl_error(e: impl std::fmt::Display) -> CniError {
    CniError::internal(e.to_string())
}

/// The bridge `name`, created (down, then up) if it does not exist; refused if a link of
/// that name is not a bridge.
pub fn ensure_bridge(
    name: &str,
    mtu: Option<u32>,
    promisc: bool,
    vlan_filtering: bool,
) -> Result<Link, CniError> {
    let name = name.to_owned();
    run_in(None, move |nl| async move {
        let failed = |e: &dyn std::fmt::Display| {
            CniError::internal(format!("failed to create bridge {name:?}: {e}"))
        };
        if let Err(e) = nl.add_bridge(&name, mtu, vlan_filtering).await {
            if !e.is_exists() {
                return Err(failed(&e));
            }
        }
        let link = nl
            .link_by_name(&name)
            .await
            .map_err(|e| failed(&e))?
            .ok_or_else(|| failed(&"it vanished after it was created"))?;
        if link.kind != LinkKind::Bridge {
            return Err(CniError::internal(format!(
                "failed to create bridge {name:?}: {name:?} already exists but is not a bridge"
            )));
        }
        if promisc {
            nl.set_promisc(&link, true).await.map_err(|e| failed(&e))?;
        }
        // The plugin owns the bridge's routes: no router advertisements.
        sysctl::set_best_effort(&format!("net/ipv6/conf/{name}/accept_ra"), "0");
        nl.set_up(&link).await.map_err(|e| failed(&e))?;
        nl.link_by_name(&name)
            .await
            .map_err(|e| failed(&e))?
            .ok_or_else(|| failed(&"it vanished after it was created"))
    })
}

/// "veth" and 8 random hex digits, as the reference names host ends (NetworkManager leaves
/// links named veth* alone).
fn random_veth_name() -> Result<String, CniError> {
    let mut bytes = [0u8; 4];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())
        .map_err(|e| CniError::internal(format!("failed to generate a random veth name: {e}")))?;
    Ok(format!("veth{}", hex::encode(bytes)))
}

/// Creates the veth pair from inside `inner` (the container's namespace, or the host's for a
/// VLAN gateway): `ifname` stays there, a randomly named peer goes to `outer`. Returns the
/// peer's name and the inner link.
pub fn create_veth_pair(
    inner: Option<&Netns>,
    outer: &Netns,
    ifname: &str,
    mtu: Option<u32>,
    mac: Option<[u8; 6]>,
) -> Result<(String, Link), CniError> {
    let outer_fd = outer.fd()?;
    let ifname = ifname.to_owned();
    let mut names = Vec::new();
    for _ in 0..10 {
        names.push(random_veth_name()?);
    }
    run_in(inner, move |nl| async move {
        for peer in names {
            match nl
                .add_veth(&ifname, &peer, mtu, mac.as_ref().map(|m| &m[..]), &outer_fd)
                .await
            {
                Ok(()) => {
                    let link = nl
                        .link_by_name(&ifname)
                        .await
                        .map_err(nl_error)?
                        .ok_or_else(|| {
                            CniError::internal(format!(
                                "the veth {ifname:?} vanished after it was created"
                            ))
                        })?;
                    return Ok((peer, link));
                }
                Err(e) if e.is_exists() => {
                    if nl.link_by_name(&ifname).await.map_err(nl_error)?.is_some() {
                        return Err(CniError::internal(format!(
                            "container veth name provided ({ifname}) already exists"
                        )));
                    }
                    // The random host name was taken: draw another.
                }
                Err(e) => return Err(CniError::internal(format!("failed to make veth pair: {e}"))),
            }
        }
        Err(CniError::internal("failed to find a unique veth name"))
    })
}

/// Brings the host end `name` up and makes it a port of `bridge`.
pub fn attach_port(name: &str, bridge: &Link, settings: PortSettings) -> Result<Link, CniError> {
    let name = name.to_owned();
    let bridge = bridge.clone();
    run_in(None, move |nl| async move {
        let port = lookup(&nl, &name).await?;
        nl.set_up(&port).await.map_err(nl_error)?;
        sysctl::set_best_effort(&format!("net/ipv6/conf/{name}/accept_ra"), "0");
        nl.set_controller(&port, &bridge).await.map_err(nl_error)?;
        nl.set_hairpin(&port, settings.hairpin).await.map_err(|e| {
            CniError::internal(format!("failed to setup hairpin mode for {name}: {e}"))
        })?;
        let vlans_wanted = settings.vlan.is_some() || !settings.vlan_trunk.is_empty();
        if vlans_wanted && !settings.preserve_default_vlan {
            for vid in nl.port_vlans(&port).await.map_err(nl_error)? {
                nl.delete_port_vlan(&port, vid).await.map_err(|e| {
                    CniError::internal(format!(
                        "failed to remove default vlan on interface {name:?}: {e}"
                    ))
                })?;
            }
        }
        if let Some(vid) = settings.vlan {
            nl.add_port_vlan(&port, vid, true).await.map_err(|e| {
                CniError::internal(format!(
                    "failed to setup vlan tag on interface {name:?}: {e}"
                ))
            })?;
        }
        for vid in &settings.vlan_trunk {
            nl.add_port_vlan(&port, *vid, false).await.map_err(|e| {
                CniError::internal(format!(
                    "failed to setup vlan tag on interface {name:?}: {e}"
                ))
            })?;
        }
        lookup(&nl, &name).await
    })
}

/// A link of this namespace that must exist.
pub async fn lookup(nl: &Netlink, name: &str) -> Result<Link, CniError> {
    nl.link_by_name(name)
        .await
        .map_err(nl_error)?
        .ok_or_else(|| CniError::internal(format!("failed to lookup {name:?}: link not found")))
}

/// The bridge's gateway interface for VLAN `vid` ("BRIDGE.VID"), a veth in the host
/// namespace whose peer is an untagged port of that VLAN; created if missing.
pub fn ensure_vlan_interface(
    host: &Netns,
    bridge: &Link,
    vid: u16,
    preserve_default_vlan: bool,
) -> Result<Link, CniError> {
    let name = format!("{}.{vid}", bridge.name);
    let existing = {
        let name = name.clone();
        run_in(None, move |nl| async move {
            nl.link_by_name(&name).await.map_err(nl_error)
        })?
    };
    if let Some(link) = existing {
        return Ok(link);
    }
    let (peer, _) = create_veth_pair(None, host, &name, Some(bridge.mtu), None)
        .map_err(|e| e.context(format!("failed to create vlan gateway {name:?}")))?;
    let settings = PortSettings {
        hairpin: false,
        vlan: Some(vid),
        vlan_trunk: Vec::new(),
        preserve_default_vlan,
    };
    attach_port(&peer, bridge, settings)
        .map_err(|e| e.context(format!("failed to create vlan gateway {name:?}")))?;
    run_in(None, move |nl| async move {
        let link = lookup(&nl, &name).await?;
        nl.set_up(&link).await.map_err(nl_error)?;
        lookup(&nl, &name).await
    })
}

/// Waits for the host end of the pair to be operationally up (the container end must be up
/// too), as the reference does before it reports success.
pub fn wait_port_up(name: &str) -> Result<Link, CniError> {
    let name = name.to_owned();
    run_in(None, move |nl| async move {
        let delays_ms = [0u64, 50, 500, 1000, 1000];
        let mut port = lookup(&nl, &name).await?;
        for delay in delays_ms {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            port = lookup(&nl, &name).await?;
            if port.oper_state == "UP" {
                return Ok(port);
            }
        }
        Err(CniError::internal(format!(
            "bridge port in error state: {}",
            port.oper_state
        )))
    })
}

/// Sets `name` up in `netns`.
pub fn set_up_in(netns: &Netns, name: &str) -> Result<(), CniError> {
    let name = name.to_owned();
    run_in(Some(netns), move |nl| async move {
        let link = nl
            .link_by_name(&name)
            .await
            .map_err(nl_error)?
            .ok_or_else(|| {
                CniError::internal(format!("failed to retrieve link: {name:?} not found"))
            })?;
        nl.set_up(&link)
            .await
            .map_err(|e| CniError::internal(format!("failed to set {name:?} up: {e}")))
    })
}

/// Deletes `name` in `netns` if it is there; its addresses, for whoever undoes NAT rules.
pub fn delete_link_in(
    netns: &Netns,
    name: &str,
) -> Result<Vec<crate::cni::result::IpPrefix>, CniError> {
    let name = name.to_owned();
    run_in(Some(netns), move |nl| async move {
        let Some(link) = nl.link_by_name(&name).await.map_err(nl_error)? else {
            return Ok(Vec::new());
        };
        let addresses = nl.addresses(&link).await.map_err(nl_error)?;
        nl.delete_link(link.index)
            .await
            .map_err(|e| CniError::internal(format!("failed to delete {name:?}: {e}")))?;
        Ok(addresses
            .into_iter()
            .map(|a| a.prefix)
            .filter(|p| is_global_unicast(p.addr))
            .collect())
    })
}

/// Go's `IP.IsGlobalUnicast`: not unspecified, loopback, multicast, link-local or the
/// IPv4 broadcast address.
fn is_global_unicast(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        std::net::IpAddr::V6(v6) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || v6.is_unicast_link_local())
        }
    }
}
