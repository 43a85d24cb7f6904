//! The cluster a client command talks to: a client from the kubeconfig (`KUBECONFIG`, else
//! `~/.kube/config`, else the pod's service account) and the namespace it acts in, as
//! kubectl and virtctl resolve them; and what the cluster components share: Secrets, the
//! caBundles they keep ([`ca_bundles`]) and kube-aggregator's identity ([`front_proxy`]).

pub mod ca_bundles;
pub mod front_proxy;

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

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

/// The client of a cluster component (a controller, virt-api, virt-handler, the webhook):
/// the pod's service account, else KUBECONFIG or ~/.kube/config.
pub async fn component_client() -> anyhow::Result<kube::Client> {
    operators::client_from_environment()
        .await
        .context("connecting to the cluster")
}

/// The string data of Secret `namespace/name`: what is stored there, or else what `make`
/// gives, stored the first time (when two first starts race, both use the winner's).
pub async fn shared_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    make: impl Fn() -> anyhow::Result<BTreeMap<String, String>>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    loop {
        if let Some(secret) = secrets
            .get_opt(name)
            .await
            .with_context(|| format!("reading Secret {namespace}/{name}"))?
        {
            let data = secret.data.unwrap_or_default().into_iter();
            return Ok(data
                .map(|(key, value)| (key, String::from_utf8_lossy(&value.0).into_owned()))
                .collect());
        }
        let data = make()?;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            string_data: Some(data.clone()),
            ..Default::default()
        };
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => return Ok(data),
            // Another start stored its own first: read that.
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(err) => {
                return Err(err).with_context(|| format!("storing Secret {namespace}/{name}"));
            }
        }
    }
}

/// The CA kept in Secret `namespace/name` (`tls.crt`, `tls.key`, as CDI's and KubeVirt's
/// operators keep theirs), made and stored there by whichever component starts first, so
/// every replica and every component that trusts it agree, across restarts and rolling
/// updates.
pub async fn shared_ca(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<operators::certs::CertificateAuthority> {
    use operators::certs::CertificateAuthority;
    let data = shared_secret(client, namespace, name, || {
        let ca = CertificateAuthority::generate(name)?;
        Ok(BTreeMap::from([
            ("tls.crt".to_owned(), ca.cert_pem().to_owned()),
            ("tls.key".to_owned(), ca.key_pem()),
        ]))
    })
    .await?;
    let secret = format!("{namespace}/{name}");
    let cert = secret_key(&data, &secret, "tls.crt")?;
    let key = secret_key(&data, &secret, "tls.key")?;
    CertificateAuthority::from_pem(name, cert, key).with_context(|| format!("reading {secret}"))
}

/// `key` of a Secret's data, or an error naming what is missing.
pub fn secret_key<'a>(
    data: &'a BTreeMap<String, String>,
    secret: &str,
    key: &str,
) -> anyhow::Result<&'a str> {
    data.get(key)
        .map(String::as_str)
        .with_context(|| format!("Secret {secret} has no {key}"))
}
