//! What a TaskRun runs: its Task's parameters and workspaces checked against what the run
//! passes and binds, and the Task's spec with the variables Tekton substitutes in a TaskRun
//! (`pkg/reconciler/taskrun/resources/apply.go`: params, context, result paths, workspaces)
//! replaced, as `status.taskSpec` shows it and the pod runs it.

use std::collections::BTreeMap;

use api::tekton::params::{ParamValue, param_type};
use api::tekton::workspaces::WorkspaceBinding;
use api::tekton::{TaskRun, TaskSpec};
use kube::ResourceExt;
use serde_json::Value;

use crate::results::TEKTON_RESULTS_DIR;
use crate::runner::names::step_container_name;
use crate::runner::substitution::{Replacements, param_keys};

/// Where a step's own files are: its exit code (`$(steps.NAME.exitCode.path)`) and, on
/// `ferrovirt up`, its termination message.
pub const STEPS_DIR: &str = "/tekton/steps";

/// Why a TaskRun's inputs do not fit its Task (`TaskRunValidationFailed`); each message is
/// Tekton's, without the `[User error] ` label the status adds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRun {
    #[error(
        "invalid input params for task {task}: missing values for these params which have no default values: [{}]",
        .names.join(" ")
    )]
    MissingParams { task: String, names: Vec<String> },
    #[error(
        "invalid input params for task {task}: param types don't match the user-specified type: [{}]",
        .names.join(" ")
    )]
    ParamTypes { task: String, names: Vec<String> },
    #[error("declared workspace {0:?} is required but has not been bound")]
    UnboundWorkspace(String),
    #[error("workspace binding {0:?} does not match any declared workspace")]
    UnknownWorkspace(String),
}

/// The Task a TaskRun runs, found: the name its messages use (the Task's, or the TaskRun's
/// for an inline spec), its spec, and whether it was found by `taskRef`.
pub struct ResolvedTask<'a> {
    pub name: String,
    pub spec: &'a TaskSpec,
    pub from_ref: bool,
}

/// The value of each declared parameter: what the run passes, else the default. Tekton
/// accepts parameters the Task does not declare and ignores them.
pub fn param_values(
    task: &ResolvedTask,
    run: &TaskRun,
) -> Result<BTreeMap<String, ParamValue>, InvalidRun> {
    let passed: BTreeMap<&str, &ParamValue> = run
        .spec
        .params
        .iter()
        .flatten()
        .map(|p| (p.name.as_str(), &p.value))
        .collect();
    let mut values = BTreeMap::new();
    let mut missing = Vec::new();
    let mut mistyped = Vec::new();
    for declared in task.spec.params.iter().flatten() {
        let value = match (passed.get(declared.name.as_str()), &declared.default) {
            (Some(value), _) => (*value).clone(),
            (None, Some(default)) => default.clone(),
            (None, None) => {
                missing.push(declared.name.clone());
                continue;
            }
        };
        if value.type_name() != declared.defaulted_type() && !is_whole_reference(&value) {
            mistyped.push(declared.name.clone());
        }
        values.insert(declared.name.clone(), value);
    }
    if !missing.is_empty() {
        return Err(InvalidRun::MissingParams {
            task: task.name.clone(),
            names: missing,
        });
    }
    if !mistyped.is_empty() {
        return Err(InvalidRun::ParamTypes {
            task: task.name.clone(),
            names: mistyped,
        });
    }
    Ok(values)
}

/// A string that is one `$(...)` expression, which Tekton lets stand for an array or object.
fn is_whole_reference(value: &ParamValue) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.starts_with("$(") && s.ends_with(')') && s.matches("$(").count() == 1)
}

/// Every declared workspace that is not optional is bound, and every binding is declared.
pub fn check_workspaces(task: &ResolvedTask, run: &TaskRun) -> Result<(), InvalidRun> {
    let bindings = run.spec.workspaces.as_deref().unwrap_or_default();
    let declared = task.spec.workspaces.as_deref().unwrap_or_default();
    for workspace in declared {
        if !workspace.optional.unwrap_or(false)
            && !bindings.iter().any(|b| b.name == workspace.name)
        {
            return Err(InvalidRun::UnboundWorkspace(workspace.name.clone()));
        }
    }
    for binding in bindings {
        if !declared.iter().any(|w| w.name == binding.name) {
            return Err(InvalidRun::UnknownWorkspace(binding.name.clone()));
        }
    }
    Ok(())
}

/// The volume name Tekton gives a workspace binding: `ws-` and the first five hex digits of
/// the 32-bit FNV-1a hash of the binding's name, zeros after a shorter one
/// (`pkg/names.GenerateHashedName`).
pub fn workspace_volume_name(binding: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in binding.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let hex = format!("{hash:x}");
    format!("ws-{:0<5}", hex.get(..5).unwrap_or(&hex))
}

