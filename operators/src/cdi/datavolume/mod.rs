//! The DataVolume controller: for each DataVolume it creates the PVC (named after the
//! DataVolume and owned by it), the worker that fills it (an importer pod for http, s3,
//! registry and blank sources, an upload server pod and service for uploads, a CSI clone for
//! a PVC source on the same storage class, an upload server fed by a clone source pod for a
//! PVC of another class), mirrors the worker's state onto the PVC's
//! annotations, and writes CDI's phases, conditions, progress and restart count.
//!
//! - [`transfer`]: what fills the PVC, from the DataVolume's source.
//! - [`settings`]: the StorageClass, StorageProfile and CDIConfig it depends on.
//! - [`pvc`]: the PVC a DataVolume asks for (StorageProfile completion, filesystem overhead).
//! - [`pod`]: the worker pods with CDI's environment contract, and what a pod's state means.
//! - [`status`]: the DataVolume status from the observed PVC and pod.
//! - [`plan`]: the decisions of a reconcile, observed objects in, actions out (pure).
//! - [`claim`]: CDI's annotation API on claims no DataVolume owns (`virtctl image-upload
//!   pvc`, `k8s.io/CloneRequest`), through the same observe, a plan of its own and the same
//!   execute.
//! - [`observe`]: reads what a plan decides from; [`reconcile`] carries its actions out,
//!   with [`upload`], [`host_clone`] and [`cross_namespace`] for the API calls of uploads
//!   and clones.

pub mod claim;
pub mod clone_objects;
pub mod context;
pub mod cross_namespace;
pub mod host_clone;
pub mod keys;
pub mod observe;
pub mod plan;
pub mod pod;
pub mod pvc;
pub mod reconcile;
pub mod settings;
pub mod status;
pub mod transfer;
pub mod upload;

use std::sync::Arc;
use std::time::Duration;

use api::cdi::DataVolume;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

pub use context::{Context, Error};

use crate::config::ControllerConfig;
use keys::CDI_LABEL;

fn error_policy(dv: Arc<DataVolume>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(datavolume = %dv.name_any(), namespace = ?dv.namespace(), %err, "DataVolume reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// A controller woken by the worker pods and upload services it owns (CDI's label).
trait OwnsWorkers {
    fn owns_workers(self, client: &Client) -> Self;
}

impl<K> OwnsWorkers for Controller<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    fn owns_workers(self, client: &Client) -> Self {
        let workers = watcher::Config::default().labels(&cdi_selector());
        self.owns(Api::<Pod>::all(client.clone()), workers.clone())
            .owns(Api::<Service>::all(client.clone()), workers)
    }
}

/// The label selector of what CDI's controllers make.
fn cdi_selector() -> String {
    format!("{}={}", CDI_LABEL.0, CDI_LABEL.1)
}

/// Runs the DataVolume controller until its watches end.
pub async fn run(client: Client, config: Arc<ControllerConfig>) {
    let ctx = Arc::new(Context::new(client.clone(), config));
    Controller::new(
        Api::<DataVolume>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default().labels(&cdi_selector()),
    )
    .owns_workers(&client)
    .run(reconcile::reconcile, error_policy, ctx)
    .for_each(|result| async move {
        match result {
            Ok((object, _)) => tracing::trace!(datavolume = %object.name, "reconciled"),
            Err(err) => tracing::debug!(%err, "DataVolume controller event"),
        }
    })
    .await;
}
