//! `ferrovirt virt-operator`: KubeVirt's operator on a cluster, as
//! `deploy/virt-operator/operator.yaml` runs it. Each KubeVirt CR deploys virt-api,
//! virt-controller and virt-handler (the manifests of `deploy/virt/`) in its namespace.

use operators::install::manifests::DEFAULT_IMAGE;
use operators::install::virt_operator;

#[derive(clap::Args)]
pub struct VirtOperatorArgs {
    /// The image the components run: the operator's own, as its Deployment passes it.
    #[arg(long, env = "FERROVIRT_IMAGE", default_value = DEFAULT_IMAGE)]
    image: String,
}

pub async fn run(args: VirtOperatorArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    tracing::info!(image = %args.image, "virt-operator started");
    virt_operator::run(client, args.image).await;
    Ok(())
}
