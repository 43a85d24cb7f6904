//! The VirtualMachineInstanceReplicaSet (kubevirt.io/v1): keeps a number of VMIs made from
//! one template running, as a ReplicaSet does pods. Its fields are upstream's
//! (`v1.VirtualMachineInstanceReplicaSet*` in KubeVirt v1.6.6's swagger).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::vmi::{VirtualMachineCondition, VirtualMachineInstanceTemplateSpec};

/// The desired state of a VirtualMachineInstanceReplicaSet.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "VirtualMachineInstanceReplicaSet",
    namespaced,
    status = "VirtualMachineInstanceReplicaSetStatus",
    shortname = "vmirs",
    shortname = "vmirss",
    category = "all",
    derive = "PartialEq",
    doc = "VirtualMachineInstanceReplicaSet keeps a number of VirtualMachineInstances made from one template running.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Number of desired VirtualMachineInstances"
    ),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Number of managed and not final or deleted VirtualMachineInstances"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Number of managed VirtualMachineInstances which are ready to receive traffic"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceReplicaSetSpec {
    /// How many instances to keep (1 when not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Which instances are the replica set's; must select the template's labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub selector: Option<LabelSelector>,
    /// The instances to create.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub template: Option<VirtualMachineInstanceTemplateSpec>,
    /// While true the replica set neither creates nor deletes instances.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

/// What the replica set controller last saw of its instances.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceReplicaSetStatus {
    /// Instances selected that are neither final nor being deleted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    /// Those of them whose Ready condition is true.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_replicas: i32,
    /// `ReplicaFailure` and `ReplicaPaused`, as upstream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<VirtualMachineCondition>,
    /// The selector in its canonical text form, for a HorizontalPodAutoscaler.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}

pub(crate) fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// Upstream's condition types and reasons of a replica set.
pub mod conditions {
    /// A create or delete of an instance failed.
    pub const REPLICA_FAILURE: &str = "ReplicaFailure";
    /// The replica set is paused.
    pub const REPLICA_PAUSED: &str = "ReplicaPaused";
    /// The reason of [`REPLICA_PAUSED`].
    pub const PAUSED_REASON: &str = "Paused";
    /// The message of [`REPLICA_PAUSED`].
    pub const PAUSED_MESSAGE: &str = "Controller got paused";
    /// The event of pausing.
    pub const SUCCESSFUL_PAUSED: &str = "SuccessfulPaused";
    /// The event of resuming.
    pub const SUCCESSFUL_RESUMED: &str = "SuccessfulResumed";
}
