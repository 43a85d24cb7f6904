//! `ferrovirt bridge-marker`: kubevirt/bridge-marker's DaemonSet process on a cluster node,
//! with its flags. It reports the node's Linux bridges as node resources
//! (`ferrovirt_network::bridge_marker`) and answers `/healthz` for the pod's probes.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use ferrovirt_network::bridge_marker::{MarkerSettings, run as mark};

#[derive(clap::Args)]
pub struct BridgeMarkerArgs {
    /// The Node to mark (the DaemonSet passes spec.nodeName).
    #[arg(long = "node-name", env = "NODE_NAME")]
    node_name: String,
    /// Seconds between two looks at the node's bridges.
    #[arg(long = "update-interval", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    update_interval: u64,
    /// Minutes between two re-reads of what the Node reports.
    #[arg(long = "reconcile-interval", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    reconcile_interval: u64,
    /// The port of the /healthz probe.
    #[arg(long = "health-probe-port", default_value_t = 8081, value_parser = clap::value_parser!(u16).range(1..))]
    health_probe_port: u16,
}

pub async fn run(args: BridgeMarkerArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    let settings = MarkerSettings {
        node: args.node_name,
        interval: Duration::from_secs(args.update_interval),
        reconcile_interval: Duration::from_secs(args.reconcile_interval * 60),
        // The kubelet copies capacity into allocatable on a cluster.
        mirror_allocatable: false,
    };
    let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, args.health_probe_port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening for the health probe on {addr}"))?;
    let health = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
    tokio::select! {
        () = mark(client, settings) => Ok(()),
        served = axum::serve(listener, health) => served.context("serving /healthz"),
    }
}
