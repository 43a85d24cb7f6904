//! The worker pods and what their state means. The importer pod (`importer-<pvc>`) and the
//! upload server pod (`cdi-upload-<pvc>`, behind the service of the same name) carry CDI's
//! environment contract, read by `ferrovirt importer` and `ferrovirt upload-server`; a pod's
//! phase, restarts and termination message become the PVC annotations CDI writes
//! (`cdi.kubevirt.io/storage.pod.phase`, `storage.condition.running*`, ...). Whether a
//! failure is final is the typed reason the worker gave in its termination message
//! ([`api::cdi::pod_contract`]), recorded on the PVC as [`ANN_FAILURE_REASON`].

use std::collections::BTreeMap;

use api::cdi::DataVolume;
use api::cdi::datavolume::{STORAGE_RESOURCE, annotations};
use api::cdi::pod_contract::env::{
    CloneSourceEnv, ImporterEnv, Lookup, SourceCredentials, UploadServerEnv, VolumeEnv,
    clone_source,
};
use api::common::NodePlacement;
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, ContainerPort, ContainerState, HTTPGetAction,
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodSpec, Probe,
    ResourceRequirements, SecretVolumeSource, Service, ServicePort, ServiceSpec, Volume,
    VolumeDevice, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

pub use api::cdi::pod_contract::{CLONE_SOURCE_MOUNT, FailureReason, NO_DISK_IMAGE, WorkerFailure};
use api::cdi::pod_contract::{TERMINATION_LOG_PATH, TerminationMessage};

use super::keys::{
    ANN_CREATED_BY, ANN_FAILURE_REASON, CDI_LABEL, COMPONENT_LABEL, PROMETHEUS_LABEL, content_type,
};
pub use super::keys::{UPLOAD_CLIENT_CA_CONFIG_MAP, UPLOAD_CLIENT_NAME};
use super::pvc::BLOCK;
use super::transfer::ImportSource;
use crate::config::ControllerConfig;
use uploadproxy::routes::{BLOCKDEVICE_CLONE, FILESYSTEM_CLONE};

/// The volume of the target PVC in every worker pod.
pub const DATA_VOLUME_NAME: &str = "cdi-data-vol";
/// Where a block PVC appears.
pub use api::cdi::pod_contract::BLOCK_DEVICE_PATH;
/// Where a filesystem PVC is mounted.
pub use api::cdi::pod_contract::DATA_MOUNT_PATH;
/// The volume of the source's CA certificates.
pub const CERT_VOLUME_NAME: &str = "cdi-cert-vol";
/// Where the source's CA certificates are mounted (IMPORTER_CERT_DIR).
pub const CERT_DIR: &str = "/certs";
/// Where secret extra headers are mounted, one directory per Secret.
pub const EXTRA_HEADERS_DIR: &str = "/extraheaders";
/// The port of the importer's Prometheus endpoint.
pub const METRICS_PORT: i32 = 8443;
/// The port the upload server serves uploads on.
pub const UPLOAD_PORT: i32 = 8443;
/// The port of the upload server's plain-HTTP `/healthz`.
pub const UPLOAD_HEALTHZ_PORT: i32 = 8080;
/// Where the upload server's certificate and key (Secret `cdi-upload-<pvc>`) are mounted.
pub const UPLOAD_TLS_DIR: &str = "/etc/tls";
/// Where the CA bundle of upload clients is mounted.
pub const UPLOAD_CLIENT_CA_DIR: &str = "/etc/client";
/// The ConfigMap, in CDI's namespace, with the CA bundle (`ca-bundle.crt`) of the upload
/// proxy's serving certificate, as CDI's operator keeps it.
pub const UPLOAD_PROXY_CA_CONFIG_MAP: &str = "cdi-uploadproxy-signer-bundle";
/// The namespace CDI's own objects live in.
pub const CDI_NAMESPACE: &str = "cdi";
/// The key of a CA bundle ConfigMap.
pub const CA_BUNDLE_KEY: &str = "ca-bundle.crt";
/// The label tying an upload server pod to its service: the PVC's uid.
pub const UPLOAD_TARGET_LABEL: &str = "cdi.kubevirt.io/uploadTarget";
/// CDI's Running condition reason of a running pod.
pub const POD_RUNNING_REASON: &str = "Pod is running";

/// The name of a PVC's importer pod.
pub fn importer_pod_name(pvc: &str) -> String {
    format!("importer-{pvc}")
}

/// The name of a PVC's upload server pod and service.
pub fn upload_pod_name(pvc: &str) -> String {
    format!("cdi-upload-{pvc}")
}

/// The name of a host-assisted clone's source pod (CDI's): the target PVC's uid.
pub fn clone_source_pod_name(target_pvc_uid: &str) -> String {
    format!("{target_pvc_uid}-source-pod")
}

/// The common name of a clone source's client certificate, which the target's upload server
/// requires (CDI's upload client name of a clone).
pub fn clone_client_name(source: (&str, &str), target: (&str, &str)) -> String {
    format!("{}/{}-{}/{}", source.0, source.1, target.0, target.1)
}

/// The label that finds a clone's source pod (CDI's `cloneUniqueID`).
pub const CLONE_UNIQUE_ID_LABEL: &str = "cdi.kubevirt.io/cloneUniqueID";
/// The label naming the DataVolume (its uid) a clone source pod works for, which finds the
/// pod when the DataVolume is deleted, wherever the pod is.
pub const CLONE_OWNER_LABEL: &str = "ferrovirt.io/clone-for-datavolume";
/// The termination message of a clone whose source went away before it completed.
pub const SOURCE_DELETED: &str = "was deleted before the clone completed";
/// The volume of the clone source in the source pod.
pub const CLONE_SOURCE_VOLUME: &str = "cdi-clone-source";

