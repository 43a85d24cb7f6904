//! The StorageProfile (cdi.kubevirt.io/v1beta1, cluster-scoped): per storage class, the
//! access modes, volume mode and clone strategy CDI uses to complete a DataVolume's `storage`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of a StorageProfile (overrides of what CDI detects).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "StorageProfile",
    status = "StorageProfileStatus",
    derive = "PartialEq",
    doc = "StorageProfile provides a CDI specific recommendation for storage parameters"
)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfileSpec {
    /// The preferred clone method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_strategy: Option<CdiCloneStrategy>,
    /// Access mode and volume mode combinations that work on this storage class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_property_sets: Option<Vec<ClaimPropertySet>>,
    /// Whether DataImportCron keeps imports as PVCs or snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_import_cron_source_format: Option<DataImportCronSourceFormat>,
    /// The VolumeSnapshotClass for snapshot clones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_class: Option<String>,
}

/// The observed state of a StorageProfile: what CDI uses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfileStatus {
    /// The storage class described.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Its provisioner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioner: Option<String>,
    /// The clone method used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_strategy: Option<CdiCloneStrategy>,
    /// The property sets used, the first one first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_property_sets: Option<Vec<ClaimPropertySet>>,
    /// The DataImportCron source format used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_import_cron_source_format: Option<DataImportCronSourceFormat>,
    /// The VolumeSnapshotClass used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_class: Option<String>,
}

/// Access modes and a volume mode that work together on a storage class.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimPropertySet {
    /// Access modes (`ReadWriteOnce`, `ReadOnlyMany`, `ReadWriteMany`, `ReadWriteOncePod`).
    #[schemars(length(max = 4), extend("x-kubernetes-validations" = [{
        "rule": "self.all(am, am in ['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOncePod'])",
        "message": "Illegal AccessMode",
    }]))]
    pub access_modes: Vec<String>,
    /// `Filesystem` or `Block`.
    #[schemars(extend("enum" = ["Block", "Filesystem"]))]
    pub volume_mode: Option<String>,
}

/// How CDI clones a volume.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum CdiCloneStrategy {
    /// Host-assisted copy through a source and a target pod.
    #[serde(rename = "copy")]
    Copy,
    /// A VolumeSnapshot of the source restored into the target.
    #[serde(rename = "snapshot")]
    Snapshot,
    /// The CSI driver's volume clone.
    #[serde(rename = "csi-clone")]
    CsiClone,
}

/// The kind of object a DataImportCron keeps its imports as.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DataImportCronSourceFormat {
    /// VolumeSnapshots.
    #[serde(rename = "snapshot")]
    Snapshot,
    /// PVCs.
    #[serde(rename = "pvc")]
    Pvc,
}
