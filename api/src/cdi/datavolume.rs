//! The DataVolume (cdi.kubevirt.io/v1beta1): a PVC together with the data that fills it,
//! with upstream's sources, phases, condition types and reasons.

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaimSpec, TypedLocalObjectReference, TypedObjectReference,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::ConditionStatus;

/// The desired state of a DataVolume: where the data comes from and the volume it goes to.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "DataVolume",
    namespaced,
    status = "DataVolumeStatus",
    shortname = "dv",
    shortname = "dvs",
    category = "all",
    derive = "PartialEq",
    doc = "DataVolume is an abstraction on top of PersistentVolumeClaims to allow easy population of those PersistentVolumeClaims with relation to VirtualMachines",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "The phase the data volume is in"
    ),
    printcolumn(
        name = "Progress",
        type_ = "string",
        json_path = ".status.progress",
        description = "Transfer progress in percentage if known, N/A otherwise"
    ),
    printcolumn(
        name = "Restarts",
        type_ = "integer",
        json_path = ".status.restartCount",
        description = "The number of times the transfer has been restarted."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSpec {
    /// The source of the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<DataVolumeSource>,
    /// An indirect reference to the source (a DataSource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<DataVolumeSourceRef>,
    /// The PVC to create, exactly as written (no StorageProfile defaults applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<PersistentVolumeClaimSpec>,
    /// The storage to create, completed from the StorageProfile of its storage class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageSpec>,
    /// Priority class of the importer, cloner and upload pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// What the data is: a disk image (`kubevirt`, the default) or a tar archive to unpack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<DataVolumeContentType>,
    /// The stages of a multistage (warm) import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<Vec<DataVolumeCheckpoint>>,
    /// Whether the current checkpoint is the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_checkpoint: Option<bool>,
    /// Whether the volume's space is allocated in advance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocation: Option<bool>,
    /// The service account the importer and upload pods run as (the namespace's `default`
    /// when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// The kind of data a DataVolume holds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DataVolumeContentType {
    /// A disk image, converted to raw on the volume.
    #[serde(rename = "kubevirt")]
    KubeVirt,
    /// A tar archive unpacked onto a filesystem volume.
    Archive,
}

impl DataVolumeContentType {
    /// The value as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KubeVirt => "kubevirt",
            Self::Archive => "archive",
        }
    }
}

/// A stage of a multistage import.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct DataVolumeCheckpoint {
    /// The snapshot of the previous checkpoint.
    pub previous: String,
    /// The snapshot of this checkpoint.
    pub current: String,
}

/// Where the data of a DataVolume comes from; exactly one member is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSource {
    /// An http(s) endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<DataVolumeSourceHttp>,
    /// An S3 bucket object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<DataVolumeSourceS3>,
    /// A Google Cloud Storage object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<DataVolumeSourceGcs>,
    /// A container image holding a disk image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<DataVolumeSourceRegistry>,
    /// An existing PVC to clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<DataVolumeSourcePvc>,
    /// Data uploaded through the upload proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<DataVolumeSourceUpload>,
    /// A new empty raw image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blank: Option<DataVolumeBlankImage>,
    /// An oVirt disk through ovirt-imageio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imageio: Option<DataVolumeSourceImageIo>,
    /// A VMware disk through VDDK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vddk: Option<DataVolumeSourceVddk>,
    /// An existing VolumeSnapshot to restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<DataVolumeSourceSnapshot>,
}

impl DataVolumeSource {
    /// The names of the members that are set, in declaration order.
    pub fn kinds(&self) -> Vec<&'static str> {
        let mut kinds = Vec::new();
        let members: [(&'static str, bool); 10] = [
            ("http", self.http.is_some()),
            ("s3", self.s3.is_some()),
            ("gcs", self.gcs.is_some()),
            ("registry", self.registry.is_some()),
            ("pvc", self.pvc.is_some()),
            ("upload", self.upload.is_some()),
            ("blank", self.blank.is_some()),
            ("imageio", self.imageio.is_some()),
            ("vddk", self.vddk.is_some()),
            ("snapshot", self.snapshot.is_some()),
        ];
        for (name, set) in members {
            if set {
                kinds.push(name);
            }
        }
        kinds
    }