/// Settings of a worker pod that come from the cluster's configuration.
#[derive(Clone, Copy, Debug)]
pub struct WorkerSettings<'a> {
    /// Image and names.
    pub config: &'a ControllerConfig,
    /// The fraction of the filesystem kept for metadata (0 on block volumes).
    pub filesystem_overhead: f64,
    /// Whether the image is preallocated.
    pub preallocation: bool,
    /// Whether the source's TLS certificate is not verified (an insecure registry, or an http
    /// source's `insecureSkipVerify`).
    pub insecure_tls: bool,
    /// Where worker pods may run: the active CDI CR's `spec.workload`, as CDI places its
    /// importer, upload and clone pods.
    pub placement: &'a NodePlacement,
    /// The worker container's resources: CDIConfig's `status.defaultPodResourceRequirements`.
    pub resources: Option<&'a ResourceRequirements>,
}

/// The spec of a worker pod of `dv` running `container` with `volumes`: restarted on
/// failure, with the DataVolume's priority class, the cluster's workload placement and
/// CDIConfig's worker resources.
fn worker_spec(
    dv: &DataVolume,
    mut container: Container,
    volumes: Vec<Volume>,
    settings: &WorkerSettings<'_>,
) -> PodSpec {
    let placement = settings.placement;
    container.resources = settings.resources.cloned();
    PodSpec {
        containers: vec![container],
        volumes: Some(volumes),
        restart_policy: Some("OnFailure".to_string()),
        priority_class_name: dv.spec.priority_class_name.clone(),
        node_selector: placement.node_selector.clone(),
        affinity: placement.affinity.clone(),
        tolerations: placement.tolerations.clone(),
        ..Default::default()
    }
}

/// What a worker pod filling `pvc` for `dv` is told about the volume.
fn volume_env(
    dv: &DataVolume,
    pvc: &PersistentVolumeClaim,
    settings: &WorkerSettings<'_>,
    block: bool,
) -> VolumeEnv {
    VolumeEnv {
        // A claim without a DataVolume is its own owner, as CDI's bare-claim workers say.
        owner_uid: dv
            .metadata
            .uid
            .clone()
            .or_else(|| pvc.metadata.uid.clone())
            .unwrap_or_default(),
        image_size: Some(requested_size(pvc).unwrap_or_default()),
        filesystem_overhead: Some(overhead_text(settings.filesystem_overhead, block)),
        preallocation: settings.preallocation,
    }
}

fn is_block(pvc: &PersistentVolumeClaim) -> bool {
    pvc.spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .is_some_and(|m| m == BLOCK)
}

/// The requested size of a PVC as written (`IMPORTER_IMAGE_SIZE`).
pub fn requested_size(pvc: &PersistentVolumeClaim) -> Option<String> {
    Some(
        pvc.spec
            .as_ref()?
            .resources
            .as_ref()?
            .requests
            .as_ref()?
            .get(STORAGE_RESOURCE)?
            .0
            .clone(),
    )
}

fn overhead_text(overhead: f64, block: bool) -> String {
    if block {
        "0".to_string()
    } else {
        overhead.to_string()
    }
}

fn worker_meta(
    name: String,
    dv: &DataVolume,
    pvc: &PersistentVolumeClaim,
    component: &str,
) -> ObjectMeta {
    let mut owners: Vec<_> = dv.controller_owner_ref(&()).into_iter().collect();
    // Also owned by the PVC, as CDI's pods are: deleting the PVC deletes its worker.
    if let Some(mut owner) = pvc.owner_ref(&()) {
        owner.block_owner_deletion = Some(true);
        owners.push(owner);
    }
    ObjectMeta {
        name: Some(name),
        namespace: pvc.namespace(),
        labels: Some(
            [
                (CDI_LABEL.0.to_string(), CDI_LABEL.1.to_string()),
                (COMPONENT_LABEL.to_string(), component.to_string()),
                (
                    PROMETHEUS_LABEL.0.to_string(),
                    PROMETHEUS_LABEL.1.to_string(),
                ),
            ]
            .into(),
        ),
        annotations: Some([(ANN_CREATED_BY.to_string(), "yes".to_string())].into()),
        owner_references: Some(owners),
        ..Default::default()
    }
}

/// The target volume, its mount or device, for a worker container.
fn attach_target(
    pvc: &PersistentVolumeClaim,
    container: &mut Container,
    volumes: &mut Vec<Volume>,
) {
    volumes.push(Volume {
        name: DATA_VOLUME_NAME.to_string(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: pvc.name_any(),
            read_only: Some(false),
        }),
        ..Default::default()
    });
    if is_block(pvc) {
        container.volume_devices = Some(vec![VolumeDevice {
            name: DATA_VOLUME_NAME.to_string(),
            device_path: BLOCK_DEVICE_PATH.to_string(),
        }]);
    } else {
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: DATA_VOLUME_NAME.to_string(),
                mount_path: DATA_MOUNT_PATH.to_string(),
                ..Default::default()
            });
    }
}

