//! `ferrovirt virt-controller`: the VirtualMachine and VirtualMachineInstance controllers
//! against the cluster of the environment, as the Deployment in `deploy/virt/` runs them.

use anyhow::Context;

#[derive(clap::Args)]
pub struct VirtControllerArgs {
    /// The image of the launcher pods (this binary's image).
    #[arg(long, env = "FERROVIRT_IMAGE", default_value = operators::DEFAULT_IMAGE)]
    image: String,
    /// The pull policy of those pods.
    #[arg(long, env = "FERROVIRT_IMAGE_PULL_POLICY")]
    image_pull_policy: Option<String>,
}

pub async fn run(args: VirtControllerArgs) -> anyhow::Result<()> {
    let client = operators::client_from_environment()
        .await
        .context("connecting to the cluster")?;
    let config = operators::ControllerConfig {
        image: args.image,
        image_pull_policy: args.image_pull_policy,
        ..Default::default()
    };
    operators::run_virt(client, config).await?;
    Ok(())
}
