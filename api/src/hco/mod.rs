//! hco.kubevirt.io HyperConverged: the single object that configures KubeVirt, CDI, HPP,
//! SSP and CNAO together. This module's types are v1beta1's, the version HCO's checks and
//! controller here read (the API server converts); [`v1`] is the storage version and
//! [`conversion`] moves an HC between the two. Placement and the commonly set knobs are
//! typed; the rest of its large spec is kept as it came.

pub mod conversion;
pub mod schema;
pub mod v1;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Extra, NodePlacement};

/// The API group.
pub const GROUP: &str = "hco.kubevirt.io";

/// The default HCO's CRD gives `spec.certConfig.<part>.<field>` (`ca` or `server`;
/// `duration` or `renewBefore`), in Go's duration syntax.
pub fn default_cert_duration(part: &str, field: &str) -> &'static str {
    match (part, field) {
        ("ca", "duration") => "48h0m0s",
        ("ca", _) | ("server", "duration") => "24h0m0s",
        _ => "12h0m0s",
    }
}

/// The desired state of the whole platform.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hco.kubevirt.io",
    version = "v1beta1",
    kind = "HyperConverged",
    namespaced,
    status = "HyperConvergedStatus",
    shortname = "hco",
    shortname = "hcos",
    derive = "PartialEq",
    doc = "HyperConverged is the Schema for the hyperconvergeds API"
)]
#[serde(rename_all = "camelCase")]
pub struct HyperConvergedSpec {
    /// Placement of the control plane of every component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<HyperConvergedConfig>,
    /// Placement of workloads (VMs, importer pods, node agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<HyperConvergedConfig>,
    /// Feature gates by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub feature_gates: Option<serde_json::Value>,
    /// What uninstalling does: `RemoveWorkloads` or `BlockUninstallIfWorkloadsExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall_strategy: Option<String>,
    /// Import settings passed to CDI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_import: Option<StorageImportConfig>,
    /// Fields this version does not model (liveMigrationConfig, certConfig, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// Placement of a group of components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperConvergedConfig {
    /// Node selector, affinity and tolerations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_placement: Option<NodePlacement>,
}

/// Import settings passed to CDI.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageImportConfig {
    /// Registries reached without TLS verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_registries: Option<Vec<String>>,
}

/// The observed state of the platform.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperConvergedStatus {
    /// Available, Progressing, Degraded, ReconcileComplete, Upgradeable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Fields this version does not model (versions, related objects, …).
    #[serde(flatten)]
    pub extra: Extra,
}
