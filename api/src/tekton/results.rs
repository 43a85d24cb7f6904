//! Results: what a Task or Pipeline declares it produces, and the values a run reports
//! (`result_types.go`, `pipeline_types.go`, `pipelinerun_types.go`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::{ParamValue, PropertySpec};

/// A result a Task declares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TaskResult {
    pub name: String,
    /// `string`, `array` or `object`; `object` when it has properties, else `string`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, PropertySpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A step result this one is (`$(steps.<step>.results.<name>)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<ParamValue>,
}

/// A result a TaskRun (or one of its steps) reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TaskRunResult {
    pub name: String,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub value: ParamValue,
}

/// A result a Pipeline declares: a value made of its tasks' results.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PipelineResult {
    pub name: String,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Only `$(tasks.<task>.results.<name>)` and `$(finally.…)` references.
    pub value: ParamValue,
}

/// A result a PipelineRun reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PipelineRunResult {
    pub name: String,
    pub value: ParamValue,
}
