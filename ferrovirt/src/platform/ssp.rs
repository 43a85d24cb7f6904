//! The SSP operator on `ferrovirt up`: SSP CRs get the common templates bundle, their boot
//! sources and their status (the template validator itself runs inside the API server).

use kube::Client;

/// Starts the SSP controller in the background with the common templates bundle.
pub fn start(client: &Client) {
    let bundle = operators::install::common_templates::bundle();
    tracing::debug!(templates = bundle.len(), "starting the SSP operator");
    tokio::spawn(operators::install::ssp::run(client.clone(), bundle));
}
