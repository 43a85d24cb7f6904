//! The DataVolume controller: for each DataVolume it creates the PVC (named after the
//! DataVolume and owned by it), the worker that fills it (an importer pod for http, s3,
//! registry and blank sources, an upload server pod and service for uploads, a CSI clone for
//! a PVC source on the same storage class, an upload server fed by a clone source pod for a
//! PVC of another class), mirrors the worker's state onto the PVC's
//! annotations, and writes CDI's phases, conditions, progress and restart count.
//!
//! - [`pvc`]: the PVC a DataVolume asks for (StorageProfile completion, filesystem overhead).
//! - [`pod`]: the worker pods with CDI's environment contract, and what a pod's state means.
//! - [`status`]: the DataVolume status from the observed PVC and pod.
//! - [`reconcile`]: the API calls that bring the cluster to that state.

pub mod cross_namespace;
pub mod host_clone;
pub mod pod;
pub mod pvc;
pub mod reconcile;
pub mod status;
pub mod upload;

use std::sync::Arc;
use std::time::Duration;

use api::cdi::DataVolume;
use api::cdi::datavolume::{DataVolumeContentType, DataVolumeSource, import_source};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use crate::ControllerConfig;

/// The label CDI puts on everything it creates, and its value.
pub const CDI_LABEL: (&str, &str) = ("app", "containerized-data-importer");
/// The label naming the CDI component of a pod.
pub const COMPONENT_LABEL: &str = "cdi.kubevirt.io";
/// The label that marks pods Prometheus may scrape.
pub const PROMETHEUS_LABEL: (&str, &str) = ("prometheus.cdi.kubevirt.io", "true");
/// PVC annotation: the uid of the DataVolume the PVC was created for.
pub const ANN_CREATED_FOR_DATA_VOLUME: &str = "cdi.kubevirt.io/createdForDataVolume";
/// DataVolume or PVC annotation: keep the worker pod after it completes.
pub const ANN_RETAIN_AFTER_COMPLETION: &str = "cdi.kubevirt.io/storage.pod.retainAfterCompletion";
/// Annotation on objects the controller creates.
pub const ANN_CREATED_BY: &str = "cdi.kubevirt.io/storage.createdByController";
/// PVC annotation: how a clone is done.
pub const ANN_CLONE_TYPE: &str = "cdi.kubevirt.io/cloneType";
/// Pod annotation a node agent may set to say where the worker's metrics are served when it
/// is not `<podIP>:8443` (the local node agent runs pods as processes on one address).
pub const ANN_METRICS_ADDRESS: &str = "ferrovirt.io/metrics-address";

/// What fills a DataVolume's PVC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// An importer pod: http, s3, registry, or a blank image.
    Import(ImportSource),
    /// An upload server pod and its service.
    Upload,
    /// A CSI clone of a PVC, or a restore of a VolumeSnapshot, of the same storage class.
    CsiClone {
        /// The source's namespace.
        namespace: String,
        /// The source PVC's (or VolumeSnapshot's) name.
        name: String,
        /// Whether the source is a VolumeSnapshot.
        snapshot: bool,
    },
    /// A host-assisted clone of a PVC that a CSI clone cannot copy (another storage class):
    /// an upload server on the target and a source pod streaming the source to it.
    HostClone {
        /// The source's namespace.
        namespace: String,
        /// The source PVC's (or VolumeSnapshot's) name.
        name: String,
        /// Whether the source is a VolumeSnapshot: it is restored into a temporary claim of
        /// its own class first, and that claim is copied.
        snapshot: bool,
    },
    /// A source this controller does not handle (yet); the message says which.
    Unsupported(String),
}

