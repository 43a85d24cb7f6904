//! The observed state of a VirtualMachine (`status`): whether its instance exists and is
//! ready, pending start/stop and volume requests, the crash-loop record, snapshot, restore
//! and memory dump progress, and the instance type and preference it was expanded with.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RunStrategy;
use super::vmi::{
    DataVolumeVolumeSource, Disk, PersistentVolumeClaimVolumeSource, StorageMigratedVolumeInfo,
    VirtualMachineCondition,
};

/// The observed state of a VirtualMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    /// Whether an instance exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// Whether the instance is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// The one-word state shown by `kubectl get vm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printable_status: Option<VirtualMachinePrintableStatus>,
    /// The run strategy in effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<RunStrategy>,
    /// Ready, Failure, Paused, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<VirtualMachineCondition>>,
    /// Pending start and stop requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_change_requests: Option<Vec<VirtualMachineStateChangeRequest>>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The generation of the spec the instance was created from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_generation: Option<i64>,
    /// The instance type the instance was expanded with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instancetype_ref: Option<InstancetypeStatusRef>,
    /// The preference the instance was expanded with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference_ref: Option<InstancetypeStatusRef>,
    /// A memory dump asked for or under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_dump_request: Option<VirtualMachineMemoryDumpRequest>,
    /// The restore under way, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_in_progress: Option<String>,
    /// The snapshot under way, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_in_progress: Option<String>,
    /// The record of instances that failed to start, which delays the next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_failure: Option<VirtualMachineStartFailure>,
    /// Volume hotplug and unplug requests not yet carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_requests: Option<Vec<VirtualMachineVolumeRequest>>,
    /// Whether each volume can be snapshotted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_statuses: Option<Vec<VolumeSnapshotStatus>>,
    /// The progress of a change of the VM's volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_update_state: Option<VolumeUpdateState>,
}

/// A request to start or stop the VM's instance.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct VirtualMachineStateChangeRequest {
    /// `Start` or `Stop`.
    pub action: String,
    /// Extra data of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<BTreeMap<String, String>>,
    /// The instance the request is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// The one-word state of a VM, with upstream's names.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum VirtualMachinePrintableStatus {
    /// No instance exists.
    Stopped,
    /// Volumes are being prepared.
    Provisioning,
    /// The instance is being started.
    Starting,
    /// The instance runs.
    Running,
    /// The instance is paused.
    Paused,
    /// The instance is being stopped.
    Stopping,
    /// The VM is being deleted.
    Terminating,
    /// The instance keeps failing and restarts with back-off.
    CrashLoopBackOff,
    /// The instance is migrating.
    Migrating,
    /// The state cannot be determined.
    Unknown,
    /// The launcher pod cannot be scheduled.
    ErrorUnschedulable,
    /// A container image cannot be pulled.
    ErrImagePull,
    /// Pulling a container image is backing off.
    ImagePullBackOff,
    /// A PVC of the VM does not exist.
    ErrorPvcNotFound,
    /// A DataVolume of the VM does not exist.
    ErrorDataVolumeNotFound,
    /// A DataVolume of the VM failed.
    DataVolumeError,
    /// Waiting for PVCs to bind.
    WaitingForVolumeBinding,
    /// Waiting to receive a migration.
    WaitingForReceiver,
}

/// The instance type or preference a VM was expanded with, and the revision holding it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstancetypeStatusRef {
    /// The controller revision storing the object as applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_revision_ref: Option<ControllerRevisionRef>,
    /// The volume the name was inferred from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infer_from_volume: Option<String>,
    /// What happens when inferring fails: `Reject` or `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infer_from_volume_failure_policy: Option<String>,
    /// The kind, namespaced or cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A controller revision, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ControllerRevisionRef {
    /// The revision's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A memory dump of the guest into a claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineMemoryDumpRequest {
    /// The claim the dump goes to.
    pub claim_name: String,
    /// `InProgress`, `Associating`, `Completed`, `Unmounting`, `Dissociating`, `Failed`, ….
    pub phase: String,
    /// When the dump ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Time>,
    /// The dump file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether the dump's claim is being removed from the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<bool>,
    /// When the dump started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
}

/// The record of instances that ended before they ever ran (the crash-loop back-off).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStartFailure {
    /// Instances in a row that failed to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_fail_count: Option<i32>,
    /// The UID of the last of them.
    #[serde(
        default,
        rename = "lastFailedVMIUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_failed_vmi_uid: Option<String>,
    /// No instance is created before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_timestamp: Option<Time>,
}

/// A volume to hotplug or unplug.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineVolumeRequest {
    /// Add a volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_volume_options: Option<AddVolumeOptions>,
    /// Remove a volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_volume_options: Option<RemoveVolumeOptions>,
}

/// A volume to hotplug and the disk it becomes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddVolumeOptions {
    /// The volume's name.
    pub name: String,
    /// The disk the guest sees.
    pub disk: Disk,
    /// Where the volume comes from.
    pub volume_source: HotplugVolumeSource,
    /// `All`: only check the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<String>>,
}

/// A volume to unplug.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoveVolumeOptions {
    /// The volume's name.
    pub name: String,
    /// `All`: only check the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<String>>,
}

/// What a hotplugged volume is: a DataVolume or a claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HotplugVolumeSource {
    /// A DataVolume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_volume: Option<DataVolumeVolumeSource>,
    /// A claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
}

/// Whether a volume can be snapshotted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VolumeSnapshotStatus {
    /// The volume's name.
    pub name: String,
    /// Whether it can.
    pub enabled: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The progress of a change of a VM's volumes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeUpdateState {
    /// A storage migration under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_migration_state: Option<VolumeMigrationState>,
}

/// The volumes a storage migration moves.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMigrationState {
    /// Each volume with its source and destination claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrated_volumes: Option<Vec<StorageMigratedVolumeInfo>>,
}
