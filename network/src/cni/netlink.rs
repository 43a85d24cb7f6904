//! The netlink operations the plugin needs (links, bridge ports and VLANs, addresses,
//! routes), over rtnetlink, in whatever namespace the connection was opened in (see
//! `netns`). Results are small plain structs, so the commands never see netlink messages.

use std::fmt;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use futures_util::TryStreamExt;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::{
    AddressAttribute, AddressFlags, AddressHeaderFlags, AddressMessage,
};
use rtnetlink::packet_route::link::{
    AfSpecBridge, BridgeVlanInfoFlags, InfoData, InfoKind, InfoVeth, LinkAttribute, LinkExtentMask,
    LinkFlags, LinkInfo, LinkMessage, State,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteMetric, RouteProtocol, RouteScope,
};
use rtnetlink::{
    Handle, LinkBridge, LinkBridgePort, LinkBridgeVlan, LinkMessageBuilder, LinkUnspec, LinkVeth,
    RouteMessageBuilder,
};

use super::result::{IpPrefix, Route};

/// A failed netlink request, with what was being done.
#[derive(Debug)]
pub struct NlError {
    what: String,
    source: rtnetlink::Error,
}

impl NlError {
    fn new(what: impl Into<String>, source: rtnetlink::Error) -> Self {
        NlError {
            what: what.into(),
            source,
        }
    }

    /// The errno the kernel answered with, if it answered with one.
    pub fn errno(&self) -> Option<i32> {
        match &self.source {
            rtnetlink::Error::NetlinkError(msg) => Some(msg.raw_code().abs()),
            _ => None,
        }
    }

    pub fn is_exists(&self) -> bool {
        self.errno() == Some(libc_errno::EEXIST)
    }

    pub fn is_not_found(&self) -> bool {
        matches!(
            self.errno(),
            Some(libc_errno::ENODEV | libc_errno::ENOENT | libc_errno::ESRCH)
        )
    }
}

impl fmt::Display for NlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            rtnetlink::Error::NetlinkError(msg) => write!(f, "{}: {}", self.what, msg.to_io()),
            other => write!(f, "{}: {other}", self.what),
        }
    }
}

impl std::error::Error for NlError {}

/// The errno values this module tells apart.
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const ESRCH: i32 = 3;
    pub const EEXIST: i32 = 17;
    pub const ENODEV: i32 = 19;
}

/// What kind of link a link is, as far as the plugin cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    Bridge,
    Veth,
    Other,
}

/// A link as the plugin sees it.
#[derive(Clone, Debug)]
pub struct Link {
    pub index: u32,
    pub name: String,
    pub mac: Vec<u8>,
    pub mtu: u32,
    pub kind: LinkKind,
    /// The bridge (or other controller) the link is a port of.
    pub controller: Option<u32>,
    /// IFLA_LINK: for a veth, the peer's index (in the peer's namespace).
    pub peer: Option<u32>,
    pub oper_state: String,
    pub up: bool,
    pub promisc: bool,
}

impl Link {
    fn from_message(msg: LinkMessage) -> Self {
        let mut link = Link {
            index: msg.header.index,
            name: String::new(),
            mac: Vec::new(),
            mtu: 0,
            kind: LinkKind::Other,
            controller: None,
            peer: None,
            oper_state: "UNKNOWN".to_owned(),
            up: msg.header.flags.contains(LinkFlags::Up),
            promisc: msg.header.flags.contains(LinkFlags::Promisc),
        };
        for attr in msg.attributes {
            match attr {
                LinkAttribute::IfName(name) => link.name = name,
                LinkAttribute::Address(mac) => link.mac = mac,
                LinkAttribute::Mtu(mtu) => link.mtu = mtu,
                LinkAttribute::Controller(index) if index != 0 => link.controller = Some(index),
                LinkAttribute::Link(index) if index != 0 => link.peer = Some(index),
                LinkAttribute::OperState(state) => {
                    link.oper_state = match state {
                        State::Up => "UP".to_owned(),
                        other => other.to_string(),
                    }
                }
                LinkAttribute::LinkInfo(infos) => {
                    for info in infos {
                        if let LinkInfo::Kind(kind) = info {
                            link.kind = match kind {
                                InfoKind::Bridge => LinkKind::Bridge,
                                InfoKind::Veth => LinkKind::Veth,
                                _ => LinkKind::Other,
                            };
                        }
                    }
                }
                _ => {}
            }
        }
        link
    }

