//! `ferrovirt ssp-operator`: SSP's operator on a cluster, as
//! `deploy/ssp-operator/operator.yaml` runs it. Each SSP CR gets the common templates in
//! its `commonTemplates.namespace`, its boot sources and its status, as on `ferrovirt up`.
//! The tekton-tasks operator runs beside it (ssp-operator took it in upstream): each
//! TektonTasks CR gets the KubeVirt Tekton tasks and their RBAC, the Tasks' steps running
//! `FERROVIRT_IMAGE` (else the published image).

pub async fn run() -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    let bundle = operators::install::common_templates::bundle();
    tracing::info!(templates = bundle.len(), "ssp-operator started");
    let image = std::env::var("FERROVIRT_IMAGE")
        .unwrap_or_else(|_| tekton::catalog::DEFAULT_IMAGE.to_owned());
    tokio::join!(
        operators::install::ssp::run(client.clone(), bundle),
        operators::install::tekton_tasks::run(client, image),
    );
    Ok(())
}
