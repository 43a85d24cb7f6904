//! The labels and annotations the DataVolume controller puts on what it creates and reads
//! back, as CDI names them, and the names of the objects CDI's pods rely on.

use api::cdi::DataVolume;
use api::cdi::datavolume::DataVolumeContentType;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;

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
/// Claim annotation: the clone into the claim (`k8s.io/CloneRequest`) completed (`"true"`).
pub const ANN_CLONE_OF: &str = "k8s.io/CloneOf";
/// Claim annotation: the name of the source pod of a clone into the claim.
pub const ANN_CLONE_SOURCE_POD: &str = "cdi.kubevirt.io/storage.sourceClonePodName";
/// Claim annotation: the common name the claim's upload server requires of its client.
pub const ANN_UPLOAD_CLIENT_NAME: &str = "cdi.kubevirt.io/uploadClientName";
/// Claim annotation: clone into the claim even if its requested size is smaller than the
/// source's.
pub const ANN_PERMISSIVE_CLONE: &str = "cdi.kubevirt.io/permissiveClone";
/// Claim finalizer: the claim's clone may have a source pod (in the source's namespace,
/// where nothing can own it) to remove first (CDI's clone controller's).
pub const CLONE_SOURCE_FINALIZER: &str = "cdi.kubevirt.io/cloneSource";
/// Pod annotation a node agent may set to say where the worker's metrics are served when it
/// is not `<podIP>:8443` (the local node agent runs pods as processes on one address).
pub const ANN_METRICS_ADDRESS: &str = "ferrovirt.io/metrics-address";

/// PVC annotation (Ferrovirt's): the [`api::cdi::pod_contract::FailureReason`] of a worker's
/// failure, written with `storage.pod.phase: Failed` when no retry can fix it.
pub const ANN_FAILURE_REASON: &str = "ferrovirt.io/storage.pod.failureReason";
/// The ConfigMap with the CA bundle of upload clients (CDI's name).
pub const UPLOAD_CLIENT_CA_CONFIG_MAP: &str = "cdi-uploadserver-client-signer-bundle";
/// The common name of the upload proxy's client certificate (CDI's).
pub const UPLOAD_CLIENT_NAME: &str = "client.upload-server.cdi.kubevirt.io";

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

/// Whether `dv` is the in-memory DataVolume of a claim no DataVolume owns
/// ([`super::claim`]): only such a DataVolume has no uid.
pub fn is_bare_claim(dv: &DataVolume) -> bool {
    dv.metadata.uid.is_none()
}
