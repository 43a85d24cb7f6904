//! `ferrovirt cdi-operator`: CDI's operator on a cluster, as
//! `deploy/cdi-operator/operator.yaml` runs it. The CDI CR deploys the DataVolume
//! controllers and the admission webhook (the manifests of `deploy/operators/`) into the
//! operator's namespace and keeps the CDIConfig to its `spec.config`.

use operators::install::cdi_operator;
use operators::install::manifests::DEFAULT_IMAGE;

#[derive(clap::Args)]
pub struct CdiOperatorArgs {
    /// The namespace the components go to: the operator's own.
    #[arg(long, env = "POD_NAMESPACE", default_value = "cdi")]
    namespace: String,
    /// The image the components run: the operator's own, as its Deployment passes it.
    #[arg(long, env = "FERROVIRT_IMAGE", default_value = DEFAULT_IMAGE)]
    image: String,
}

pub async fn run(args: CdiOperatorArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    tracing::info!(image = %args.image, namespace = %args.namespace, "cdi-operator started");
    cdi_operator::run(client, args.namespace, args.image).await;
    Ok(())
}