    /// The MAC address as CNI writes it ("0a:1b:...").
    pub fn mac_string(&self) -> String {
        format_mac(&self.mac)
    }
}

/// Lower-case, colon-separated, as Go's `net.HardwareAddr` prints.
pub fn format_mac(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// An address on a link.
#[derive(Clone, Debug)]
pub struct Address {
    pub prefix: IpPrefix,
    pub tentative: bool,
    pub dad_failed: bool,
    message: AddressMessage,
}

/// A route of the main table.
#[derive(Clone, Debug)]
pub struct RouteEntry {
    /// None for a default route.
    pub dst: Option<IpPrefix>,
    pub gw: Option<IpAddr>,
    pub oif: Option<u32>,
}

/// A netlink connection to one namespace.
pub struct Netlink {
    handle: Handle,
}

impl Netlink {
    pub(super) fn new(handle: Handle) -> Self {
        Netlink { handle }
    }

    pub async fn link_by_name(&self, name: &str) -> Result<Option<Link>, NlError> {
        let reply = self
            .handle
            .link()
            .get()
            .match_name(name)
            .execute()
            .try_next()
            .await;
        match reply {
            Ok(Some(msg)) => Ok(Some(Link::from_message(msg))),
            Ok(None) => Ok(None),
            Err(e) => {
                let err = NlError::new(format!("cannot look up {name:?}"), e);
                if err.is_not_found() {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    pub async fn link_by_index(&self, index: u32) -> Result<Option<Link>, NlError> {
        let reply = self
            .handle
            .link()
            .get()
            .match_index(index)
            .execute()
            .try_next()
            .await;
        match reply {
            Ok(msg) => Ok(msg.map(Link::from_message)),
            Err(e) => {
                let err = NlError::new(format!("cannot look up link {index}"), e);
                if err.is_not_found() {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Creates a bridge, down, with the kernel's default txqueuelen.
    pub async fn add_bridge(
        &self,
        name: &str,
        mtu: Option<u32>,
        vlan_filtering: bool,
    ) -> Result<(), NlError> {
        let mut builder = LinkMessageBuilder::<LinkBridge>::new(name);
        if let Some(mtu) = mtu {
            builder = builder.mtu(mtu);
        }
        if vlan_filtering {
            builder = builder.vlan_filtering(true);
        }
        self.handle
            .link()
            .add(builder.build())
            .execute()
            .await
            .map_err(|e| NlError::new(format!("cannot add bridge {name:?}"), e))
    }

    /// Creates a veth pair: `name` here (with `mac` if given) and `peer` moved into the
    /// namespace `peer_netns`; both with `mtu` if given.
    pub async fn add_veth(
        &self,
        name: &str,
        peer: &str,
        mtu: Option<u32>,
        mac: Option<&[u8]>,
        peer_netns: &OwnedFd,
    ) -> Result<(), NlError> {
        let mut peer_builder = LinkUnspec::new_with_name(peer).setns_by_fd(peer_netns.as_raw_fd());
        if let Some(mtu) = mtu {
            peer_builder = peer_builder.mtu(mtu);
        }
        let mut builder = LinkVeth::new(name, peer)
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer_builder.build())));
        if let Some(mtu) = mtu {
            builder = builder.mtu(mtu);
        }
        if let Some(mac) = mac {
            builder = builder.address(mac.to_vec());
        }
        self.handle
            .link()
            .add(builder.build())
            .execute()
            .await
            .map_err(|e| NlError::new(format!("cannot add veth pair {name:?}/{peer:?}"), e))
    }

    pub async fn delete_link(&self, index: u32) -> Result<(), NlError> {
        self.handle
            .link()
            .del(index)
            .execute()
            .await
            .map_err(|e| NlError::new(format!("cannot delete link {index}"), e))
    }

    async fn set(&self, msg: LinkMessage, what: String) -> Result<(), NlError> {
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(|e| NlError::new(what, e))
    }

    pub async fn set_up(&self, link: &Link) -> Result<(), NlError> {
        self.set(
            LinkUnspec::new_with_index(link.index).up().build(),
            format!("cannot set {:?} up", link.name),
        )
        .await
    }

    pub async fn set_promisc(&self, link: &Link, on: bool) -> Result<(), NlError> {
        let msg = LinkUnspec::new_with_index(link.index)
            .promiscuous(on)
            .build();
        self.set(
            msg,
            format!("cannot set promiscuous mode on {:?}", link.name),
        )
        .await
    }

    pub async fn set_mac(&self, link: &Link, mac: &[u8]) -> Result<(), NlError> {
        let msg = LinkUnspec::new_with_index(link.index)
            .address(mac.to_vec())
            .build();
        self.set(
            msg,
            format!("cannot set the MAC address of {:?}", link.name),
        )
        .await
    }

    pub async fn set_controller(&self, link: &Link, controller: &Link) -> Result<(), NlError> {
        let msg = LinkUnspec::new_with_index(link.index)
            .controller(controller.index)
            .build();
        self.set(
            msg,
            format!(
                "cannot connect {:?} to bridge {:?}",
                link.name, controller.name
            ),
        )
        .await
    }

    /// Hairpin mode of a bridge port.
    pub async fn set_hairpin(&self, port: &Link, on: bool) -> Result<(), NlError> {
        let msg = LinkBridgePort::new(port.index).hairpin(on).build();
        self.handle
            .link()
            .set_port(msg)
            .execute()
            .await
            .map_err(|e| NlError::new(format!("cannot set hairpin mode on {:?}", port.name), e))
    }

    /// Adds VLAN `vid` to a bridge port, as its PVID and untagged if asked.
    pub async fn add_port_vlan(
        &self,
        port: &Link,
        vid: u16,
        pvid_untagged: bool,
    ) -> Result<(), NlError> {
        let flags = if pvid_untagged {
            BridgeVlanInfoFlags::Pvid | BridgeVlanInfoFlags::Untagged
        } else {
            BridgeVlanInfoFlags::empty()
        };
        let msg = LinkBridgeVlan::new(port.index).vlan(vid, flags).build();
        self.set(msg, format!("cannot set VLAN {vid} on {:?}", port.name))
            .await
    }

    pub async fn delete_port_vlan(&self, port: &Link, vid: u16) -> Result<(), NlError> {
        let msg = LinkBridgeVlan::new(port.index)
            .vlan(vid, BridgeVlanInfoFlags::empty())
            .build();
        self.handle
            .link()
            .del_with_message(msg)
            .execute()
            .await
            .map_err(|e| NlError::new(format!("cannot remove VLAN {vid} from {:?}", port.name), e))
    }

    /// The VLANs of a bridge port.
    pub async fn port_vlans(&self, port: &Link) -> Result<Vec<u16>, NlError> {
        let what = || format!("cannot list the VLANs of {:?}", port.name);
        let mut replies = self
            .handle
            .link()
            .get()
            .set_filter_mask(AddressFamily::Bridge, vec![LinkExtentMask::Brvlan])
            .execute();
        let mut vids = Vec::new();
        while let Some(msg) = replies
            .try_next()
            .await
            .map_err(|e| NlError::new(what(), e))?
        {
            if msg.header.index != port.index {
                continue;
            }
            for attr in msg.attributes {
                if let LinkAttribute::AfSpecBridge(specs) = attr {
                    vids.extend(specs.into_iter().filter_map(|spec| match spec {
                        AfSpecBridge::VlanInfo(info) => Some(info.vid),
                        _ => None,
                    }));
                }
            }
        }
        Ok(vids)
    }

    /// The addresses of a link, IPv4 and IPv6.
    pub async fn addresses(&self, link: &Link) -> Result<Vec<Address>, NlError> {
        let mut replies = self
            .handle
            .address()
            .get()
            .set_link_index_filter(link.index)
            .execute();
        let mut out = Vec::new();
        while let Some(msg) = replies
            .try_next()
            .await
            .map_err(|e| NlError::new(format!("cannot list the addresses of {:?}", link.name), e))?
        {
            if msg.header.index != link.index {
                continue;
            }
            let mut local = None;
            let mut address = None;
            let mut flags = u32::from(msg.header.flags.bits());
            for attr in &msg.attributes {
                match attr {
                    AddressAttribute::Local(ip) => local = Some(*ip),
                    AddressAttribute::Address(ip) => address = Some(*ip),
                    AddressAttribute::Flags(f) => flags |= f.bits(),
                    _ => {}
                }
            }
            let Some(ip) = local.or(address) else {
                continue;
            };
            let Some(prefix) = IpPrefix::new(ip, msg.header.prefix_len) else {
                continue;
            };
            out.push(Address {
                prefix,
                tentative: flags & AddressFlags::Tentative.bits() != 0
                    || msg.header.flags.contains(AddressHeaderFlags::Tentative),
                dad_failed: flags & AddressFlags::Dadfailed.bits() != 0,
                message: msg,
            });
        }
        Ok(out)
    }

    pub async fn add_address(&self, link: &Link, prefix: IpPrefix) -> Result<(), NlError> {
        self.handle
            .address()
            .add(link.index, prefix.addr, prefix.prefix)
            .execute()
            .await
            .map_err(|e| NlError::new(format!("cannot add address {prefix} to {:?}", link.name), e))
    }

    pub async fn delete_address(&self, link: &Link, address: &Address) -> Result<(), NlError> {
        self.handle
            .address()
            .del(address.message.clone())
            .execute()
            .await
            .map_err(|e| {
                NlError::new(
                    format!(
                        "cannot remove address {} from {:?}",
                        address.prefix, link.name
                    ),
                    e,
                )
            })
    }

    /// Adds `route` through `link` (protocol "boot", scope universe unless the route has a
    /// scope, as the reference plugins add routes).
    pub async fn add_route(&self, link: &Link, route: &Route) -> Result<(), NlError> {
        let what = || match route.gw {
            Some(gw) => format!("cannot add route {} via {gw} dev {}", route.dst, link.name),
            None => format!("cannot add route {} dev {}", route.dst, link.name),
        };
        let mut builder = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(route.dst.network(), route.dst.prefix)
            .map_err(|e| NlError::new(what(), rtnetlink::Error::InvalidNla(e.to_string())))?
            .output_interface(link.index)
            .protocol(RouteProtocol::Boot)
            .scope(route.scope.map_or(RouteScope::Universe, RouteScope::from));
        if let Some(gw) = route.gw {
            builder = builder
                .gateway(gw)
                .map_err(|e| NlError::new(what(), rtnetlink::Error::InvalidNla(e.to_string())))?;
        }
        if let Some(priority) = route.priority {
            builder = builder.priority(priority);
        }
        if let Some(table) = route.table {
            builder = builder.table_id(table);
        }
        let mut msg = builder.build();
        let mut metrics = Vec::new();
        if let Some(mtu) = route.mtu {
            metrics.push(RouteMetric::Mtu(mtu));
        }
        if let Some(adv_mss) = route.adv_mss {
            metrics.push(RouteMetric::Advmss(adv_mss));
        }
        if !metrics.is_empty() {
            msg.attributes.push(RouteAttribute::Metrics(metrics));
        }
        self.handle
            .route()
            .add(msg)
            .execute()
            .await
            .map_err(|e| NlError::new(what(), e))
    }

    /// The routes of the main table of one family.
    pub async fn routes(&self, ipv4: bool) -> Result<Vec<RouteEntry>, NlError> {
        let msg = if ipv4 {
            RouteMessageBuilder::<std::net::Ipv4Addr>::new().build()
        } else {
            RouteMessageBuilder::<std::net::Ipv6Addr>::new().build()
        };
        let mut replies = self.handle.route().get(msg).execute();
        let mut out = Vec::new();
        while let Some(msg) = replies
            .try_next()
            .await
            .map_err(|e| NlError::new("cannot list routes", e))?
        {
            let mut table = u32::from(msg.header.table);
            let mut dst = None;
            let mut gw = None;
            let mut oif = None;
            for attr in &msg.attributes {
                match attr {
                    RouteAttribute::Table(t) => table = *t,
                    RouteAttribute::Destination(address) => dst = route_ip(address),
                    RouteAttribute::Gateway(address) => gw = route_ip(address),
                    RouteAttribute::Oif(index) => oif = Some(*index),
                    _ => {}
                }
            }
            if table != 254 {
                continue;
            }
            let dst = dst.and_then(|ip| IpPrefix::new(ip, msg.header.destination_prefix_length));
            let dst = if msg.header.destination_prefix_length == 0 {
                None
            } else {
                dst
            };
            out.push(RouteEntry { dst, gw, oif });
        }
        Ok(out)
    }
}

fn route_ip(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(ip) => Some(IpAddr::V4(*ip)),
        RouteAddress::Inet6(ip) => Some(IpAddr::V6(*ip)),
        _ => None,
    }
}
