//! `ferrovirt webhook`: the admission webhook of CDI's API server on a cluster. For
//! DataVolumes (and DataSources, DataImportCrons) it applies the defaulting and validation of
//! `admission::admit`, and for a DataVolume that clones from another namespace CDI's permission
//! check (a SubjectAccessReview for the requesting user) and the clone token the controller
//! requires.
//!
//! It keeps what it needs in the cluster, as CDI's operator does: the token signing key in
//! Secret `cdi-api-signing-key` (where the controller reads the public half), and a serving
//! certificate from the CA of Secret `ferrovirt-webhook-ca` (made by the first replica to
//! start, so replicas and a rolling update's pods agree), whose bundle it writes into its
//! MutatingWebhookConfiguration.
//!
//! It also serves SSP's virt-template-validator (`admission::ssp::template_validator`): VirtualMachines
//! at `/virtualmachine-validate`, checked against the validation rules of the VM or of the
//! Template its labels name, and Template deletions at `/template-validate`. Its CA goes into
//! the ValidatingWebhookConfiguration `virt-template-validator` when that exists.
//!
//! And, as cdi-apiserver, the UploadTokenRequest API behind APIService
//! `v1beta1.upload.cdi.kubevirt.io` ([`upload_token_api`]), signing with the same key, and
//! the CDI CR's uninstall guard at `/cdi-validate` (ValidatingWebhookConfiguration
//! `cdi-api-validate`, [`crate::webhooks::install`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use admission::Refusal;
use admission::cdi::clone_auth::{
    CDI_GROUP, CloneSource, DeclaredSource, declared_source, denial, source_of,
    sufficient_permissions,
};
use admission::review::{Verdict, admit_request, patch_between};
use admission::ssp::template_validator::{
    self as validator, TEMPLATE_VALIDATE_PATH, VM_VALIDATE_PATH,
};
use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes as SarAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use uploadproxy::UploadTokenIssuer;

use crate::cluster::ca_bundles::{
    self, Holder, publish_apiservice_ca, publish_validating_ca, publish_webhook_ca,
};
use crate::cluster::front_proxy::FrontProxy;
use crate::upload::token_api::{self, UploadTokenApi};
use crate::webhooks::clone_auth;
use crate::webhooks::install::{self, CDI_DELETE_PATH, KubeCluster};
use crate::webhooks::review::{answer_review, answer_with, read_review, respond};
use crate::webhooks::serving::service_tls;
use uploadproxy::tls::ClientCerts;

/// The Secret holding the token signing key, as CDI names it.
pub const SIGNING_KEY_SECRET: &str = operators::CLONE_TOKEN_SECRET;
const PRIVATE_KEY: &str = "id_rsa";
const PUBLIC_KEY: &str = operators::CLONE_TOKEN_PUBLIC_KEY;
/// The path the MutatingWebhookConfiguration calls.
pub const MUTATE_PATH: &str = "/datavolume-mutate";
/// The Secret (in the webhook's namespace) holding the CA of its serving certificate.
const SERVING_CA: &str = "ferrovirt-webhook-ca";

#[derive(clap::Args)]
pub struct WebhookArgs {
    /// Address to serve HTTPS on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// The namespace of the webhook's Service and Secrets.
    #[arg(long, env = "POD_NAMESPACE", default_value = "cdi")]
    namespace: String,
    /// The Service in front of this server (its certificate names it).
    #[arg(long, default_value = "ferrovirt-webhook")]
    service: String,
    /// The MutatingWebhookConfiguration whose caBundle this server keeps.
    #[arg(long, default_value = "ferrovirt-datavolume-mutate")]
    configuration: String,
    /// The ValidatingWebhookConfiguration of the template validator, whose caBundle this
    /// server keeps when it exists.
    #[arg(long, default_value = validator::WEBHOOK_CONFIGURATION)]
    validating_configuration: String,
    /// The ValidatingWebhookConfiguration of the CDI CR's uninstall guard, whose caBundle
    /// this server keeps when it exists.
    #[arg(long, default_value = "cdi-api-validate")]
    cdi_validating_configuration: String,
    /// The APIService of the UploadTokenRequest API, whose caBundle this server keeps when
    /// it exists.
    #[arg(long, default_value = "v1beta1.upload.cdi.kubevirt.io")]
    api_service: String,
}

