//! APIServices (`apiregistration.k8s.io/v1`), kube-aggregator's registration: an APIService
//! with `spec.service` makes its group-version an aggregated API proxied to that Service's
//! backend, and its `Available` condition says whether the backend answers discovery. A task
//! follows the store's changes of APIServices, Services and Endpoints, and checks every
//! APIService again every 10 seconds.

mod endpoint;
mod proxy;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, watch};

use super::aggregated::{AggregatedApis, RemoteVersion};
use super::errors::ApiError;
use super::front_proxy::FrontProxyIdentity;
use super::object::{self, UpdateTarget};
use super::objects::Objects;
use super::patch::{Patch, PatchType};
use super::resources::ResourceType;
use super::store::ChangeEvent;
use endpoint::ServiceReference;
use proxy::{Backend, ProxyError};
use tls::ServerTrust;

/// How often every APIService's backend is checked when nothing changes.
const CHECK_INTERVAL: Duration = Duration::from_secs(10);
const GROUP: &str = "apiregistration.k8s.io";
const PLURAL: &str = "apiservices";
/// The stored resources whose changes can change a registration or its availability.
const WATCHED: [&str; 3] = [
    "apiregistration.k8s.io/apiservices",
    "/services",
    "/endpoints",
];

/// What one APIService asks for.
enum Registration {
    /// `spec.service` is null: this server serves the group-version itself.
    Local,
    /// An in-process aggregated API serves the group already, and wins.
    InProcess { group: String },
    /// Proxied to a backend.
    Remote {
        group: String,
        version: String,
        backend: Arc<Backend>,
    },
    /// A spec that names no group, version or service.
    Invalid(String),
}

/// An APIService's `Available` condition.
#[derive(Debug, Clone, PartialEq)]
struct Availability {
    available: bool,
    reason: String,
    message: String,
}

impl Availability {
    fn yes(reason: &str, message: &str) -> Self {
        Availability {
            available: true,
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn no(reason: &str, message: String) -> Self {
        Availability {
            available: false,
            reason: reason.into(),
            message,
        }
    }
}

/// Registers the proxies of APIServices and keeps their status.
pub struct ApiServiceController {
    objects: Arc<Objects>,
    apis: Arc<AggregatedApis>,
    identity: FrontProxyIdentity,
    apiservice_type: ResourceType,
}

/// Runs the controller until `shutdown` changes.
pub fn spawn(
    objects: Arc<Objects>,
    apis: Arc<AggregatedApis>,
    identity: FrontProxyIdentity,
    shutdown: watch::Receiver<bool>,
) {
    let Some(apiservice_type) = objects.registry.find(GROUP, "v1", PLURAL) else {
        tracing::warn!("APIServices are not served: no proxies to extension API servers");
        return;
    };
    let changes = objects.store.subscribe();
    let controller = ApiServiceController {
        objects,
        apis,
        identity,
        apiservice_type,
    };
    tokio::spawn(controller.run(changes, shutdown));
}

impl ApiServiceController {
    async fn run(
        self,
        mut changes: broadcast::Receiver<Arc<ChangeEvent>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut ticks = tokio::time::interval(CHECK_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = ticks.tick() => {}
                more = next_relevant_change(&mut changes) => if !more { return },
            }
            // Changes made meanwhile are covered by this round.
            while let Ok(_) | Err(TryRecvError::Lagged(_)) = changes.try_recv() {}
            if let Err(err) = self.sync().await {
                tracing::warn!(%err, "syncing APIServices failed");
            }
        }
    }

    /// Registers every APIService's proxy, then checks each and writes its status.
    async fn sync(&self) -> Result<(), ApiError> {
        let objects = self.objects.clone();
        let key = self.apiservice_type.storage_key();
        let (apiservices, _) =
            tokio::task::spawn_blocking(move || objects.store.list(&key, None, None))
                .await
                .map_err(ApiError::internal)??;
        let registrations: Vec<(Value, Registration)> = apiservices
            .into_iter()
            .map(|apiservice| {
                let registration = self.registration(&apiservice);
                (apiservice, registration)
            })
            .collect();
        self.apis.replace_remote(
            registrations
                .iter()
                .filter_map(|(apiservice, registration)| remote_version(apiservice, registration))
                .collect(),
        );
        let checks = registrations
            .iter()
            .map(|(_, registration)| availability(registration));
        let availabilities = futures_util::future::join_all(checks).await;
        let statuses: Vec<(Value, Availability)> = registrations
            .into_iter()
            .map(|(apiservice, _)| apiservice)
            .zip(availabilities)
            .collect();
        let objects = self.objects.clone();
        let rt = self.apiservice_type.clone();
        tokio::task::spawn_blocking(move || {
            for (apiservice, availability) in &statuses {
                write_status(&objects, &rt, apiservice, availability)?;
            }
            Ok(())
        })
        .await
        .map_err(ApiError::internal)?
    }

    /// What `apiservice` asks for, its backend ready to take requests.
    fn registration(&self, apiservice: &Value) -> Registration {
        let spec = &apiservice["spec"];
        if spec["service"].is_null() {
            return Registration::Local;
        }
        let (Some(group), Some(version)) = (spec["group"].as_str(), spec["version"].as_str())
        else {
            return Registration::Invalid("spec.group and spec.version are required".into());
        };
        let name = apiservice["metadata"]["name"].as_str().unwrap_or_default();
        if name != format!("{version}.{group}") {
            return Registration::Invalid(format!(
                "metadata.name must be {version}.{group} (spec.version.spec.group)"
            ));
        }
        // kube-aggregator keeps the groups kube-apiserver serves itself Local: an APIService
        // must not take over a built-in group or a CRD's.
        if self
            .objects
            .registry
            .all()
            .iter()
            .any(|rt| rt.group == group)
        {
            return Registration::Invalid(format!(
                "group {group:?} is served by this API server itself (a built-in or a CRD)"
            ));
        }
        if self.apis.serves_in_process(group) {
            return Registration::InProcess {
                group: group.into(),
            };
        }
        let service = match service_reference(&spec["service"]) {
            Ok(service) => service,
            Err(message) => return Registration::Invalid(message),
        };
        let tls = self.client_config(spec);
        Registration::Remote {
            group: group.into(),
            version: version.into(),
            backend: Arc::new(Backend::new(self.objects.clone(), service, tls)),
        }
    }

    /// The TLS client settings `spec` asks for.
    fn client_config(&self, spec: &Value) -> Result<Arc<rustls::ClientConfig>, String> {
        if spec["insecureSkipTLSVerify"].as_bool() == Some(true) {
            return tls::client_config(&self.identity, ServerTrust::Anything);
        }
        let bundle = match spec["caBundle"].as_str() {
            Some(encoded) => STANDARD
                .decode(encoded)
                .map_err(|e| format!("spec.caBundle: {e}"))?,
            None => Vec::new(),
        };
        tls::client_config(&self.identity, ServerTrust::CaBundle(&bundle))
    }
}

/// Waits for a change of a watched resource; false once the store's stream ends.
async fn next_relevant_change(changes: &mut broadcast::Receiver<Arc<ChangeEvent>>) -> bool {
    loop {
        match changes.recv().await {
            Ok(event) if WATCHED.contains(&event.resource.as_str()) => return true,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return true,
            Err(RecvError::Closed) => return false,
        }
    }
}

/// `spec.service` of an APIService: namespace and name required, the port 443 by default.
fn service_reference(service: &Value) -> Result<ServiceReference, String> {
    let (Some(namespace), Some(name)) = (service["namespace"].as_str(), service["name"].as_str())
    else {
        return Err("spec.service: namespace and name are required".into());
    };
    let port = match service["port"].as_i64() {
        None => endpoint::DEFAULT_PORT,
        Some(port) => u16::try_from(port)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("spec.service.port: Invalid value: {port}"))?,
    };
    Ok(ServiceReference {
        namespace: namespace.into(),
        name: name.into(),
        port,
    })
}

