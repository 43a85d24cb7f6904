//! v1beta1's TaskRun and PipelineRun: v1's, with the older names (`stepOverrides`,
//! `taskResults`, `serviceAccountName` and `podTemplate` on the PipelineRun, `timeout`,
//! `pipelineResults`) and the provenance's older `configSource`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerState, ResourceRequirements};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{PipelineRef, TaskRef};
use crate::tekton::params::Param;
use crate::tekton::pipeline::EmbeddedMetadata;
use crate::tekton::pipelinerun::{ChildStatusReference, SkippedTask, TimeoutFields};
use crate::tekton::pod_template::PodTemplate;
use crate::tekton::results::{PipelineRunResult, TaskRunResult};
use crate::tekton::run_status::{FeatureFlags, RefSource, RunCondition};
use crate::tekton::taskrun::{Artifact, SidecarState, TaskRunDebug};
use crate::tekton::workspaces::WorkspaceBinding;

/// A v1beta1 TaskRun.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tekton.dev",
    version = "v1beta1",
    kind = "TaskRun",
    namespaced,
    status = "TaskRunStatus",
    shortname = "tr",
    shortname = "trs",
    category = "tekton",
    category = "tekton-pipelines",
    derive = "PartialEq",
    doc = "TaskRun. Deprecated: Please use v1.TaskRun instead.",
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<TaskRef>,
    /// A v1beta1 Task spec, unchecked by the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tekton::schema::preserve_any")]
    pub task_spec: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<WorkspaceBinding>>,
    /// v1's `stepSpecs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_overrides: Option<Vec<TaskRunStepOverride>>,
    /// v1's `sidecarSpecs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar_overrides: Option<Vec<TaskRunSidecarOverride>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
}

/// v1's `TaskRunStepSpec`, with `resources`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TaskRunStepOverride {
    pub name: String,
    pub resources: ResourceRequirements,
}

/// v1's `TaskRunSidecarSpec`, with `resources`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TaskRunSidecarOverride {
    pub name: String,
    pub resources: ResourceRequirements,
}

/// A v1beta1 TaskRun status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<RunCondition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    pub pod_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<StepState>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tekton::schema::preserve_any")]
    pub retries_status: Option<Vec<serde_json::Value>>,
    /// v1's `results`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_results: Option<Vec<TaskRunResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecars: Option<Vec<SidecarState>>,
    /// A v1beta1 Task spec, unchecked by the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tekton::schema::preserve_any")]
    pub task_spec: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_context: Option<BTreeMap<String, String>>,
}

/// A v1beta1 step state (no `terminationReason`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepState {
    #[serde(flatten)]
    pub state: ContainerState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<TaskRunResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Artifact>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<Artifact>>,
}

/// A v1beta1 provenance: v1's and the deprecated `configSource` (v1's `refSource`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_source: Option<RefSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_source: Option<RefSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_flags: Option<FeatureFlags>,
}

/// A v1beta1 PipelineRun.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tekton.dev",
    version = "v1beta1",
    kind = "PipelineRun",
    namespaced,
    status = "PipelineRunStatus",
    shortname = "pr",
    shortname = "prs",
    category = "tekton",
    category = "tekton-pipelines",
    derive = "PartialEq",
    doc = "PipelineRun. Deprecated: Please use v1.PipelineRun instead.",
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
pub struct PipelineRunSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_ref: Option<PipelineRef>,
    /// A v1beta1 Pipeline spec, unchecked by the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tekton::schema::preserve_any")]
    pub pipeline_spec: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
    /// v1's `taskRunTemplate.serviceAccountName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<TimeoutFields>,
    /// Deprecated: v1's `timeouts.pipeline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// v1's `taskRunTemplate.podTemplate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<WorkspaceBinding>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_run_specs: Option<Vec<PipelineTaskRunSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
}

/// v1's `PipelineTaskRunSpec` under v1beta1's names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineTaskRunSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_task_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_service_account_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_pod_template: Option<PodTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_overrides: Option<Vec<TaskRunStepOverride>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar_overrides: Option<Vec<TaskRunSidecarOverride>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<EmbeddedMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A v1beta1 PipelineRun status. The embedded `taskRuns` and `runs` maps, which Tekton no
/// longer fills, are not declared.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRunStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<RunCondition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// v1's `results`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_results: Option<Vec<PipelineRunResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tekton::schema::preserve_any")]
    pub pipeline_spec: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_tasks: Option<Vec<SkippedTask>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_references: Option<Vec<ChildStatusReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finally_start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_context: Option<BTreeMap<String, String>>,
}
