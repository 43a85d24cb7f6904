//! The caBundles a serving component keeps: of its webhook configurations and APIServices,
//! which name the CA its serving certificate comes from. Each is written at start, and kept:
//! an operator that recreates a deleted configuration, or a hand edit, leaves it without this
//! server's CA, and every call the API server makes would then fail TLS (with
//! `failurePolicy: Fail`, every admission of those objects). [`keep`] looks again every
//! [`RECHECK`] and writes back what differs.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// How often the kept bundles are looked at again.
pub const RECHECK: Duration = Duration::from_secs(10);

/// An object whose caBundle a server keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Every webhook of a MutatingWebhookConfiguration.
    Mutating(String),
    /// Every webhook of a ValidatingWebhookConfiguration.
    Validating(String),
    /// An APIService.
    ApiService(String),
    /// The conversion webhook of a CustomResourceDefinition (its name), served behind the
    /// Service `service` (`{namespace, name, path, port}`): the whole stanza is kept, as
    /// HCO keeps its CRD's.
    CrdConversion(String, Value),
}

impl Holder {
    fn resource(&self) -> ApiResource {
        let gvk = match self {
            Holder::Mutating(_) => GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "MutatingWebhookConfiguration",
            ),
            Holder::Validating(_) => GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
            ),
            Holder::ApiService(_) => {
                GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService")
            }
            Holder::CrdConversion(..) => {
                GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
            }
        };
        ApiResource::from_gvk(&gvk)
    }

    fn name(&self) -> &str {
        match self {
            Holder::Mutating(name)
            | Holder::Validating(name)
            | Holder::ApiService(name)
            | Holder::CrdConversion(name, _) => name,
        }
    }
}

/// Whether `object` (as `holder` is) carries `bundle` (base64, as JSON has it) everywhere it
/// should.
pub fn carries(holder: &Holder, object: &Value, bundle: &str) -> bool {
    match holder {
        Holder::ApiService(_) => object["spec"]["caBundle"] == bundle,
        Holder::CrdConversion(_, service) => {
            object["spec"]["conversion"] == crd_conversion(service, &json!(bundle))
        }
        Holder::Mutating(_) | Holder::Validating(_) => {
            object["webhooks"].as_array().is_none_or(|hooks| {
                hooks
                    .iter()
                    .all(|h| h["clientConfig"]["caBundle"] == bundle)
            })
        }
    }
}

/// Writes `ca_pem` into `holder` if it exists and does not carry it yet; whether it wrote.
pub async fn refresh(client: &Client, holder: &Holder, ca_pem: &str) -> anyhow::Result<bool> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &holder.resource());
    let Some(current) = api.get_opt(holder.name()).await? else {
        return Ok(false);
    };
    // As the object's JSON has it: base64.
    let bundle = serde_json::to_value(k8s_openapi::ByteString(ca_pem.as_bytes().to_vec()))?;
    let bundle = bundle.as_str().unwrap_or_default();
    if carries(holder, &serde_json::to_value(&current)?, bundle) {
        return Ok(false);
    }
    match holder {
        Holder::Mutating(name) => publish_webhook_ca(client, name, ca_pem)
            .await
            .map(|()| true),
        Holder::Validating(name) => publish_validating_ca(client, name, ca_pem).await,
        Holder::ApiService(name) => publish_apiservice_ca(client, name, ca_pem).await,
        Holder::CrdConversion(name, service) => {
            let crds: Api<DynamicObject> = Api::all_with(client.clone(), &holder.resource());
            let patch = json!({"spec": {"conversion": crd_conversion(service, &json!(bundle))}});
            crds.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .with_context(|| format!("writing the conversion webhook of CRD {name}"))?;
            Ok(true)
        }
    }
}

/// A CRD's `spec.conversion` naming the webhook behind `service` and its CA `bundle`.
fn crd_conversion(service: &Value, bundle: &Value) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"service": service, "caBundle": bundle},
            "conversionReviewVersions": ["v1", "v1beta1"],
        },
    })
}

/// Keeps `ca_pem` in each of `holders` until the process ends.
pub fn keep(client: Client, ca_pem: String, holders: Vec<Holder>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(RECHECK).await;
            for holder in &holders {
                match refresh(&client, holder, &ca_pem).await {
                    Ok(true) => tracing::info!(?holder, "wrote the caBundle back"),
                    Ok(false) => {}
                    Err(err) => tracing::warn!(?holder, %err, "checking the caBundle"),
                }
            }
        }
    })
}

