//! The values a Pipeline's variables take and putting them in: the run's parameters over the
//! Pipeline's defaults (checked for missing ones and types), `$(context.…)`,
//! `$(workspaces.W.bound)`, task results, and substituting all of them into a pipeline task
//! (its params, when expressions, `taskRef`, workspaces and embedded task spec).

use std::collections::BTreeMap;

use api::tekton::params::Param;
use api::tekton::{ParamSpec, ParamValue, PipelineRun, PipelineSpec, PipelineTask};
use serde_json::Value;

use crate::runner::substitution::{Replacements, param_keys};

/// The values of a set of variables, by key (`params.x`, `tasks.t.results.r`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values {
    pub replacements: Replacements,
    /// Whole objects, for a param that is exactly one object variable.
    pub objects: BTreeMap<String, BTreeMap<String, String>>,
}

/// A problem with the parameters a run passes its Pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamProblem {
    /// Declared without default and not passed, in declaration order.
    Missing(Vec<String>),
    /// Passed with another type than declared, in the run's order.
    TypeMismatch(Vec<String>),
}

impl Values {
    /// Adds `value` under each of `keys`: a string as is, an array whole and by index
    /// (`KEY[i]`), an object whole and by key (`KEY.k`).
    pub fn insert(&mut self, keys: &[String], value: &ParamValue) {
        for key in keys {
            match value {
                ParamValue::String(s) => {
                    self.replacements.strings.insert(key.clone(), s.clone());
                }
                ParamValue::Array(items) => {
                    self.replacements.arrays.insert(key.clone(), items.clone());
                    for (i, item) in items.iter().enumerate() {
                        self.replacements
                            .strings
                            .insert(format!("{key}[{i}]"), item.clone());
                    }
                }
                ParamValue::Object(fields) => {
                    self.objects.insert(key.clone(), fields.clone());
                    for (k, v) in fields {
                        self.replacements
                            .strings
                            .insert(format!("{key}.{k}"), v.clone());
                    }
                }
            }
        }
    }

    /// Adds a string under one key.
    pub fn insert_str(&mut self, key: &str, value: &str) {
        self.insert(&[key.to_string()], &ParamValue::String(value.to_string()));
    }

    /// Adds all of `other`'s values over these.
    pub fn extend(&mut self, other: &Values) {
        self.replacements
            .strings
            .extend(other.replacements.strings.clone());
        self.replacements
            .arrays
            .extend(other.replacements.arrays.clone());
        self.objects.extend(other.objects.clone());
    }

    /// These values without those of the parameters `names` (in every spelling).
    pub fn without_params(&self, names: &[String]) -> Values {
        let prefixes: Vec<String> = names.iter().flat_map(|n| param_keys(n)).collect();
        let keep = |key: &String| {
            !prefixes.iter().any(|p| {
                key.strip_prefix(p.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['[', '.']))
            })
        };
        let mut out = self.clone();
        out.replacements.strings.retain(|k, _| keep(k));
        out.replacements.arrays.retain(|k, _| keep(k));
        out.objects.retain(|k, _| keep(k));
        out
    }

    /// `text` with its known variables replaced.
    pub fn text(&self, text: &str) -> String {
        self.replacements.apply(text)
    }

    /// A parameter value with its variables replaced; a string that is exactly one array or
    /// object variable becomes that array or object (`ParamValue.applyOrCorrect`).
    pub fn param_value(&self, value: &ParamValue) -> ParamValue {
        match value {
            ParamValue::String(s) => {
                if let Some(key) = sole_variable(s) {
                    if let Some(items) = self.replacements.arrays.get(key) {
                        return ParamValue::Array(items.clone());
                    }
                    if let Some(fields) = self.objects.get(key) {
                        return ParamValue::Object(fields.clone());
                    }
                }
                ParamValue::String(self.text(s))
            }
            ParamValue::Array(items) => ParamValue::Array(self.replacements.apply_list(items)),
            ParamValue::Object(fields) => ParamValue::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), self.text(v)))
                    .collect(),
            ),
        }
    }

    /// Params with their values' variables replaced.
    pub fn params(&self, params: &[Param]) -> Vec<Param> {
        params
            .iter()
            .map(|p| Param {
                name: p.name.clone(),
                value: self.param_value(&p.value),
            })
            .collect()
    }

    /// Every string of a JSON value with its variables replaced; a list element that is
    /// exactly one array variable becomes the array's elements.
    pub fn json(&self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for mut item in std::mem::take(items) {
                    match item {
                        Value::String(s) => out.extend(
                            self.replacements
                                .apply_list(std::slice::from_ref(&s))
                                .into_iter()
                                .map(Value::String),
                        ),
                        _ => {
                            self.json(&mut item);
                            out.push(item);
                        }
                    }
                }
                *items = out;
            }
            Value::Object(fields) => fields.values_mut().for_each(|v| self.json(v)),
            _ => {}
        }
    }

    /// A pipeline task with its variables replaced: in params, when expressions, display
    /// name, `taskRef`, workspace subpaths, `onError` and the embedded task spec (where the
    /// parameters the task declares or is passed keep their own `$(params.…)`).
    pub fn pipeline_task(&self, task: &PipelineTask) -> PipelineTask {
        let mut out = task.clone();
        out.params = task.params.as_deref().map(|p| self.params(p));
        out.display_name = task.display_name.as_deref().map(|t| self.text(t));
        out.on_error = task.on_error.as_deref().map(|t| self.text(t));
        for when in out.when.iter_mut().flatten() {
            when.input = when.input.as_deref().map(|t| self.text(t));
            when.values = when
                .values
                .as_deref()
                .map(|v| self.replacements.apply_list(v));
            when.cel = when.cel.as_deref().map(|t| self.text(t));
        }
        if let Some(task_ref) = out.task_ref.as_mut() {
            task_ref.name = task_ref.name.as_deref().map(|t| self.text(t));
            task_ref.params = task_ref.params.as_deref().map(|p| self.params(p));
        }
        for binding in out.workspaces.iter_mut().flatten() {
            binding.sub_path = binding.sub_path.as_deref().map(|t| self.text(t));
        }
        if let Some(embedded) = out.task_spec.as_mut() {
            let mut own: Vec<String> = task
                .params
                .iter()
                .flatten()
                .map(|p| p.name.clone())
                .collect();
            own.extend(
                embedded
                    .task
                    .params
                    .iter()
                    .flatten()
                    .map(|p| p.name.clone()),
            );
            let scoped = self.without_params(&own);
            if let Ok(mut json) = serde_json::to_value(&embedded.task) {
                scoped.json(&mut json);
                if let Ok(spec) = serde_json::from_value(json) {
                    embedded.task = spec;
                }
            }
        }
        out
    }
}

