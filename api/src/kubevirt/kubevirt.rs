//! The KubeVirt operator kind (kubevirt.io/v1 `KubeVirt`): installs KubeVirt and carries its
//! cluster-wide configuration. Image settings and the phase are typed; the large
//! `configuration` tree is kept as it came.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::common::Extra;

/// The desired state of the KubeVirt installation.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "KubeVirt",
    namespaced,
    status = "KubeVirtStatus",
    shortname = "kv",
    shortname = "kvs",
    category = "all",
    derive = "PartialEq",
    doc = "KubeVirt represents the object deploying all KubeVirt resources",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase")
)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtSpec {
    /// The registry component images come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_registry: Option<String>,
    /// The tag of the component images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tag: Option<String>,
    /// When to pull component images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Cluster-wide configuration (feature gates, migrations, network, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub configuration: Option<serde_json::Value>,
    /// Placement of the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub infra: Option<serde_json::Value>,
    /// Placement of virt-handler and VM pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub workloads: Option<serde_json::Value>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The observed state of the KubeVirt installation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtStatus {
    /// `Deploying`, `Deployed`, `Deleting` or `Deleted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Available, Progressing, Degraded, Created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<KubeVirtCondition>>,
    /// The version of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The version deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_kube_virt_version: Option<String>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A condition of the KubeVirt installation, in virt-operator's shape: it is probed
/// (`lastProbeTime`), where the operator SDK's conditions of CDI, HPP and SSP carry a
/// heartbeat.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtCondition {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A machine-readable reason for the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When virt-operator last checked the condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Phases of the KubeVirt installation.
pub mod phase {
    /// Components are being deployed.
    pub const DEPLOYING: &str = "Deploying";
    /// All components are deployed.
    pub const DEPLOYED: &str = "Deployed";
    /// Components are being removed.
    pub const DELETING: &str = "Deleting";
    /// All components are removed.
    pub const DELETED: &str = "Deleted";
}
