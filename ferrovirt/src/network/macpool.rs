//! The MAC pool on the platform (kubemacpool) and the NetworkAddonsConfig operator (CNAO)
//! that configures it. On `ferrovirt up` both run in-process: the pool's admission is a
//! plugin of the embedded API server and its watches, collision detection, the
//! NetworkAddonsConfig controller and a Prometheus endpoint are tasks of the control plane.
//! On a cluster `ferrovirt macpool` is kubemacpool's manager: the mutating webhook
//! `mutatevirtualmachines.kubemacpool.io` at `/mutate-virtualmachines` (HTTPS), collision
//! detection, and the metrics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::{Api, Client};
use operators::install::cnao;
use operators::macpool::metrics::MacPoolMetrics;
use operators::macpool::{self, KubeMacPool, MacPoolConfig, Operation, OptMode};
use serde_json::{Value, json};
use standalone::apiserver::{
    AdmissionPlugin, AdmissionRequest, Persist, Refusal, Resources, Wording,
};

use crate::webhooks::review;

/// How long `up` waits for the pool to be loaded from the stored VirtualMachines.
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// The pool `ferrovirt up` runs: CNAO's namespace, the wait time CNAO deploys kubemacpool
/// with unless `wait_time` says otherwise, namespaces opted out by label.
pub fn local_pool(wait_time: Option<Duration>) -> Arc<KubeMacPool> {
    KubeMacPool::new(MacPoolConfig {
        namespace: cnao::OPERAND_NAMESPACE.to_owned(),
        wait_time: wait_time.unwrap_or(macpool::CNAO_WAIT_TIME),
        opt_mode: OptMode::OptOut,
    })
}

/// The embedded API server's admission plugin of the pool (creates and updates of the
/// kinds it gives MACs to, which it picks).
pub fn embedded_admission(pool: &Arc<KubeMacPool>) -> AdmissionPlugin {
    let pool = pool.clone();
    let mutate = Box::new(move |request: &AdmissionRequest, object: &mut Value| {
        // A dry run is neither given MACs nor counted, as the cluster webhook skips it.
        if request.write.persist == Persist::DryRun {
            return Ok(Vec::new());
        }
        let rt = request.resource;
        let admitted = pool.admit(&rt.group, &rt.plural, object);
        admitted
            .map(|()| Vec::new())
            .map_err(|message| Refusal::new(422, message))
    });
    AdmissionPlugin::mutating(
        macpool::VM_WEBHOOK,
        Resources::All,
        Wording::InvalidObject,
        mutate,
    )
}

/// Starts, against the embedded API server, what makes the pool run: the `cluster`
/// NetworkAddonsConfig (created with `kubeMacPool: {}` when there is none, as HCO creates
/// it), reconciled once so the range ConfigMap exists, then its controller; the pool's
/// watches, collision detection, and the metrics endpoint on `metrics_listen`. Returns once
/// the pool is loaded (VirtualMachine admissions are refused until then), with the metrics
/// endpoint's address.
pub async fn start_local(
    client: &Client,
    pool: &Arc<KubeMacPool>,
    metrics_listen: SocketAddr,
) -> anyhow::Result<SocketAddr> {
    seed_network_addons_config(client).await?;
    cnao::sync_cluster(client.clone(), cnao::OPERAND_NAMESPACE)
        .await
        .context("deploying NetworkAddonsConfig cluster")?;
    // The pool runs in this process: nothing for the operator to deploy.
    tokio::spawn(cnao::run(
        client.clone(),
        cnao::OPERAND_NAMESPACE.to_owned(),
        None,
    ));
    let running = pool.clone();
    let watching = client.clone();
    tokio::spawn(async move {
        let err = running.run(watching).await;
        tracing::error!(%err, "the MAC pool stopped");
    });
    tokio::spawn(macpool::collision::run(pool.clone(), client.clone()));
    let metrics = serve_metrics(metrics_listen, pool.metrics()).await?;
    tokio::time::timeout(LOAD_TIMEOUT, pool.wait_ready())
        .await
        .context("the MAC pool was not loaded from the stored VirtualMachines in time")?;
    Ok(metrics)
}

/// Creates NetworkAddonsConfig `cluster` with the MAC pool unless one exists.
async fn seed_network_addons_config(client: &Client) -> anyhow::Result<()> {
    let configs: Api<api::cnao::NetworkAddonsConfig> = Api::all(client.clone());
    if configs.get_opt(api::cnao::CLUSTER).await?.is_some() {
        return Ok(());
    }
    let config: api::cnao::NetworkAddonsConfig = serde_json::from_value(json!({
        "apiVersion": "networkaddonsoperator.network.kubevirt.io/v1",
        "kind": "NetworkAddonsConfig",
        "metadata": {"name": api::cnao::CLUSTER},
        "spec": {"kubeMacPool": {}},
    }))?;
    match configs.create(&Default::default(), &config).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err).context("creating NetworkAddonsConfig cluster"),
    }
}

/// Serves `metrics` in Prometheus' text format at `/metrics` on `addr` (plain HTTP).
pub async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<MacPoolMetrics>,
) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening for metrics on {addr}"))?;
    let bound = listener.local_addr()?;
    let router = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    metrics.encode(),
                )
            }
        }),
    );
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            tracing::warn!(%err, "the metrics server stopped");
        }
    });
    Ok(bound)
}

