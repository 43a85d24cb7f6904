//! References to a Task or Pipeline: by name in the namespace, or through a resolver
//! (`taskref_types.go`, `pipelineref_types.go`, `resolver_types.go`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::Param;

/// The kind a `taskRef` names when it names none (and no resolver).
pub const TASK_KIND: &str = "Task";

/// A Task a TaskRun or pipeline task runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Task`, or a custom task's kind; the webhook sets `Task` when no resolver is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A custom task's API version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// A remote resolver (`git`, `bundles`, `hub`, `cluster`, `http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver: Option<String>,
    /// The resolver's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
}

/// A Pipeline a PipelineRun (or, alpha, a pipeline task) runs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<Param>>,
}