/// Writes `ca_pem` as the caBundle of APIService `name`; false when there is none.
pub async fn publish_apiservice_ca(
    client: &Client,
    name: &str,
    ca_pem: &str,
) -> anyhow::Result<bool> {
    let bundle = k8s_openapi::ByteString(ca_pem.as_bytes().to_vec());
    let gvk = kube::api::GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService");
    let services: Api<kube::api::DynamicObject> =
        Api::all_with(client.clone(), &kube::api::ApiResource::from_gvk(&gvk));
    let patch = Patch::Merge(json!({"spec": {"caBundle": bundle}}));
    match services.patch(name, &PatchParams::default(), &patch).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(err) => Err(err).with_context(|| format!("writing the caBundle of APIService {name}")),
    }
}

/// Writes `ca_pem` as the caBundle of every webhook of ValidatingWebhookConfiguration
/// `configuration`, when it exists and may be read: whether it was written.
pub async fn publish_validating_ca(
    client: &Client,
    configuration: &str,
    ca_pem: &str,
) -> anyhow::Result<bool> {
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    // Without it (or without permission to read it) this server is CDI's webhook only.
    let current = match configurations.get_opt(configuration).await {
        Ok(Some(current)) => current,
        Ok(None) => {
            tracing::info!(%configuration, "no ValidatingWebhookConfiguration to keep");
            return Ok(false);
        }
        Err(err) => {
            tracing::warn!(%configuration, %err, "not keeping the ValidatingWebhookConfiguration");
            return Ok(false);
        }
    };
    let webhooks = current.webhooks.unwrap_or_default();
    write_webhooks_ca(&configurations, configuration, webhooks, ca_pem).await?;
    Ok(true)
}

/// Writes `ca_pem` as the caBundle of every webhook of MutatingWebhookConfiguration
/// `configuration`.
pub async fn publish_webhook_ca(
    client: &Client,
    configuration: &str,
    ca_pem: &str,
) -> anyhow::Result<()> {
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let current = configurations
        .get(configuration)
        .await
        .with_context(|| format!("reading MutatingWebhookConfiguration {configuration}"))?;
    let webhooks = current.webhooks.unwrap_or_default();
    write_webhooks_ca(&configurations, configuration, webhooks, ca_pem).await?;
    Ok(())
}

/// Patches `webhooks` (those of `configuration` in `api`) back with `ca_pem` as the caBundle
/// of each.
async fn write_webhooks_ca<K, W>(
    api: &Api<K>,
    configuration: &str,
    webhooks: Vec<W>,
    ca_pem: &str,
) -> anyhow::Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    W: serde::Serialize,
{
    let bundle = serde_json::to_value(k8s_openapi::ByteString(ca_pem.as_bytes().to_vec()))?;
    let webhooks = webhooks
        .into_iter()
        .map(|webhook| {
            let mut webhook = serde_json::to_value(webhook)?;
            webhook["clientConfig"]["caBundle"] = bundle.clone();
            Ok(webhook)
        })
        .collect::<Result<Vec<Value>, serde_json::Error>>()?;
    api.patch(
        configuration,
        &PatchParams::default(),
        &Patch::Merge(json!({"webhooks": webhooks})),
    )
    .await
    .with_context(|| format!("writing the caBundle of {configuration}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_is_carried_only_where_every_webhook_has_it() {
        let hooks = |a: &str, b: &str| json!({"webhooks": [{"clientConfig": {"caBundle": a}}, {"clientConfig": {"caBundle": b}}]});
        let mutating = Holder::Mutating("m".into());
        assert!(carries(&mutating, &hooks("QQ==", "QQ=="), "QQ=="));
        assert!(
            !carries(&mutating, &hooks("QQ==", "Qg=="), "QQ=="),
            "one webhook differs"
        );
        let recreated = json!({"webhooks": [{"clientConfig": {"service": {"name": "s"}}}]});
        assert!(!carries(
            &Holder::Validating("v".into()),
            &recreated,
            "QQ=="
        ));
        let service = Holder::ApiService("v1.x".into());
        assert!(carries(
            &service,
            &json!({"spec": {"caBundle": "QQ=="}}),
            "QQ=="
        ));
        assert!(!carries(&service, &json!({"spec": {}}), "QQ=="));
    }
}