/// The importer pod of a PVC: `ferrovirt importer` with CDI's importer environment.
pub fn importer_pod(
    dv: &DataVolume,
    pvc: &PersistentVolumeClaim,
    source: &ImportSource,
    settings: &WorkerSettings<'_>,
) -> Pod {
    let block = is_block(pvc);
    let vars = ImporterEnv {
        volume: volume_env(dv, pvc, settings, block),
        source: Some(source.kind.to_string()),
        endpoint: Some(source.endpoint.clone().unwrap_or_default()),
        content_type: Some(content_type(dv).to_string()),
        insecure_tls: settings.insecure_tls,
        metrics_address: Some(format!("0.0.0.0:{METRICS_PORT}")),
        checksum: source.checksum.clone(),
        registry_architecture: source.architecture.clone(),
        credentials: source.secret_ref.clone().map(SourceCredentials::Secret),
        cert_dir: source
            .cert_config_map
            .as_ref()
            .map(|_| CERT_DIR.to_string()),
        extra_headers: source.extra_headers.clone(),
    }
    .to_env();
    let mut container = Container {
        name: "importer".to_string(),
        image: Some(settings.config.image.clone()),
        image_pull_policy: Some(pull_policy(settings.config)),
        args: Some(vec!["importer".to_string()]),
        ports: Some(vec![ContainerPort {
            name: Some("metrics".to_string()),
            container_port: METRICS_PORT,
            protocol: Some("TCP".to_string()),
            ..Default::default()
        }]),
        termination_message_path: Some(TERMINATION_LOG_PATH.to_string()),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Default::default()
    };
    let mut volumes = Vec::new();
    attach_target(pvc, &mut container, &mut volumes);
    if let Some(cm) = &source.cert_config_map {
        volumes.push(Volume {
            name: CERT_VOLUME_NAME.to_string(),
            config_map: Some(ConfigMapVolumeSource {
                name: cm.clone(),
                ..Default::default()
            }),
            ..Default::default()
        });
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: CERT_VOLUME_NAME.to_string(),
                mount_path: CERT_DIR.to_string(),
                read_only: Some(true),
                ..Default::default()
            });
    }
    for (i, secret) in source.secret_extra_headers.iter().enumerate() {
        let name = format!("cdi-extra-header-{i}");
        volumes.push(Volume {
            name: name.clone(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                ..Default::default()
            }),
            ..Default::default()
        });
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name,
                mount_path: format!("{EXTRA_HEADERS_DIR}/{i}"),
                read_only: Some(true),
                ..Default::default()
            });
    }
    container.env = Some(vars);
    Pod {
        metadata: worker_meta(importer_pod_name(&pvc.name_any()), dv, pvc, "importer"),
        spec: Some(PodSpec {
            service_account_name: dv.spec.service_account_name.clone(),
            ..worker_spec(dv, container, volumes, settings)
        }),
        status: None,
    }
}

fn pull_policy(config: &ControllerConfig) -> String {
    config
        .image_pull_policy
        .clone()
        .unwrap_or_else(|| "IfNotPresent".to_string())
}

/// The upload server pod of a PVC: `ferrovirt upload-server` with CDI's upload server
/// environment, its serving certificate from Secret `cdi-upload-<pvc>` (`tls.crt`,
/// `tls.key`) and the upload clients' CA from the configured ConfigMap (`ca-bundle.crt`).
pub fn upload_pod(
    dv: &DataVolume,
    pvc: &PersistentVolumeClaim,
    settings: &WorkerSettings<'_>,
    client_name: &str,
) -> Pod {
    let block = is_block(pvc);
    let name = upload_pod_name(&pvc.name_any());
    let mut meta = worker_meta(name.clone(), dv, pvc, "cdi-upload-server");
    if let (Some(labels), Some(uid)) = (meta.labels.as_mut(), pvc.metadata.uid.as_ref()) {
        labels.insert(UPLOAD_TARGET_LABEL.to_string(), uid.clone());
    }
    let vars = UploadServerEnv {
        volume: volume_env(dv, pvc, settings, block),
        tls_key_file: format!("{UPLOAD_TLS_DIR}/tls.key"),
        tls_cert_file: format!("{UPLOAD_TLS_DIR}/tls.crt"),
        client_cert_file: format!("{UPLOAD_CLIENT_CA_DIR}/ca-bundle.crt"),
        client_name: Some(client_name.to_string()),
        listen_port: Some(UPLOAD_PORT.to_string()),
    }
    .to_env();
    let mut container = Container {
        name: "cdi-upload-server".to_string(),
        image: Some(settings.config.image.clone()),
        image_pull_policy: Some(pull_policy(settings.config)),
        args: Some(vec!["upload-server".to_string()]),
        env: Some(vars),
        ports: Some(vec![ContainerPort {
            name: Some("server".to_string()),
            container_port: UPLOAD_PORT,
            protocol: Some("TCP".to_string()),
            ..Default::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/healthz".to_string()),
                port: IntOrString::Int(UPLOAD_HEALTHZ_PORT),
                ..Default::default()
            }),
            initial_delay_seconds: Some(2),
            period_seconds: Some(5),
            ..Default::default()
        }),
        termination_message_path: Some(TERMINATION_LOG_PATH.to_string()),
        ..Default::default()
    };
    let mut volumes = Vec::new();
    attach_target(pvc, &mut container, &mut volumes);
    volumes.push(Volume {
        name: "tls".to_string(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(name.clone()),
            ..Default::default()
        }),
        ..Default::default()
    });
    volumes.push(Volume {
        name: "client-ca".to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: settings.config.upload_client_ca_config_map.clone(),
            ..Default::default()
        }),
        ..Default::default()
    });
    let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
    mounts.push(VolumeMount {
        name: "tls".to_string(),
        mount_path: UPLOAD_TLS_DIR.to_string(),
        read_only: Some(true),
        ..Default::default()
    });
    mounts.push(VolumeMount {
        name: "client-ca".to_string(),
        mount_path: UPLOAD_CLIENT_CA_DIR.to_string(),
        read_only: Some(true),
        ..Default::default()
    });
    Pod {
        metadata: meta,
        spec: Some(PodSpec {
            service_account_name: dv.spec.service_account_name.clone(),
            ..worker_spec(dv, container, volumes, settings)
        }),
        status: None,
    }
}

