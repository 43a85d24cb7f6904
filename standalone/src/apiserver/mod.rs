//! The embedded Kubernetes-compatible API server: objects in SQLite, served over HTTPS on
//! loopback with the REST semantics kubectl, kube-rs and client-go rely on.

mod admission;
mod admission_server;
mod aggregated;
mod apiservice;
mod authz;
mod conversion;
mod converter;
mod crd_schema;
mod credentials;
mod discovery;
mod errors;
mod event_view;
mod front_proxy;
mod gc;
mod identity;
pub mod kube_protobuf;
mod managed_fields;
mod object;
mod objects;
mod openapi;
mod openapi_v2;
mod patch;
mod pod_log;
mod pod_placement;
mod priority_class;
mod query;
mod resource_claim;
mod resources;
mod route;
mod scale;
mod selector;
mod server;
mod service_account_token;
mod store;
mod table;
mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use front_proxy::FrontProxyIdentity;

pub use self::admission::{
    AdmissionPlugin, AdmissionRequest, Hook, Mutate, Operation, Origin, Refusal, Resources,
    Validate, Wording, Write,
};
pub use aggregated::{AggregatedApi, AggregatedBody, AggregatedService, BoxError};
pub use converter::Converter;
pub use credentials::{Credentials, CredentialsError};
pub use errors::ApiError;
pub use identity::{ResourceAttributes, UserInfo};
pub use objects::{Objects, Outcome};
pub use resources::ResourceType;
pub use server::VirtualCreate;
pub use store::Persist;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("creating the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("opening the database: {0}")]
    Store(ApiError),
    #[error("listening on {addr}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("creating {what}: {source}")]
    Seed { what: String, source: ApiError },
}

/// How to start the server.
pub struct ApiServerConfig {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// CRDs installed (created or updated) at start, as JSON objects.
    pub crds: Vec<Value>,
    /// The platform's admission plugins (its webhooks, run in-process), in the order they
    /// run after the built-in ones; more may be registered later.
    pub admission: Vec<AdmissionPlugin>,
    /// Resources answered by a function instead of stored, keyed by (group, plural).
    pub virtual_creates: HashMap<(String, String), Box<VirtualCreate>>,
}

