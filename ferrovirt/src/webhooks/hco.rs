//! `ferrovirt hco-webhook`: HCO's webhook on a cluster (`hyperconverged-cluster-webhook`
//! in `deploy/hco-operator/`), serving the HyperConverged's create, update and delete
//! checks of [`admission::install_guards`] at HCO's path, and the HyperConverged's conversion
//! between v1beta1 and v1 at `/convert`. It serves with a certificate from the CA of Secret
//! `hco-webhook-ca` (made by the first replica to start) and keeps that CA in the
//! ValidatingWebhookConfiguration it serves and in the HC CRD's conversion stanza.

use std::net::SocketAddr;

use admission::install_guards;

use crate::webhooks::install::{CONVERT_PATH, GuardServer, HYPERCONVERGED_PATH};

#[derive(clap::Args)]
pub struct HcoWebhookArgs {
    /// Address to serve HTTPS on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// The namespace of the webhook's Service: HCO's.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubevirt-hyperconverged")]
    namespace: String,
    /// The Service in front of this server (its certificate names it).
    #[arg(long, default_value = "hyperconverged-cluster-webhook-service")]
    service: String,
    /// The ValidatingWebhookConfiguration whose caBundle this server keeps.
    #[arg(long, default_value = install_guards::HCO_WEBHOOK)]
    configuration: String,
}

pub async fn run(args: HcoWebhookArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    GuardServer {
        listen: args.listen,
        namespace: args.namespace,
        service: args.service,
        ca_secret: "hco-webhook-ca",
        configuration: args.configuration,
        manifest: "deploy/hco-operator/operator.yaml",
        paths: &[HYPERCONVERGED_PATH, CONVERT_PATH],
        converts: &["hyperconvergeds.hco.kubevirt.io"],
    }
    .run(client)
    .await
}