/// What a clone source pod needs to reach its target's upload server.
#[derive(Debug, Clone)]
pub struct CloneConnection {
    /// `https://cdi-upload-<target>.<namespace>.svc/v1beta1/upload`.
    pub upload_url: String,
    /// The upload pod's own `ip:port`, for where no cluster DNS answers the service name.
    pub server_address: Option<String>,
    /// The client certificate and key (PEM) with the clone's client name.
    pub client_cert_pem: String,
    pub client_key_pem: String,
    /// The CA (PEM) of the upload servers' serving certificates.
    pub server_ca_pem: String,
}

/// The source pod of a host-assisted clone (`<target uid>-source-pod`, in the source's
/// namespace): `ferrovirt clone-source` with CDI's cloner environment, the source PVC
/// mounted read-only at CDI's path (or its device), streaming to the target's upload server.
pub fn clone_source_pod(
    dv: &DataVolume,
    target: &PersistentVolumeClaim,
    source: &PersistentVolumeClaim,
    connection: &CloneConnection,
    settings: &WorkerSettings<'_>,
) -> Pod {
    let target_uid = target.metadata.uid.clone().unwrap_or_default();
    let block = is_block(source);
    let mut meta = worker_meta(
        clone_source_pod_name(&target_uid),
        dv,
        target,
        "cdi-clone-source",
    );
    meta.namespace = source.namespace();
    if meta.namespace != target.namespace() {
        // Owners live in the pod's namespace only; the controller removes this pod itself.
        meta.owner_references = None;
    }
    if let Some(labels) = meta.labels.as_mut() {
        labels.insert(
            CLONE_UNIQUE_ID_LABEL.to_string(),
            clone_source_pod_name(&target_uid),
        );
        labels.insert(
            CLONE_OWNER_LABEL.to_string(),
            dv.metadata.uid.clone().unwrap_or_default(),
        );
    }
    let (content_type, mount) = if block {
        (BLOCKDEVICE_CLONE, BLOCK_DEVICE_PATH)
    } else {
        (FILESYSTEM_CLONE, CLONE_SOURCE_MOUNT)
    };
    let vars = CloneSourceEnv {
        volume: VolumeEnv {
            owner_uid: dv.metadata.uid.clone().unwrap_or_default(),
            preallocation: settings.preallocation,
            ..Default::default()
        },
        client_key: connection.client_key_pem.clone(),
        client_cert: connection.client_cert_pem.clone(),
        server_ca_cert: connection.server_ca_pem.clone(),
        upload_url: connection.upload_url.clone(),
        metrics_address: Some(format!("0.0.0.0:{METRICS_PORT}")),
        upload_server_address: connection.server_address.clone(),
    }
    .to_env();
    let mut container = Container {
        name: "cdi-clone-source".to_string(),
        image: Some(settings.config.image.clone()),
        image_pull_policy: Some(pull_policy(settings.config)),
        args: Some(vec![
            "clone-source".to_string(),
            "--content-type".to_string(),
            content_type.to_string(),
            "--mount".to_string(),
            mount.to_string(),
        ]),
        env: Some(vars),
        ports: Some(vec![ContainerPort {
            name: Some("metrics".to_string()),
            container_port: METRICS_PORT,
            protocol: Some("TCP".to_string()),
            ..Default::default()
        }]),
        termination_message_path: Some(TERMINATION_LOG_PATH.to_string()),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Default::default()
    };
    if block {
        container.volume_devices = Some(vec![VolumeDevice {
            name: CLONE_SOURCE_VOLUME.to_string(),
            device_path: BLOCK_DEVICE_PATH.to_string(),
        }]);
    } else {
        container.volume_mounts = Some(vec![VolumeMount {
            name: CLONE_SOURCE_VOLUME.to_string(),
            mount_path: CLONE_SOURCE_MOUNT.to_string(),
            read_only: Some(true),
            ..Default::default()
        }]);
    }
    let volumes = vec![Volume {
        name: CLONE_SOURCE_VOLUME.to_string(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: source.name_any(),
            read_only: Some(true),
        }),
        ..Default::default()
    }];
    Pod {
        metadata: meta,
        spec: Some(worker_spec(dv, container, volumes, settings)),
        status: None,
    }
}

/// Puts a clone source's credentials (the client certificate and key, the CA of the upload
/// servers, PEM) into its pod's environment; they are issued only when the pod is created.
pub fn set_clone_credentials(pod: &mut Pod, cert_pem: &str, key_pem: &str, server_ca_pem: &str) {
    let containers = pod.spec.iter_mut().flat_map(|s| s.containers.iter_mut());
    for vars in containers.filter_map(|c| c.env.as_mut()) {
        CloneSourceEnv::set_credentials(vars, cert_pem, key_pem, server_ca_pem);
    }
}

/// The upload server address a clone source pod was told (where there is no cluster DNS).
pub fn told_upload_server_address(pod: &Pod) -> Option<String> {
    let container = pod.spec.as_ref()?.containers.first()?;
    container
        .env
        .as_deref()?
        .var(clone_source::UPLOAD_SERVER_ADDRESS)
}

