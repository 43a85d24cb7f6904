//! `ferrovirt network-operator`: the cluster network addons operator on a cluster, as
//! `deploy/network-operator/operator.yaml` runs it. NetworkAddonsConfig `cluster` gets the
//! MAC pool's range ConfigMap in the operand namespace and CNAO's status.

use operators::install::cnao;

#[derive(clap::Args)]
pub struct NetworkOperatorArgs {
    /// The namespace of the add-ons' objects (CNAO's `OPERAND_NAMESPACE`).
    #[arg(long, env = "OPERAND_NAMESPACE", default_value = cnao::OPERAND_NAMESPACE)]
    namespace: String,
}

pub async fn run(args: NetworkOperatorArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    tracing::info!(namespace = %args.namespace, "network-operator started");
    cnao::run(client, args.namespace).await;
    Ok(())
}
