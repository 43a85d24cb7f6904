//! ssp.kubevirt.io/v1beta2 SSP: scheduling, scale and performance add-ons (common VM
//! templates, the template validator, common instance types).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Extra, OperatorCondition};

/// The API group.
pub const GROUP: &str = "ssp.kubevirt.io";

/// The desired state of the SSP add-ons.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ssp.kubevirt.io",
    version = "v1beta2",
    kind = "SSP",
    plural = "ssps",
    namespaced,
    status = "SspStatus",
    derive = "PartialEq",
    doc = "SSP is the Schema for the ssps API"
)]
#[serde(rename_all = "camelCase")]
pub struct SspSpec {
    /// Where common templates are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_templates: Option<CommonTemplates>,
    /// Replicas and placement of the template validator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub template_validator: Option<serde_json::Value>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Where common templates are created.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonTemplates {
    /// The namespace of the templates.
    pub namespace: String,
    /// DataImportCrons kept for golden images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::preserve_unknown_object_list")]
    pub data_import_cron_templates: Option<Vec<serde_json::Value>>,
}

/// The observed state of the SSP add-ons.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SspStatus {
    /// `Deploying`, `Deployed`, `Deleting`, `Deleted`, `Error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Available, Progressing, Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<OperatorCondition>>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}