#[derive(clap::Args)]
pub struct MacPoolArgs {
    /// Address of the webhook server (HTTPS).
    #[arg(long, default_value = "0.0.0.0:8000")]
    listen: SocketAddr,
    /// Address of the metrics endpoint (plain HTTP, `/metrics`).
    #[arg(long, default_value = "0.0.0.0:8443")]
    metrics_listen: SocketAddr,
    /// The namespace of the range ConfigMap and of the webhook's Service.
    #[arg(long, env = "POD_NAMESPACE", default_value = cnao::OPERAND_NAMESPACE)]
    namespace: String,
    /// The Service in front of this server (its certificate names it).
    #[arg(long, default_value = macpool::WEBHOOK_SERVICE)]
    service: String,
    /// The MutatingWebhookConfiguration whose caBundle this server keeps and whose VM
    /// webhook's namespaceSelector says whether namespaces opt in or out.
    #[arg(long, default_value = macpool::WEBHOOK_CONFIGURATION)]
    configuration: String,
    /// Seconds a MAC allocated for a VirtualMachine that is never stored stays allocated.
    #[arg(long = "wait-time", default_value_t = macpool::DEFAULT_WAIT_TIME.as_secs())]
    wait_time: u64,
}

/// kubemacpool's manager on a cluster.
pub async fn run(args: MacPoolArgs) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = crate::cluster::component_client().await?;
    let opt_mode = opt_mode(&client, &args.configuration).await?;
    let pool = KubeMacPool::new(MacPoolConfig {
        namespace: args.namespace.clone(),
        wait_time: Duration::from_secs(args.wait_time),
        opt_mode,
    });
    let running = pool.clone();
    let watching = client.clone();
    let watches = tokio::spawn(async move { running.run(watching).await });
    tokio::spawn(macpool::collision::run(pool.clone(), client.clone()));
    let metrics = serve_metrics(args.metrics_listen, pool.metrics()).await?;
    eprintln!("metrics on http://{metrics}/metrics");
    let tls = serving_tls(&client, &args).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    eprintln!("kubemacpool webhook on https://{}", listener.local_addr()?);
    let serving = pool.clone();
    let server = uploadproxy::tls::serve(listener, tls, move |request, _peer| {
        let pool = serving.clone();
        async move { handle(&pool, request).await }
    });
    tokio::select! {
        stopped = watches => bail!("{}", stopped.map_or_else(|e| e.to_string(), |e| e.to_string())),
        stopped = server => bail!("the webhook server stopped: {stopped:?}"),
    }
}

/// Opted in when the VM webhook selects namespaces labelled `…=allocate`, else opted out
/// (CNAO's deployment), as kubemacpool reads it from its configuration.
async fn opt_mode(client: &Client, configuration: &str) -> anyhow::Result<OptMode> {
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let Some(found) = configurations.get_opt(configuration).await? else {
        return Ok(OptMode::OptOut);
    };
    let selector = found
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .find(|w| w.name == macpool::VM_WEBHOOK)
        .and_then(|w| w.namespace_selector);
    let opted_in = selector.is_some_and(|s| {
        s.match_expressions.unwrap_or_default().iter().any(|e| {
            e.key == macpool::VM_WEBHOOK
                && e.operator == "In"
                && e.values.as_deref() == Some(&["allocate".to_owned()])
        }) || s
            .match_labels
            .is_some_and(|l| l.get(macpool::VM_WEBHOOK).map(String::as_str) == Some("allocate"))
    });
    Ok(if opted_in {
        OptMode::OptIn
    } else {
        OptMode::OptOut
    })
}

async fn serving_tls(
    client: &Client,
    args: &MacPoolArgs,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let (service, namespace) = (&args.service, &args.namespace);
    // One CA for every replica, kept in a Secret of the manager's namespace.
    let ca = crate::cluster::shared_ca(client, namespace, "kubemacpool-ca").await?;
    let tls = crate::webhooks::serving::service_tls(
        &ca,
        service,
        namespace,
        uploadproxy::tls::ClientCerts::None,
    )?;
    crate::cluster::ca_bundles::publish_webhook_ca(client, &args.configuration, ca.cert_pem())
        .await?;
    crate::cluster::ca_bundles::keep(
        client.clone(),
        ca.cert_pem().to_owned(),
        vec![crate::cluster::ca_bundles::Holder::Mutating(
            args.configuration.clone(),
        )],
    );
    Ok(tls)
}

async fn handle(pool: &KubeMacPool, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    match (request.method(), path.as_str()) {
        (&hyper::Method::GET, "/healthz") => {
            review::respond(StatusCode::OK, &json!({"status": "ok"}))
        }
        (&hyper::Method::GET, "/readyz") if pool.is_ready() => {
            review::respond(StatusCode::OK, &json!({"status": "ready"}))
        }
        (&hyper::Method::GET, "/readyz") => review::respond(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "the pool is being loaded"}),
        ),
        (&hyper::Method::POST, macpool::VM_WEBHOOK_PATH) => {
            let review = match review::read_review(request).await {
                Ok(review) => review,
                Err(refused) => return refused,
            };
            let verdict = review_vm(pool, &review["request"]);
            review::answer_review(&review, verdict)
        }
        _ => review::respond(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
    }
}

/// The patch giving a VirtualMachine its MACs, or why it is refused. A dry run is
/// admitted unchanged (nothing may be allocated for it).
fn review_vm(pool: &KubeMacPool, request: &Value) -> admission::review::Verdict {
    let operation = match request["operation"].as_str() {
        Some("CREATE") => Operation::Create,
        Some("UPDATE") => Operation::Update,
        _ => return Ok(None),
    };
    if request["dryRun"] == true {
        return Ok(None);
    }
    let original = request["object"].clone();
    let mut object = original.clone();
    let namespace = request["namespace"].as_str().unwrap_or_default();
    pool.admit_virtual_machine(Some(operation), namespace, &mut object)
        .map_err(|err| admission::Refusal::new(500, err.message()))?;
    admission::review::patch_between(&original, &object)
}
