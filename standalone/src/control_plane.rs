//! One machine's whole control plane, as `ferrovirt up` runs it: the embedded API server with
//! the platform's CRDs and validation, the CSI driver on a default pool under the data dir,
//! the local provisioner, the local node agent, and the default objects a newcomer needs
//! (the default `hostpath-csi` StorageClass, this machine's Node, each namespace's `default`
//! ServiceAccount).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ferrovirt_csi_driver::{DRIVER_NAME, DriverConfig, POOL_PARAMETER};
use ferrovirt_hostpath::{HostPathStore, Pool};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

use crate::apiserver::{AdmissionPlugin, ApiServer, ApiServerConfig, StartError, VirtualCreate};
use crate::csi::CsiClient;
use crate::node_agent::{LocalNodeAgent, NodeAgentHandle};
use crate::provisioner::LocalProvisioner;
use crate::snapshotter::LocalSnapshotter;

/// The default StorageClass of a single machine, on the CSI driver's default pool.
pub const STORAGE_CLASS: &str = "hostpath-csi";
pub const POOL: &str = "local";

#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error(transparent)]
    ApiServer(#[from] StartError),
    #[error("storage pool: {0}")]
    Storage(#[from] ferrovirt_hostpath::Error),
    #[error("CSI driver: {0}")]
    Csi(String),
    #[error("client of the embedded API server: {0}")]
    Client(String),
    #[error("creating {what}: {source}")]
    Seed { what: String, source: kube::Error },
    #[error("node agent: {0}")]
    NodeAgent(#[from] crate::node_agent::AgentError),
}

pub struct ControlPlaneConfig {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// The `ferrovirt` binary the node agent runs pods with.
    pub executable: PathBuf,
    /// This machine's node name.
    pub node: String,
    pub admission: Vec<AdmissionPlugin>,
    pub virtual_creates: HashMap<(String, String), Box<VirtualCreate>>,
}

pub struct ControlPlane {
    pub api_server: ApiServer,
    pub client: Client,
    pub csi_socket: PathBuf,
    /// The CSI driver's pools and volumes: the HostPathProvisioner operator adds and removes
    /// pools here while the driver serves.
    pub storage: Arc<HostPathStore>,
    /// Stops the pods (and unpublishes their volumes) at shutdown.
    pub node_agent: NodeAgentHandle,
}

impl ControlPlane {
    pub async fn start(config: ControlPlaneConfig) -> Result<ControlPlane, ControlPlaneError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let crds = api::crds::all()
            .into_iter()
            .filter_map(|crd| serde_json::to_value(crd).ok())
            .collect();
        let api_server = ApiServer::start(ApiServerConfig {
            data_dir: config.data_dir.clone(),
            listen: config.listen,
            crds,
            admission: config.admission,
            virtual_creates: config.virtual_creates,
        })
        .await?;
        let client = client_for(&api_server.kubeconfig).await?;
        let csi_socket = config.data_dir.join("csi").join("csi.sock");
        let storage = start_csi_driver(&config.data_dir, &config.node, &csi_socket).await?;
        let csi = CsiClient::connect(&csi_socket)
            .await
            .map_err(|e| ControlPlaneError::Csi(e.to_string()))?;
        seed(&client, &config.node).await?;
        tokio::spawn(crate::service_accounts::run(client.clone()));
        let provisioner = LocalProvisioner {
            client: client.clone(),
            csi: csi.clone(),
            driver: DRIVER_NAME.to_string(),
            node: config.node.clone(),
        };
        tokio::spawn(async move {
            if let Err(err) = provisioner.run().await {
                tracing::error!(%err, "the local provisioner stopped");
            }
        });
        let snapshotter = LocalSnapshotter {
            client: client.clone(),
            csi: csi.clone(),
            driver: DRIVER_NAME.to_string(),
        };
        tokio::spawn(async move {
            if let Err(err) = snapshotter.run().await {
                tracing::error!(%err, "the local snapshotter stopped");
            }
        });
        let agent = LocalNodeAgent {
            client: client.clone(),
            csi,
            node: config.node.clone(),
            state_dir: crate::node_agent::state_dir(&config.data_dir),
            executable: config.executable,
            kubeconfig: api_server.kubeconfig.clone(),
        };
        let node_agent = agent.start()?;
        Ok(ControlPlane {
            api_server,
            client,
            csi_socket,
            storage,
            node_agent,
        })
    }
}

/// A kube client from a kubeconfig file the API server wrote.
pub async fn client_for(kubeconfig: &std::path::Path) -> Result<Client, ControlPlaneError> {
    let err = |e: &dyn std::fmt::Display| ControlPlaneError::Client(e.to_string());
    let kubeconfig = Kubeconfig::read_from(kubeconfig).map_err(|e| err(&e))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| err(&e))?;
    Client::try_from(config).map_err(|e| err(&e))
}

async fn start_csi_driver(
    data_dir: &std::path::Path,
    node: &str,
    socket: &std::path::Path,
) -> Result<Arc<HostPathStore>, ControlPlaneError> {
    let pool_path = data_dir.join("pools").join(POOL);
    std::fs::create_dir_all(&pool_path)
        .map_err(|e| ControlPlaneError::Csi(format!("{}: {e}", pool_path.display())))?;
    let pools = vec![Pool {
        name: POOL.to_string(),
        path: pool_path,
    }];
    let state_dir = data_dir.join("csi").join("state");
    // Pools added at runtime (from the HostPathProvisioner CR) are reopened from the state
    // directory, so their volumes are served before the operator runs again.
    let store = tokio::task::spawn_blocking(move || HostPathStore::open(pools, state_dir))
        .await
        .map_err(|e| ControlPlaneError::Csi(e.to_string()))??;
    let store = Arc::new(store);
    let socket = socket.to_path_buf();
    // A socket left by a control plane that was killed would answer "exists" below before
    // the driver has bound it again (`ferrovirt up`'s pid file keeps a second one out).
    let _ = std::fs::remove_file(&socket);
    let config = DriverConfig::new(node);
    let serving = socket.clone();
    let serving_store = store.clone();
    tokio::spawn(async move {
        if let Err(err) =
            ferrovirt_csi_driver::serve(serving_store, config, &serving, std::future::pending())
                .await
        {
            tracing::error!(%err, "the CSI driver stopped");
        }
    });
    for _ in 0..100 {
        if socket.exists() {
            return Ok(store);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Err(ControlPlaneError::Csi(format!(
        "socket {} did not appear",
        socket.display()
    )))
}

/// The objects a single machine starts with; existing ones are left as the user changed them.
async fn seed(client: &Client, node: &str) -> Result<(), ControlPlaneError> {
    let storage_class = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": DRIVER_NAME,
        "parameters": {POOL_PARAMETER: POOL},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": true,
    });
    create_if_missing(
        client,
        "storage.k8s.io/v1",
        "StorageClass",
        "storageclasses",
        storage_class,
    )
    .await?;
    let node_object = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node,
            "labels": {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": std::env::consts::ARCH},
        },
    });
    create_if_missing(client, "v1", "Node", "nodes", node_object).await
}

async fn create_if_missing(
    client: &Client,
    api_version: &str,
    kind: &str,
    plural: &str,
    object: Value,
) -> Result<(), ControlPlaneError> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = kube::api::ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &resource);
    let object: kube::api::DynamicObject =
        serde_json::from_value(object).map_err(|e| ControlPlaneError::Client(e.to_string()))?;
    match api.create(&kube::api::PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(ControlPlaneError::Seed {
            what: format!("{kind} {}", object.metadata.name.unwrap_or_default()),
            source,
        }),
    }
}
