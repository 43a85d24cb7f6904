//! `ferrovirt controller`: the DataVolume, StorageProfile, DataSource and DataImportCron
//! controllers against the cluster of the environment (in-cluster service account,
//! KUBECONFIG or ~/.kube/config), as the Deployment in `deploy/operators/` runs them.

/// The image of the pods a controller makes (this binary's image) and their pull policy.
#[derive(clap::Args)]
pub struct PodImageArgs {
    /// The image of the pods the controllers create (importer, upload server, launcher).
    #[arg(long, env = "FERROVIRT_IMAGE", default_value = operators::DEFAULT_IMAGE)]
    pub image: String,
    /// The pull policy of those pods.
    #[arg(long, env = "FERROVIRT_IMAGE_PULL_POLICY")]
    pub image_pull_policy: Option<String>,
}

impl PodImageArgs {
    /// The controllers' configuration with these pods, the rest defaulted.
    pub fn controller_config(self) -> operators::ControllerConfig {
        operators::ControllerConfig {
            image: self.image,
            image_pull_policy: self.image_pull_policy,
            ..Default::default()
        }
    }
}

#[derive(clap::Args)]
pub struct ControllerArgs {
    #[command(flatten)]
    pods: PodImageArgs,
    /// CDI's namespace: of Secret `cdi-api-signing-key` (kept by `ferrovirt webhook`), whose
    /// public key checks the clone tokens of cross-namespace clones, and of the upload CAs'
    /// Secrets (`upload_cas.rs`), which sign the upload servers' certificates.
    #[arg(long, env = "POD_NAMESPACE", default_value = "cdi")]
    namespace: String,
}

pub async fn run(args: ControllerArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    let certificates = crate::upload::cas::upload_certificates(&client, &args.namespace).await?;
    let config = operators::ControllerConfig {
        cdi_namespace: Some(args.namespace),
        upload_certificates: Some(certificates),
        ..args.pods.controller_config()
    };
    operators::run(client, config).await?;
    Ok(())
}
