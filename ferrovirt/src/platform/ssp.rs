//! The SSP operator on `ferrovirt up`: SSP CRs get the common templates bundle, their boot
//! sources and their status (the template validator itself runs inside the API server).
//! The tekton-tasks operator runs beside it: TektonTasks CRs (HCO makes one) get the
//! KubeVirt Tekton tasks and their RBAC once Tekton's Task is served.

use kube::Client;

/// Starts the SSP and TektonTasks controllers in the background.
pub fn start(client: &Client) {
    let bundle = operators::install::common_templates::bundle();
    tracing::debug!(templates = bundle.len(), "starting the SSP operator");
    tokio::spawn(operators::install::ssp::run(client.clone(), bundle));
    let image = std::env::var("FERROVIRT_IMAGE")
        .unwrap_or_else(|_| tekton::catalog::DEFAULT_IMAGE.to_owned());
    tokio::spawn(operators::install::tekton_tasks::run(client.clone(), image));
}
