//! Ferrovirt's kube-rs controllers: CDI's (DataVolume: PVCs, importer and upload server
//! pods, CSI clones, phases and conditions as CDI writes them; StorageProfile: one profile
//! per StorageClass; DataSource; DataImportCron) and virt-controller's (VirtualMachine,
//! VirtualMachineInstance). [`run`] runs them all until one fails.

pub mod cdi;
pub mod certs;
pub mod config;
pub mod install;
pub mod kit;
pub mod kubevirt;
pub mod macpool;
pub mod rbac;

use cdi::{config as cdi_config, dataimportcron, datasource, datavolume, storageprofile};

use std::sync::Arc;

use kube::Client;

pub use config::{
    CLONE_TOKEN_PUBLIC_KEY, CLONE_TOKEN_SECRET, ControllerConfig, DEFAULT_IMAGE,
    PublishedUploadProxy,
};
pub use kit::volume_snapshot_resource;

/// Why the controllers stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A controller's watch stream ended.
    #[error("the {0} controller stopped")]
    Stopped(&'static str),
    /// No usable connection to the API server could be configured.
    #[error("kubernetes client configuration: {0}")]
    Config(String),
}

/// Runs CDI's controllers (DataVolume, bare claims, StorageProfile, CDIConfig, DataSource,
/// DataImportCron) against `client` until one of them stops: `ferrovirt controller` on a
/// cluster.
pub async fn run(client: Client, config: ControllerConfig) -> Result<(), Error> {
    let config = Arc::new(config);
    tracing::info!(image = %config.image, "starting the CDI controllers");
    tokio::select! {
        () = datavolume::run(client.clone(), config.clone()) => Err(Error::Stopped("DataVolume")),
        () = datavolume::claim::run(client.clone(), config.clone()) => Err(Error::Stopped("claim")),
        () = storageprofile::run(client.clone()) => Err(Error::Stopped("StorageProfile")),
        () = cdi_config::run(client.clone(), config.upload_proxy.clone(), config.cdi_namespace.clone()) => Err(Error::Stopped("CDIConfig")),
        () = datasource::run(client.clone()) => Err(Error::Stopped("DataSource")),
        () = dataimportcron::run(client) => Err(Error::Stopped("DataImportCron")),
    }
}

/// Runs virt-controller's controllers (VirtualMachine, VirtualMachineInstance, replica sets,
/// pools) against
/// `client` until one of them stops: `ferrovirt virt-controller` on a cluster.
pub async fn run_virt(client: Client, config: ControllerConfig) -> Result<(), Error> {
    let config = Arc::new(config);
    tracing::info!(image = %config.image, "starting the VirtualMachine controllers");
    tokio::select! {
        () = kubevirt::vmi::run(client.clone(), config.clone()) => Err(Error::Stopped("VirtualMachineInstance")),
        () = kubevirt::vm::run(client.clone(), config.clone()) => Err(Error::Stopped("VirtualMachine")),
        () = kubevirt::replicaset::run(client.clone(), config.clone()) => Err(Error::Stopped("VirtualMachineInstanceReplicaSet")),
        () = kubevirt::pool::run(client, config) => Err(Error::Stopped("VirtualMachinePool")),
    }
}

/// A client from KUBECONFIG, `~/.kube/config` or the in-cluster service account, with the
/// ring TLS provider installed.
pub async fn client_from_environment() -> Result<Client, Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::infer()
        .await
        .map_err(|e| Error::Config(e.to_string()))?;
    Client::try_from(config).map_err(|e| Error::Config(e.to_string()))
}