    /// Whether the source clones an existing volume or snapshot (so the size may be taken
    /// from the source).
    pub fn is_clone(&self) -> bool {
        self.pvc.is_some() || self.snapshot.is_some()
    }
}

/// Names of the source members, for messages.
pub const SOURCE_KINDS: [&str; 10] = [
    "http", "s3", "gcs", "registry", "pvc", "upload", "blank", "imageio", "vddk", "snapshot",
];

/// An existing PVC to clone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DataVolumeSourcePvc {
    /// The namespace of the PVC.
    pub namespace: String,
    /// The name of the PVC.
    pub name: String,
}

/// An existing VolumeSnapshot to restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DataVolumeSourceSnapshot {
    /// The namespace of the snapshot.
    pub namespace: String,
    /// The name of the snapshot.
    pub name: String,
}

/// A new empty raw image (no parameters).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DataVolumeBlankImage {}

/// An upload through the upload proxy (no parameters).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DataVolumeSourceUpload {}

/// An http(s) endpoint, with optional basic auth and extra CAs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceHttp {
    /// The URL of the image.
    pub url: String,
    /// A Secret with `accessKeyId` (user) and `secretKey` (password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// A ConfigMap with CA certificates to trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config_map: Option<String>,
    /// Extra `Name: value` headers sent with every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_headers: Option<Vec<String>>,
    /// Secrets each holding an extra header that may be sensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_extra_headers: Option<Vec<String>>,
    /// The expected digest of the downloaded bytes, as `algorithm:hex` with algorithm one of
    /// md5, sha1, sha256, sha512. The import fails on a mismatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Whether the server's TLS certificate is accepted without being verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_skip_verify: Option<bool>,
}

/// An object in an S3 bucket.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceS3 {
    /// The URL of the object.
    pub url: String,
    /// A Secret with `accessKeyId` and `secretKey`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// A ConfigMap with CA certificates to trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config_map: Option<String>,
}

/// An object in Google Cloud Storage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceGcs {
    /// The URL of the object.
    pub url: String,
    /// A Secret with the service account key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
}

/// A container image holding a disk image under `/disk`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceRegistry {
    /// The image, as `docker://…` or `oci-archive://…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// An OpenShift ImageStream to import from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_stream: Option<String>,
    /// How the image is pulled: by an importer pod or by the node's container runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_method: Option<RegistryPullMethod>,
    /// A Secret with `accessKeyId` and `secretKey` for the registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// A ConfigMap with the registry's CA certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config_map: Option<String>,
    /// The platform to pick from a multi-architecture image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<PlatformOptions>,
}

/// Registry URL scheme of a Docker/OCI registry.
pub const REGISTRY_SCHEME_DOCKER: &str = "docker";
/// Registry URL scheme of an OCI archive.
pub const REGISTRY_SCHEME_OCI_ARCHIVE: &str = "oci-archive";

/// How a registry image is pulled.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RegistryPullMethod {
    /// An importer pod pulls the image (the default).
    Pod,
    /// The node's container runtime pulls the image.
    Node,
}

/// The runtime requirements of a registry image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PlatformOptions {
    /// The CPU architecture to select.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
}

/// An oVirt disk read through ovirt-imageio.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceImageIo {
    /// The URL of the oVirt engine.
    pub url: String,
    /// The id of the disk.
    pub disk_id: String,
    /// A Secret with the engine credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// A ConfigMap with the engine's CA certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config_map: Option<String>,
    /// Skip certificate verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_skip_verify: Option<bool>,
}

/// A VMware disk read through VDDK.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceVddk {
    /// The URL of the vCenter or ESXi host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The UUID of the virtual machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The path of the disk on the datastore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backing_file: Option<String>,
    /// The host's certificate thumbprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thumbprint: Option<String>,
    /// A Secret with the user name and password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// An image with the VDDK library.
    #[serde(
        default,
        rename = "initImageURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub init_image_url: Option<String>,
    /// A ConfigMap with extra VDDK arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_args: Option<String>,
    /// A ConfigMap with the CA certificate of the vCenter or ESXi host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config_map: Option<String>,
}

