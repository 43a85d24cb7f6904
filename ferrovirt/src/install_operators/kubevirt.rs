//! `ferrovirt virt-operator`: KubeVirt's operator on a cluster, as
//! `deploy/virt-operator/operator.yaml` runs it. Each KubeVirt CR deploys virt-api,
//! virt-controller and virt-handler (the manifests of `deploy/virt/`) in its namespace.
//!
//! As upstream's virt-operator, it also serves the webhooks of ValidatingWebhookConfiguration
//! `virt-operator-validator` behind Service `kubevirt-operator-webhook`: the uninstall guard
//! of a KubeVirt CR (`BlockUninstallIfWorkloadsExist`) and the review of its updates.

use std::net::SocketAddr;

use operators::install::manifests::DEFAULT_IMAGE;
use operators::install::virt_operator;

use crate::webhooks::install::{GuardServer, KUBEVIRT_DELETE_PATH, KUBEVIRT_UPDATE_PATH};

#[derive(clap::Args)]
pub struct VirtOperatorArgs {
    /// The image the components run: the operator's own, as its Deployment passes it.
    #[arg(long, env = "FERROVIRT_IMAGE", default_value = DEFAULT_IMAGE)]
    image: String,
    /// Address to serve the webhooks on (HTTPS).
    #[arg(long, default_value = "0.0.0.0:8444")]
    webhook_listen: SocketAddr,
    /// The operator's namespace: of the webhooks' Service and their CA's Secret.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubevirt")]
    namespace: String,
    /// The Service in front of the webhooks (their certificate names it).
    #[arg(long, default_value = "kubevirt-operator-webhook")]
    webhook_service: String,
    /// The ValidatingWebhookConfiguration whose caBundle the operator keeps.
    #[arg(long, default_value = "virt-operator-validator")]
    webhook_configuration: String,
}

pub async fn run(args: VirtOperatorArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    tracing::info!(image = %args.image, "virt-operator started");
    let webhooks = GuardServer {
        listen: args.webhook_listen,
        namespace: args.namespace,
        service: args.webhook_service,
        ca_secret: "kubevirt-operator-webhook-ca",
        configuration: args.webhook_configuration,
        manifest: "deploy/virt-operator/operator.yaml",
        paths: &[KUBEVIRT_DELETE_PATH, KUBEVIRT_UPDATE_PATH],
        converts: &[],
    };
    tokio::select! {
        () = virt_operator::run(client.clone(), args.image) => Ok(()),
        served = webhooks.run(client) => served,
    }
}
