//! The DataSource (cdi.kubevirt.io/v1beta1): a named pointer to a PVC or snapshot that
//! DataVolumes clone through `sourceRef`, typically a golden image kept by a DataImportCron.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::datavolume::{DataVolumeSourcePvc, DataVolumeSourceSnapshot};
use crate::common::ConditionStatus;

/// The desired state of a DataSource.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "DataSource",
    namespaced,
    status = "DataSourceStatus",
    shortname = "das",
    category = "all",
    derive = "PartialEq",
    doc = "DataSource references an import/clone source for a DataVolume"
)]
#[serde(rename_all = "camelCase")]
pub struct DataSourceSpec {
    /// What the DataSource points at.
    pub source: DataSourceSource,
}

/// What a DataSource points at; one member is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataSourceSource {
    /// A PVC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<DataVolumeSourcePvc>,
    /// A VolumeSnapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<DataVolumeSourceSnapshot>,
    /// Another DataSource (one level of indirection at most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<DataSourceRefSourceDataSource>,
}

/// A reference from one DataSource to another.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DataSourceRefSourceDataSource {
    /// The namespace of the referenced DataSource.
    pub namespace: String,
    /// The name of the referenced DataSource.
    pub name: String,
}

/// The observed state of a DataSource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataSourceStatus {
    /// The resolved source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<DataSourceSource>,
    /// The Ready condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CdiCondition>>,
}

/// A condition in the shape CDI uses for DataSource and DataImportCron.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CdiCondition {
    /// The condition type (`Ready`; `Progressing`, `UpToDate` for DataImportCron).
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// When the condition was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    /// A machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The DataSource condition saying the source can be consumed.
pub const CONDITION_READY: &str = "Ready";
