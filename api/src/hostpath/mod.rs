//! hostpathprovisioner.kubevirt.io/v1beta1: the HostPathProvisioner (cluster-scoped), which
//! says where on each node the hostpath CSI driver keeps volumes, with its defaulting (validation
//! is admission's, `admission::hostpath::validate`).

pub mod default;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PersistentVolumeClaimStatus};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{NodePlacement, OperatorCondition};

/// The API group.
pub const GROUP: &str = "hostpathprovisioner.kubevirt.io";
/// The API version.
pub const VERSION: &str = "v1beta1";

/// The desired state of the hostpath provisioner.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hostpathprovisioner.kubevirt.io",
    version = "v1beta1",
    kind = "HostPathProvisioner",
    plural = "hostpathprovisioners",
    status = "HostPathProvisionerStatus",
    derive = "PartialEq",
    doc = "HostPathProvisioner is the Schema for the hostpathprovisioners API"
)]
#[serde(rename_all = "camelCase")]
pub struct HostPathProvisionerSpec {
    /// When to pull the provisioner's images: `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// The single legacy location of volumes (deprecated; use `storagePools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_config: Option<PathConfig>,
    /// Where the provisioner's node pods run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<NodePlacement>,
    /// Enabled feature gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<Vec<String>>,
    /// Named storage pools; a storage class picks one with its `storagePool` parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_pools: Option<Vec<StoragePool>>,
}

/// The legacy single location of volumes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PathConfig {
    /// The directory volumes are created under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Whether the PVC name is part of the volume directory name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_naming_prefix: Option<bool>,
}

/// A named place on each node where volumes are kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoragePool {
    /// The name storage classes refer to.
    pub name: String,
    /// A PVC to create on each node and mount at `path`, backing the pool with other storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc_template: Option<PersistentVolumeClaimSpec>,
    /// The directory on the host.
    pub path: String,
    /// The name of the storage class of the pool's overlay volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay_class_name: Option<String>,
    /// How the pool's volumes are snapshotted (upstream knows only `reflink`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_provider: Option<String>,
}

/// The observed state of the hostpath provisioner.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostPathProvisionerStatus {
    /// Available, Progressing and Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<OperatorCondition>>,
    /// The version of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The version being deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// The version deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_version: Option<String>,
    /// The state of each storage pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_pool_statuses: Option<Vec<StoragePoolStatus>>,
}

/// The state of one storage pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoragePoolStatus {
    /// The pool's name.
    pub name: String,
    /// `Preparing`, `Mounting` or `Ready`.
    pub phase: String,
    /// How many node pods should be ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_ready: Option<i32>,
    /// How many node pods are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_ready: Option<i32>,
    /// The PVCs backing the pool on each node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_statuses: Option<Vec<ClaimStatus>>,
}

/// The phases of a storage pool.
pub mod pool_phase {
    /// Volumes backing the pool are being prepared.
    pub const PREPARING: &str = "Preparing";
    /// Backing volumes are being mounted.
    pub const MOUNTING: &str = "Mounting";
    /// The pool is usable on every node.
    pub const READY: &str = "Ready";
}

/// The state of a PVC backing a storage pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClaimStatus {
    /// The PVC's name.
    pub name: String,
    /// The PVC's status.
    pub status: PersistentVolumeClaimStatus,
}