/// The importer pod's view of a source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSource {
    /// `http`, `s3`, `registry`, or `none` for a blank image.
    pub kind: &'static str,
    /// The URL, when there is one.
    pub endpoint: Option<String>,
    /// A Secret with `accessKeyId` and `secretKey`.
    pub secret_ref: Option<String>,
    /// A ConfigMap with CA certificates.
    pub cert_config_map: Option<String>,
    /// `algorithm:hex` of the source bytes.
    pub checksum: Option<String>,
    /// Extra `Name: value` headers.
    pub extra_headers: Vec<String>,
    /// Secrets holding one extra header each.
    pub secret_extra_headers: Vec<String>,
    /// The registry image's architecture.
    pub architecture: Option<String>,
}

impl Transfer {
    /// What fills a PVC from `source` (after a `sourceRef` was resolved).
    pub fn from_source(source: &DataVolumeSource) -> Transfer {
        let kinds = source.kinds();
        if kinds.len() != 1 {
            return Transfer::Unsupported(format!(
                "exactly one source is required, found {}",
                if kinds.is_empty() {
                    "none".to_string()
                } else {
                    kinds.join(", ")
                }
            ));
        }
        if let Some(http) = &source.http {
            return Transfer::Import(ImportSource {
                kind: import_source::HTTP,
                endpoint: Some(http.url.clone()),
                secret_ref: http.secret_ref.clone(),
                cert_config_map: http.cert_config_map.clone(),
                checksum: http.checksum.clone(),
                extra_headers: http.extra_headers.clone().unwrap_or_default(),
                secret_extra_headers: http.secret_extra_headers.clone().unwrap_or_default(),
                architecture: None,
            });
        }
        if let Some(s3) = &source.s3 {
            return Transfer::Import(ImportSource {
                kind: import_source::S3,
                endpoint: Some(s3.url.clone()),
                secret_ref: s3.secret_ref.clone(),
                cert_config_map: s3.cert_config_map.clone(),
                ..Default::default()
            });
        }
        if let Some(registry) = &source.registry {
            let Some(url) = &registry.url else {
                return Transfer::Unsupported(
                    "registry imports from an ImageStream are not supported".to_string(),
                );
            };
            return Transfer::Import(ImportSource {
                kind: import_source::REGISTRY,
                endpoint: Some(url.clone()),
                secret_ref: registry.secret_ref.clone(),
                cert_config_map: registry.cert_config_map.clone(),
                architecture: registry
                    .platform
                    .as_ref()
                    .and_then(|p| p.architecture.clone()),
                ..Default::default()
            });
        }
        if source.blank.is_some() {
            return Transfer::Import(ImportSource {
                kind: import_source::NONE,
                ..Default::default()
            });
        }
        if source.upload.is_some() {
            return Transfer::Upload;
        }
        if let Some(pvc) = &source.pvc {
            return Transfer::CsiClone {
                namespace: pvc.namespace.clone(),
                name: pvc.name.clone(),
                snapshot: false,
            };
        }
        if let Some(snapshot) = &source.snapshot {
            return Transfer::CsiClone {
                namespace: snapshot.namespace.clone(),
                name: snapshot.name.clone(),
                snapshot: true,
            };
        }
        Transfer::Unsupported(format!("source {} is not supported yet", kinds.join(", ")))
    }
}

/// The content type of a DataVolume as written on PVCs and pods.
pub fn content_type(dv: &DataVolume) -> &'static str {
    dv.spec
        .content_type
        .unwrap_or(DataVolumeContentType::KubeVirt)
        .as_str()
}

/// Whether the worker pod is kept once it has completed.
pub fn retain_after_completion(dv: &DataVolume, pvc: Option<&PersistentVolumeClaim>) -> bool {
    let set = |annotations: &std::collections::BTreeMap<String, String>| {
        annotations
            .get(ANN_RETAIN_AFTER_COMPLETION)
            .is_some_and(|v| v == "true")
    };
    set(dv.annotations()) || pvc.is_some_and(|pvc| set(pvc.annotations()))
}