/// An indirect reference to the source of a DataVolume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DataVolumeSourceRef {
    /// The kind of the referenced object; only `DataSource` is supported.
    pub kind: String,
    /// Its namespace; the DataVolume's namespace when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// The only kind a `sourceRef` may name.
pub const SOURCE_REF_KIND_DATA_SOURCE: &str = "DataSource";

/// The storage of a DataVolume; unset fields are completed from the StorageProfile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// The access modes of the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_modes: Option<Vec<String>>,
    /// A label query over volumes to bind to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The requested size (`requests.storage`); may be omitted when cloning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<VolumeResourceRequirements>,
    /// The PersistentVolume to bind to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_name: Option<String>,
    /// The storage class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// `Filesystem`, `Block`, or `FromStorageProfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<String>,
    /// A snapshot or PVC to populate the volume from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<TypedLocalObjectReference>,
    /// An object to populate the volume from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source_ref: Option<TypedObjectReference>,
}

/// The volume mode that asks CDI to pick the mode from the StorageProfile.
pub const VOLUME_MODE_FROM_STORAGE_PROFILE: &str = "FromStorageProfile";

/// The observed state of a DataVolume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeStatus {
    /// The name of the PVC that holds the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// The current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DataVolumePhase>,
    /// Transfer progress such as `45.30%`, or `N/A`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// How often the pod populating the volume restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count: Option<i32>,
    /// The Bound, Running and Ready conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<DataVolumeCondition>>,
}

/// The progress value when it is not known.
pub const PROGRESS_NOT_AVAILABLE: &str = "N/A";

/// The phase of a DataVolume, with upstream's names.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DataVolumePhase {
    /// Created, nothing done yet.
    Pending,
    /// The PVC is bound.
    #[serde(rename = "PVCBound")]
    PvcBound,
    /// The importer pod is scheduled.
    ImportScheduled,
    /// The import is running.
    ImportInProgress,
    /// The clone is scheduled.
    CloneScheduled,
    /// The host-assisted clone is running.
    CloneInProgress,
    /// A snapshot of the source is being taken for a smart clone.
    SnapshotForSmartCloneInProgress,
    /// A PVC is being restored from a source snapshot.
    CloneFromSnapshotSourceInProgress,
    /// The PVC of a smart clone is being created.
    #[serde(rename = "SmartClonePVCInProgress")]
    SmartClonePvcInProgress,
    /// The CSI driver is cloning the volume.
    #[serde(rename = "CSICloneInProgress")]
    CsiCloneInProgress,
    /// The PVC is being expanded.
    ExpansionInProgress,
    /// The PVC is being moved from a temporary namespace.
    NamespaceTransferInProgress,
    /// The claim is being prepared (populators).
    PrepClaimInProgress,
    /// The PV is being rebound to the target claim (populators).
    RebindInProgress,
    /// The upload pod is scheduled.
    UploadScheduled,
    /// The upload server accepts data.
    UploadReady,
    /// The storage class binds on first consumer, and there is none yet.
    WaitForFirstConsumer,
    /// A populator will fill the PVC once it exists.
    PendingPopulation,
    /// The data is in place.
    Succeeded,
    /// The population failed.
    Failed,
    /// A multistage import waits for its next checkpoint.
    Paused,
    /// The phase is not known.
    Unknown,
}

