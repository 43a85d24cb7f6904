//! hco.kubevirt.io/v1 HyperConverged, the storage version: v1beta1's spec grouped into
//! sections, and feature gates as a list of `{name, state}`. The sections' contents are
//! mostly v1beta1's types ([`super::sections`]); the CRD constrains the fields upstream's
//! does with rules (see [`super::schema`]).

mod groups;

pub use groups::*;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of the whole platform, as v1 writes it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hco.kubevirt.io",
    version = "v1",
    kind = "HyperConverged",
    namespaced,
    status = "crate::hco::HyperConvergedStatus",
    shortname = "hco",
    shortname = "hcos",
    derive = "PartialEq",
    doc = "HyperConverged is the Schema for the hyperconvergeds API"
)]
#[serde(rename_all = "camelCase")]
pub struct HyperConvergedSpec {
    /// Optional features to turn on or off: a gate in the list is on unless its state is
    /// `Disabled`; a gate not listed keeps its default (beta gates on, alpha gates off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "feature_gates")]
    pub feature_gates: Option<Vec<FeatureGate>>,
    /// KubeVirt's settings: live migration, host devices, CPU models, VM options, ratios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization: Option<Virtualization>,
    /// Storage classes, import settings, filesystem overhead, storage workloads' resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Storage>,
    /// Secondary DNS, the MAC pool range, network binding plugins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<Networking>,
    /// Common templates and boot sources, instance types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_sources: Option<WorkloadSources>,
    /// Certificate rotation and the TLS profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Security>,
    /// Node placement, uninstall strategy, log verbosity, optional components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<Deployment>,
    /// The metrics, alerts and recording rules to keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observability: Option<Observability>,
}

/// One feature gate of the list.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct FeatureGate {
    /// The gate's name.
    pub name: String,
    /// `Enabled` (the default) or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// The list's schema, with upstream's bounds and its uniqueness rule.
fn feature_gates(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Optional features to turn on or off.",
        "type": "array",
        "maxItems": 64,
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"description": "Name is the feature gate name", "type": "string", "maxLength": 256},
                "state": {"description": "State determines if the feature gate is Enabled, or Disabled. The default value is Enabled.",
                          "type": "string", "enum": ["Enabled", "Disabled"]},
            },
        },
        "x-kubernetes-validations": [{
            "rule": "self.all(x, self.exists_one(y, x.name.lowerAscii() == y.name.lowerAscii()))",
            "message": "feature gate names must be unique (case-insensitive)",
        }],
    })
}
