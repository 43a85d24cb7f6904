//! `tekton.dev/v1beta1`, served next to v1 (the storage version) and converted to and from
//! it by [`super::conversion`]. Only the types that differ from v1 are here; the rest are
//! v1's. PipelineResources (`resources` of Tasks, Pipelines and runs), removed from Tekton
//! and refused by its webhook, are not declared.

pub mod containers;
pub mod runs;

use k8s_openapi::api::core::v1::Volume;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::{Param, ParamSpec};
use super::pipeline::Matrix;
use super::results::{PipelineResult, TaskResult};
use super::when::WhenExpression;
use super::workspaces::{
    PipelineWorkspaceDeclaration, WorkspaceDeclaration, WorkspacePipelineTaskBinding,
};
use containers::{Sidecar, Step, StepTemplate};

pub use runs::{PipelineRun, PipelineRunSpec, TaskRun, TaskRunSpec};

/// The deprecation warning of v1beta1, as upstream's types say it.
pub const DEPRECATION: &str = "Deprecated: Please use v1 instead.";

/// A v1beta1 Task.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tekton.dev",
    version = "v1beta1",
    kind = "Task",
    namespaced,
    category = "tekton",
    category = "tekton-pipelines",
    derive = "PartialEq",
    doc = "Task. Deprecated: Please use v1.Task instead."
)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<ParamSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<Step>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tekton::schema::preserve_any")]
    pub volumes: Option<Vec<Volume>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_template: Option<StepTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecars: Option<Vec<Sidecar>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<WorkspaceDeclaration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<TaskResult>>,
}

/// A v1beta1 reference to a Task: v1's and an OCI `bundle` (refused on create).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
}

/// A v1beta1 reference to a Pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
}

/// A v1beta1 Pipeline.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tekton.dev",
    version = "v1beta1",
    kind = "Pipeline",
    namespaced,
    category = "tekton",
    category = "tekton-pipelines",
    derive = "PartialEq",
    doc = "Pipeline. Deprecated: Please use v1.Pipeline instead."
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finally: Option<Vec<PipelineTask>>,
}

/// A v1beta1 pipeline task: v1's, with references that may name a bundle, and an inline
/// Task or Pipeline at v1beta1.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineTask {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<TaskRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tekton::schema::preserve_any")]
    pub task_spec: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Vec<WhenExpression>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_after: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Matrix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<WorkspacePipelineTaskBinding>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_ref: Option<PipelineRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::tekton::schema::preserve_any")]
    pub pipeline_spec: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<String>,
}
