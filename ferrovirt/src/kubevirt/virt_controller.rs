//! `ferrovirt virt-controller`: the VirtualMachine and VirtualMachineInstance controllers
//! against the cluster of the environment, as the Deployment in `deploy/virt/` runs them.

#[derive(clap::Args)]
pub struct VirtControllerArgs {
    #[command(flatten)]
    pods: crate::storage::cdi_controller::PodImageArgs,
}

pub async fn run(args: VirtControllerArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    let config = args.pods.controller_config();
    // Launcher pods follow the active KubeVirt CR's useEmulation: read before the first pod is
    // made (as virt-controller waits for its informers), so none gets emulation it may not.
    let mut wait = std::time::Duration::from_millis(200);
    while let Err(err) =
        operators::install::components::load_cluster_config(&client, &config.kubevirt).await
    {
        tracing::warn!(%err, "reading the KubeVirt CRs; retrying");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_secs(10));
    }
    tokio::spawn(operators::install::components::follow_cluster_config(
        client.clone(),
        config.kubevirt.clone(),
    ));
    operators::run_virt(client, config).await?;
    Ok(())
}
