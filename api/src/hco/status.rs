//! The observed state of a HyperConverged, the same at both versions.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cdi::DataImportCronSpec;

/// The observed state of the platform.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperConvergedStatus {
    /// Available, Progressing, Degraded, ReconcileComplete, Upgradeable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// The boot source crons HCO manages, and where each came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_import_cron_templates: Option<Vec<DataImportCronTemplateStatus>>,
    /// The cron schedule HCO picked for the common boot sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_import_schedule: Option<String>,
    /// Whether the control plane runs on more than one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_highly_available: Option<bool>,
    /// The architectures of the cluster's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfoStatus>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The objects HCO created for this HyperConverged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_objects: Option<Vec<ObjectReference>>,
    /// `healthy`, `warning` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_health_status: Option<String>,
    /// The operator's and operands' versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<Version>>,
}

/// A boot source cron HCO manages, with where it came from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataImportCronTemplateStatus {
    /// The cron's name, labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The cron's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<DataImportCronSpec>,
    /// Where the cron came from and whether the user changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DataImportCronStatus>,
}

/// Where a managed cron came from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataImportCronStatus {
    /// Whether it is one of HCO's common boot sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_template: Option<bool>,
    /// Conditions of the cron as HCO sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Whether the user changed a common boot source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<bool>,
    /// The architectures the template named before HCO narrowed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_supported_architectures: Option<String>,
}

/// The architectures of the cluster's nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfoStatus {
    /// The control plane nodes' architectures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_architectures: Option<Vec<String>>,
    /// The architecture VMs get when they name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_workload_architecture: Option<String>,
    /// The workload nodes' architectures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads_architectures: Option<Vec<String>>,
}

/// A component's name and version.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// The component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}
