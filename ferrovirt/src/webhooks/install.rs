//! The install guards of [`admission::install_guards`] served as AdmissionReviews on a cluster, over a
//! kube client: HCO's webhook (`ferrovirt hco-webhook`) serves the HyperConverged's path,
//! virt-operator (`ferrovirt virt-operator`) the KubeVirt CR's uninstall guard and update
//! review, and CDI's API server (`ferrovirt webhook`) the CDI CR's uninstall guard, each at
//! upstream's path and under upstream's webhook names, as upstream's own components serve
//! them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use admission::Refusal;
use admission::cluster::Cluster;
use admission::{conversion_review, install_guards};
use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::cluster::ca_bundles::{self, Holder, publish_validating_ca};
use crate::webhooks::hco_operands::HcoOperator;
use crate::webhooks::review::{answer_with, read_review, respond};

/// HCO's path for the HyperConverged.
pub const HYPERCONVERGED_PATH: &str = "/validate-hco-kubevirt-io-v1beta1-hyperconverged";
/// virt-operator's path for a KubeVirt CR's deletion.
pub const KUBEVIRT_DELETE_PATH: &str = "/kubevirt-validate-delete";
/// virt-operator's path for a KubeVirt CR's update.
pub const KUBEVIRT_UPDATE_PATH: &str = "/kubevirt-validate-update";
/// cdi-apiserver's path for a CDI CR's deletion.
pub const CDI_DELETE_PATH: &str = "/cdi-validate";
/// Where HCO's webhook converts the HyperConverged between its versions.
pub const CONVERT_PATH: &str = api::hco::schema::CONVERSION_PATH;

/// Where and as what a guard server serves.
pub struct GuardServer {
    pub listen: SocketAddr,
    /// The namespace of its Service and of the CA's Secret.
    pub namespace: String,
    /// The Service in front of it (its certificate names it).
    pub service: String,
    /// The Secret holding the CA of its serving certificate, shared by every replica.
    pub ca_secret: &'static str,
    /// The ValidatingWebhookConfiguration whose caBundle it keeps.
    pub configuration: String,
    /// What to apply when that configuration is missing.
    pub manifest: &'static str,
    /// The paths it answers.
    pub paths: &'static [&'static str],
    /// The CRDs it converts at [`CONVERT_PATH`] (their conversion caBundle kept too).
    pub converts: &'static [&'static str],
}

impl GuardServer {
    /// Serves until the server fails. Serving without the CA in the configuration would
    /// fail every call the API server makes (failurePolicy Fail): it stops instead, naming
    /// the configuration.
    pub async fn run(self, client: Client) -> anyhow::Result<()> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (service, namespace) = (&self.service, &self.namespace);
        // One CA for every replica, kept in a Secret: a rolling update's pods all serve
        // under the bundle in the configuration.
        let ca = crate::cluster::shared_ca(&client, namespace, self.ca_secret).await?;
        let no_client_certs = uploadproxy::tls::ClientCerts::None;
        let tls = crate::webhooks::serving::service_tls(&ca, service, namespace, no_client_certs)?;
        if !publish_validating_ca(&client, &self.configuration, ca.cert_pem()).await? {
            anyhow::bail!(
                "cannot write the caBundle of ValidatingWebhookConfiguration {}: apply {}",
                self.configuration,
                self.manifest
            );
        }
        let mut holders = vec![Holder::Validating(self.configuration.clone())];
        for crd in self.converts {
            let service =
                json!({"namespace": namespace, "name": service, "path": CONVERT_PATH, "port": 443});
            let holder = Holder::CrdConversion((*crd).to_owned(), service);
            ca_bundles::refresh(&client, &holder, ca.cert_pem()).await?;
            holders.push(holder);
        }
        ca_bundles::keep(client.clone(), ca.cert_pem().to_owned(), holders);
        let listener = tokio::net::TcpListener::bind(self.listen)
            .await
            .with_context(|| format!("listening on {}", self.listen))?;
        tracing::info!(address = %listener.local_addr()?, paths = ?self.paths, "guard webhook serving");
        let cluster = Arc::new(KubeCluster::new(client));
        let paths = self.paths;
        let server = uploadproxy::tls::serve(listener, tls, move |request, _peer| {
            let cluster = cluster.clone();
            async move { handle(cluster.as_ref(), paths, request).await }
        });
        server.await.context("the webhook server stopped")?;
        Ok(())
    }
}

