//! `ferrovirt virt-controller`: the VirtualMachine and VirtualMachineInstance controllers
//! against the cluster of the environment, as the Deployment in `deploy/virt/` runs them.

use anyhow::Context;

#[derive(clap::Args)]
pub struct VirtControllerArgs {
    #[command(flatten)]
    pods: crate::controller::PodImageArgs,
}

pub async fn run(args: VirtControllerArgs) -> anyhow::Result<()> {
    let client = operators::client_from_environment()
        .await
        .context("connecting to the cluster")?;
    let config = operators::ControllerConfig {
        image: args.pods.image,
        image_pull_policy: args.pods.image_pull_policy,
        ..Default::default()
    };
    operators::run_virt(client, config).await?;
    Ok(())
}
