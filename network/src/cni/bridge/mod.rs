//! The linux-bridge plugin (`type: bridge`, deployed as `cnv-bridge` by the
//! cluster-network-addons-operator): a veth pair per attachment, the container end in the
//! container's namespace, the host end a port of a Linux bridge the plugin creates if needed,
//! with the addresses an IPAM plugin allocates. Behaviour follows the containernetworking
//! reference plugin; docs/network.md lists where it differs.
//!
//! ```text
//!   host namespace                          container namespace
//!   ┌──────────────┐   veth pair           ┌──────────────┐
//!   │ bridge br0   │── vethXXXXXXXX ═══════│ eth0 (IFNAME)│  addresses, routes from IPAM
//!   │ (gateway IPs)│   (port: hairpin,     └──────────────┘
//!   └──────────────┘    VLANs, spoof check)
//! ```

mod add;
mod addressing;
mod check;
pub mod config;
mod del;
mod gc;
mod links;
mod status;

use crate::cni::error::CniError;
use crate::cni::protocol::{Invocation, Plugin};
use crate::cni::result::CniResult;

/// The bridge plugin's commands.
pub struct BridgePlugin;

impl Plugin for BridgePlugin {
    fn about(&self) -> String {
        format!(
            "CNI linux-bridge plugin (ferrovirt {})",
            env!("CARGO_PKG_VERSION")
        )
    }

    fn add(&self, inv: &Invocation) -> Result<CniResult, CniError> {
        add::add(inv)
    }

    fn del(&self, inv: &Invocation) -> Result<(), CniError> {
        del::del(inv)
    }

    fn check(&self, inv: &Invocation) -> Result<(), CniError> {
        check::check(inv)
    }

    fn status(&self, inv: &Invocation) -> Result<(), CniError> {
        status::status(inv)
    }

    fn gc(&self, inv: &Invocation) -> Result<(), CniError> {
        gc::gc(inv)
    }
}
