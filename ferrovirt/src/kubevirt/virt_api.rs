//! `ferrovirt virt-api`: KubeVirt's virt-api on a cluster, as the Deployment in
//! `deploy/virt/` runs it. One HTTPS server for
//!
//! - the subresource API `subresources.kubevirt.io`, registered with kube-aggregator by
//!   the APIServices of `deploy/virt/`: requests come from the aggregator, which proves
//!   itself with a client certificate from the request-header CA of ConfigMap
//!   `kube-system/extension-apiserver-authentication` and names the user in headers;
//!   each is then authorized with a SubjectAccessReview, as KubeVirt's virt-api does.
//!   The VM verbs are answered here, the rest forwarded to the VMI node's virt-handler;
//! - the mutating admission webhooks of VirtualMachines and VirtualMachineInstances
//!   (`api::admission`'s defaulting and validation, and the features the active KubeVirt
//!   CR's feature gates leave off refused in virt-api's words).
//!
//! At start it writes the bundle of its serving CA into those APIServices and webhooks.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use api::kubevirt::cluster_config::{ClusterConfig, SharedClusterConfig};
use axum::body::Body;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use kube::Client;
use serde_json::json;
use tower::ServiceExt;
use uploadproxy::tls::{ClientCerts, Peer};
use virt::subresources::to_handler::ToHandler;

use crate::cluster::ca_bundles::{self, Holder};
use crate::cluster::front_proxy::{self, FrontProxy, RemoteUser};
use crate::kubevirt::certs as virt_certs;
use crate::webhooks::review;

/// The webhook paths, one per kind (both run the same admission).
pub const MUTATE_PATHS: [&str; 2] = ["/virtualmachines-mutate", "/virtualmachineinstances-mutate"];

#[derive(clap::Args)]
pub struct VirtApiArgs {
    /// Address to serve HTTPS on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// The namespace of virt-api's Service and of the CA Secret shared with virt-handler.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubevirt")]
    namespace: String,
    /// The Service in front of this server (its certificate names it).
    #[arg(long, default_value = "virt-api")]
    service: String,
    /// The MutatingWebhookConfiguration whose caBundle this server keeps.
    #[arg(long, default_value = "virt-api-mutator")]
    webhook_configuration: String,
}

