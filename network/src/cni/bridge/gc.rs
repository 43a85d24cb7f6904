//! GC (CNI 1.1): removes what the plugin keeps in the host namespace for attachments the
//! runtime no longer knows (`cni.dev/valid-attachments`): the macspoofchk chains, then passes
//! GC on to the IPAM plugin. Veth pairs need no collecting: a container's end goes with its
//! namespace and takes the host end with it. The iptables NAT chains of `ipMasq` cannot be
//! told apart by attachment (their names are hashes), as in the reference.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::cni::error::CniError;
use crate::cni::ipam::Ipam;
use crate::cni::protocol::Invocation;
use crate::cni::spoofcheck::SpoofCheck;

use super::config::TeardownConfig;

const VALID_ATTACHMENTS: &str = "cni.dev/valid-attachments";

pub fn gc(inv: &Invocation) -> Result<(), CniError> {
    let valid = valid_attachments(&inv.config)?;
    if TeardownConfig::parse(inv).mac_spoof_check {
        SpoofCheck::collect_garbage(&valid)?;
    }
    match Ipam::of(inv)? {
        Some(ipam) => ipam.gc(),
        None => Ok(()),
    }
}

/// The attachments still in use, as `CONTAINERID-IFNAME` (the spoof check's IDs).
fn valid_attachments(config: &Value) -> Result<BTreeSet<String>, CniError> {
    let entries = match config.get(VALID_ATTACHMENTS) {
        None | Some(Value::Null) => return Ok(BTreeSet::new()),
        Some(Value::Array(entries)) => entries,
        Some(other) => {
            return Err(CniError::config(format!(
                "\"{VALID_ATTACHMENTS}\" must be a list, not {other}"
            )));
        }
    };
    entries
        .iter()
        .map(|entry| {
            let field = |key: &str| entry.get(key).and_then(Value::as_str);
            match (field("containerID"), field("ifname")) {
                (Some(id), Some(ifname)) => Ok(format!("{id}-{ifname}")),
                _ => Err(CniError::config(format!(
                    "\"{VALID_ATTACHMENTS}\" entries need \"containerID\" and \"ifname\", got {entry}"
                ))),
            }
        })
        .collect()
}