/// The aggregated API a remote registration serves.
fn remote_version(apiservice: &Value, registration: &Registration) -> Option<RemoteVersion> {
    let Registration::Remote {
        group,
        version,
        backend,
    } = registration
    else {
        return None;
    };
    Some(RemoteVersion {
        group: group.clone(),
        version: version.clone(),
        version_priority: apiservice["spec"]["versionPriority"].as_i64().unwrap_or(0),
        service: backend.clone().into_service(),
    })
}

/// Whether a registration's API is available, by kube-aggregator's checks and reasons.
async fn availability(registration: &Registration) -> Availability {
    match registration {
        Registration::Local => Availability::yes("Local", "Local APIServices are always available"),
        Registration::InProcess { group } => Availability::no(
            "ServedInProcess",
            format!("group {group} is served by an in-process API of this server, which wins"),
        ),
        Registration::Invalid(message) => Availability::no("InvalidSpec", message.clone()),
        Registration::Remote {
            group,
            version,
            backend,
        } => match backend.resolve().await {
            Err(ProxyError::Endpoint(err)) => Availability::no(err.reason(), err.to_string()),
            Err(err) => Availability::no("FailedDiscoveryCheck", err.to_string()),
            Ok(_) => match backend.check_discovery(group, version).await {
                Ok(()) => Availability::yes("Passed", "all checks passed"),
                Err(message) => Availability::no("FailedDiscoveryCheck", message),
            },
        },
    }
}

/// Writes the `Available` condition of `apiservice` unless it says that already; the
/// transition time moves only when the status does.
fn write_status(
    objects: &Objects,
    rt: &ResourceType,
    apiservice: &Value,
    availability: &Availability,
) -> Result<(), ApiError> {
    let status = if availability.available {
        "True"
    } else {
        "False"
    };
    let mut conditions: Vec<Value> = apiservice["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let current = conditions.iter().find(|c| c["type"] == "Available");
    if current.is_some_and(|c| {
        c["status"] == status
            && c["reason"] == availability.reason.as_str()
            && c["message"] == availability.message.as_str()
    }) {
        return Ok(());
    }
    let since = current
        .filter(|c| c["status"] == status)
        .map(|c| c["lastTransitionTime"].clone())
        .unwrap_or_else(|| json!(object::now()));
    conditions.retain(|c| c["type"] != "Available");
    conditions.push(json!({
        "type": "Available",
        "status": status,
        "lastTransitionTime": since,
        "reason": availability.reason,
        "message": availability.message,
    }));
    let name = object::name(apiservice);
    tracing::info!(apiservice = %name, status, reason = %availability.reason, message = %availability.message, "APIService availability");
    let patch = Patch {
        kind: PatchType::Merge,
        body: json!({"status": {"conditions": conditions}}),
        manager: None,
    };
    match objects.patch(rt, "v1", "", name, &patch, UpdateTarget::Status) {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_references_default_to_port_443() {
        let service = service_reference(&json!({"namespace": "kubevirt", "name": "virt-api"}));
        assert_eq!(
            service,
            Ok(ServiceReference {
                namespace: "kubevirt".into(),
                name: "virt-api".into(),
                port: 443
            })
        );
        let odd = service_reference(&json!({"namespace": "a", "name": "b", "port": 70000}));
        assert!(odd.is_err());
        assert!(service_reference(&json!({"name": "b"})).is_err());
    }
}