impl DataVolumePhase {
    /// Whether a consumer (a VM's instance) may use the claim now: the data is there, or
    /// the claim waits for its first consumer to be bound or populated.
    pub fn usable_by_consumer(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::WaitForFirstConsumer | Self::PendingPopulation
        )
    }

    /// The value as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::PvcBound => "PVCBound",
            Self::ImportScheduled => "ImportScheduled",
            Self::ImportInProgress => "ImportInProgress",
            Self::CloneScheduled => "CloneScheduled",
            Self::CloneInProgress => "CloneInProgress",
            Self::SnapshotForSmartCloneInProgress => "SnapshotForSmartCloneInProgress",
            Self::CloneFromSnapshotSourceInProgress => "CloneFromSnapshotSourceInProgress",
            Self::SmartClonePvcInProgress => "SmartClonePVCInProgress",
            Self::CsiCloneInProgress => "CSICloneInProgress",
            Self::ExpansionInProgress => "ExpansionInProgress",
            Self::NamespaceTransferInProgress => "NamespaceTransferInProgress",
            Self::PrepClaimInProgress => "PrepClaimInProgress",
            Self::RebindInProgress => "RebindInProgress",
            Self::UploadScheduled => "UploadScheduled",
            Self::UploadReady => "UploadReady",
            Self::WaitForFirstConsumer => "WaitForFirstConsumer",
            Self::PendingPopulation => "PendingPopulation",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Paused => "Paused",
            Self::Unknown => "Unknown",
        }
    }

    /// Whether the DataVolume has reached an end state.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// A condition of a DataVolume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeCondition {
    /// Ready, Bound or Running.
    #[serde(rename = "type")]
    pub type_: DataVolumeConditionType,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// When the condition was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    /// A machine-readable reason, see [`reasons`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The condition types of a DataVolume.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DataVolumeConditionType {
    /// The data is ready to be consumed.
    Ready,
    /// The PVC is bound.
    Bound,
    /// The importer, upload or clone pod is running.
    Running,
}

/// Condition reasons CDI writes on DataVolumes.
pub mod reasons {
    /// Bound: the PVC is bound.
    pub const BOUND: &str = "Bound";
    /// Bound: the PVC is pending.
    pub const PENDING: &str = "Pending";
    /// Bound: the PVC lost its volume.
    pub const CLAIM_LOST: &str = "ClaimLost";
    /// Bound: there is no PVC.
    pub const NOT_FOUND: &str = "NotFound";
    /// Ready: the transfer pod is running.
    pub const TRANSFER_RUNNING: &str = "TransferRunning";
    /// Running: the pod cannot be scheduled.
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    /// Running: the pod finished its work.
    pub const COMPLETED: &str = "Completed";
    /// Running: the pod failed.
    pub const ERROR: &str = "Error";
    /// Running: the pod is being created.
    pub const POD_PENDING: &str = "Pending";
}

