//! `ferrovirt virt-controller`: the VirtualMachine and VirtualMachineInstance controllers
//! against the cluster of the environment, as the Deployment in `deploy/virt/` runs them.

#[derive(clap::Args)]
pub struct VirtControllerArgs {
    #[command(flatten)]
    pods: crate::controller::PodImageArgs,
}

pub async fn run(args: VirtControllerArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    let config = args.pods.controller_config();
    // Launcher pods follow the active KubeVirt CR's useEmulation.
    tokio::spawn(operators::install::components::follow_cluster_config(
        client.clone(),
        config.kubevirt.clone(),
    ));
    operators::run_virt(client, config).await?;
    Ok(())
}
