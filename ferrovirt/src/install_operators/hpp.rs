//! `ferrovirt hpp-operator`: hostpath-provisioner-operator on a cluster, as
//! `deploy/hpp-operator/operator.yaml` runs it. The HostPathProvisioner CRs deploy the CSI
//! driver (the manifests of `deploy/csi-driver/`) into the operator's namespace, serving
//! their path pools.

use operators::install::hpp::cluster;
use operators::install::manifests::DEFAULT_IMAGE;

#[derive(clap::Args)]
pub struct HppOperatorArgs {
    /// The namespace the driver goes to: the operator's own.
    #[arg(long, env = "POD_NAMESPACE", default_value = "ferrovirt")]
    namespace: String,
    /// The image the driver runs: the operator's own, as its Deployment passes it.
    #[arg(long, env = "FERROVIRT_IMAGE", default_value = DEFAULT_IMAGE)]
    image: String,
}

pub async fn run(args: HppOperatorArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    tracing::info!(image = %args.image, namespace = %args.namespace, "hpp-operator started");
    cluster::run(client, args.namespace, args.image).await;
    Ok(())
}
