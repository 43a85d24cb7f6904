//! CNI plugins, run by a container runtime (or Multus) as `ferrovirt cni PLUGIN` with the
//! `CNI_*` environment and the network configuration on stdin.
//!
//! ```text
//!   protocol    CNI_* variables, stdin, command dispatch, JSON output   (any plugin)
//!   error       the spec's error object and its codes
//!   version     spec versions and the ones a configuration may ask for
//!   result      the result in every spec version
//!   ipam        delegation to the IPAM plugin named by ipam.type
//!   netns       a thread per namespace, setns'd, with its own netlink socket
//!   netlink     links, bridge ports and VLANs, addresses, routes (rtnetlink)
//!   sysctl      /proc/sys/net of the calling thread's namespace
//!   spoofcheck  macspoofchk nftables rules;  ipmasq  ipMasq iptables rules
//!   bridge/     the linux-bridge plugin: config, ADD, DEL, CHECK, STATUS, GC
//! ```

pub mod bridge;
pub mod error;
pub mod ipam;
pub mod ipmasq;
pub mod netlink;
pub mod netns;
pub mod protocol;
pub mod result;
pub mod spoofcheck;
pub mod sysctl;
pub mod version;

use protocol::Plugin;

/// The plugins `ferrovirt cni` runs.
#[derive(Clone, Copy, Debug, clap::Subcommand)]
pub enum CniPlugin {
    /// The linux-bridge plugin (the reference `bridge`, as CNAO's `cnv-bridge`): a veth pair
    /// per attachment, its host end a port of a Linux bridge, addresses from an IPAM plugin.
    Bridge,
}

/// Runs one invocation of `plugin` on this process's environment, stdin and stdout. An
/// error has already been printed to stdout as the spec's error object when this returns
/// it; the caller's only job is to exit nonzero.
pub fn run(plugin: CniPlugin) -> Result<(), error::CniError> {
    let plugin: &dyn Plugin = match plugin {
        CniPlugin::Bridge => &bridge::BridgePlugin,
    };
    let getenv = |name: &str| std::env::var(name).ok();
    protocol::run(
        plugin,
        &getenv,
        &mut std::io::stdin(),
        // Unlocked handles: namespace threads may log to stderr while the command runs.
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )
}
