//! The volumes a VM's disks are backed by.

use k8s_openapi::api::core::v1::DownwardAPIVolumeFile;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A volume of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// The name disks refer to.
    pub name: String,
    /// A disk image in a container image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_disk: Option<ContainerDiskSource>,
    /// A cloud-init NoCloud data source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_no_cloud: Option<CloudInitSource>,
    /// A cloud-init ConfigDrive data source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_config_drive: Option<CloudInitSource>,
    /// A DataVolume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_volume: Option<DataVolumeVolumeSource>,
    /// A PVC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
    /// A temporary empty disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_disk: Option<EmptyDiskSource>,
    /// A PVC used read-only under a throw-away overlay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<EphemeralVolumeSource>,
    /// A disk image file on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_disk: Option<HostDisk>,
    /// A ConfigMap presented as an ISO disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    /// A Secret presented as an ISO disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
    /// A service account's token, CA and namespace presented as an ISO disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountVolumeSource>,
    /// Pod metadata presented as an ISO disk.
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<DownwardApiVolumeSource>,
    /// Host and VM metrics the guest reads from a disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downward_metrics: Option<DownwardMetricsVolumeSource>,
    /// A claim a memory dump of the guest is written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_dump: Option<MemoryDumpVolumeSource>,
    /// Windows answer files (sysprep) from a ConfigMap or Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sysprep: Option<SysprepSource>,
}

impl Volume {
    /// The volume source kinds set on this volume.
    pub fn source_kinds(&self) -> Vec<String> {
        [
            ("containerDisk", self.container_disk.is_some()),
            ("cloudInitNoCloud", self.cloud_init_no_cloud.is_some()),
            (
                "cloudInitConfigDrive",
                self.cloud_init_config_drive.is_some(),
            ),
            ("dataVolume", self.data_volume.is_some()),
            (
                "persistentVolumeClaim",
                self.persistent_volume_claim.is_some(),
            ),
            ("emptyDisk", self.empty_disk.is_some()),
            ("ephemeral", self.ephemeral.is_some()),
            ("hostDisk", self.host_disk.is_some()),
            ("configMap", self.config_map.is_some()),
            ("secret", self.secret.is_some()),
            ("serviceAccount", self.service_account.is_some()),
            ("downwardAPI", self.downward_api.is_some()),
            ("downwardMetrics", self.downward_metrics.is_some()),
            ("memoryDump", self.memory_dump.is_some()),
            ("sysprep", self.sysprep.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(n, _)| n.to_owned())
        .collect()
    }
}

/// A disk image in a container image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerDiskSource {
    /// The image.
    pub image: String,
    /// When to pull it: `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Always", "IfNotPresent", "Never"]))]
    pub image_pull_policy: Option<String>,
    /// A pull secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secret: Option<String>,
    /// The path of the disk inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Cloud-init user and network data, inline or from a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudInitSource {
    /// User data as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// User data, base64 encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_base64: Option<String>,
    /// A Secret holding the user data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectName>,
    /// Network data as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<String>,
    /// Network data, base64 encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_base64: Option<String>,
    /// A Secret holding the network data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_secret_ref: Option<LocalObjectName>,
}

/// A reference to an object in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct LocalObjectName {
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A DataVolume backing a volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeVolumeSource {
    /// The DataVolume's name, in the VM's namespace.
    pub name: String,
    /// Whether the volume can be hot-unplugged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotpluggable: Option<bool>,
}

/// A PVC backing a volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimVolumeSource {
    /// The PVC's name.
    pub claim_name: String,
    /// Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Whether the volume can be hot-unplugged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotpluggable: Option<bool>,
}

/// A temporary empty disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct EmptyDiskSource {
    /// Its size.
    pub capacity: Quantity,
}

/// A PVC used read-only under a throw-away overlay.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralVolumeSource {
    /// The claim, as a pod refers to one (no `hotpluggable`: an ephemeral volume is not
    /// hot-plugged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim:
        Option<k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource>,
}

/// A disk image file on the node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostDisk {
    /// The image file's path on the node.
    pub path: String,
    /// `Disk` (must exist) or `DiskOrCreate` (created sparse at `capacity`).
    #[serde(rename = "type")]
    pub type_: String,
    /// The size of a created image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Quantity>,
    /// Whether several VMs share the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
}

/// A ConfigMap presented as an ISO disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapVolumeSource {
    /// The ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the ConfigMap may be missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// The ISO's volume label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// A Secret presented as an ISO disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretVolumeSource {
    /// The Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// Whether the Secret may be missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// The ISO's volume label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// A service account presented as an ISO disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountVolumeSource {
    /// The service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// Pod metadata presented as an ISO disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiVolumeSource {
    /// The files and the pod fields or resources they hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<DownwardAPIVolumeFile>>,
    /// The ISO's volume label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_label: Option<String>,
}

/// Host and VM metrics offered to the guest; it has no settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DownwardMetricsVolumeSource {}

/// The claim a memory dump is written to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDumpVolumeSource {
    /// The claim's name.
    pub claim_name: String,
    /// Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Whether the volume can be hot-unplugged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotpluggable: Option<bool>,
}

/// Where Windows answer files come from: a ConfigMap or a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SysprepSource {
    /// A ConfigMap holding the answer files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<LocalObjectName>,
    /// A Secret holding the answer files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<LocalObjectName>,
}

#[cfg(test)]
#[path = "volumes_tests.rs"]
mod tests;
