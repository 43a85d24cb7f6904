//! The CDIConfig controller: keeps the status of CDIConfig `config` to the configuration in
//! effect, as CDI's config-controller does. The status is what the DataVolume controller
//! reads: the worker pods' resources (CDI's defaults, each one replaced by the spec's), the
//! filesystem overhead of every StorageClass, preallocation, the scratch space class and the
//! import proxy. The upload proxy URL is the spec's override when it has one, else the one
//! the controller was given (`ferrovirt up`'s loopback proxy; CDI's look-up of Ingresses and
//! Routes is not done). The status is replaced whole, as CDI updates it, so what no longer
//! applies (a deleted StorageClass's overhead) goes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::cdi::CDIConfig;
use api::cdi::operator::{
    CdiConfigStatus, DEFAULT_FILESYSTEM_OVERHEAD, FilesystemOverhead, ImportProxy,
};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ResourceRequirements};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use super::datavolume::pod::{CA_BUNDLE_KEY, UPLOAD_PROXY_CA_CONFIG_MAP};
use super::datavolume::pvc::default_storage_class;
use super::datavolume::settings::CDI_CONFIG;
use crate::config::PublishedUploadProxy;

/// CDI's resources of a worker pod's container where the spec names none:
/// (limits or requests, resource, quantity).
const DEFAULT_POD_RESOURCES: [(Bound, &str, &str); 4] = [
    (Bound::Limit, "cpu", "750m"),
    (Bound::Limit, "memory", "600M"),
    (Bound::Request, "cpu", "100m"),
    (Bound::Request, "memory", "60M"),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    Limit,
    Request,
}

/// Errors of the CDIConfig controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
}

/// The status `config` should have, given the cluster's StorageClasses, the upload proxy to
/// publish without an override, and the upload proxy's CA bundle as CDI's namespace keeps
/// it on a cluster (pure: the controller's plan).
pub fn desired_status(
    config: &CDIConfig,
    classes: &[StorageClass],
    published: Option<&PublishedUploadProxy>,
    signer_bundle: Option<&str>,
) -> CdiConfigStatus {
    let spec = &config.spec;
    let current = config.status.clone().unwrap_or_default();
    let upload_proxy_url = spec
        .upload_proxy_url_override
        .clone()
        .or(published.map(|p| p.url.clone()));
    // The CA clients add to their roots for that URL: the published proxy's own; for an
    // override (on a cluster the only URL there is), the proxy's signer bundle, which a
    // front passing TLS through to the proxy serves under. (CDI reads the certificate of
    // an Ingress or Route instead, which is not done.)
    let upload_proxy_ca = match published {
        Some(p) if upload_proxy_url.as_ref() == Some(&p.url) => Some(p.ca_pem.clone()),
        _ => signer_bundle
            .filter(|_| upload_proxy_url.is_some())
            .map(str::to_owned),
    };
    CdiConfigStatus {
        upload_proxy_url,
        upload_proxy_ca,
        import_proxy: Some(spec.import_proxy.clone().unwrap_or_else(empty_proxy)),
        scratch_space_storage_class: Some(scratch_space_class(
            spec.scratch_space_storage_class.as_deref(),
            classes,
        )),
        default_pod_resource_requirements: Some(pod_resources(
            spec.pod_resource_requirements.as_ref(),
        )),
        filesystem_overhead: Some(filesystem_overhead(
            spec.filesystem_overhead.as_ref(),
            classes,
        )),
        preallocation: Some(spec.preallocation == Some(true)),
        ..current
    }
}

/// No proxy: CDI writes the four fields empty rather than leaving them out.
fn empty_proxy() -> ImportProxy {
    ImportProxy {
        http_proxy: Some(String::new()),
        https_proxy: Some(String::new()),
        no_proxy: Some(String::new()),
        trusted_ca_proxy: Some(String::new()),
    }
}

/// The spec's scratch class if it exists, else the default class, else none ("").
fn scratch_space_class(named: Option<&str>, classes: &[StorageClass]) -> String {
    named
        .filter(|name| classes.iter().any(|c| c.name_any() == *name))
        .map(str::to_owned)
        .or_else(|| default_storage_class(classes).map(|c| c.name_any()))
        .unwrap_or_default()
}

/// CDI's default worker resources with each CPU and memory limit and request the spec
/// names put in its place (other resources of the spec are not carried, as in CDI).
fn pod_resources(spec: Option<&ResourceRequirements>) -> ResourceRequirements {
    let mut limits = BTreeMap::new();
    let mut requests = BTreeMap::new();
    for (bound, resource, default) in DEFAULT_POD_RESOURCES {
        let (out, given) = match bound {
            Bound::Limit => (&mut limits, spec.and_then(|s| s.limits.as_ref())),
            Bound::Request => (&mut requests, spec.and_then(|s| s.requests.as_ref())),
        };
        let quantity = given
            .and_then(|g| g.get(resource).cloned())
            .unwrap_or_else(|| Quantity(default.to_owned()));
        out.insert(resource.to_owned(), quantity);
    }
    ResourceRequirements {
        limits: Some(limits),
        requests: Some(requests),
        ..Default::default()
    }
}