pub async fn run(args: VirtApiArgs) -> anyhow::Result<()> {
    let client = crate::cluster::component_client().await?;
    let ca = virt_certs::shared_ca(&client, &args.namespace).await?;
    let (service, namespace) = (&args.service, &args.namespace);
    let names = vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}"),
        service.clone(),
    ];
    let identity = virt_certs::server_identity(&ca, &names)?;
    let front_proxy = FrontProxy::read(&client).await?;
    let tls = uploadproxy::tls::server_config_with(
        &identity,
        ClientCerts::Optional(front_proxy.roots.clone()),
    )?;
    let to_handler_tls = uploadproxy::tls::client_config(
        virt_certs::trusting(&ca)?,
        &virt_certs::client_identity(&ca, virt_certs::API_CLIENT_NAME)?,
    )?;
    let to_handler = ToHandler::new(client.clone(), Arc::new(to_handler_tls));
    let cluster = SharedClusterConfig::default();
    tokio::spawn(operators::install::components::follow_cluster_config(
        client.clone(),
        cluster.clone(),
    ));
    let server = Arc::new(VirtApi {
        router: virt::subresources::api_router(client.clone(), to_handler.router()),
        client: client.clone(),
        front_proxy,
        cluster,
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let serving = uploadproxy::tls::serve(listener, tls, move |request, peer| {
        server.clone().handle(request, peer)
    });
    publish_ca_bundle(&client, ca.cert_pem(), &args.webhook_configuration).await?;
    eprintln!("virt-api on https://{}", args.listen);
    serving.await.context("the virt-api server stopped")?;
    Ok(())
}

struct VirtApi {
    client: Client,
    router: axum::Router,
    front_proxy: FrontProxy,
    /// The active KubeVirt CR's configuration, for the webhooks' defaulting.
    cluster: SharedClusterConfig,
}

impl VirtApi {
    async fn handle(self: Arc<Self>, request: Request<Incoming>, peer: Peer) -> Response<Body> {
        let path = request.uri().path();
        if MUTATE_PATHS.contains(&path) && request.method() == Method::POST {
            return admit(request, &self.client, &self.cluster.get())
                .await
                .map(Body::new);
        }
        if path == "/healthz" {
            return plain(StatusCode::OK, "ok");
        }
        if !path.starts_with(&format!("/apis/{}", virt::subresources::GROUP)) {
            return plain(StatusCode::NOT_FOUND, "not found");
        }
        if is_open(path) {
            return self.answer(request).await;
        }
        let Some(user) = self.front_proxy.user(&peer, request.headers()) else {
            let message = "the request did not come through the API server's front proxy";
            return status(StatusCode::UNAUTHORIZED, "Unauthorized", message);
        };
        match self.authorize(&user, request.method(), path).await {
            Ok(true) => {}
            Ok(false) => {
                let message = format!(
                    "user {:?} may not {} {path}",
                    user.username,
                    request.method()
                );
                return status(StatusCode::FORBIDDEN, "Forbidden", &message);
            }
            Err(err) => {
                let message = format!("reviewing the user's access: {err}");
                return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &message);
            }
        }
        self.answer(request).await
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<Body> {
        match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// Asks the API server whether `user` may do what the request does, as KubeVirt's
    /// virt-api does for every subresource request.
    async fn authorize(
        &self,
        user: &RemoteUser,
        method: &Method,
        path: &str,
    ) -> Result<bool, kube::Error> {
        // Anything that names no resource (and is not open) is refused.
        let Some(attributes) = resource_attributes(method, path) else {
            return Ok(false);
        };
        front_proxy::may(&self.client, user, attributes).await
    }
}

/// The group's paths anyone may read, as KubeVirt's virt-api lets them through: its
/// discovery documents, version and health.
fn is_open(path: &str) -> bool {
    let Some(rest) = path.strip_prefix(&format!("/apis/{}", virt::subresources::GROUP)) else {
        return false;
    };
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let served = |version: &str| virt::subresources::VERSIONS.contains(&version);
    match segments.as_slice() {
        [] => true,
        [version] => served(version),
        [version, "version" | "healthz"] => served(version),
        _ => false,
    }
}

/// What a subresource request asks to do, as a SubjectAccessReview names it:
/// `/apis/{group}/{version}/namespaces/{ns}/{resource}/{name}/{subresource}[/...]`; `None`
/// for any other path, and for a percent-encoded one (no name needs encoding, and the
/// review must name what the handlers, which decode, act on).
fn resource_attributes(method: &Method, path: &str) -> Option<ResourceAttributes> {
    if path.contains('%') {
        return None;
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let [
        "apis",
        group,
        version,
        "namespaces",
        namespace,
        resource,
        name,
        subresource,
        ..,
    ] = segments.as_slice()
    else {
        return None;
    };
    let verb = match *method {
        Method::GET | Method::HEAD => "get",
        Method::PUT => "update",
        Method::POST => "create",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    };
    Some(ResourceAttributes {
        verb: Some(verb.into()),
        group: Some((*group).into()),
        version: Some((*version).into()),
        resource: Some((*resource).into()),
        subresource: Some((*subresource).into()),
        namespace: Some((*namespace).into()),
        name: Some((*name).into()),
        ..Default::default()
    })
}

/// A webhook call: a VMI created given its namespace's presets, then the object defaulted
/// and validated by `admission::admit` on a cluster configured by `cluster`.
async fn admit(
    request: Request<Incoming>,
    client: &Client,
    cluster: &ClusterConfig,
) -> Response<http_body_util::Full<bytes::Bytes>> {
    let review = match review::read_review(request).await {
        Ok(review) => review,
        Err(refused) => return refused,
    };
    // virt-api's validating webhooks, here in the one webhook: the gated features first.
    let object = &review["request"]["object"];
    if let Some(message) = api::kubevirt::gated_features::refusal(object, &cluster.feature_gates) {
        return review::answer_review(&review, Err(admission::Refusal::new(422, message)));
    }
    let mut admitted_request = review["request"].clone();
    let warnings = match apply_presets(client, &mut admitted_request).await {
        Ok(warnings) => warnings,
        Err(refusal) => return review::answer_review(&review, Err(refusal)),
    };
    let verdict =
        admission::review::admit_request_in(&admitted_request, cluster).and_then(|admitted| {
            match admitted {
                Some((_, object)) => admission::review::patch_between(object_of(&review), &object),
                None => Ok(None),
            }
        });
    let mut answer = admission::review::answer(&review, verdict);
    if !warnings.is_empty() {
        answer["response"]["warnings"] = json!(warnings);
    }
    review::respond(StatusCode::OK, &answer)
}

fn object_of(review: &serde_json::Value) -> &serde_json::Value {
    &review["request"]["object"]
}

/// The presets of its namespace applied to a VMI being created (virt-api's VMI mutator);
/// other requests are left as they are.
async fn apply_presets(
    client: &Client,
    request: &mut serde_json::Value,
) -> Result<Vec<String>, admission::Refusal> {
    let is_vmi_create = request["operation"] == "CREATE"
        && request["resource"]["group"] == "kubevirt.io"
        && request["resource"]["resource"] == "virtualmachineinstances";
    if !is_vmi_create {
        return Ok(Vec::new());
    }
    let namespace = request["namespace"].as_str().unwrap_or_default();
    let presets: kube::Api<api::kubevirt::VirtualMachineInstancePreset> =
        kube::Api::namespaced(client.clone(), namespace);
    let listed = presets
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|err| admission::Refusal::new(500, format!("listing presets: {err}")))?;
    let presets: Vec<serde_json::Value> = listed
        .items
        .iter()
        .filter_map(|preset| serde_json::to_value(preset).ok())
        .collect();
    admission::kubevirt::preset::apply_presets(&mut request["object"], &presets)
}

/// A Kubernetes Status answer.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = code;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = code;
    response
}

/// Writes `ca_pem` as the caBundle of the group's APIServices and of the webhooks, and keeps
/// it there.
async fn publish_ca_bundle(client: &Client, ca_pem: &str, webhooks: &str) -> anyhow::Result<()> {
    let mut holders = Vec::new();
    for version in virt::subresources::VERSIONS {
        let name = format!("{version}.{}", virt::subresources::GROUP);
        if !ca_bundles::publish_apiservice_ca(client, &name, ca_pem).await? {
            anyhow::bail!("APIService {name} is missing: apply deploy/virt/virt-api.yaml");
        }
        holders.push(Holder::ApiService(name));
    }
    ca_bundles::publish_webhook_ca(client, webhooks, ca_pem).await?;
    holders.push(Holder::Mutating(webhooks.to_owned()));
    ca_bundles::keep(client.clone(), ca_pem.to_owned(), holders);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_discovery_version_and_health_are_open() {
        let group = "/apis/subresources.kubevirt.io";
        for open in [
            "",
            "/",
            "/v1",
            "/v1alpha3/",
            "/v1/version",
            "/v1alpha3/healthz",
        ] {
            assert!(is_open(&format!("{group}{open}")), "{open}");
        }
        for closed in [
            "/v2",
            "/v2/version",
            "/v1/namespaces/ns/virtualmachineinstances/vmi/console",
            "/v1/namespaces/ns/virtualmachines/vm",
            "x/v1",
        ] {
            assert!(!is_open(&format!("{group}{closed}")), "{closed}");
        }
    }

    #[test]
    fn subresource_paths_become_access_review_attributes() {
        let path =
            "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vmi/console";
        let attributes = resource_attributes(&Method::GET, path).expect("attributes");
        assert_eq!(attributes.verb.as_deref(), Some("get"));
        assert_eq!(
            attributes.group.as_deref(),
            Some("subresources.kubevirt.io")
        );
        assert_eq!(
            attributes.resource.as_deref(),
            Some("virtualmachineinstances")
        );
        assert_eq!(attributes.subresource.as_deref(), Some("console"));
        assert_eq!(attributes.namespace.as_deref(), Some("ns"));
        assert_eq!(attributes.name.as_deref(), Some("vmi"));
        let start = "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start";
        let attributes = resource_attributes(&Method::PUT, start).expect("attributes");
        assert_eq!(attributes.verb.as_deref(), Some("update"));
        assert_eq!(attributes.subresource.as_deref(), Some("start"));
        assert!(
            resource_attributes(&Method::GET, "/apis/subresources.kubevirt.io/v1/version")
                .is_none()
        );
        let encoded = "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/v%6d/start";
        assert!(
            resource_attributes(&Method::PUT, encoded).is_none(),
            "refused, not reviewed as v%6d"
        );
    }
}
