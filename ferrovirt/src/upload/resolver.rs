//! Where the upload proxy finds a PVC's upload server, from the API server, as CDI's proxy
//! does: the PVC must be an upload target (`cdi.kubevirt.io/storage.upload.target`) whose
//! upload pod is ready (`cdi.kubevirt.io/storage.pod.ready`), and the server is reached at its
//! service name `cdi-upload-<pvc>.<namespace>.svc`. On one machine there is no cluster DNS,
//! so [`PodAddresses`] answers those names with the pod's own address.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};

use api::cdi::datavolume::annotations;
use importer::ContentType;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::{Api, Client, ResourceExt};
use uploadproxy::resolver::{Resolution, ResolveFuture, UploadServerResolver, UploadTarget};

/// The port upload server pods listen on (the service maps 443 to it).
const UPLOAD_POD_PORT: u16 = 8443;

/// Answers the proxy from the PVC's annotations and its upload pod.
pub struct ClusterUploadResolver {
    client: Client,
    /// Set on one machine: service names are resolved to the pod's address here, and the
    /// pod's port is used directly.
    local: Option<Arc<PodAddresses>>,
}

impl ClusterUploadResolver {
    /// A resolver on a cluster: upload servers are reached through their Services.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            local: None,
        }
    }

    /// A resolver for a single machine, filling `addresses` as upload pods are found.
    pub fn local(client: Client, addresses: Arc<PodAddresses>) -> Self {
        Self {
            client,
            local: Some(addresses),
        }
    }

    async fn lookup(&self, namespace: &str, pvc_name: &str) -> Resolution {
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let pvc = match pvcs.get_opt(pvc_name).await {
            Ok(Some(pvc)) => pvc,
            Ok(None) => {
                return Resolution::Rejected(format!("PVC {namespace}/{pvc_name} not found"));
            }
            Err(err) => return Resolution::NotReady(format!("reading PVC: {err}")),
        };
        let ann = pvc.annotations();
        if !ann.contains_key(annotations::UPLOAD_REQUEST) {
            return Resolution::Rejected(format!(
                "PVC {namespace}/{pvc_name} is not an upload target"
            ));
        }
        if ann
            .get(annotations::POD_PHASE)
            .is_some_and(|p| p == "Succeeded")
        {
            return Resolution::Rejected(format!(
                "the upload to PVC {namespace}/{pvc_name} has already completed"
            ));
        }
        if ann.get(annotations::POD_READY).is_none_or(|r| r != "true") {
            return Resolution::NotReady("the upload server pod is not ready".into());
        }
        let content_type = match ann.get(annotations::CONTENT_TYPE).map(String::as_str) {
            Some("archive") => ContentType::Archive,
            _ => ContentType::Kubevirt,
        };
        let service = format!("cdi-upload-{pvc_name}");
        let host = format!("{service}.{namespace}.svc");
        let base_url = match &self.local {
            None => format!("https://{host}"),
            Some(addresses) => {
                let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
                let ip = match pods.get_opt(&service).await {
                    Ok(pod) => pod
                        .and_then(|p| p.status?.pod_ip)
                        .and_then(|ip| ip.parse::<IpAddr>().ok()),
                    Err(err) => return Resolution::NotReady(format!("reading pod: {err}")),
                };
                let Some(ip) = ip else {
                    return Resolution::NotReady("the upload server pod has no address".into());
                };
                addresses.insert(&host, ip);
                format!("https://{host}:{UPLOAD_POD_PORT}")
            }
        };
        Resolution::Ready(UploadTarget {
            base_url,
            content_type,
        })
    }
}

impl UploadServerResolver for ClusterUploadResolver {
    fn resolve<'a>(&'a self, namespace: &'a str, pvc: &'a str) -> ResolveFuture<'a> {
        Box::pin(self.lookup(namespace, pvc))
    }
}

/// Service names of upload pods and their addresses: the cluster DNS of one machine.
#[derive(Debug, Default)]
pub struct PodAddresses {
    names: RwLock<HashMap<String, IpAddr>>,
}

impl PodAddresses {
    fn insert(&self, host: &str, ip: IpAddr) {
        self.names
            .write()
            .expect("pod address lock")
            .insert(host.to_ascii_lowercase(), ip);
    }

    fn get(&self, host: &str) -> Option<IpAddr> {
        self.names
            .read()
            .expect("pod address lock")
            .get(&host.to_ascii_lowercase())
            .copied()
    }
}

impl reqwest::dns::Resolve for PodAddresses {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let found = self.get(name.as_str());
        let host = name.as_str().to_string();
        Box::pin(async move {
            let ip = found.ok_or_else(|| -> Box<dyn std::error::Error + Send + Sync> {
                format!("no upload pod is known by the name {host}").into()
            })?;
            let addrs: reqwest::dns::Addrs = Box::new(std::iter::once(SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}