/// The key of a text that is exactly one variable, `$(KEY)` or `$(KEY[*])`.
fn sole_variable(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("$(")?.strip_suffix(')')?;
    if inner.contains(['(', ')', '$']) {
        return None;
    }
    Some(inner.strip_suffix("[*]").unwrap_or(inner))
}

/// Checks the run's params against the Pipeline's declarations: missing ones first, then
/// types, as the reconciler does.
pub fn check_params(declared: &[ParamSpec], passed: &[Param]) -> Result<(), ParamProblem> {
    let missing: Vec<String> = declared
        .iter()
        .filter(|d| d.default.is_none() && !passed.iter().any(|p| p.name == d.name))
        .map(|d| d.name.clone())
        .collect();
    if !missing.is_empty() {
        return Err(ParamProblem::Missing(missing));
    }
    let mismatched: Vec<String> = passed
        .iter()
        .filter(|p| {
            declared
                .iter()
                .find(|d| d.name == p.name)
                .is_some_and(|d| d.defaulted_type() != p.value.type_name())
        })
        .map(|p| p.name.clone())
        .collect();
    if mismatched.is_empty() {
        Ok(())
    } else {
        Err(ParamProblem::TypeMismatch(mismatched))
    }
}

/// The values of the Pipeline's params: what the run passes, else the declared default (a
/// default may use the other params).
pub fn param_values(declared: &[ParamSpec], passed: &[Param]) -> Values {
    let mut given = Values::default();
    for p in passed {
        given.insert(&param_keys(&p.name), &p.value);
    }
    let mut with_raw_defaults = Values::default();
    for d in declared {
        if let Some(default) = &d.default {
            with_raw_defaults.insert(&param_keys(&d.name), default);
        }
    }
    with_raw_defaults.extend(&given);
    let mut values = given;
    for d in declared {
        if passed.iter().any(|p| p.name == d.name) {
            continue;
        }
        if let Some(default) = &d.default {
            let value = with_raw_defaults.param_value(default);
            values.insert(&param_keys(&d.name), &value);
        }
    }
    values
}

/// `$(context.pipelineRun.name|namespace|uid)` and `$(context.pipeline.name)`.
pub fn context_values(run: &PipelineRun, pipeline_name: &str) -> Values {
    let mut values = Values::default();
    let meta = &run.metadata;
    values.insert_str(
        "context.pipelineRun.name",
        meta.name.as_deref().unwrap_or(""),
    );
    values.insert_str(
        "context.pipelineRun.namespace",
        meta.namespace.as_deref().unwrap_or(""),
    );
    values.insert_str("context.pipelineRun.uid", meta.uid.as_deref().unwrap_or(""));
    values.insert_str("context.pipeline.name", pipeline_name);
    values
}

/// `$(workspaces.W.bound)` for each workspace the Pipeline declares.
pub fn workspace_values(spec: &PipelineSpec, run: &PipelineRun) -> Values {
    let mut values = Values::default();
    let bound = run.spec.workspaces.as_deref().unwrap_or_default();
    for declared in spec.workspaces.iter().flatten() {
        let is_bound = bound.iter().any(|b| b.name == declared.name);
        values.insert_str(
            &format!("workspaces.{}.bound", declared.name),
            if is_bound { "true" } else { "false" },
        );
    }
    values
}

/// The Pipeline with the run's params, context and workspace variables substituted into its
/// tasks and finally tasks: what Tekton stores in `status.pipelineSpec`.
pub fn apply_to_spec(spec: &PipelineSpec, values: &Values) -> PipelineSpec {
    let mut out = spec.clone();
    out.tasks = spec
        .tasks
        .as_deref()
        .map(|t| t.iter().map(|pt| values.pipeline_task(pt)).collect());
    out.finally = spec
        .finally
        .as_deref()
        .map(|t| t.iter().map(|pt| values.pipeline_task(pt)).collect());
    out
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
