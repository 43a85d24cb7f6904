//! The PipelineRun (`tekton.dev/v1`): one run of a Pipeline, whose tasks become TaskRuns,
//! and its status (`pipelinerun_types.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::Param;
use super::pipeline::{EmbeddedMetadata, PipelineSpec};
use super::pod_template::PodTemplate;
use super::refs::PipelineRef;
use super::results::PipelineRunResult;
use super::run_status::{Provenance, RunCondition};
use super::taskrun::{TaskRunSidecarSpec, TaskRunStepSpec};
use super::when::WhenExpression;
use super::workspaces::WorkspaceBinding;

/// The values of a PipelineRun's `spec.status`.
pub mod spec_status {
    /// Stop now: cancel the running TaskRuns, run no `finally`.
    pub const CANCELLED: &str = "Cancelled";
    /// Cancel the running TaskRuns, then run the `finally` tasks.
    pub const CANCELLED_RUN_FINALLY: &str = "CancelledRunFinally";
    /// Start no new task, let the running ones end, then run `finally`.
    pub const STOPPED_RUN_FINALLY: &str = "StoppedRunFinally";
    /// Do not start yet.
    pub const PENDING: &str = "PipelineRunPending";
}

/// A run of a Pipeline.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tekton.dev",
    version = "v1",
    kind = "PipelineRun",
    namespaced,
    status = "PipelineRunStatus",
    shortname = "pr",
    shortname = "prs",
    category = "tekton",
    category = "tekton-pipelines",
    derive = "PartialEq",
    doc = "PipelineRun represents a single execution of a Pipeline.",
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
    /// The Pipeline run; exactly one of this and `pipelineSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_ref: Option<PipelineRef>,
    /// The Pipeline run, inline; upstream keeps it unchecked by the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::preserve_any")]
    pub pipeline_spec: Option<PipelineSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
    /// One of [`spec_status`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<TimeoutFields>,
    /// What every TaskRun gets (v1beta1's `serviceAccountName` and `podTemplate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_run_template: Option<PipelineTaskRunTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<WorkspaceBinding>>,
    /// What the TaskRun of one named pipeline task gets, over the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_run_specs: Option<Vec<PipelineTaskRunSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
}

/// Go durations bounding the run: all of it, its `tasks`, its `finally` tasks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TimeoutFields {
    /// The webhook sets `1h0m0s`; `0s` is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finally: Option<String>,
}

/// The service account and pod template of every TaskRun of the run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineTaskRunTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplate>,
    /// The webhook sets `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// Settings of the TaskRun of one pipeline task.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineTaskRunSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_task_name: Option<String>,
    /// v1beta1's `taskServiceAccountName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// v1beta1's `taskPodTemplate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplate>,
    /// v1beta1's `stepOverrides`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_specs: Option<Vec<TaskRunStepSpec>>,
    /// v1beta1's `sidecarOverrides`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar_specs: Option<Vec<TaskRunSidecarSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<EmbeddedMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// What became of a PipelineRun.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRunStatus {
    /// One condition, `Succeeded`.
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
    /// v1beta1's `pipelineResults`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<PipelineRunResult>>,
    /// The Pipeline as it ran, its parameters substituted; unchecked by the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::preserve_any")]
    pub pipeline_spec: Option<PipelineSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_tasks: Option<Vec<SkippedTask>>,
    /// The TaskRuns (and CustomRuns) made for the pipeline tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_references: Option<Vec<ChildStatusReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finally_start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_context: Option<BTreeMap<String, String>>,
}

/// A pipeline task that did not run, and why.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedTask {
    pub name: String,
    /// One of Tekton's skipping reasons (`When Expressions evaluated to false`, ...).
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_expressions: Option<Vec<WhenExpression>>,
}

/// A TaskRun or CustomRun made for a pipeline task.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChildStatusReference {
    /// `tekton.dev/v1` for a TaskRun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `TaskRun` or `CustomRun`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_task_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_expressions: Option<Vec<WhenExpression>>,
}
