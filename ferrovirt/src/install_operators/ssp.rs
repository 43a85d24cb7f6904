//! `ferrovirt ssp-operator`: SSP's operator on a cluster, as
//! `deploy/ssp-operator/operator.yaml` runs it. Each SSP CR gets the common templates in
//! its `commonTemplates.namespace`, its boot sources and its status, as on `ferrovirt up`.

pub async fn run() -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    let bundle = operators::install::common_templates::bundle();
    tracing::info!(templates = bundle.len(), "ssp-operator started");
    operators::install::ssp::run(client, bundle).await;
    Ok(())
}
