//! The Pipeline (`tekton.dev/v1`): Tasks ordered by `runAfter` and by the results they
//! pass, then the `finally` tasks (`pipeline_types.go`).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::{Param, ParamSpec};
use super::refs::{PipelineRef, TaskRef};
use super::results::PipelineResult;
use super::task::TaskSpec;
use super::when::WhenExpression;
use super::workspaces::{PipelineWorkspaceDeclaration, WorkspacePipelineTaskBinding};

/// What a Pipeline runs. Also embedded in PipelineRuns (and their status).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tekton.dev",
    version = "v1",
    kind = "Pipeline",
    namespaced,
    category = "tekton",
    category = "tekton-pipelines",
    derive = "PartialEq",
    doc = "Pipeline describes a list of Tasks to execute. It expresses how outputs of tasks feed into inputs of subsequent tasks."
)]
#[serde(rename_all = "camelCase")]
pub struct PipelineSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<PipelineTask>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<ParamSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<PipelineWorkspaceDeclaration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<PipelineResult>>,
    /// Tasks run after all of `tasks`, whatever became of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finally: Option<Vec<PipelineTask>>,
}

/// One task of a Pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineTask {
    /// Unique within the Pipeline; names its TaskRun `<pipelinerun>-<name>`.
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<TaskRef>,
    /// The Task inline; upstream keeps it unchecked by the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::preserve_any")]
    pub task_spec: Option<EmbeddedTask>,
    /// All must hold for the task to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Vec<WhenExpression>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<i32>,
    /// Tasks this one waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_after: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
    /// Fan-out over combinations of values (beta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Matrix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<WorkspacePipelineTaskBinding>>,
    /// A Go duration for its TaskRun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// A Pipeline run as this task (alpha).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_ref: Option<PipelineRef>,
    /// A Pipeline run as this task, inline (alpha).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::preserve_any")]
    pub pipeline_spec: Option<Box<PipelineSpec>>,
    /// `continue` lets the Pipeline go on when it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<String>,
}

/// A Task given inline in a Pipeline: its spec, with the labels and annotations of its
/// TaskRun; or a custom task's `apiVersion`, `kind` and `spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedTask {
    #[serde(flatten)]
    pub task: TaskSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<EmbeddedMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A custom task's spec, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<serde_json::Value>,
}

/// Labels and annotations for an object a run makes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct EmbeddedMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// A pipeline task's fan-out: one TaskRun per combination of `params`, plus `include`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Matrix {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<MatrixInclude>>,
}

/// An extra combination of a matrix.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MatrixInclude {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
}
