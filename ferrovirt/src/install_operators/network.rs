//! `ferrovirt network-operator`: the cluster network addons operator on a cluster, as
//! `deploy/network-operator/operator.yaml` runs it. NetworkAddonsConfig `cluster` gets the
//! MAC pool (its range ConfigMap and kubemacpool's manager, `deploy/network/kubemacpool.yaml`)
//! in the operand namespace and CNAO's status.

use operators::install::cnao;
use operators::install::manifests::DEFAULT_IMAGE;

#[derive(clap::Args)]
pub struct NetworkOperatorArgs {
    /// The namespace of the add-ons' objects (CNAO's `OPERAND_NAMESPACE`).
    #[arg(long, env = "OPERAND_NAMESPACE", default_value = cnao::OPERAND_NAMESPACE)]
    namespace: String,
    /// The image the add-ons' workloads run: the operator's own, as its Deployment passes it.
    #[arg(long, env = "FERROVIRT_IMAGE", default_value = DEFAULT_IMAGE)]
    image: String,
}

pub async fn run(args: NetworkOperatorArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    tracing::info!(namespace = %args.namespace, image = %args.image, "network-operator started");
    cnao::run(client, args.namespace, Some(args.image)).await;
    Ok(())
}
