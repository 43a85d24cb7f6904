//! Network interfaces: `masquerade` on the pod network becomes QEMU's user-mode network
//! with KubeVirt's addressing (gateway = the CIDR's first host, guest = its second: 10.0.2.1
//! and 10.0.2.2 by default) and `ports[]` forwarded from the pod's address; `bridge` on a
//! network with a node bridge becomes a tap on that bridge.

use std::net::Ipv4Addr;

use api::kubevirt::VirtualMachineInstance;
use api::kubevirt::vmi::{Interface, Network, Port};
use api::validation::FieldPath;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::facts::{NodeFacts, PodPort};
use super::machine::Identity;
use super::opts::Opts;
use super::{DomainError, TapDevice};

/// KubeVirt's default masquerade network.
const DEFAULT_VM_CIDR: &str = "10.0.2.0/24";

/// The network part of the invocation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkPlan {
    pub nics: Vec<Nic>,
    pub taps: Vec<TapDevice>,
    /// How the pod's address reaches the guest, when an interface is masquerade.
    pub forward_route: Option<ForwardRoute>,
    /// Differences from KubeVirt the user should know about.
    pub warnings: Vec<String>,
}

/// The path from the pod's address to the guest on the first masquerade interface: the
/// ports its `ports[]` lists are forwarded from the start, others (`port-forward`) are added
/// to the running netdev the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardRoute {
    /// The user-mode netdev's id.
    pub netdev: String,
    /// The pod's address as a forwarding rule writes it.
    listen: String,
    guest: Ipv4Addr,
    /// `(protocol, port)` pairs forwarded at start.
    pub listed: std::collections::BTreeSet<(&'static str, u16)>,
}

impl ForwardRoute {
    /// QEMU's forwarding rule for `protocol` (`tcp` or `udp`) `port`, from the pod's
    /// address to the same port of the guest.
    pub fn rule(&self, protocol: &str, port: u16) -> String {
        format!("{protocol}:{}:{port}-{}:{port}", self.listen, self.guest)
    }
}

/// One guest NIC: its backend (`-netdev`) and its device.
#[derive(Debug, Clone, PartialEq)]
pub struct Nic {
    pub netdev: String,
    pub device: Value,
}

pub fn plan(
    vmi: &VirtualMachineInstance,
    facts: &NodeFacts,
    identity: &Identity,
) -> Result<NetworkPlan, DomainError> {
    let spec = &vmi.spec;
    let interfaces_path = FieldPath::new("spec")
        .child("domain")
        .child("devices")
        .child("interfaces");
    let networks: Vec<&Network> = spec.networks.iter().flatten().collect();
    let mut plan = NetworkPlan::default();
    for (i, iface) in spec.domain.devices.interfaces.iter().flatten().enumerate() {
        let path = interfaces_path.index(i);
        let network = networks
            .iter()
            .find(|n| n.name == iface.name)
            .ok_or_else(|| {
                DomainError::unsupported(&path.child("name"), "no network of this name")
            })?;
        let id = format!("net{i}");
        let netdev = backend(iface, network, &id, &path, facts, identity, &mut plan)?;
        let mut device = json!({
            "driver": model(iface, &path)?,
            "netdev": id,
            "id": format!("ua-{}", iface.name),
            "mac": mac(iface, facts.pod_ports.get(&network.name), identity),
        });
        match iface.boot_order {
            Some(order) => device["bootindex"] = json!(order),
            // No option ROM unless the NIC boots: disk boots need no iPXE image.
            None => device["romfile"] = json!(""),
        }
        plan.nics.push(Nic { netdev, device });
    }
    Ok(plan)
}

fn backend(
    iface: &Interface,
    network: &Network,
    id: &str,
    path: &FieldPath,
    facts: &NodeFacts,
    identity: &Identity,
    plan: &mut NetworkPlan,
) -> Result<String, DomainError> {
    let methods = iface.binding_methods();
    match methods.first().copied() {
        Some("masquerade") => masquerade_backend(iface, network, id, path, facts, identity, plan),
        Some("bridge") => bridge_backend(iface, network, id, path, facts, identity, plan),
        Some(other) => Err(DomainError::unsupported(
            &path.child(other),
            format!("the {other} binding is not supported; use masquerade or bridge"),
        )),
        None => Err(DomainError::unsupported(
            path,
            "an interface needs a binding: masquerade or bridge",
        )),
    }
}

