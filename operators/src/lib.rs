//! Ferrovirt's kube-rs controllers: CDI's (DataVolume: PVCs, importer and upload server
//! pods, CSI clones, phases and conditions as CDI writes them; StorageProfile: one profile
//! per StorageClass; DataSource; DataImportCron) and virt-controller's (VirtualMachine,
//! VirtualMachineInstance). [`run`] runs them all until one fails.

pub mod cdi;
pub mod certs;
pub mod kubevirt;
pub mod rbac;

use cdi::{dataimportcron, datasource, datavolume, storageprofile};

use std::sync::Arc;

use kube::Client;

/// The image of the worker pods when none is configured.
pub const DEFAULT_IMAGE: &str = "quay.io/ferrovirt/ferrovirt:latest";

/// What the controllers need to know beyond the API server.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// The image of the importer and upload server pods (the `ferrovirt` binary).
    pub image: String,
    /// The pull policy of those pods (`IfNotPresent` when unset).
    pub image_pull_policy: Option<String>,
    /// The name the controllers report events under.
    pub reporter: String,
    /// The ConfigMap (in the DataVolume's namespace) with the CA bundle (`ca-bundle.crt`)
    /// that upload clients' certificates must chain to; mounted into upload server pods.
    pub upload_client_ca_config_map: String,
    /// The common name the upload proxy's client certificate must have.
    pub upload_client_name: String,
    /// When set, the controller gives each upload server its serving certificate and the
    /// client CA bundle (CDI's operator-managed CAs); otherwise they must exist already.
    pub upload_certificates: Option<Arc<certs::UploadCertificates>>,
    /// Checks the clone tokens that authorize cross-namespace clones; without it such clones
    /// are refused.
    pub clone_tokens: Option<uploadproxy::UploadTokenValidator>,
    /// Otherwise, the namespace of the Secret `cdi-api-signing-key` whose `id_rsa.pub` checks
    /// them (where `ferrovirt webhook` keeps its key), read when a clone needs it.
    pub clone_token_secret_namespace: Option<String>,
    /// Set where Services have no cluster DNS or proxy (one machine): a clone source reaches
    /// its target's upload server at that pod's own address.
    pub no_cluster_dns: bool,
    /// Arguments given to every `ferrovirt virt-launcher` after the subcommand (node
    /// settings such as `--insecure-registry HOST`).
    pub launcher_args: Vec<String>,
}

/// The API resource of VolumeSnapshots (a CRD of the external snapshotter, not in k8s-openapi).
pub fn volume_snapshot_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshot",
    ))
}

/// The Secret with the key that signs upload and clone tokens, as CDI names it.
pub const CLONE_TOKEN_SECRET: &str = "cdi-api-signing-key";
/// Its key holding the public half (PEM).
pub const CLONE_TOKEN_PUBLIC_KEY: &str = "id_rsa.pub";

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            image: DEFAULT_IMAGE.to_string(),
            image_pull_policy: None,
            reporter: "ferrovirt-controller".to_string(),
            upload_client_ca_config_map: datavolume::pod::UPLOAD_CLIENT_CA_CONFIG_MAP.to_string(),
            upload_client_name: datavolume::pod::UPLOAD_CLIENT_NAME.to_string(),
            upload_certificates: None,
            clone_tokens: None,
            clone_token_secret_namespace: None,
            no_cluster_dns: false,
            launcher_args: Vec::new(),
        }
    }
}

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

/// Runs CDI's controllers (DataVolume, StorageProfile, DataSource, DataImportCron) against
/// `client` until one of them stops: `ferrovirt controller` on a cluster.
pub async fn run(client: Client, config: ControllerConfig) -> Result<(), Error> {
    let config = Arc::new(config);
    tracing::info!(image = %config.image, "starting the CDI controllers");
    tokio::select! {
        () = datavolume::run(client.clone(), config.clone()) => Err(Error::Stopped("DataVolume")),
        () = storageprofile::run(client.clone()) => Err(Error::Stopped("StorageProfile")),
        () = datasource::run(client.clone()) => Err(Error::Stopped("DataSource")),
        () = dataimportcron::run(client) => Err(Error::Stopped("DataImportCron")),
    }
}

/// Runs virt-controller's controllers (VirtualMachine, VirtualMachineInstance) against
/// `client` until one of them stops: `ferrovirt virt-controller` on a cluster.
pub async fn run_virt(client: Client, config: ControllerConfig) -> Result<(), Error> {
    let config = Arc::new(config);
    tracing::info!(image = %config.image, "starting the VirtualMachine controllers");
    tokio::select! {
        () = kubevirt::vmi::run(client.clone(), config.clone()) => Err(Error::Stopped("VirtualMachineInstance")),
        () = kubevirt::vm::run(client, config) => Err(Error::Stopped("VirtualMachine")),
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
