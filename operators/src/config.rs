//! What the controllers are configured with beyond the API server: the image and names of
//! the worker pods, the upload and clone certificates, node settings of VM launchers.

use std::sync::Arc;

use api::kubevirt::cluster_config::SharedClusterConfig;

use crate::cdi::datavolume::keys::{UPLOAD_CLIENT_CA_CONFIG_MAP, UPLOAD_CLIENT_NAME};
use crate::certs;

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
    /// CDI's namespace on a cluster. Without `clone_tokens`, clone tokens are checked with
    /// the `id_rsa.pub` of its Secret `cdi-api-signing-key` (where `ferrovirt webhook`
    /// keeps its key), read when a clone needs it; CDIConfig's `status.uploadProxyCA` is
    /// the bundle of its ConfigMap `cdi-uploadproxy-signer-bundle` (the upload proxy's CA).
    pub cdi_namespace: Option<String>,
    /// Set where Services have no cluster DNS or proxy (one machine): a clone source reaches
    /// its target's upload server at that pod's own address.
    pub no_cluster_dns: bool,
    /// Arguments given to every `ferrovirt virt-launcher` after the subcommand (node
    /// settings such as `--insecure-registry HOST`).
    pub launcher_args: Vec<String>,
    /// The active KubeVirt CR's configuration (whether launchers may emulate), kept current
    /// by whoever watches the CRs: the in-process components on `ferrovirt up`,
    /// `ferrovirt virt-controller` on a cluster.
    pub kubevirt: SharedClusterConfig,
    /// The upload proxy CDIConfig's status names when its spec has no override: on one
    /// machine, the loopback proxy; on a cluster none (CDI would read it from an Ingress or
    /// a Route, which is not done).
    pub upload_proxy: Option<PublishedUploadProxy>,
}

/// An upload proxy clients can reach, as CDIConfig's status publishes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedUploadProxy {
    /// `status.uploadProxyURL`.
    pub url: String,
    /// The CA its serving certificate chains to (PEM), `status.uploadProxyCA`.
    pub ca_pem: String,
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
            upload_client_ca_config_map: UPLOAD_CLIENT_CA_CONFIG_MAP.to_string(),
            upload_client_name: UPLOAD_CLIENT_NAME.to_string(),
            upload_certificates: None,
            clone_tokens: None,
            cdi_namespace: None,
            no_cluster_dns: false,
            launcher_args: Vec::new(),
            kubevirt: SharedClusterConfig::default(),
            upload_proxy: None,
        }
    }
}
