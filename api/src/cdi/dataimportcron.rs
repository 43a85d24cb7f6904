//! The DataImportCron (cdi.kubevirt.io/v1beta1): polls a registry on a schedule, imports new
//! image digests as DataVolumes and points a DataSource at the newest one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::datasource::CdiCondition;
use super::datavolume::{
    DataVolumeSourcePvc, DataVolumeSourceRegistry, DataVolumeSpec, DataVolumeStatus,
};
use super::storageprofile::DataImportCronSourceFormat;

/// The label naming the DataImportCron that made a DataVolume, PVC or DataSource.
pub const CRON_LABEL: &str = "cdi.kubevirt.io/dataImportCron";

/// The desired state of a DataImportCron.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "DataImportCron",
    namespaced,
    status = "DataImportCronStatus",
    shortname = "dic",
    shortname = "dics",
    category = "all",
    derive = "PartialEq",
    doc = "DataImportCron defines a cron job for recurring polling/importing disk images as PVCs into a golden image namespace",
    printcolumn(
        name = "Format",
        type_ = "string",
        json_path = ".status.sourceFormat",
        description = "The format in which created sources are saved"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DataImportCronSpec {
    /// The DataVolume created for each import.
    pub template: DataVolumeTemplate,
    /// When to poll, in cron format.
    pub schedule: String,
    /// Whether old imports are deleted: `Outdated` (default) or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garbage_collect: Option<DataImportCronGarbageCollect>,
    /// How many imports to keep when collecting garbage (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imports_to_keep: Option<i32>,
    /// The DataSource this cron keeps pointing at the newest import.
    pub managed_data_source: String,
    /// Whether created DataVolumes and DataSources outlive the cron: `All` or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_policy: Option<DataImportCronRetentionPolicy>,
    /// The service account whose permissions the DataVolumes the cron creates are
    /// authorized with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

impl DataImportCronSpec {
    /// The registry its template imports from, the only source a cron polls.
    pub fn registry(&self) -> Option<&DataVolumeSourceRegistry> {
        self.template.spec.source.as_ref()?.registry.as_ref()
    }
}

/// A DataVolume embedded in another object: metadata, spec and (rarely) status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeTemplate {
    /// The DataVolume's API version, if the template names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The DataVolume's kind, if the template names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Labels, annotations and name of the DataVolume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The DataVolume spec.
    pub spec: DataVolumeSpec,
    /// A status, if one was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DataVolumeStatus>,
}

/// The garbage collection mode of a DataImportCron.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DataImportCronGarbageCollect {
    /// Keep every import.
    Never,
    /// Delete imports beyond `importsToKeep`.
    Outdated,
}

/// Whether created objects outlive their DataImportCron.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DataImportCronRetentionPolicy {
    /// Delete them with the cron.
    None,
    /// Keep them.
    All,
}

/// The observed state of a DataImportCron.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataImportCronStatus {
    /// Imports in progress (one at most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_imports: Option<Vec<ImportStatus>>,
    /// The newest imported PVC.
    #[serde(
        default,
        rename = "lastImportedPVC",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_imported_pvc: Option<DataVolumeSourcePvc>,
    /// When the registry was last polled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_execution_timestamp: Option<Time>,
    /// When the last import finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_import_timestamp: Option<Time>,
    /// Whether imports are kept as PVCs or snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_format: Option<DataImportCronSourceFormat>,
    /// The Progressing and UpToDate conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CdiCondition>>,
}

/// An import in progress (upstream spells these keys with a capital letter).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ImportStatus {
    /// The DataVolume doing the import.
    #[serde(rename = "DataVolumeName")]
    pub data_volume_name: String,
    /// The digest of the image being imported.
    #[serde(rename = "Digest")]
    pub digest: String,
}

/// Condition types of a DataImportCron.
pub mod conditions {
    /// An import is running.
    pub const PROGRESSING: &str = "Progressing";
    /// The newest digest has been imported.
    pub const UP_TO_DATE: &str = "UpToDate";
}