/// Errors of the DataVolume controller; the variant names show in the logs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// The object has no namespace.
    #[error("DataVolume {0} has no namespace")]
    MissingNamespace(String),
    /// The PVC could not be derived from the DataVolume.
    #[error(transparent)]
    Pvc(#[from] pvc::PvcError),
    /// An upload server's certificate could not be issued.
    #[error("upload server certificate: {0}")]
    Certificate(String),
    /// A clone source's client certificate could not be issued.
    #[error("clone source certificate: {0}")]
    CloneCertificate(String),
}

/// What every reconcile shares.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Publishes events on DataVolumes.
    pub recorder: Recorder,
    /// Images and names of the worker pods.
    pub config: Arc<ControllerConfig>,
    /// Scrapes the workers' progress.
    pub http: reqwest::Client,
}

fn error_policy(dv: Arc<DataVolume>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(datavolume = %dv.name_any(), namespace = ?dv.namespace(), %err, "DataVolume reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the DataVolume controller until its watches end.
pub async fn run(client: Client, config: Arc<ControllerConfig>) {
    let selector = format!("{}={}", CDI_LABEL.0, CDI_LABEL.1);
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: config.reporter.clone(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap_or_default();
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder,
        config,
        http,
    });
    Controller::new(
        Api::<DataVolume>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default().labels(&selector),
    )
    .owns(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default().labels(&selector),
    )
    .owns(
        Api::<Service>::all(client),
        watcher::Config::default().labels(&selector),
    )
    .run(reconcile::reconcile, error_policy, ctx)
    .for_each(|result| async move {
        match result {
            Ok((object, _)) => tracing::trace!(datavolume = %object.name, "reconciled"),
            Err(err) => tracing::debug!(%err, "DataVolume controller event"),
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::datavolume::{
        DataVolumeBlankImage, DataVolumeSourceHttp, DataVolumeSourcePvc, DataVolumeSourceUpload,
    };

    #[test]
    fn sources_map_to_transfers() {
        let http = DataVolumeSource {
            http: Some(DataVolumeSourceHttp {
                url: "http://x/disk.img".into(),
                checksum: Some("sha256:00".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let Transfer::Import(source) = Transfer::from_source(&http) else {
            panic!("http is an import");
        };
        assert_eq!(source.kind, "http");
        assert_eq!(source.endpoint.as_deref(), Some("http://x/disk.img"));
        assert_eq!(source.checksum.as_deref(), Some("sha256:00"));
        let s3 = DataVolumeSource {
            s3: Some(api::cdi::datavolume::DataVolumeSourceS3 {
                url: "http://s3.local/bucket/disk.qcow2".into(),
                secret_ref: Some("s3-creds".into()),
                cert_config_map: None,
            }),
            ..Default::default()
        };
        let Transfer::Import(source) = Transfer::from_source(&s3) else {
            panic!("s3 is an import");
        };
        assert_eq!(source.kind, "s3");
        assert_eq!(
            source.endpoint.as_deref(),
            Some("http://s3.local/bucket/disk.qcow2")
        );
        assert_eq!(source.secret_ref.as_deref(), Some("s3-creds"));
        let blank = DataVolumeSource {
            blank: Some(DataVolumeBlankImage {}),
            ..Default::default()
        };
        assert!(matches!(Transfer::from_source(&blank), Transfer::Import(s) if s.kind == "none"));
        let upload = DataVolumeSource {
            upload: Some(DataVolumeSourceUpload {}),
            ..Default::default()
        };
        assert_eq!(Transfer::from_source(&upload), Transfer::Upload);
        let clone = DataVolumeSource {
            pvc: Some(DataVolumeSourcePvc {
                namespace: "a".into(),
                name: "b".into(),
            }),
            ..Default::default()
        };
        assert!(matches!(
            Transfer::from_source(&clone),
            Transfer::CsiClone { .. }
        ));
        assert!(matches!(
            Transfer::from_source(&DataVolumeSource::default()),
            Transfer::Unsupported(_)
        ));
    }
}
