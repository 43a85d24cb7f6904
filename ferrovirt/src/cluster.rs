//! The cluster a client command talks to: a client from the kubeconfig (`KUBECONFIG`, else
//! `~/.kube/config`, else the pod's service account) and the namespace it acts in, as
//! kubectl and virtctl resolve them.

use anyhow::Context;

/// A client, and `namespace` or else the kubeconfig context's.
pub async fn client_in(namespace: Option<&str>) -> anyhow::Result<(kube::Client, String)> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::infer()
        .await
        .context("loading the cluster configuration (KUBECONFIG or ~/.kube/config)")?;
    let namespace = namespace.map_or_else(|| config.default_namespace.clone(), str::to_owned);
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    Ok((client, namespace))
}
