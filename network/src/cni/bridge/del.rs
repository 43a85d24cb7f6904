//! DEL: deletes the container end of the pair (the host end goes with it), releases the IPAM
//! allocation, removes the spoof check and the NAT rules. Idempotent: a missing namespace or
//! interface is success, and IPAM is still released.

use serde_json::Value;

use crate::cni::error::CniError;
use crate::cni::ipam::Ipam;
use crate::cni::ipmasq::IpMasq;
use crate::cni::netns::{Netns, NetnsError};
use crate::cni::protocol::Invocation;
use crate::cni::result::{CniResult, IpPrefix};
use crate::cni::spoofcheck::SpoofCheck;

use super::config::TeardownConfig;
use super::links;

pub fn del(inv: &Invocation) -> Result<(), CniError> {
    let conf = TeardownConfig::parse(inv);
    let ipam = Ipam::of(inv)?;

    // The container's addresses, for the NAT rules: those on its interface while it exists,
    // and those of the prevResult the runtime passed.
    let mut addresses = None;
    if !inv.netns.is_empty() {
        match Netns::open(&inv.netns) {
            Ok(netns) => addresses = Some(links::delete_link_in(&netns, &inv.ifname)?),
            // Gone already (the container is dead): nothing to delete in it.
            Err(NetnsError::Missing(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }

    if let Some(ipam) = &ipam {
        ipam.del()?;
    }

    if conf.mac_spoof_check {
        if let Err(e) = SpoofCheck::new(&inv.container_id, &inv.ifname).teardown() {
            // Chains already gone are no reason to fail a DEL.
            tracing::warn!("{e}");
        }
    }

    if conf.ip_masq && ipam.is_some() {
        // Both sources: an address removed from the interface by hand still has its rules.
        let mut all = addresses.unwrap_or_default();
        for address in prev_result_addresses(inv) {
            if !all.contains(&address) {
                all.push(address);
            }
        }
        let masq = IpMasq::new(&conf.name, &inv.container_id);
        for address in all {
            masq.teardown(address)?;
        }
    }
    Ok(())
}

fn prev_result_addresses(inv: &Invocation) -> Vec<IpPrefix> {
    let Some(prev) = inv.config.get("prevResult").filter(|v| !Value::is_null(v)) else {
        return Vec::new();
    };
    match CniResult::from_value(prev, "prevResult", inv.version()) {
        Ok(result) => result.ips.into_iter().map(|ip| ip.address).collect(),
        Err(e) => {
            tracing::warn!("DEL ignores an unreadable prevResult: {e}");
            Vec::new()
        }
    }
}