/// The answer to one webhook call at one of `paths`.
pub async fn handle(
    cluster: &impl Cluster,
    paths: &[&str],
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    if !paths.contains(&path.as_str()) || request.method() != hyper::Method::POST {
        return respond(StatusCode::NOT_FOUND, &json!({"error": "not found"}));
    }
    let review = match read_review(request).await {
        Ok(review) => review,
        Err(refused) => return refused,
    };
    if path == CONVERT_PATH {
        let answer = conversion_review::answer(&review, api::hco::conversion::webhook);
        return respond(StatusCode::OK, &answer);
    }
    let verdict = review_request(cluster, &path, &review["request"]).await;
    answer_with(&review, admission::review::warned_response(verdict))
}

/// The check `path` makes of one request: the warnings of an admitted one, or the refusal.
async fn review_request(
    cluster: &impl Cluster,
    path: &str,
    request: &Value,
) -> Result<Vec<String>, Refusal> {
    let operation = request["operation"].as_str().unwrap_or_default();
    let namespace = request["namespace"].as_str().unwrap_or_default();
    let (object, old) = (&request["object"], &request["oldObject"]);
    match (path, operation) {
        (HYPERCONVERGED_PATH, "CREATE") => install_guards::hyperconverged_create(namespace, object),
        (HYPERCONVERGED_PATH, "UPDATE") => {
            install_guards::hyperconverged_update(cluster, &HcoOperator, namespace, object, old)
                .await
        }
        (HYPERCONVERGED_PATH, "DELETE") => {
            install_guards::hyperconverged_delete(cluster, &HcoOperator, namespace, old).await?;
            Ok(Vec::new())
        }
        (KUBEVIRT_UPDATE_PATH, "UPDATE") => {
            install_guards::kubevirt_update(cluster, object, old).await
        }
        (KUBEVIRT_DELETE_PATH, "DELETE") => {
            install_guards::kubevirt_uninstall(cluster, old).await?;
            Ok(Vec::new())
        }
        (CDI_DELETE_PATH, "DELETE") => {
            install_guards::cdi_uninstall(cluster, old).await?;
            Ok(Vec::new())
        }
        // Operations the configuration does not send here are not this webhook's to judge.
        _ => Ok(Vec::new()),
    }
}

/// A served resource and whether it is namespaced.
type Served = (ApiResource, bool);

/// The cluster through a kube client. Each resource is found by discovery once and then
/// remembered; one that is not served is looked for again, as its CRD may come later.
pub struct KubeCluster {
    client: Client,
    found: std::sync::Mutex<HashMap<(String, String), Served>>,
}