/// The values of every variable a TaskRun's Task may use.
pub fn replacements(
    task: &ResolvedTask,
    run: &TaskRun,
    params: &BTreeMap<String, ParamValue>,
) -> Replacements {
    let mut r = Replacements::default();
    for (name, value) in params {
        add_param(&mut r, name, value);
    }
    let retries = run
        .status
        .as_ref()
        .and_then(|s| s.retries_status.as_ref())
        .map_or(0, Vec::len);
    for (key, value) in [
        ("context.taskRun.name", run.name_any()),
        (
            "context.taskRun.namespace",
            run.namespace().unwrap_or_default(),
        ),
        ("context.taskRun.uid", run.uid().unwrap_or_default()),
        ("context.task.name", task.name.clone()),
        ("context.task.retry-count", retries.to_string()),
    ] {
        r.string(&[key.to_string()], &value);
    }
    for result in task.spec.results.iter().flatten() {
        let name = &result.name;
        let keys = [
            format!("results.{name}.path"),
            format!("results[\"{name}\"].path"),
            format!("results['{name}'].path"),
        ];
        r.string(&keys, &format!("{TEKTON_RESULTS_DIR}/{name}"));
    }
    for (index, step) in task.spec.steps.iter().flatten().enumerate() {
        let container = step_container_name(&step.name, index);
        r.string(
            &[format!("steps.{container}.exitCode.path")],
            &format!("{STEPS_DIR}/{container}/exitCode"),
        );
    }
    let bindings = run.spec.workspaces.as_deref().unwrap_or_default();
    for workspace in task.spec.workspaces.iter().flatten() {
        let binding = bindings.iter().find(|b| b.name == workspace.name);
        add_workspace(&mut r, &workspace.name, &workspace.mount_path(), binding);
    }
    r
}

fn add_param(r: &mut Replacements, name: &str, value: &ParamValue) {
    match value {
        ParamValue::String(text) => r.string(&param_keys(name), text),
        ParamValue::Array(items) => {
            for key in param_keys(name) {
                for (index, item) in items.iter().enumerate() {
                    r.strings.insert(format!("{key}[{index}]"), item.clone());
                }
                r.arrays.insert(key, items.clone());
            }
        }
        ParamValue::Object(fields) => {
            for (field, text) in fields {
                r.string(&[format!("params.{name}.{field}")], text);
            }
        }
    }
}

fn add_workspace(r: &mut Replacements, name: &str, path: &str, binding: Option<&WorkspaceBinding>) {
    let key = |what: &str| vec![format!("workspaces.{name}.{what}")];
    let claim = binding
        .and_then(|b| b.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .unwrap_or_default();
    r.string(&key("path"), if binding.is_some() { path } else { "" });
    r.string(
        &key("bound"),
        if binding.is_some() { "true" } else { "false" },
    );
    r.string(&key("claim"), &claim);
    r.string(&key("volume"), &workspace_volume_name(name));
}

/// `spec` with its variables replaced where Tekton replaces them: the steps, the step
/// template, the sidecars, the volumes and the workspaces' mount paths. In a step's
/// `command` and `args`, an element that is exactly an array variable becomes its elements.
pub fn substitute(spec: &TaskSpec, r: &Replacements) -> TaskSpec {
    let mut out = spec.clone();
    out.steps = spec.steps.as_ref().map(|s| substituted(s, r));
    out.step_template = spec.step_template.as_ref().map(|t| substituted(t, r));
    out.sidecars = spec.sidecars.as_ref().map(|s| substituted(s, r));
    out.volumes = spec.volumes.as_ref().map(|v| substituted(v, r));
    if let Some(workspaces) = out.workspaces.as_mut() {
        for workspace in workspaces {
            workspace.mount_path = workspace.mount_path.as_deref().map(|p| r.apply(p));
        }
    }
    out
}

/// `value` through its JSON form with every string replaced: the typed API is the same
/// after, as replacing text in strings keeps every field's shape.
fn substituted<T: serde::Serialize + serde::de::DeserializeOwned + Clone>(
    value: &T,
    r: &Replacements,
) -> T {
    let Ok(mut json) = serde_json::to_value(value) else {
        return value.clone();
    };
    replace_strings(&mut json, r, false);
    serde_json::from_value(json).unwrap_or_else(|_| value.clone())
}

fn replace_strings(value: &mut Value, r: &Replacements, expand_arrays: bool) {
    match value {
        Value::String(text) => *text = r.apply(text),
        Value::Array(items) if expand_arrays && items.iter().all(Value::is_string) => {
            let list: Vec<String> = items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            *items = r.apply_list(&list).into_iter().map(Value::String).collect();
        }
        Value::Array(items) => items.iter_mut().for_each(|v| replace_strings(v, r, false)),
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                replace_strings(field, r, key == "command" || key == "args");
            }
        }
        _ => {}
    }
}

/// Whether a declared type is a string's (for results, whose values are read as text).
pub fn is_string_type(declared: Option<&str>) -> bool {
    declared.is_none_or(|t| t.is_empty() || t == param_type::STRING)
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
