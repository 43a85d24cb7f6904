//! STATUS (CNI 1.1): whether the plugin can serve ADDs for this network. The configuration
//! must be valid, netlink must answer in the host namespace, and the IPAM plugin, if there
//! is one, must report ready itself.

use crate::cni::error::{CniError, code};
use crate::cni::ipam::Ipam;
use crate::cni::netns::run_in;
use crate::cni::protocol::Invocation;

use super::config::BridgeConfig;

pub fn status(inv: &Invocation) -> Result<(), CniError> {
    BridgeConfig::parse(inv)?;
    run_in(None, |nl| async move {
        nl.link_by_name("lo").await.map(drop).map_err(|e| {
            CniError::new(
                code::PLUGIN_NOT_AVAILABLE,
                format!("netlink does not answer in the host namespace: {e}"),
            )
        })
    })?;
    match Ipam::of(inv)? {
        Some(ipam) => ipam.status(),
        None => Ok(()),
    }
}