/// PVC annotations through which CDI's pods and controllers talk, read by users and tools.
pub mod annotations {
    /// The phase of the pod populating the PVC (`Pending`, `Running`, `Succeeded`, `Failed`).
    pub const POD_PHASE: &str = "cdi.kubevirt.io/storage.pod.phase";
    /// Whether that pod is ready.
    pub const POD_READY: &str = "cdi.kubevirt.io/storage.pod.ready";
    /// How often that pod restarted.
    pub const POD_RESTARTS: &str = "cdi.kubevirt.io/storage.pod.restarts";
    /// Running condition status of the target side, `true`/`false`.
    pub const RUNNING_CONDITION: &str = "cdi.kubevirt.io/storage.condition.running";
    /// Running condition message.
    pub const RUNNING_CONDITION_MESSAGE: &str = "cdi.kubevirt.io/storage.condition.running.message";
    /// Running condition reason.
    pub const RUNNING_CONDITION_REASON: &str = "cdi.kubevirt.io/storage.condition.running.reason";
    /// Running condition status of the clone source side.
    pub const SOURCE_RUNNING_CONDITION: &str = "cdi.kubevirt.io/storage.condition.source.running";
    /// Bound condition status reported by a populator.
    pub const BOUND_CONDITION: &str = "cdi.kubevirt.io/storage.condition.bound";
    /// Bound condition message.
    pub const BOUND_CONDITION_MESSAGE: &str = "cdi.kubevirt.io/storage.condition.bound.message";
    /// Bound condition reason.
    pub const BOUND_CONDITION_REASON: &str = "cdi.kubevirt.io/storage.condition.bound.reason";
    /// The import endpoint URL.
    pub const IMPORT_ENDPOINT: &str = "cdi.kubevirt.io/storage.import.endpoint";
    /// The import source kind (`http`, `s3`, `registry`, `none`, …).
    pub const IMPORT_SOURCE: &str = "cdi.kubevirt.io/storage.import.source";
    /// The content type of the import.
    pub const CONTENT_TYPE: &str = "cdi.kubevirt.io/storage.contentType";
    /// Marks a PVC as an upload target.
    pub const UPLOAD_REQUEST: &str = "cdi.kubevirt.io/storage.upload.target";
    /// Transfer progress reported by a populator.
    pub const POPULATOR_PROGRESS: &str = "cdi.kubevirt.io/storage.populator.progress";
    /// The Secret with the source credentials.
    pub const SECRET: &str = "cdi.kubevirt.io/storage.import.secretName";
    /// The ConfigMap with the source's CA certificates.
    pub const CERT_CONFIG_MAP: &str = "cdi.kubevirt.io/storage.import.certConfigMap";
    /// Extra http headers of the import.
    pub const EXTRA_HEADERS: &str = "cdi.kubevirt.io/storage.import.extraHeaders";
    /// The registry pull method (`pod` or `node`).
    pub const REGISTRY_IMPORT_METHOD: &str = "cdi.kubevirt.io/storage.import.registryImportMethod";
    /// The name of the importer pod.
    pub const IMPORT_POD: &str = "cdi.kubevirt.io/storage.import.importPodName";
    /// Whether preallocation was requested.
    pub const PREALLOCATION_REQUESTED: &str = "cdi.kubevirt.io/storage.preallocation.requested";
    /// Whether preallocation was applied.
    pub const PREALLOCATION_APPLIED: &str = "cdi.kubevirt.io/storage.preallocation";
    /// Source running condition message.
    pub const SOURCE_RUNNING_CONDITION_MESSAGE: &str =
        "cdi.kubevirt.io/storage.condition.source.running.message";
    /// Source running condition reason.
    pub const SOURCE_RUNNING_CONDITION_REASON: &str =
        "cdi.kubevirt.io/storage.condition.source.running.reason";
    /// The snapshot of the previous checkpoint of a multistage import.
    pub const PREVIOUS_CHECKPOINT: &str = "cdi.kubevirt.io/storage.checkpoint.previous";
    /// The snapshot of the current checkpoint of a multistage import.
    pub const CURRENT_CHECKPOINT: &str = "cdi.kubevirt.io/storage.checkpoint.current";
    /// Whether the current checkpoint is the last.
    pub const FINAL_CHECKPOINT: &str = "cdi.kubevirt.io/storage.checkpoint.final";
    /// Marks a PVC as populated for the named DataVolume.
    pub const POPULATED_FOR: &str = "cdi.kubevirt.io/storage.populatedFor";
    /// Marks a PVC as already populated.
    pub const PRE_POPULATED: &str = "cdi.kubevirt.io/storage.prePopulated";
    /// Binding mode: immediate binding even with a WaitForFirstConsumer storage class.
    pub const IMMEDIATE_BINDING: &str = "cdi.kubevirt.io/storage.bind.immediate.requested";
    /// Whether the PVC is deleted when the DataVolume completes (garbage collection).
    pub const DELETE_AFTER_COMPLETION: &str = "cdi.kubevirt.io/storage.deleteAfterCompletion";
    /// Kubernetes' own: the node a WaitForFirstConsumer volume is provisioned on, set by the
    /// scheduler when it places the first pod that uses the claim.
    pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
}

/// Values of the [`annotations::IMPORT_SOURCE`] annotation.
pub mod import_source {
    /// An http(s) endpoint (also the default).
    pub const HTTP: &str = "http";
    /// An S3 bucket.
    pub const S3: &str = "s3";
    /// Google Cloud Storage.
    pub const GCS: &str = "gcs";
    /// A container registry.
    pub const REGISTRY: &str = "registry";
    /// ovirt-imageio.
    pub const IMAGEIO: &str = "imageio";
    /// VMware VDDK.
    pub const VDDK: &str = "vddk";
    /// No source: a blank image.
    pub const NONE: &str = "none";
}

/// The progress value of a finished transfer.
pub const PROGRESS_DONE: &str = "100.0%";

/// The key of the storage size in `resources.requests`.
pub const STORAGE_RESOURCE: &str = "storage";