/// A running API server.
pub struct ApiServer {
    pub addr: SocketAddr,
    pub kubeconfig: PathBuf,
    pub objects: Arc<Objects>,
    aggregated: Arc<aggregated::AggregatedApis>,
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl ApiServer {
    pub async fn start(config: ApiServerConfig) -> Result<ApiServer, StartError> {
        let dir = &config.data_dir;
        std::fs::create_dir_all(dir).map_err(|source| StartError::DataDir {
            path: dir.clone(),
            source,
        })?;
        let credentials = Credentials::load_or_create(dir)?;
        let service_accounts = service_account_token::ServiceAccountTokens::load_or_create(dir)?;
        let store = store::Store::open(&dir.join("state.sqlite")).map_err(StartError::Store)?;
        let objects = Objects::new(store, resources::Registry::with_builtins());
        for plugin in config.admission {
            objects.register_admission(plugin);
        }
        objects.load_crds().map_err(StartError::Store)?;
        let objects = Arc::new(objects);
        seed(&objects, &config.crds)?;
        let front_proxy = FrontProxyIdentity::load_or_create(dir)?;
        publish_front_proxy(&objects, &front_proxy)?;
        let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
        gc::spawn(objects.clone(), shutdown_rx.clone());
        let aggregated = Arc::new(aggregated::AggregatedApis::default());
        apiservice::spawn(
            objects.clone(),
            aggregated.clone(),
            front_proxy,
            shutdown_rx.clone(),
        );

        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| StartError::Listen {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
        let acceptor = TlsAcceptor::from(credentials.server_config()?);
        let handler = Arc::new(server::Handler {
            objects: objects.clone(),
            token: credentials.token.clone(),
            virtual_creates: config.virtual_creates,
            aggregated: aggregated.clone(),
            pod_state_dir: crate::pod_files::state_dir(dir),
            protobuf: kube_protobuf::Messages::new(),
            service_accounts,
        });
        tokio::spawn(server::serve(listener, acceptor, handler, shutdown_rx));
        let kubeconfig = dir.join("kubeconfig");
        credentials::write_private(
            &kubeconfig,
            &credentials.kubeconfig(&format!("https://{addr}")),
        )?;
        tracing::info!(%addr, kubeconfig = %kubeconfig.display(), "API server listening");
        Ok(ApiServer {
            addr,
            kubeconfig,
            objects,
            aggregated,
            shutdown,
        })
    }

    /// Serves `api`'s group from now on (replacing an API of the same group), as creating
    /// its APIService does with kube-aggregator; it wins over APIServices of the group.
    /// APIs are registered after the server starts because their services usually need a
    /// client of it.
    pub fn register_aggregated_api(&self, api: AggregatedApi) {
        tracing::info!(group = %api.group, versions = ?api.versions, "serving an aggregated API");
        self.aggregated.register(api);
    }

    /// Converts `converter`'s kind between its versions from now on, as a CRD's conversion
    /// webhook does once it answers; a pure function, registered as the kind's component
    /// registers its webhooks.
    pub fn register_converter(&self, converter: Converter) {
        tracing::info!(group = %converter.group, kind = %converter.kind, "converting with an in-process webhook");
        self.objects.registry.register_converter(converter);
    }

    /// Runs `plugin` from now on, as registering a webhook configuration does; most
    /// webhooks are registered after the server starts because they need a client of it.
    pub fn register_admission(&self, plugin: AdmissionPlugin) {
        tracing::info!(webhook = %plugin.name, mutating = plugin.is_mutating(), "admitting with an in-process webhook");
        self.objects.register_admission(plugin);
    }

    /// Stops accepting connections, ends the garbage collector, and ends open connections:
    /// idle ones at once, a request in flight (or a watch) within a grace period, and
    /// upgraded ones (WebSockets) by ending what their service reads.
    pub fn stop(&self) {
        let _ = self.shutdown.send(true);
    }

    pub fn data_dir_kubeconfig(dir: &Path) -> PathBuf {
        dir.join("kubeconfig")
    }
}

/// The objects every cluster has: its system namespaces and priority classes, and the CRDs
/// of this platform.
fn seed(objects: &Objects, crds: &[Value]) -> Result<(), StartError> {
    let registry = &objects.registry;
    let namespaces = registry
        .find("", "v1", "namespaces")
        .expect("namespaces are built in");
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let namespace = json!({"metadata": {"name": name}});
        create_if_missing(objects, &namespaces, "v1", "", namespace)?;
    }
    let priority_classes = registry
        .find(priority_class::GROUP, "v1", priority_class::PLURAL)
        .expect("priority classes are built in");
    for class in priority_class::system_classes() {
        create_if_missing(objects, &priority_classes, "v1", "", class)?;
    }
    let crd_type = registry
        .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .expect("CRDs are built in");
    for crd in crds {
        create_or_replace(objects, &crd_type, "v1", "", crd).map_err(|source| {
            StartError::Seed {
                what: format!("CRD {}", object::name(crd)),
                source,
            }
        })?;
    }
    Ok(())
}

/// Publishes the front-proxy settings for extension API servers as kube-apiserver does, in
/// ConfigMap `kube-system/extension-apiserver-authentication` (written anew at each start).
/// This server takes no client certificates, so the ConfigMap has no `client-ca-file`.
fn publish_front_proxy(objects: &Objects, identity: &FrontProxyIdentity) -> Result<(), StartError> {
    let configmaps = objects
        .registry
        .find("", "v1", "configmaps")
        .expect("configmaps are built in");
    let configmap = identity.configmap(None);
    create_or_replace(
        objects,
        &configmaps,
        "v1",
        front_proxy::CONFIGMAP_NAMESPACE,
        &configmap,
    )
    .map_err(|source| StartError::Seed {
        what: format!("ConfigMap {}", front_proxy::CONFIGMAP_NAME),
        source,
    })
}

/// Creates `object`, or replaces the stored one of its name.
fn create_or_replace(
    objects: &Objects,
    rt: &ResourceType,
    version: &str,
    ns: &str,
    object: &Value,
) -> Result<(), ApiError> {
    let name = object::name(object);
    match objects.get(rt, ns, name) {
        Ok(current) => {
            let mut updated = object.clone();
            updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            objects.update(rt, version, ns, name, updated, object::UpdateTarget::Main)?;
        }
        Err(ApiError::NotFound { .. }) => {
            objects.create(rt, version, ns, object.clone())?;
        }
        Err(err) => return Err(err),
    }
    Ok(())
}

/// Creates an object unless one of that name exists.
pub fn create_if_missing(
    objects: &Objects,
    rt: &ResourceType,
    version: &str,
    ns: &str,
    object: Value,
) -> Result<(), StartError> {
    match objects.create(rt, version, ns, object) {
        Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
        Err(source) => Err(StartError::Seed {
            what: rt.kind.clone(),
            source,
        }),
    }
}