impl KubeCluster {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            found: Default::default(),
        }
    }

    /// The resource `group`/`plural` as the cluster serves it, if it does.
    async fn resource(&self, group: &str, plural: &str) -> Result<Option<Served>, Refusal> {
        let key = (group.to_owned(), plural.to_owned());
        if let Some(served) = self.remembered().get(&key) {
            return Ok(Some(served.clone()));
        }
        let discovery = Discovery::new(self.client.clone())
            .filter(&[group])
            .run()
            .await
            .map_err(refused)?;
        let served = discovery.groups().find_map(|found| {
            found
                .recommended_resources()
                .into_iter()
                .find(|(resource, _)| resource.plural == plural)
                .map(|(resource, caps)| (resource, caps.scope == Scope::Namespaced))
        });
        if let Some(served) = &served {
            self.remembered().insert(key, served.clone());
        }
        Ok(served)
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Served>> {
        // A panic while holding the lock left the map whole: inserts are single calls.
        self.found
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn api(&self, resource: &ApiResource, namespaced: bool, namespace: &str) -> Api<DynamicObject> {
        if namespaced {
            Api::namespaced_with(self.client.clone(), namespace, resource)
        } else {
            Api::all_with(self.client.clone(), resource)
        }
    }
}

/// A failed call as the webhook's refusal, the API server's code and words kept.
fn refused(err: kube::Error) -> Refusal {
    match err {
        kube::Error::Api(status) => Refusal::new(status.code, status.message),
        other => Refusal::new(500, other.to_string()),
    }
}

impl Cluster for KubeCluster {
    async fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, Refusal> {
        let Some((resource, namespaced)) = self.resource(group, plural).await? else {
            return Ok(None);
        };
        let found = self
            .api(&resource, namespaced, namespace)
            .get_opt(name)
            .await
            .map_err(refused)?;
        found
            .map(|object| {
                serde_json::to_value(object).map_err(|e| refused(kube::Error::SerdeError(e)))
            })
            .transpose()
    }

    async fn count(
        &self,
        group: &str,
        plural: &str,
        selector: &str,
        limit: usize,
    ) -> Result<usize, Refusal> {
        let Some((resource, _)) = self.resource(group, plural).await? else {
            return Ok(0);
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let mut params = ListParams::default().limit(u32::try_from(limit).unwrap_or(u32::MAX));
        if !selector.is_empty() {
            params = params.labels(selector);
        }
        let found = api.list_metadata(&params).await.map_err(refused)?;
        Ok(found.items.len())
    }

    async fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal> {
        self.dry_run(DryRun::Create, group, plural, namespace, object)
            .await
    }

    async fn dry_run_update(
        &self,
        group: &str,
        plural: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal> {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        self.dry_run(DryRun::Update, group, plural, namespace, object)
            .await
    }
}

/// The writes a guard tries with `dryRun=All`.
#[derive(Clone, Copy)]
enum DryRun {
    Create,
    Update,
}

impl KubeCluster {
    /// `write` of `object` with `dryRun=All`: the API server's warnings, or its refusal.
    async fn dry_run(
        &self,
        write: DryRun,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal> {
        let Some((resource, namespaced)) = self.resource(group, plural).await? else {
            return Err(Refusal::new(
                404,
                format!("the server could not find the requested resource ({plural}.{group})"),
            ));
        };
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let params = PostParams {
            dry_run: true,
            ..Default::default()
        };
        // Sent as a raw request: kube's typed calls drop the response's Warning headers,
        // which carry the admission warnings.
        let url =
            <DynamicObject as kube::Resource>::url_path(&resource, namespaced.then_some(namespace));
        let body = serde_json::to_vec(object).map_err(|e| refused(kube::Error::SerdeError(e)))?;
        let request = kube::core::Request::new(url);
        let request = match write {
            DryRun::Create => request.create(&params, body),
            DryRun::Update => request.replace(name, &params, body),
        }
        .map_err(|e| refused(kube::Error::BuildRequest(e)))?;
        let response = self
            .client
            .send(request.map(kube::client::Body::from))
            .await
            .map_err(refused)?;
        let warnings = admission_warnings(response.headers());
        let status = response.status();
        if status.is_success() {
            return Ok(warnings);
        }
        let text = response
            .into_body()
            .collect()
            .await
            .map(|body| String::from_utf8_lossy(&body.to_bytes()).into_owned())
            .unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|status| status["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        Err(Refusal {
            warnings,
            ..Refusal::new(status.as_u16(), message)
        })
    }
}

/// The texts of `Warning: 299 - "text"` headers (RFC 7234's warn-text, as kube-apiserver
/// writes admission warnings), unquoted.
fn admission_warnings(headers: &hyper::HeaderMap) -> Vec<String> {
    headers
        .get_all(hyper::header::WARNING)
        .iter()
        .filter_map(|value| std::str::from_utf8(value.as_bytes()).ok())
        .filter_map(|value| {
            let quoted = value.splitn(3, ' ').nth(2)?.trim();
            let text = quoted.strip_prefix('"')?;
            // The text ends at the first unescaped quote; a date may follow it.
            let mut unquoted = String::new();
            let mut chars = text.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => unquoted.push(chars.next()?),
                    '"' => return Some(unquoted),
                    c => unquoted.push(c),
                }
            }
            None
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_headers_are_read_as_kube_apiserver_writes_them() {
        let mut headers = hyper::HeaderMap::new();
        for value in [
            r#"299 - "feature gate X is deprecated""#,
            r#"299 - "a \"quoted\" word" "Thu, 26 Nov 2026 10:00:00 GMT""#,
            "299 - unquoted",
            r#"299 - "unterminated"#,
        ] {
            headers.append(
                hyper::header::WARNING,
                value.parse().expect("a header value"),
            );
        }
        assert_eq!(
            admission_warnings(&headers),
            ["feature gate X is deprecated", r#"a "quoted" word"#]
        );
    }
}