pub async fn run(args: WebhookArgs) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = crate::cluster::component_client().await?;
    let issuer = Arc::new(signing_key(&client, &args.namespace).await?);
    // Without kube-aggregator's request-header CA the UploadTokenRequest API cannot tell
    // its requests from anyone's; the webhooks still serve.
    let front_proxy = read_front_proxy(&client).await;
    let client_certs = front_proxy
        .as_ref()
        .map_or(ClientCerts::None, |front_proxy| {
            ClientCerts::Optional(front_proxy.roots.clone())
        });
    let tls = serving_tls(&client, &args, client_certs).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    eprintln!("webhook on https://{}", listener.local_addr()?);
    let reviewer = Arc::new(Reviewer {
        uploads: UploadTokenApi {
            client: client.clone(),
            issuer: issuer.clone(),
            front_proxy,
        },
        guards: KubeCluster::new(client.clone()),
        client,
        issuer,
    });
    let server = uploadproxy::tls::serve(listener, tls, move |request, peer| {
        let reviewer = reviewer.clone();
        async move {
            if token_api::serves(request.uri().path()) {
                return reviewer.uploads.handle(request, &peer).await;
            }
            reviewer.handle(request).await
        }
    });
    server.await.context("the webhook server stopped")?;
    Ok(())
}

