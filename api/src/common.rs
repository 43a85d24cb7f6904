//! Types shared by several API groups (condition status, node placement, the operator
//! condition of openshift/custom-resource-status) and schema helpers that keep generated CRD
//! schemas structural where a field is deliberately left untyped.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The status of a condition: `True`, `False` or `Unknown`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Whether the condition holds is not known.
    Unknown,
}

/// Where a component's pods may run (the controller-lifecycle-operator-sdk `NodePlacement`
/// that CDI, HPP and HCO share).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacement {
    /// Labels a node must have for the pods to run on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Pod affinity and anti-affinity applied next to the node selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Tolerations added to the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
}

/// An operator condition (`Available`, `Progressing`, `Degraded`, `Upgradeable`) in the
/// shape of openshift/custom-resource-status, used by the HPP, CDI and SSP operators.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorCondition {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// A machine-readable reason for the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Operator condition types of openshift/custom-resource-status.
pub mod operator_condition {
    /// The operand is fully deployed and serving.
    pub const AVAILABLE: &str = "Available";
    /// The operator is rolling out a change.
    pub const PROGRESSING: &str = "Progressing";
    /// The operand is not working as it should.
    pub const DEGRADED: &str = "Degraded";
    /// The operand may be upgraded.
    pub const UPGRADEABLE: &str = "Upgradeable";
}

/// Schema of a field kept as arbitrary JSON: an object whose content the API server keeps
/// unpruned and unvalidated.
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Like [`preserve_unknown_object`], for an optional field.
pub fn nullable_preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of a list of arbitrary JSON objects.
pub fn preserve_unknown_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "nullable": true,
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// Unknown fields of a partly typed object, kept as they came so nothing is lost when the
/// object is read and written back.
pub type Extra = BTreeMap<String, serde_json::Value>;

/// Five characters as Kubernetes appends them to a `generateName` (consonants and digits
/// that cannot spell words).
pub fn random_name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// The TLS profile an operator's servers use (OpenShift's `TLSSecurityProfile`, which HCO,
/// CDI and SSP embed): a named Mozilla profile or custom ciphers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsSecurityProfile {
    /// The ciphers and least version of a `Custom` profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomTlsProfile>,
    /// Mozilla's intermediate profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intermediate: Option<EmptyProfile>,
    /// Mozilla's modern profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modern: Option<EmptyProfile>,
    /// Mozilla's old profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<EmptyProfile>,
    /// Which profile applies.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Old", "Intermediate", "Modern", "Custom"]))]
    pub type_: Option<String>,
}

/// A named TLS profile, which has no settings of its own.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct EmptyProfile {}

/// The ciphers and least TLS version of a custom profile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomTlsProfile {
    /// The cipher suites, in OpenSSL's names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ciphers: Option<Vec<String>>,
    /// The least TLS version accepted.
    #[serde(
        default,
        rename = "minTLSVersion",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("enum" = ["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"]))]
    pub min_tls_version: Option<String>,
}

/// A pull secret in the object's namespace, by name: core's `LocalObjectReference` as CDI
/// and KubeVirt embed it, whose name upstream leaves optional (empty when left out).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct PullSecretReference {
    /// The Secret's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("default" = ""))]
    pub name: String,
}
