//! `ferrovirt controller`: the DataVolume, StorageProfile, DataSource and DataImportCron
//! controllers against the cluster of the environment (in-cluster service account,
//! KUBECONFIG or ~/.kube/config), as the Deployment in `deploy/operators/` runs them.

use anyhow::Context;

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

#[derive(clap::Args)]
pub struct ControllerArgs {
    #[command(flatten)]
    pods: PodImageArgs,
    /// The namespace of Secret `cdi-api-signing-key` (kept by `ferrovirt webhook`), whose
    /// public key checks the clone tokens of cross-namespace clones.
    #[arg(long, env = "POD_NAMESPACE", default_value = "cdi")]
    namespace: String,
}

pub async fn run(args: ControllerArgs) -> anyhow::Result<()> {
    let client = operators::client_from_environment()
        .await
        .context("connecting to the cluster")?;
    let config = operators::ControllerConfig {
        image: args.pods.image,
        image_pull_policy: args.pods.image_pull_policy,
        clone_token_secret_namespace: Some(args.namespace),
        ..Default::default()
    };
    operators::run(client, config).await?;
    Ok(())
}