/// The global overhead (the spec's when valid, else CDI's 0.06) and one figure for every
/// StorageClass: the spec's for that class when valid, else the global one.
fn filesystem_overhead(
    spec: Option<&FilesystemOverhead>,
    classes: &[StorageClass],
) -> FilesystemOverhead {
    let global = spec
        .and_then(|s| s.global.clone())
        .filter(|g| is_valid_overhead(g))
        .unwrap_or_else(|| DEFAULT_FILESYSTEM_OVERHEAD.to_owned());
    let per_class = spec.and_then(|s| s.storage_class.as_ref());
    let storage_class = classes
        .iter()
        .map(|class| {
            let name = class.name_any();
            let figure = per_class
                .and_then(|p| p.get(&name))
                .filter(|f| is_valid_overhead(f))
                .cloned()
                .unwrap_or_else(|| global.clone());
            (name, figure)
        })
        .collect();
    FilesystemOverhead {
        global: Some(global),
        storage_class: Some(storage_class),
    }
}

/// CDI's form of an overhead: `0`, `1`, or `0.` and one to three digits.
fn is_valid_overhead(text: &str) -> bool {
    match text.strip_prefix("0.") {
        Some(digits) => {
            (1..=3).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
        }
        None => text == "0" || text == "1",
    }
}

struct Context {
    client: Client,
    published: Option<PublishedUploadProxy>,
    /// CDI's namespace on a cluster, where the upload proxy keeps its CA bundle.
    cdi_namespace: Option<String>,
}

async fn reconcile(config: Arc<CDIConfig>, ctx: Arc<Context>) -> Result<Action, Error> {
    let classes: Api<StorageClass> = Api::all(ctx.client.clone());
    let classes = classes.list(&Default::default()).await?.items;
    let signer_bundle = match &ctx.cdi_namespace {
        Some(namespace) => Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace)
            .get_opt(UPLOAD_PROXY_CA_CONFIG_MAP)
            .await?
            .and_then(|map| map.data?.remove(CA_BUNDLE_KEY)),
        None => None,
    };
    let status = desired_status(
        &config,
        &classes,
        ctx.published.as_ref(),
        signer_bundle.as_deref(),
    );
    if config.status.as_ref() != Some(&status) {
        // Replaced whole, against the version read: a change meanwhile is looked at again.
        let mut updated = (*config).clone();
        updated.status = Some(status);
        let configs: Api<CDIConfig> = Api::all(ctx.client.clone());
        match configs
            .replace_status(&config.name_any(), &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                return Ok(Action::requeue(Duration::from_millis(100)));
            }
            Err(err) => return Err(err.into()),
        }
    }
    // Looked at again within a minute: the CA bundle, which no watch covers, may change.
    Ok(Action::requeue(Duration::from_secs(60)))
}