/// The masquerade binding: a user-mode (slirp) netdev on the VM network, the listed ports
/// forwarded from the pod's address; the first one is the VMI's forward route.
fn masquerade_backend(
    iface: &Interface,
    network: &Network,
    id: &str,
    path: &FieldPath,
    facts: &NodeFacts,
    identity: &Identity,
    plan: &mut NetworkPlan,
) -> Result<String, DomainError> {
    let (net, prefix) = masquerade_vm_network(network, path)?;
    let gateway = Ipv4Addr::from(u32::from(net) + 1);
    let guest = Ipv4Addr::from(u32::from(net) + 2);
    let mut opts = Opts::new("user")
        .set("id", id)
        .set("net", format!("{net}/{prefix}"))
        .set("host", gateway)
        .set("dhcpstart", guest)
        .set("ipv6", "off")
        .set("hostname", &identity.hostname);
    let ports = iface.ports.as_deref().unwrap_or_default();
    if ports.is_empty() {
        plan.warnings.push(format!(
            "{path}: no ports listed; only listed ports, and those port-forward asks for, \
             reach the guest here (KubeVirt forwards all of them)"
        ));
    }
    let listen = match facts.pod_ip {
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    };
    let mut route = ForwardRoute {
        netdev: id.to_owned(),
        listen,
        guest,
        listed: std::collections::BTreeSet::new(),
    };
    for (p, port) in ports.iter().enumerate() {
        let (protocol, number) =
            listed_port(port, &path.child("ports").index(p), &mut route.listed)?;
        opts = opts.set("hostfwd", route.rule(protocol, number));
    }
    plan.forward_route.get_or_insert(route);
    Ok(opts.build())
}

/// The masquerade VM network (`vmNetworkCIDR`, else KubeVirt's default): only on the pod
/// network, IPv4 only.
fn masquerade_vm_network(
    network: &Network,
    path: &FieldPath,
) -> Result<(Ipv4Addr, u8), DomainError> {
    let Some(pod) = &network.pod else {
        return Err(DomainError::unsupported(
            &path.child("masquerade"),
            "masquerade is only allowed on the pod network",
        ));
    };
    if pod.vm_ipv6_network_cidr.is_some() {
        return Err(DomainError::unsupported(
            &FieldPath::new("spec")
                .child("networks")
                .child(&network.name),
            "IPv6 masquerade is not supported: the pod network here is IPv4 only",
        ));
    }
    let cidr = pod.vm_network_cidr.as_deref().unwrap_or(DEFAULT_VM_CIDR);
    parse_cidr(cidr).ok_or_else(|| {
        DomainError::unsupported(
            &FieldPath::new("spec")
                .child("networks")
                .child(&network.name)
                .child("pod")
                .child("vmNetworkCIDR"),
            format!("{cidr:?} is not an IPv4 CIDR with room for a gateway and a guest"),
        )
    })
}

/// One entry of an interface's `ports`: its protocol (`tcp` or `udp`) and number, each
/// pair listed once.
fn listed_port(
    port: &Port,
    ppath: &FieldPath,
    listed: &mut std::collections::BTreeSet<(&'static str, u16)>,
) -> Result<(&'static str, u16), DomainError> {
    let protocol = match port.protocol.as_deref().unwrap_or("TCP") {
        "TCP" => "tcp",
        "UDP" => "udp",
        other => {
            return Err(DomainError::unsupported(
                &ppath.child("protocol"),
                format!("unsupported protocol {other:?}; supported: TCP, UDP"),
            ));
        }
    };
    let number = u16::try_from(port.port)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            DomainError::unsupported(&ppath.child("port"), "must be between 1 and 65535")
        })?;
    if !listed.insert((protocol, number)) {
        return Err(DomainError::unsupported(
            ppath,
            format!("{protocol} port {number} is listed twice"),
        ));
    }
    Ok((protocol, number))
}

