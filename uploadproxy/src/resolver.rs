//! Where the upload server for a PVC is, and whether it is ready: the proxy asks a
//! [`UploadServerResolver`]. On a cluster the control plane answers from the PVC's
//! annotations (CDI: `cdi.kubevirt.io/storage.pod.ready`, the content type annotation) and
//! the service `cdi-upload-<pvc>`; [`StaticResolver`] is a fixed map for tests and for running
//! the proxy by hand.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::RwLock;

use importer::ContentType;

/// An upload server ready to take bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadTarget {
    /// `https://host:port`, without a path.
    pub base_url: String,
    /// The PVC's content type: `archive` makes the proxy use the archive route.
    pub content_type: ContentType,
}

/// What the resolver knows about a PVC's upload server right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Ready(UploadTarget),
    /// Not ready yet (the pod is starting): the proxy asks again until its wait ends.
    NotReady(String),
    /// Uploading is not possible (no such PVC, already uploaded, not an upload PVC): the
    /// proxy answers 503 with this message at once.
    Rejected(String),
}

/// A boxed future, so that resolvers can be used as trait objects.
pub type ResolveFuture<'a> = Pin<Box<dyn Future<Output = Resolution> + Send + 'a>>;

/// Maps a PVC to its upload server.
pub trait UploadServerResolver: Send + Sync {
    fn resolve<'a>(&'a self, namespace: &'a str, pvc: &'a str) -> ResolveFuture<'a>;
}

/// The URL CDI's proxy uses for a PVC's upload server: service `cdi-upload-<pvc>` in the
/// PVC's namespace, port 443. (CDI shortens names longer than 63 characters with a hash; the
/// control plane's resolver does the same.)
pub fn cluster_upload_server_url(namespace: &str, pvc: &str) -> String {
    format!("https://cdi-upload-{pvc}.{namespace}.svc")
}

/// A fixed map from `namespace/pvc` to upload servers; PVCs not in it are "not ready".
#[derive(Debug, Default)]
pub struct StaticResolver {
    targets: RwLock<HashMap<(String, String), UploadTarget>>,
}

impl StaticResolver {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&self, namespace: &str, pvc: &str, target: UploadTarget) {
        self.targets
            .write()
            .expect("resolver lock")
            .insert((namespace.into(), pvc.into()), target);
    }

    pub fn remove(&self, namespace: &str, pvc: &str) {
        self.targets
            .write()
            .expect("resolver lock")
            .remove(&(namespace.to_string(), pvc.to_string()));
    }
}

impl UploadServerResolver for StaticResolver {
    fn resolve<'a>(&'a self, namespace: &'a str, pvc: &'a str) -> ResolveFuture<'a> {
        let found = self
            .targets
            .read()
            .expect("resolver lock")
            .get(&(namespace.to_string(), pvc.to_string()))
            .cloned();
        Box::pin(async move {
            match found {
                Some(target) => Resolution::Ready(target),
                None => Resolution::NotReady(format!(
                    "no upload server is ready for PVC {namespace}/{pvc}"
                )),
            }
        })
    }
}
