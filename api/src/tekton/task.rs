//! The Task (`tekton.dev/v1`): steps run in order in one pod, with the parameters,
//! workspaces and results it declares (`task_types.go`).

use k8s_openapi::api::core::v1::Volume;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::ParamSpec;
use super::results::TaskResult;
use super::steps::{Sidecar, Step, StepTemplate};
use super::workspaces::WorkspaceDeclaration;

/// What a Task runs. Also embedded, as given or resolved, in TaskRuns and pipeline tasks.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tekton.dev",
    version = "v1",
    kind = "Task",
    namespaced,
    category = "tekton",
    category = "tekton-pipelines",
    derive = "PartialEq",
    doc = "Task represents a collection of sequential steps that are run as part of a Pipeline using a set of inputs and producing a set of outputs."
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
    /// Pod volumes the steps may mount; upstream keeps them unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::preserve_any")]
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