/// The bridge binding: a tap the launcher makes on the network's Linux bridge (no ports:
/// the guest is on the bridge's network itself).
fn bridge_backend(
    iface: &Interface,
    network: &Network,
    id: &str,
    path: &FieldPath,
    facts: &NodeFacts,
    identity: &Identity,
    plan: &mut NetworkPlan,
) -> Result<String, DomainError> {
    if iface.ports.as_ref().is_some_and(|p| !p.is_empty()) {
        return Err(DomainError::unsupported(
            &path.child("ports"),
            "ports are forwarded only with the masquerade binding",
        ));
    }
    let bridge = facts.bridges.get(&network.name).ok_or_else(|| {
        DomainError::unsupported(
            &path.child("bridge"),
            format!(
                "network {:?} has no Linux bridge on this node for the bridge binding \
                 (use masquerade on the pod network)",
                network.name
            ),
        )
    })?;
    if !facts.may_create_tap {
        return Err(DomainError::unsupported(
            &path.child("bridge"),
            "the bridge binding needs a tap device, and this launcher may not create one (no CAP_NET_ADMIN)",
        ));
    }
    let tap = tap_name(identity, &iface.name);
    plan.taps.push(TapDevice {
        name: tap.clone(),
        bridge: bridge.clone(),
        pod_port: facts
            .pod_ports
            .get(&network.name)
            .map(|p| p.interface.clone()),
    });
    Ok(Opts::new("tap")
        .set("id", id)
        .set("ifname", &tap)
        .set("script", "no")
        .set("downscript", "no")
        .build())
}

fn model(iface: &Interface, path: &FieldPath) -> Result<&'static str, DomainError> {
    match iface.model.as_deref().unwrap_or("virtio") {
        "virtio" => Ok("virtio-net-pci"),
        "e1000e" => Ok("e1000e"),
        "e1000" => Ok("e1000"),
        "rtl8139" => Ok("rtl8139"),
        other => Err(DomainError::unsupported(
            &path.child("model"),
            format!("unsupported model {other:?}; supported: virtio, e1000e, e1000, rtl8139"),
        )),
    }
}

/// The interface's `macAddress`, else its pod interface's (as KubeVirt hands it to the
/// guest), else a stable locally administered one from QEMU's prefix.
fn mac(iface: &Interface, pod_port: Option<&PodPort>, identity: &Identity) -> String {
    if let Some(mac) = iface.mac_address.as_ref().or(pod_port.map(|p| &p.mac)) {
        return mac.to_ascii_lowercase();
    }
    let digest = Sha256::digest(format!("{}/{}", identity.seed, iface.name).as_bytes());
    format!(
        "52:54:00:{:02x}:{:02x}:{:02x}",
        digest[0], digest[1], digest[2]
    )
}

/// A tap name unique to the VMI and interface, within Linux's 15 characters.
fn tap_name(identity: &Identity, iface: &str) -> String {
    let digest = Sha256::digest(format!("{}/{iface}", identity.seed).as_bytes());
    format!("fvtap{}", &hex::encode(digest)[..10])
}

/// `a.b.c.d/n` with room for the network, a gateway, a guest and a broadcast address.
fn parse_cidr(cidr: &str) -> Option<(Ipv4Addr, u8)> {
    let (addr, prefix) = cidr.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 30)?;
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    Some((Ipv4Addr::from(u32::from(addr) & mask), prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_are_normalised_and_checked() {
        assert_eq!(
            parse_cidr("10.0.2.0/24"),
            Some((Ipv4Addr::new(10, 0, 2, 0), 24))
        );
        assert_eq!(
            parse_cidr("192.168.7.9/16"),
            Some((Ipv4Addr::new(192, 168, 0, 0), 16))
        );
        assert_eq!(parse_cidr("10.0.2.0/31"), None);
        assert_eq!(parse_cidr("fd10::/120"), None);
    }
}