fn error_policy(config: Arc<CDIConfig>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(config = %config.name_any(), %err, "CDIConfig reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the CDIConfig controller until its watches end: CDIConfig `config`, reconciled
/// again whenever a StorageClass changes; `published` is the upload proxy its status names
/// without an override, `cdi_namespace` where the proxy keeps its CA bundle on a cluster.
pub async fn run(
    client: Client,
    published: Option<PublishedUploadProxy>,
    cdi_namespace: Option<String>,
) {
    let configs: Api<CDIConfig> = Api::all(client.clone());
    let classes: Api<StorageClass> = Api::all(client.clone());
    let ctx = Arc::new(Context {
        client,
        published,
        cdi_namespace,
    });
    let only_config = watcher::Config::default().fields(&format!("metadata.name={CDI_CONFIG}"));
    Controller::new(configs, only_config)
        .watches(classes, watcher::Config::default(), |_| {
            Some(ObjectRef::<CDIConfig>::new(CDI_CONFIG))
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "CDIConfig controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(spec: serde_json::Value, status: serde_json::Value) -> CDIConfig {
        serde_json::from_value(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDIConfig",
            "metadata": {"name": "config"}, "spec": spec, "status": status,
        }))
        .expect("a CDIConfig")
    }

    fn class(name: &str, default: bool) -> StorageClass {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {
                "storageclass.kubernetes.io/is-default-class": default.to_string()}},
            "provisioner": "kubevirt.io.hostpath-provisioner",
        }))
        .expect("a StorageClass")
    }

    fn loopback() -> PublishedUploadProxy {
        PublishedUploadProxy {
            url: "https://127.0.0.1:1".into(),
            ca_pem: "PEM".into(),
        }
    }

    fn quantities(value: serde_json::Value) -> Option<BTreeMap<String, Quantity>> {
        Some(serde_json::from_value(value).expect("quantities"))
    }

    #[test]
    fn an_empty_spec_gives_cdis_defaults() {
        let classes = [class("local", true), class("fast", false)];
        let status = desired_status(&config(json!({}), json!(null)), &classes, None, None);
        let resources = status.default_pod_resource_requirements.expect("resources");
        assert_eq!(
            resources.limits,
            quantities(json!({"cpu": "750m", "memory": "600M"}))
        );
        assert_eq!(
            resources.requests,
            quantities(json!({"cpu": "100m", "memory": "60M"}))
        );
        let overhead = status.filesystem_overhead.expect("overhead");
        assert_eq!(overhead.global.as_deref(), Some("0.06"));
        assert_eq!(
            overhead.storage_class,
            Some(BTreeMap::from([
                ("fast".to_owned(), "0.06".to_owned()),
                ("local".to_owned(), "0.06".to_owned()),
            ]))
        );
        assert_eq!(status.scratch_space_storage_class.as_deref(), Some("local"));
        assert_eq!(status.preallocation, Some(false));
        assert_eq!(status.import_proxy, Some(empty_proxy()));
        assert_eq!(status.upload_proxy_url, None);
    }

    #[test]
    fn the_spec_replaces_each_default_it_names() {
        let spec = json!({
            "podResourceRequirements": {"limits": {"cpu": "2"}, "requests": {"memory": "1Gi"}},
            "filesystemOverhead": {"global": "0.1", "storageClass": {"fast": "0.2", "local": "7"}},
            "scratchSpaceStorageClass": "fast",
            "preallocation": true,
            "importProxy": {"HTTPProxy": "http://proxy:3128"},
            "uploadProxyURLOverride": "upload.example",
        });
        let classes = [class("local", true), class("fast", false)];
        let status = desired_status(
            &config(spec, json!({"uploadProxyURL": "https://127.0.0.1:1"})),
            &classes,
            Some(&loopback()),
            None,
        );
        let resources = status.default_pod_resource_requirements.expect("resources");
        assert_eq!(
            resources.limits,
            quantities(json!({"cpu": "2", "memory": "600M"}))
        );
        assert_eq!(
            resources.requests,
            quantities(json!({"cpu": "100m", "memory": "1Gi"}))
        );
        let overhead = status.filesystem_overhead.expect("overhead");
        assert_eq!(overhead.global.as_deref(), Some("0.1"));
        let per_class = overhead.storage_class.expect("per class");
        assert_eq!(per_class["fast"], "0.2");
        assert_eq!(
            per_class["local"], "0.1",
            "an invalid figure gives way to the global one"
        );
        assert_eq!(status.scratch_space_storage_class.as_deref(), Some("fast"));
        assert_eq!(status.preallocation, Some(true));
        assert_eq!(
            status.import_proxy.and_then(|p| p.http_proxy).as_deref(),
            Some("http://proxy:3128")
        );
        assert_eq!(status.upload_proxy_url.as_deref(), Some("upload.example"));
        assert_eq!(
            status.upload_proxy_ca, None,
            "the loopback proxy's CA is not the overriding front's"
        );
        let on_a_cluster = desired_status(
            &config(
                json!({"uploadProxyURLOverride": "upload.example"}),
                json!(null),
            ),
            &classes,
            None,
            Some("SIGNER PEM"),
        );
        assert_eq!(
            on_a_cluster.upload_proxy_ca.as_deref(),
            Some("SIGNER PEM"),
            "on a cluster the override gets the proxy's signer bundle"
        );
    }

    #[test]
    fn the_published_upload_proxy_applies_without_an_override() {
        let current = json!({"uploadProxyURL": "upload.example", "uploadProxyCA": "OLD PEM",
            "filesystemOverhead": {"global": "0.06", "storageClass": {"gone": "0.06"}}});
        let status = desired_status(
            &config(json!({}), current.clone()),
            &[],
            Some(&loopback()),
            Some("SIGNER PEM"),
        );
        assert_eq!(
            status.upload_proxy_url.as_deref(),
            Some("https://127.0.0.1:1"),
            "a withdrawn override gives way to the published URL"
        );
        assert_eq!(
            status.upload_proxy_ca.as_deref(),
            Some("PEM"),
            "with its CA"
        );
        assert_eq!(status.scratch_space_storage_class.as_deref(), Some(""));
        assert_eq!(
            status.filesystem_overhead.and_then(|o| o.storage_class),
            Some(BTreeMap::new()),
            "a deleted class's figure goes"
        );
        let unpublished =
            desired_status(&config(json!({}), current), &[], None, Some("SIGNER PEM"));
        assert_eq!(
            (unpublished.upload_proxy_url, unpublished.upload_proxy_ca),
            (None, None),
            "no override, nothing published"
        );
    }

    #[test]
    fn a_missing_scratch_class_falls_back_to_the_default_one() {
        let classes = [class("local", true)];
        let status = desired_status(
            &config(json!({"scratchSpaceStorageClass": "gone"}), json!(null)),
            &classes,
            None,
            None,
        );
        assert_eq!(status.scratch_space_storage_class.as_deref(), Some("local"));
    }

    #[test]
    fn overheads_are_checked_as_cdi_writes_them() {
        for good in ["0", "1", "0.1", "0.06", "0.055"] {
            assert!(is_valid_overhead(good), "{good}");
        }
        for bad in ["", "0.", "0.0555", "1.0", ".5", "0.a", "-0.1", "2"] {
            assert!(!is_valid_overhead(bad), "{bad}");
        }
    }
}
