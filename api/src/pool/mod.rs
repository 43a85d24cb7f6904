//! pool.kubevirt.io/v1alpha1: the VirtualMachinePool, a number of VirtualMachines made from
//! one template, named `<pool>-<index>`. Its fields are upstream's
//! (`staging/src/kubevirt.io/api/pool/v1alpha1/types.go` at KubeVirt v1.6.6, also
//! `v1alpha1.VirtualMachinePool*` in its swagger).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kubevirt::VirtualMachineSpec;
use crate::kubevirt::vmi::VirtualMachineCondition;

/// The API group.
pub const GROUP: &str = "pool.kubevirt.io";
/// The only version KubeVirt v1.6 serves.
pub const VERSION: &str = "v1alpha1";
/// On a pool's VMs and their instances: the pool revision they were made from.
pub const REVISION_NAME_LABEL: &str = "kubevirt.io/vm-pool-revision-name";

/// The desired state of a VirtualMachinePool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "pool.kubevirt.io",
    version = "v1alpha1",
    kind = "VirtualMachinePool",
    namespaced,
    status = "VirtualMachinePoolStatus",
    shortname = "vmpool",
    shortname = "vmpools",
    category = "all",
    derive = "PartialEq",
    doc = "VirtualMachinePool resource contains a VirtualMachine configuration that can be used to replicate multiple VirtualMachine resources.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Number of desired VirtualMachines"
    ),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Number of managed and not final or deleted VirtualMachines"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Number of managed VirtualMachines which are ready to receive traffic"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePoolSpec {
    /// How many VMs to keep (1 when not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Which VMs are the pool's; must select the template's labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub selector: Option<LabelSelector>,
    /// The VMs to create.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub virtual_machine_template: Option<VirtualMachineTemplateSpec>,
    /// While true the pool neither creates nor deletes VMs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Whether ConfigMap and Secret volumes name a per-VM object (`<name>-<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_generation: Option<VirtualMachinePoolNameGeneration>,
    /// How many VMs may be unavailable at once during an update (100% when not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Which VMs go first when the pool scales in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_in_strategy: Option<VirtualMachinePoolScaleInStrategy>,
}

/// The VM a pool makes: labels and annotations, and the VM spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineTemplateSpec {
    /// Labels and annotations of each VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The VM spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<VirtualMachineSpec>,
}

/// Options of a pool's per-VM names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePoolNameGeneration {
    /// ConfigMap volumes name `<configmap>-<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_index_to_config_map_refs: Option<bool>,
    /// Secret volumes name `<secret>-<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_index_to_secret_refs: Option<bool>,
}

/// How the pool scales in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePoolScaleInStrategy {
    /// Scale in by deleting VMs (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proactive: Option<VirtualMachinePoolProactiveScaleInStrategy>,
}

/// The proactive scale-in strategy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePoolProactiveScaleInStrategy {
    /// Which VMs are chosen first (`Random` when not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_policy: Option<VirtualMachinePoolSelectionPolicy>,
}

/// The order VMs are chosen in when the pool scales in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePoolSelectionPolicy {
    /// `Random` or `DescendingOrder` (highest index first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_policy: Option<VirtualMachinePoolBasePolicy>,
}

/// A pool's base scale-in policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum VirtualMachinePoolBasePolicy {
    /// Any VM (upstream's default).
    #[default]
    Random,
    /// The VM of the highest index first.
    DescendingOrder,
}

/// What the pool controller last saw of its VMs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachinePoolStatus {
    /// The pool's VMs.
    #[serde(default, skip_serializing_if = "crate::kubevirt::replicaset::is_zero")]
    pub replicas: i32,
    /// Those whose Ready condition is true.
    #[serde(default, skip_serializing_if = "crate::kubevirt::replicaset::is_zero")]
    pub ready_replicas: i32,
    /// `ReplicaFailure` and `ReplicaPaused`, as upstream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<VirtualMachineCondition>,
    /// The selector in its canonical text form, for a HorizontalPodAutoscaler.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}

/// Upstream's condition types and reasons of a pool.
pub mod conditions {
    /// A create or delete of a VM failed.
    pub const REPLICA_FAILURE: &str = "ReplicaFailure";
    /// The pool is paused.
    pub const REPLICA_PAUSED: &str = "ReplicaPaused";
    /// The reason of [`REPLICA_PAUSED`], and its event.
    pub const SUCCESSFUL_PAUSED: &str = "SuccessfulPaused";
    /// The message of [`REPLICA_PAUSED`].
    pub const PAUSED_MESSAGE: &str = "Pool controller is paused";
    /// The event of resuming.
    pub const SUCCESSFUL_RESUME: &str = "SuccessfulResume";
    /// The reason of [`REPLICA_FAILURE`] when VMs could not be created.
    pub const FAILED_SCALE_OUT: &str = "FailedScaleOut";
    /// The reason of [`REPLICA_FAILURE`] when VMs could not be deleted.
    pub const FAILED_SCALE_IN: &str = "FailedScaleIn";
}
