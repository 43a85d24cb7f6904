//! `ferrovirt csi-driver`: the CSI hostpath driver of one node (Identity, Controller and Node
//! services) on a unix socket, over the storage pools given by flags.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use ferrovirt_csi_driver::{DRIVER_NAME, DriverConfig, serve, socket_path};
use ferrovirt_hostpath::{HostPathStore, parse_pool_flag, parse_pools_json};

#[derive(clap::Args)]
pub struct CsiDriverArgs {
    /// The CSI endpoint to listen on.
    #[arg(long, env = "CSI_ENDPOINT", default_value = "unix:///csi/csi.sock")]
    endpoint: String,
    /// This node's name, as Kubernetes knows it (the topology value of its volumes).
    #[arg(long, alias = "nodeid", env = "NODE_NAME")]
    node_id: String,
    /// A storage pool, NAME=PATH; repeat for more. The first is the default pool.
    #[arg(long = "pool", value_name = "NAME=PATH")]
    pools: Vec<String>,
    /// Storage pools in HPP's `--datadir` JSON form: `[{"name":"local","path":"/var/hpvolumes"}]`.
    #[arg(long = "pools-json", alias = "datadir", value_name = "JSON")]
    pools_json: Option<String>,
    /// Where volume and snapshot records are kept (must survive restarts of the driver).
    #[arg(long, default_value = "/var/lib/ferrovirt/csi")]
    state_dir: PathBuf,
    /// The CSI driver name; HPP's by default so its StorageClasses keep working.
    #[arg(long, alias = "drivername", default_value = DRIVER_NAME)]
    driver_name: String,
}

pub async fn run(args: CsiDriverArgs) -> anyhow::Result<()> {
    let mut pools = Vec::new();
    if let Some(json) = &args.pools_json {
        pools.extend(parse_pools_json(json)?);
    }
    for flag in &args.pools {
        pools.push(parse_pool_flag(flag)?);
    }
    if pools.is_empty() {
        bail!("no storage pool: give --pool NAME=PATH or --pools-json");
    }
    let socket = socket_path(&args.endpoint)?;
    let state_dir = args.state_dir.clone();
    let store = tokio::task::spawn_blocking(move || HostPathStore::open(pools, state_dir))
        .await?
        .with_context(|| format!("opening the storage state in {}", args.state_dir.display()))?;
    let mut config = DriverConfig::new(args.node_id);
    config.name = args.driver_name;
    let shutdown = async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::info!("shutting down");
    };
    serve(Arc::new(store), config, &socket, shutdown).await?;
    let _ = std::fs::remove_file(&socket);
    Ok(())
}
