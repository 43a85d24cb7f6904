//! The TaskRun (`tekton.dev/v1`): one run of a Task in one pod, and its status
//! (`taskrun_types.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerState, ResourceRequirements};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::Param;
use super::pod_template::PodTemplate;
use super::refs::TaskRef;
use super::results::TaskRunResult;
use super::run_status::{Provenance, RunCondition};
use super::task::TaskSpec;
use super::workspaces::WorkspaceBinding;

/// The values of a TaskRun's `spec.status`.
pub mod spec_status {
    pub const CANCELLED: &str = "TaskRunCancelled";
    pub const PENDING: &str = "TaskRunPending";
}

/// A run of a Task: which Task (by reference or inline), its parameters and workspaces.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tekton.dev",
    version = "v1",
    kind = "TaskRun",
    namespaced,
    status = "TaskRunStatus",
    shortname = "tr",
    shortname = "trs",
    category = "tekton",
    category = "tekton-pipelines",
    derive = "PartialEq",
    doc = "TaskRun represents a single execution of a Task.",
    printcolumn(
        name = "Succeeded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Succeeded\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Succeeded\")].reason"
    ),
    printcolumn(name = "StartTime", type_ = "date", json_path = ".status.startTime"),
    printcolumn(
        name = "CompletionTime",
        type_ = "date",
        json_path = ".status.completionTime"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<TaskRunDebug>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
    /// The pod's service account; the webhook sets `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// The Task run; exactly one of this and `taskSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<TaskRef>,
    /// The Task run, inline; upstream keeps it unchecked by the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::preserve_any")]
    pub task_spec: Option<TaskSpec>,
    /// `TaskRunCancelled` or `TaskRunPending` ([`spec_status`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why `status` was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// How many times a failed run is tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<i32>,
    /// A Go duration; the webhook sets `1h0m0s`; `0s` is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<WorkspaceBinding>>,
    /// Resources of named steps, over the Task's (v1beta1's `stepOverrides`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_specs: Option<Vec<TaskRunStepSpec>>,
    /// Resources of named sidecars (v1beta1's `sidecarOverrides`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar_specs: Option<Vec<TaskRunSidecarSpec>>,
    /// Resources of the whole pod, shared by the steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_resources: Option<ResourceRequirements>,
    /// The controller that runs it, when not Tekton's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
}

/// Breakpoints of a TaskRun run for debugging.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TaskRunDebug {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakpoints: Option<TaskBreakpoints>,
}

/// Where a debugged TaskRun stops.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskBreakpoints {
    /// `enabled` stops at the first failing step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_steps: Option<Vec<String>>,
}

/// The resources of one step of the run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunStepSpec {
    pub name: String,
    pub compute_resources: ResourceRequirements,
}

/// The resources of one sidecar of the run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunSidecarSpec {
    pub name: String,
    pub compute_resources: ResourceRequirements,
}

/// What became of a TaskRun.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunStatus {
    /// One condition, `Succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<RunCondition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// The pod's name, `""` before there is one; always written, and required by the schema.
    pub pod_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<StepState>>,
    /// The status of each earlier try; upstream keeps it unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::preserve_any")]
    pub retries_status: Option<Vec<TaskRunStatus>>,
    /// v1beta1's `taskResults`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<TaskRunResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Artifacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecars: Option<Vec<SidecarState>>,
    /// The Task as it ran, its variables substituted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_spec: Option<TaskSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_context: Option<BTreeMap<String, String>>,
}

/// The state of one step's container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepState {
    /// `waiting`, `running` or `terminated`, as the pod reports it.
    #[serde(flatten)]
    pub state: ContainerState,
    /// The step's name (the container's without `step-`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The container, `step-<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<TaskRunResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// `Completed`, `Continued`, `Error`, `TimeoutExceeded`, `Skipped`, `TaskRunCancelled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Artifact>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<Artifact>>,
}

/// The state of one sidecar's container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarState {
    #[serde(flatten)]
    pub state: ContainerState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
}

/// Artifacts a TaskRun consumed and produced (alpha).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Artifacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Artifact>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<Artifact>>,
}

/// One named artifact and its values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<ArtifactValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_output: Option<bool>,
}

/// Where an artifact is and its digests.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ArtifactValue {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}