/// The service `cdi-upload-<pvc>` in front of the upload server pod (the upload proxy's
/// `https://cdi-upload-<pvc>.<namespace>.svc`).
pub fn upload_service(dv: &DataVolume, pvc: &PersistentVolumeClaim) -> Service {
    let name = upload_pod_name(&pvc.name_any());
    let mut meta = worker_meta(name, dv, pvc, "cdi-upload-server");
    if let Some(labels) = meta.labels.as_mut() {
        labels.remove(PROMETHEUS_LABEL.0);
    }
    Service {
        metadata: meta,
        spec: Some(ServiceSpec {
            selector: pvc
                .metadata
                .uid
                .as_ref()
                .map(|uid| [(UPLOAD_TARGET_LABEL.to_string(), uid.clone())].into()),
            ports: Some(vec![ServicePort {
                name: Some("uploadproxy".to_string()),
                port: 443,
                target_port: Some(IntOrString::Int(UPLOAD_PORT)),
                protocol: Some("TCP".to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

fn container_state(pod: &Pod) -> Option<(&ContainerState, Option<&ContainerState>, i32)> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    Some((
        status.state.as_ref()?,
        status.last_state.as_ref(),
        status.restart_count,
    ))
}

/// The terminal failure of the pod's worker, in its current or last state (a restarted pod
/// keeps the last failure in `lastState`).
pub fn worker_failure(pod: &Pod) -> Option<WorkerFailure> {
    let (state, last, _) = container_state(pod)?;
    [Some(state), last]
        .into_iter()
        .flatten()
        .filter_map(|s| s.terminated.as_ref())
        .filter(|t| t.exit_code != 0)
        .filter_map(|t| t.message.as_deref())
        .filter_map(|m| TerminationMessage::parse(m).failure())
        .find(WorkerFailure::is_final)
}

/// The message of a terminal failure of the pod's worker; see [`worker_failure`].
pub fn terminal_failure(pod: &Pod) -> Option<String> {
    worker_failure(pod).map(|f| f.message)
}

/// The terminal failure recorded on the PVC, if any: its message.
pub fn recorded_terminal_failure(pvc: &PersistentVolumeClaim) -> Option<String> {
    let ann = pvc.annotations();
    if ann.get(annotations::POD_PHASE).map(String::as_str) != Some("Failed") {
        return None;
    }
    let reason: FailureReason = ann.get(ANN_FAILURE_REASON)?.parse().ok()?;
    if !reason.is_final() {
        return None;
    }
    ann.get(annotations::RUNNING_CONDITION_MESSAGE).cloned()
}

/// The PVC annotations that record a terminal failure, as a worker's would.
pub fn failure_annotations(failure: &WorkerFailure) -> BTreeMap<String, String> {
    [
        (annotations::POD_PHASE, "Failed"),
        (annotations::RUNNING_CONDITION, "false"),
        (
            annotations::RUNNING_CONDITION_MESSAGE,
            failure.message.as_str(),
        ),
        (annotations::RUNNING_CONDITION_REASON, "Error"),
        (ANN_FAILURE_REASON, failure.reason.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// A worker's Running condition annotations and the clone source's counterparts.
pub const SOURCE_RUNNING_KEYS: [(&str, &str); 3] = [
    (
        annotations::RUNNING_CONDITION,
        annotations::SOURCE_RUNNING_CONDITION,
    ),
    (
        annotations::RUNNING_CONDITION_MESSAGE,
        annotations::SOURCE_RUNNING_CONDITION_MESSAGE,
    ),
    (
        annotations::RUNNING_CONDITION_REASON,
        annotations::SOURCE_RUNNING_CONDITION_REASON,
    ),
];

/// The target PVC's annotations of a clone source pod's Running condition (CDI's
/// `storage.condition.source.running*`) that differ from `current`: a source that fails and
/// restarts says why on the DataVolume, not only in its own pod.
pub fn source_annotations(
    source_pod: &Pod,
    current: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let from_pod = pvc_annotations_from_pod(source_pod, &BTreeMap::new());
    SOURCE_RUNNING_KEYS
        .into_iter()
        .filter_map(|(from, to)| Some((to.to_string(), from_pod.get(from)?.clone())))
        .filter(|(k, v)| current.get(k) != Some(v))
        .collect()
}

/// Whether the pod is running and ready (the upload server accepts data).
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod's phase (`Pending` when not reported yet).
pub fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".to_string())
}

/// The PVC annotations that report a worker pod, as CDI's import and upload controllers
/// write them: phase, readiness, restarts, and the Running condition from the container's
/// state. A terminal failure is reported as phase `Failed` even while the kubelet would
/// restart the pod.
pub fn pvc_annotations_from_pod(
    pod: &Pod,
    current: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut ann = BTreeMap::new();
    let terminal = worker_failure(pod);
    let phase = if terminal.is_some() {
        "Failed".to_string()
    } else {
        phase(pod)
    };
    ann.insert(annotations::POD_PHASE.to_string(), phase);
    ann.insert(
        annotations::POD_READY.to_string(),
        is_ready(pod).to_string(),
    );
    let Some((state, last, restarts)) = container_state(pod) else {
        return ann;
    };
    let known: i32 = current
        .get(annotations::POD_RESTARTS)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    ann.insert(
        annotations::POD_RESTARTS.to_string(),
        restarts.max(known).to_string(),
    );
    let mut running = |status: &str, message: &str, reason: &str| {
        ann.insert(
            annotations::RUNNING_CONDITION.to_string(),
            status.to_string(),
        );
        ann.insert(
            annotations::RUNNING_CONDITION_MESSAGE.to_string(),
            message.to_string(),
        );
        ann.insert(
            annotations::RUNNING_CONDITION_REASON.to_string(),
            reason.to_string(),
        );
    };
    if let Some(failure) = &terminal {
        running("false", &failure.message, "Error");
        ann.insert(
            ANN_FAILURE_REASON.to_string(),
            failure.reason.as_str().to_string(),
        );
    } else if state.running.is_some() {
        running("true", "", POD_RUNNING_REASON);
    } else if let Some(waiting) = state
        .waiting
        .as_ref()
        .filter(|w| w.reason.as_deref() != Some("CrashLoopBackOff"))
    {
        running(
            "false",
            waiting.message.as_deref().unwrap_or_default(),
            waiting.reason.as_deref().unwrap_or_default(),
        );
    } else if let Some(terminated) = state.terminated.as_ref().or_else(|| {
        // Between restarts (CrashLoopBackOff) the failure is the last termination.
        last.and_then(|l| l.terminated.as_ref())
            .filter(|_| state.waiting.is_some())
    }) {
        let parsed = TerminationMessage::parse(terminated.message.as_deref().unwrap_or_default());
        let reason = terminated.reason.clone().unwrap_or_else(|| {
            if terminated.exit_code == 0 {
                "Completed"
            } else {
                "Error"
            }
            .to_string()
        });
        running("false", &parsed.message, &reason);
        if parsed.preallocation_applied == Some(true) {
            ann.insert(
                annotations::PREALLOCATION_APPLIED.to_string(),
                "true".to_string(),
            );
        }
    } else {
        ann.insert(
            annotations::RUNNING_CONDITION.to_string(),
            "false".to_string(),
        );
    }
    ann
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::DataVolumeSpec;
    use k8s_openapi::api::core::v1::{
        ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
        EnvVar, PersistentVolumeClaimSpec, PodStatus, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn dv() -> DataVolume {
        let mut dv = DataVolume::new("disk", DataVolumeSpec::default());
        dv.metadata.namespace = Some("ns".into());
        dv.metadata.uid = Some("uid-dv".into());
        dv
    }

    fn pvc(mode: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("disk".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-pvc".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                volume_mode: Some(mode.into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Quantity("1142278537".into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    const ANYWHERE: NodePlacement = NodePlacement {
        node_selector: None,
        affinity: None,
        tolerations: None,
    };

    fn settings(config: &ControllerConfig) -> WorkerSettings<'_> {
        WorkerSettings {
            config,
            filesystem_overhead: 0.06,
            preallocation: false,
            insecure_tls: false,
            placement: &ANYWHERE,
            resources: None,
        }
    }

    fn env_of(pod: &Pod) -> BTreeMap<String, EnvVar> {
        pod.spec.as_ref().unwrap().containers[0]
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|e| (e.name.clone(), e))
            .collect()
    }

    fn value<'a>(env: &'a BTreeMap<String, EnvVar>, name: &str) -> &'a str {
        env.get(name)
            .and_then(|e| e.value.as_deref())
            .unwrap_or_else(|| panic!("{name} missing"))
    }

    #[test]
    fn importer_pod_has_cdis_environment() {
        let config = ControllerConfig::default();
        let source = ImportSource {
            kind: "http",
            endpoint: Some("https://example.com/disk.qcow2.xz".into()),
            secret_ref: Some("creds".into()),
            cert_config_map: Some("cas".into()),
            checksum: Some("sha256:abcd".into()),
            extra_headers: vec!["X-A: b".into()],
            ..Default::default()
        };
        let pod = importer_pod(&dv(), &pvc("Filesystem"), &source, &settings(&config));
        assert_eq!(pod.metadata.name.as_deref(), Some("importer-disk"));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("OnFailure"));
        let c = &spec.containers[0];
        assert_eq!(c.image.as_deref(), Some(crate::DEFAULT_IMAGE));
        assert_eq!(c.args, Some(vec!["importer".to_string()]));
        let env = env_of(&pod);
        assert_eq!(value(&env, "IMPORTER_SOURCE"), "http");
        assert_eq!(
            value(&env, "IMPORTER_ENDPOINT"),
            "https://example.com/disk.qcow2.xz"
        );
        assert_eq!(value(&env, "IMPORTER_CONTENTTYPE"), "kubevirt");
        assert_eq!(value(&env, "IMPORTER_IMAGE_SIZE"), "1142278537");
        assert_eq!(value(&env, "OWNER_UID"), "uid-dv");
        assert_eq!(value(&env, "FILESYSTEM_OVERHEAD"), "0.06");
        assert_eq!(value(&env, "PREALLOCATION"), "false");
        assert_eq!(value(&env, "INSECURE_TLS"), "false");
        assert_eq!(value(&env, "IMPORTER_CHECKSUM"), "sha256:abcd");
        assert_eq!(value(&env, "IMPORTER_METRICS_ADDR"), "0.0.0.0:8443");
        assert_eq!(value(&env, "IMPORTER_CERT_DIR"), "/certs");
        assert_eq!(value(&env, "IMPORTER_EXTRA_HEADER_0"), "X-A: b");
        let key = env["IMPORTER_ACCESS_KEY_ID"]
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("creds", "accessKeyId")
        );
        let key = env["IMPORTER_SECRET_KEY"]
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("creds", "secretKey")
        );
        let mounts = c.volume_mounts.as_ref().unwrap();
        assert!(
            mounts
                .iter()
                .any(|m| m.name == "cdi-data-vol" && m.mount_path == "/data")
        );
        assert!(
            mounts
                .iter()
                .any(|m| m.name == "cdi-cert-vol" && m.mount_path == "/certs")
        );
        let volumes = spec.volumes.as_ref().unwrap();
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "disk"
        );
        let owners = pod.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners[0].kind, "DataVolume");
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(owners[1].kind, "PersistentVolumeClaim");
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()["app"],
            "containerized-data-importer"
        );
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()["cdi.kubevirt.io"],
            "importer"
        );
    }

    #[test]
    fn block_volumes_are_devices_without_overhead() {
        let config = ControllerConfig::default();
        let source = ImportSource {
            kind: "none",
            ..Default::default()
        };
        let pod = importer_pod(&dv(), &pvc("Block"), &source, &settings(&config));
        let c = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            c.volume_devices.as_ref().unwrap()[0].device_path,
            "/dev/cdi-block-volume"
        );
        assert!(c.volume_mounts.is_none());
        let env = env_of(&pod);
        assert_eq!(value(&env, "FILESYSTEM_OVERHEAD"), "0");
        assert_eq!(value(&env, "IMPORTER_SOURCE"), "none");
        assert!(!env.contains_key("IMPORTER_CHECKSUM"));
    }

    #[test]
    fn every_worker_pod_runs_where_the_cdi_crs_workload_placement_says_with_its_resources() {
        let config = ControllerConfig::default();
        let placement: NodePlacement = serde_json::from_value(serde_json::json!({
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "storage", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
        }))
        .expect("a placement");
        let resources: ResourceRequirements = serde_json::from_value(serde_json::json!({
            "limits": {"cpu": "750m", "memory": "600M"},
            "requests": {"cpu": "100m", "memory": "60M"},
        }))
        .expect("resources");
        let placed_settings = WorkerSettings {
            placement: &placement,
            resources: Some(&resources),
            ..settings(&config)
        };
        let connection = CloneConnection {
            upload_url: "https://cdi-upload-disk.ns.svc/v1beta1/upload".into(),
            server_address: None,
            client_cert_pem: String::new(),
            client_key_pem: String::new(),
            server_ca_pem: String::new(),
        };
        let target = pvc("Filesystem");
        let pods = [
            importer_pod(&dv(), &target, &ImportSource::default(), &placed_settings),
            upload_pod(&dv(), &target, &placed_settings, UPLOAD_CLIENT_NAME),
            clone_source_pod(&dv(), &target, &pvc("Block"), &connection, &placed_settings),
        ];
        for pod in pods {
            let spec = pod.spec.expect("a pod spec");
            assert_eq!(spec.node_selector, placement.node_selector);
            assert_eq!(spec.tolerations, placement.tolerations);
            assert_eq!(spec.affinity, placement.affinity);
            assert_eq!(spec.containers.len(), 1, "the placement keeps the rest");
            assert_eq!(spec.containers[0].resources.as_ref(), Some(&resources));
        }
        let unplaced = importer_pod(&dv(), &target, &ImportSource::default(), &settings(&config));
        let spec = unplaced.spec.expect("a pod spec");
        assert!(spec.node_selector.is_none() && spec.tolerations.is_none());
        assert!(spec.containers[0].resources.is_none());
    }

    #[test]
    fn upload_pod_and_service_match() {
        let config = ControllerConfig::default();
        let pod = upload_pod(
            &dv(),
            &pvc("Filesystem"),
            &settings(&config),
            &config.upload_client_name,
        );
        assert_eq!(pod.metadata.name.as_deref(), Some("cdi-upload-disk"));
        let env = env_of(&pod);
        assert_eq!(value(&env, "TLS_CERT_FILE"), "/etc/tls/tls.crt");
        assert_eq!(value(&env, "CLIENT_CERT_FILE"), "/etc/client/ca-bundle.crt");
        assert_eq!(value(&env, "UPLOAD_IMAGE_SIZE"), "1142278537");
        assert_eq!(value(&env, "CLIENT_NAME"), UPLOAD_CLIENT_NAME);
        assert_eq!(
            pod.spec.as_ref().unwrap().containers[0].args,
            Some(vec!["upload-server".to_string()])
        );
        let service = upload_service(&dv(), &pvc("Filesystem"));
        assert_eq!(service.metadata.name.as_deref(), Some("cdi-upload-disk"));
        let selector = service.spec.unwrap().selector.unwrap();
        assert_eq!(
            pod.metadata.labels.unwrap()[UPLOAD_TARGET_LABEL],
            selector[UPLOAD_TARGET_LABEL]
        );
    }

    #[test]
    fn clone_source_pod_streams_the_source_to_the_targets_upload_server() {
        let config = ControllerConfig::default();
        let mut source = pvc("Filesystem");
        source.metadata.name = Some("golden".into());
        let connection = CloneConnection {
            upload_url: "https://cdi-upload-disk.ns.svc/v1beta1/upload".into(),
            server_address: Some("127.0.0.9:8443".into()),
            client_cert_pem: "CERT".into(),
            client_key_pem: "KEY".into(),
            server_ca_pem: "CA".into(),
        };
        let pod = clone_source_pod(
            &dv(),
            &pvc("Block"),
            &source,
            &connection,
            &settings(&config),
        );
        assert_eq!(pod.metadata.name.as_deref(), Some("uid-pvc-source-pod"));
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()[CLONE_UNIQUE_ID_LABEL],
            "uid-pvc-source-pod"
        );
        // Same namespace: owned like the other workers, so deleting the DataVolume removes it.
        assert_eq!(pod.metadata.owner_references.as_ref().unwrap().len(), 2);
        let env = env_of(&pod);
        assert_eq!(value(&env, "UPLOAD_URL"), connection.upload_url);
        assert_eq!(value(&env, "CLIENT_CERT"), "CERT");
        assert_eq!(
            value(&env, "FERROVIRT_UPLOAD_SERVER_ADDRESS"),
            "127.0.0.9:8443"
        );
        let spec = pod.spec.unwrap();
        let c = &spec.containers[0];
        assert_eq!(
            c.args.as_ref().unwrap()[..3],
            ["clone-source", "--content-type", "filesystem-clone"]
        );
        let mount = &c.volume_mounts.as_ref().unwrap()[0];
        assert_eq!(mount.mount_path, CLONE_SOURCE_MOUNT);
        assert_eq!(mount.read_only, Some(true));
        let volume = &spec.volumes.unwrap()[0];
        assert_eq!(
            volume.persistent_volume_claim.as_ref().unwrap().claim_name,
            "golden"
        );

        source.metadata.namespace = Some("images".into());
        let pod = clone_source_pod(
            &dv(),
            &pvc("Block"),
            &source,
            &connection,
            &settings(&config),
        );
        assert_eq!(pod.metadata.namespace.as_deref(), Some("images"));
        assert!(pod.metadata.owner_references.is_none());
    }

    fn pod_with(
        state: ContainerState,
        last: Option<ContainerState>,
        phase: &str,
        restarts: i32,
    ) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                container_statuses: Some(vec![ContainerStatus {
                    name: "importer".into(),
                    state: Some(state),
                    last_state: last,
                    restart_count: restarts,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn terminated(code: i32, message: &str) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                message: Some(message.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A worker's termination message of a failure for `reason`.
    fn failed(reason: FailureReason, message: &str) -> String {
        WorkerFailure::new(reason, message).termination_message()
    }

    #[test]
    fn running_and_completed_pods_become_cdis_annotations() {
        let running = ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        };
        let ann =
            pvc_annotations_from_pod(&pod_with(running, None, "Running", 2), &BTreeMap::new());
        assert_eq!(ann[annotations::POD_PHASE], "Running");
        assert_eq!(ann[annotations::POD_RESTARTS], "2");
        assert_eq!(ann[annotations::RUNNING_CONDITION], "true");
        assert_eq!(ann[annotations::RUNNING_CONDITION_REASON], "Pod is running");
        let done = terminated(
            0,
            r#"{"scratchSpaceRequired":false,"preallocationApplied":true,"message":"Import Complete"}"#,
        );
        let ann = pvc_annotations_from_pod(&pod_with(done, None, "Succeeded", 0), &BTreeMap::new());
        assert_eq!(ann[annotations::POD_PHASE], "Succeeded");
        assert_eq!(ann[annotations::RUNNING_CONDITION], "false");
        assert_eq!(
            ann[annotations::RUNNING_CONDITION_MESSAGE],
            "Import Complete"
        );
        assert_eq!(ann[annotations::RUNNING_CONDITION_REASON], "Completed");
        assert_eq!(ann[annotations::PREALLOCATION_APPLIED], "true");
    }

    #[test]
    fn checksum_and_size_failures_are_terminal_others_are_not() {
        let msg =
            "Unable to process data: checksum mismatch: expected sha256:00, calculated sha256:11";
        let pod = pod_with(
            terminated(1, &failed(FailureReason::ChecksumMismatch, msg)),
            None,
            "Failed",
            0,
        );
        assert_eq!(terminal_failure(&pod).as_deref(), Some(msg));
        let ann = pvc_annotations_from_pod(&pod, &BTreeMap::new());
        assert_eq!(ann[annotations::POD_PHASE], "Failed");
        assert_eq!(ann[annotations::RUNNING_CONDITION_REASON], "Error");
        assert_eq!(ann[annotations::RUNNING_CONDITION_MESSAGE], msg);
        // Restarted by the kubelet: the failure is in lastState.
        let running = ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        };
        let small = "Unable to process data: target too small to contain image: needs 2 bytes, 1 available on /data/disk.img";
        let pod = pod_with(
            running.clone(),
            Some(terminated(1, &failed(FailureReason::TargetTooSmall, small))),
            "Running",
            1,
        );
        assert_eq!(terminal_failure(&pod).as_deref(), Some(small));
        let transient = pod_with(
            running,
            Some(terminated(1, "Unable to process data: connection reset")),
            "Running",
            1,
        );
        assert_eq!(terminal_failure(&transient), None);
        let ann = pvc_annotations_from_pod(
            &transient,
            &[(annotations::POD_RESTARTS.to_string(), "3".to_string())].into(),
        );
        assert_eq!(
            ann[annotations::POD_RESTARTS],
            "3",
            "restarts never go down"
        );
    }

    #[test]
    fn a_crash_looping_pod_reports_its_last_failure() {
        let backoff = ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("CrashLoopBackOff".into()),
                message: Some("back-off restarting failed container importer".into()),
            }),
            ..Default::default()
        };
        let not_found = "Unable to process data: HTTP 404 Not Found from http://host/x.qcow2";
        let pod = pod_with(
            backoff.clone(),
            Some(terminated(1, not_found)),
            "Running",
            2,
        );
        let ann = pvc_annotations_from_pod(&pod, &BTreeMap::new());
        assert_eq!(ann[annotations::RUNNING_CONDITION], "false");
        assert_eq!(ann[annotations::RUNNING_CONDITION_MESSAGE], not_found);
        assert_eq!(ann[annotations::POD_PHASE], "Running", "404 is retried");
        let small = "Unable to process data: requested size 1048576 is too small for the \
                     image's virtual size 33554432: a larger volume is required";
        let pod = pod_with(
            backoff,
            Some(terminated(1, &failed(FailureReason::TargetTooSmall, small))),
            "Running",
            2,
        );
        assert_eq!(terminal_failure(&pod).as_deref(), Some(small));
    }

    #[test]
    fn the_reason_not_the_wording_makes_a_failure_final() {
        // Worded like a final failure, but given as one a retry may fix: retried.
        let worded = "Unable to process data: checksum mismatch, target too small";
        let pod = pod_with(
            terminated(1, &failed(FailureReason::Other, worded)),
            None,
            "Running",
            1,
        );
        assert_eq!(terminal_failure(&pod), None);
        let ann = pvc_annotations_from_pod(&pod, &BTreeMap::new());
        assert_eq!(ann[annotations::RUNNING_CONDITION_MESSAGE], worded);
        assert!(!ann.contains_key(ANN_FAILURE_REASON));
        // Worded like anything, given as final: the DataVolume fails with that message.
        let reworded = "Unable to process data: the bytes are not the ones asked for";
        let pod = pod_with(
            terminated(1, &failed(FailureReason::ChecksumMismatch, reworded)),
            None,
            "Running",
            1,
        );
        let ann = pvc_annotations_from_pod(&pod, &BTreeMap::new());
        assert_eq!(ann[annotations::POD_PHASE], "Failed");
        assert_eq!(ann[ANN_FAILURE_REASON], "ChecksumMismatch");
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                annotations: Some(ann),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(recorded_terminal_failure(&claim).as_deref(), Some(reworded));
    }
}
