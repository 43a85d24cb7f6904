//! `ferrovirt hco-operator`: HCO on a cluster, as `deploy/hco-operator/operator.yaml` runs
//! it. The HyperConverged of its namespace becomes the KubeVirt, CDI, NetworkAddonsConfig
//! and SSP CRs, which the operators of `deploy/hco/` act on; their conditions come back
//! aggregated into the HC's status. The CLI download server is a Deployment of its image.

use operators::install::hco::{self, cli_download};
use operators::install::manifests::DEFAULT_IMAGE;

#[derive(clap::Args)]
pub struct HcoOperatorArgs {
    /// The namespace whose HyperConverged is reconciled: the operator's own.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubevirt-hyperconverged")]
    namespace: String,
    /// The image of the CLI download server: the operator's own, as its Deployment passes it.
    #[arg(long, env = "FERROVIRT_IMAGE", default_value = DEFAULT_IMAGE)]
    image: String,
    /// Let the KubeVirt CR allow software emulation (KubeVirt's `useEmulation`), for nodes
    /// without usable KVM.
    #[arg(long, env = "USE_EMULATION")]
    use_emulation: bool,
}

pub async fn run(args: HcoOperatorArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    tracing::info!(namespace = %args.namespace, image = %args.image, "hco-operator started");
    let settings = hco::Settings {
        namespace: args.namespace,
        use_emulation: args.use_emulation,
        cli_download: cli_download::Server::Deployment { image: args.image },
    };
    hco::run(client, settings).await;
    Ok(())
}