/// kube-aggregator's identity, tried for a while (the binding that lets this server read
/// it may land after the server starts); without it the UploadTokenRequest API refuses.
async fn read_front_proxy(client: &Client) -> Option<FrontProxy> {
    const ATTEMPTS: u32 = 15;
    for attempt in 1..=ATTEMPTS {
        match FrontProxy::read(client).await {
            Ok(front_proxy) => return Some(front_proxy),
            Err(err) if attempt == ATTEMPTS => {
                tracing::warn!(err = %format!("{err:#}"), "not serving UploadTokenRequests");
            }
            Err(err) => {
                tracing::info!(err = %format!("{err:#}"), attempt, "reading the front proxy's CA");
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
        }
    }
    None
}

/// The signing key from its Secret, made and stored there the first time.
pub async fn signing_key(client: &Client, namespace: &str) -> anyhow::Result<UploadTokenIssuer> {
    let data = crate::cluster::shared_secret(client, namespace, SIGNING_KEY_SECRET, || {
        let issuer = UploadTokenIssuer::generate()?;
        Ok(BTreeMap::from([
            (PRIVATE_KEY.to_owned(), issuer.private_key_pem()),
            (PUBLIC_KEY.to_owned(), issuer.public_key_pem().to_owned()),
        ]))
    })
    .await?;
    let secret = format!("{namespace}/{SIGNING_KEY_SECRET}");
    let pem = crate::cluster::secret_key(&data, &secret, PRIVATE_KEY)?;
    UploadTokenIssuer::from_pem(pem).context("reading the signing key")
}

/// A serving certificate for the Service from the CA of Secret [`SERVING_CA`] (shared by
/// every replica, so a rolling update does not swap the bundle under the API server),
/// whose bundle goes into every webhook of the configuration.
async fn serving_tls(
    client: &Client,
    args: &WebhookArgs,
    client_certs: ClientCerts,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let (service, namespace) = (&args.service, &args.namespace);
    let ca = crate::cluster::shared_ca(client, namespace, SERVING_CA).await?;
    let tls = service_tls(&ca, service, namespace, client_certs)?;
    publish_webhook_ca(client, &args.configuration, ca.cert_pem()).await?;
    // Without the template validator's configuration this server is CDI's webhook only.
    publish_validating_ca(client, &args.validating_configuration, ca.cert_pem()).await?;
    publish_validating_ca(client, &args.cdi_validating_configuration, ca.cert_pem()).await?;
    if !publish_apiservice_ca(client, &args.api_service, ca.cert_pem()).await? {
        tracing::info!(api_service = %args.api_service, "no APIService to keep");
    }
    ca_bundles::keep(
        client.clone(),
        ca.cert_pem().to_owned(),
        vec![
            Holder::Mutating(args.configuration.clone()),
            Holder::Validating(args.validating_configuration.clone()),
            Holder::Validating(args.cdi_validating_configuration.clone()),
            Holder::ApiService(args.api_service.clone()),
        ],
    );
    Ok(tls)
}

struct Reviewer {
    client: Client,
    issuer: Arc<UploadTokenIssuer>,
    uploads: UploadTokenApi,
    guards: KubeCluster,
}

impl Reviewer {
    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path().to_owned();
        if path == CDI_DELETE_PATH {
            return install::handle(&self.guards, &[CDI_DELETE_PATH], request).await;
        }
        let known = [MUTATE_PATH, VM_VALIDATE_PATH, TEMPLATE_VALIDATE_PATH];
        if !known.contains(&path.as_str()) || request.method() != hyper::Method::POST {
            return respond(StatusCode::NOT_FOUND, &json!({"error": "not found"}));
        }
        let review = match read_review(request).await {
            Ok(review) => review,
            Err(refused) => return refused,
        };
        let request = &review["request"];
        match path.as_str() {
            VM_VALIDATE_PATH => answer_with(&review, self.validate_vm(request).await),
            TEMPLATE_VALIDATE_PATH => answer_with(&review, self.validate_template(request).await),
            _ => answer_review(&review, self.review(request).await),
        }
    }

    /// The template validator's answer for a VirtualMachine.
    async fn validate_vm(&self, request: &Value) -> Value {
        let resource = &request["resource"];
        if resource["resource"] != "virtualmachines" {
            let message = format!("expect resource {} to be 'virtualmachines'", gvr(resource));
            return bad_request(&message);
        }
        let vm = &request["object"];
        if request["operation"] == "DELETE" || !vm.is_object() {
            return json!({"allowed": true});
        }
        let template = match validator::template_needed(vm) {
            Some((namespace, name)) => match self.template(&namespace, &name).await {
                Ok(template) => template,
                Err(err) => return bad_request(&err.to_string()),
            },
            None => None,
        };
        let verdict = validator::review_vm(vm, template.as_ref());
        tracing::info!(
            vm = %vm["metadata"]["name"], allowed = verdict.allowed(),
            message = verdict.message().unwrap_or_default(), "template validation"
        );
        let mut response = json!({"allowed": verdict.allowed()});
        if let Some(status) = verdict.status() {
            response["status"] = status;
        }
        if !verdict.warnings.is_empty() {
            response["warnings"] = json!(verdict.warnings);
        }
        response
    }

    /// The Template `namespace/name`, none when it (or the Template kind) does not exist.
    async fn template(&self, namespace: &str, name: &str) -> Result<Option<Value>, kube::Error> {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("template.openshift.io", "v1", "Template"),
            "templates",
        );
        let templates: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        let template = match templates.get_opt(name).await {
            Ok(template) => template,
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(err) => return Err(err),
        };
        Ok(template.and_then(|t| serde_json::to_value(t).ok()))
    }

    /// The template validator's answer for a Template: a deletion is refused while VMs
    /// validate against it.
    async fn validate_template(&self, request: &Value) -> Value {
        if request["operation"] != "DELETE" {
            return json!({"allowed": true});
        }
        let resource = &request["resource"];
        if resource["resource"] != "templates" {
            let message = format!("expected resource {} to be 'templates'", gvr(resource));
            return bad_request(&message);
        }
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
            "virtualmachines",
        );
        let vms: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let vms = match vms.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(err) => return bad_request(&err.to_string()),
        };
        let vms: Vec<Value> = vms
            .into_iter()
            .filter_map(|vm| serde_json::to_value(vm).ok())
            .collect();
        match validator::review_template_deletion(&request["oldObject"], &vms) {
            Some(status) => json!({"allowed": false, "status": status}),
            None => json!({"allowed": true}),
        }
    }

    /// The JSON patch that admits the request's object, or why it is refused.
    async fn review(&self, request: &Value) -> Verdict {
        let Some((original, mut object)) = admit_request(request)? else {
            return Ok(None);
        };
        let is_dv =
            request["kind"]["group"] == CDI_GROUP && request["kind"]["kind"] == "DataVolume";
        if is_dv && request["operation"] == "CREATE" {
            self.authorize_clone(request, &mut object).await?;
        }
        patch_between(&original, &object)
    }

    async fn authorize_clone(&self, request: &Value, dv: &mut Value) -> Result<(), Refusal> {
        let namespace = request["namespace"].as_str().unwrap_or_default();
        let internal = |err: kube::Error| Refusal::new(500, err.to_string());
        let source = match declared_source(dv, namespace) {
            DeclaredSource::None => None,
            DeclaredSource::Direct(source) => Some(source),
            DeclaredSource::DataSource(ds_namespace, name) => {
                let sources: Api<api::cdi::DataSource> =
                    Api::namespaced(self.client.clone(), &ds_namespace);
                let ds = sources.get_opt(&name).await.map_err(internal)?;
                ds.and_then(|ds| serde_json::to_value(ds).ok())
                    .and_then(|ds| source_of(&ds["spec"]["source"], &ds_namespace))
            }
        };
        let Some(source) = source.filter(|s| s.namespace != namespace) else {
            return Ok(());
        };
        let user = &request["userInfo"];
        if !self.may_clone(user, &source).await.map_err(internal)? {
            let name = user["username"].as_str().unwrap_or_default();
            return Err(Refusal::new(403, denial(name, &source)));
        }
        clone_auth::add_token(dv, &self.issuer, &source, namespace)
            .map_err(|err| Refusal::new(500, err))
    }

    /// Asks the API server, for the requesting user, each set of sufficient permissions.
    async fn may_clone(&self, user: &Value, source: &CloneSource) -> Result<bool, kube::Error> {
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let extra = user["extra"]
            .as_object()
            .map(|extra| extra.iter().map(|(k, v)| (k.clone(), strings(v))).collect());
        for set in sufficient_permissions(source) {
            let mut all = true;
            for attributes in &set {
                let review = SubjectAccessReview {
                    spec: SubjectAccessReviewSpec {
                        user: user["username"].as_str().map(str::to_string),
                        uid: user["uid"].as_str().map(str::to_string),
                        groups: Some(strings(&user["groups"])),
                        extra: extra.clone(),
                        resource_attributes: Some(SarAttributes {
                            verb: Some(attributes.verb.clone()),
                            group: Some(attributes.group.clone()),
                            resource: Some(attributes.resource.clone()),
                            subresource: Some(attributes.subresource.clone()),
                            namespace: Some(attributes.namespace.clone()),
                            name: Some(attributes.name.clone()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let answer = reviews.create(&PostParams::default(), &review).await?;
                if !answer.status.is_some_and(|s| s.allowed) {
                    all = false;
                    break;
                }
            }
            if all {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Go's rendering of a GroupVersionResource in upstream's messages: `{group version resource}`.
fn gvr(resource: &Value) -> String {
    let part = |key: &str| resource[key].as_str().unwrap_or_default().to_owned();
    format!(
        "{{{} {} {}}}",
        part("group"),
        part("version"),
        part("resource")
    )
}

/// Upstream's answer to a request it cannot review: refused, code 400.
fn bad_request(message: &str) -> Value {
    json!({"allowed": false, "status": {"message": message, "code": 400}})
}
