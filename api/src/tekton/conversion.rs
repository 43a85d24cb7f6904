//! Tekton's objects between `tekton.dev/v1beta1` and `v1` (the storage version), as
//! Tekton's conversion webhook moves them (`pkg/apis/pipeline/v1beta1/*_conversion.go`):
//!
//! - steps, sidecars and the step template: `resources` is v1's `computeResources`; the
//!   container fields v1 dropped from steps and the step template ride in annotation
//!   [`TASK_DEPRECATIONS_ANNOTATION`], keyed by task name, so v1beta1 reads them back;
//! - TaskRun: `stepOverrides`/`sidecarOverrides` (`resources`) are `stepSpecs`/`sidecarSpecs`
//!   (`computeResources`); status `taskResults` is `results`;
//! - PipelineRun: `serviceAccountName` and `podTemplate` are `taskRunTemplate`'s, `timeout`
//!   is `timeouts.pipeline` (and wins over it), `taskRunSpecs[]` renames its fields, status
//!   `pipelineResults` is `results`;
//! - provenance `configSource` is v1's `refSource`; `bundle` of a reference has no v1 form.
//!
//! Written on JSON, as HCO's conversion is: most of an object crosses unchanged, and the
//! embedded specs (in runs, their status and pipeline tasks) go through the same functions.

use serde_json::{Map, Value, json};

use super::{V1, V1BETA1};

/// The annotation holding v1beta1's step fields that v1 has no place for.
pub const TASK_DEPRECATIONS_ANNOTATION: &str = "tekton.dev/v1beta1.task-deprecations";

/// The kinds converted.
pub const KINDS: &[&str] = &["Task", "TaskRun", "Pipeline", "PipelineRun"];

/// The container fields of a v1beta1 step (and its step template) that v1 dropped.
const DEPRECATED_STEP_FIELDS: &[&str] = &[
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "stdin",
    "stdinOnce",
    "tty",
];

/// Why an object cannot be converted.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConversionError {
    #[error("cannot convert a {kind} from {from:?} to {to:?}")]
    Versions {
        kind: String,
        from: String,
        to: String,
    },
    #[error("unknown kind {0:?} in group tekton.dev")]
    Kind(String),
    #[error("error deserializing key {TASK_DEPRECATIONS_ANNOTATION} from metadata: {0}")]
    Annotation(String),
    #[error("length of deserialized steps mismatch the length of target steps")]
    StepCount,
    #[error("the object to convert is not a JSON object")]
    NotAnObject,
}

/// [`convert`] as a conversion webhook answers: the object, or the message of its failure.
pub fn webhook(object: &Value, api_version: &str) -> Result<Value, String> {
    convert(object, api_version).map_err(|err| err.to_string())
}

/// `object` (a Task, TaskRun, Pipeline or PipelineRun of either version) at `api_version`.
pub fn convert(object: &Value, api_version: &str) -> Result<Value, ConversionError> {
    let from = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let direction = match (from, api_version) {
        (from, to) if from == to => return Ok(object.clone()),
        (V1BETA1, V1) => Direction::Up,
        (V1, V1BETA1) => Direction::Down,
        (from, to) => {
            return Err(ConversionError::Versions {
                kind,
                from: from.to_owned(),
                to: to.to_owned(),
            });
        }
    };
    if !object.is_object() {
        return Err(ConversionError::NotAnObject);
    }
    let mut converted = object.clone();
    let mut deprecations = Deprecations::read(&converted)?;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    // An object without a spec (the schema defaults it) converts without one.
    let mut spec = converted
        .as_object_mut()
        .and_then(|o| o.remove("spec"))
        .unwrap_or(Value::Null);
    match kind.as_str() {
        "Task" => task_spec(&mut spec, &mut deprecations, name, direction)?,
        "Pipeline" => pipeline_spec(&mut spec, &mut deprecations, direction)?,
        "TaskRun" => task_run(
            &mut spec,
            &mut converted,
            &mut deprecations,
            name,
            direction,
        )?,
        "PipelineRun" => pipeline_run(&mut spec, &mut converted, &mut deprecations, direction)?,
        _ => return Err(ConversionError::Kind(kind)),
    }
    if !spec.is_null() {
        converted["spec"] = spec;
    }
    deprecations.write(&mut converted);
    converted["apiVersion"] = json!(api_version);
    Ok(converted)
}

/// Which way an object goes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Direction {
    /// v1beta1 to v1.
    Up,
    /// v1 to v1beta1.
    Down,
}

impl Direction {
    /// `(v1beta1 name, v1 name)` as `(from, to)` this way.
    fn names<'a>(self, v1beta1: &'a str, v1: &'a str) -> (&'a str, &'a str) {
        match self {
            Direction::Up => (v1beta1, v1),
            Direction::Down => (v1, v1beta1),
        }
    }
}

/// Moves `object[from]` to `object[to]`, replacing what is there.
fn rename(object: &mut Value, from: &str, to: &str) {
    if let Some(fields) = object.as_object_mut() {
        if let Some(value) = fields.remove(from) {
            fields.insert(to.to_owned(), value);
        }
    }
}

/// `object[v1beta1]` <-> `object[v1]`, the way `direction` goes.
fn rename_field(object: &mut Value, v1beta1: &str, v1: &str, direction: Direction) {
    let (from, to) = direction.names(v1beta1, v1);
    rename(object, from, to);
}

/// Every item of the list at `object[field]`.
fn items<'a>(object: &'a mut Value, field: &str) -> impl Iterator<Item = &'a mut Value> {
    object
        .get_mut(field)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// Steps, sidecars and the step template of one Task spec, its deprecated step fields kept
/// in (or restored from) `deprecations` under `task_name`.
fn task_spec(
    spec: &mut Value,
    deprecations: &mut Deprecations,
    task_name: &str,
    direction: Direction,
) -> Result<(), ConversionError> {
    if !spec.is_object() {
        return Ok(());
    }
    match direction {
        Direction::Up => deprecations.take_from(spec, task_name),
        Direction::Down => deprecations.restore_into(spec, task_name)?,
    }
    for list in ["steps", "sidecars"] {
        for container in items(spec, list) {
            rename_field(container, "resources", "computeResources", direction);
        }
    }
    if let Some(template) = spec.get_mut("stepTemplate") {
        rename_field(template, "resources", "computeResources", direction);
    }
    Ok(())
}

/// The tasks, `finally` tasks and nested pipelines of one Pipeline spec.
fn pipeline_spec(
    spec: &mut Value,
    deprecations: &mut Deprecations,
    direction: Direction,
) -> Result<(), ConversionError> {
    for list in ["tasks", "finally"] {
        for task in items(spec, list) {
            pipeline_task(task, deprecations, direction)?;
        }
    }
    Ok(())
}

/// One pipeline task: its references, and its embedded Task or Pipeline.
fn pipeline_task(
    task: &mut Value,
    deprecations: &mut Deprecations,
    direction: Direction,
) -> Result<(), ConversionError> {
    let name = task["name"].as_str().unwrap_or_default().to_owned();
    for reference in ["taskRef", "pipelineRef"] {
        if let Some(reference) = task.get_mut(reference).and_then(Value::as_object_mut) {
            reference.remove("bundle");
        }
    }
    if let Some(embedded) = task.get_mut("taskSpec") {
        task_spec(embedded, deprecations, &name, direction)?;
    }
    if let Some(nested) = task.get_mut("pipelineSpec") {
        pipeline_spec(nested, deprecations, direction)?;
    }
    Ok(())
}

/// A TaskRun's `spec` (taken out of it) and the rest of `run`.
fn task_run(
    spec: &mut Value,
    run: &mut Value,
    deprecations: &mut Deprecations,
    name: &str,
    direction: Direction,
) -> Result<(), ConversionError> {
    overrides(spec, direction);
    if let Some(reference) = spec.get_mut("taskRef").and_then(Value::as_object_mut) {
        reference.remove("bundle");
    }
    if let Some(embedded) = spec.get_mut("taskSpec") {
        task_spec(embedded, deprecations, name, direction)?;
    }
    let Some(status) = run.get_mut("status").filter(|s| s.is_object()) else {
        return Ok(());
    };
    rename_field(status, "taskResults", "results", direction);
    provenance(status, direction);
    for step in items(status, "steps") {
        provenance(step, direction);
    }
    if let Some(ran) = status.get_mut("taskSpec") {
        // The status spec is the run's own, resolved; its deprecated fields are not kept.
        task_spec(ran, &mut Deprecations::default(), name, direction)?;
    }
    Ok(())
}

/// `stepOverrides`/`sidecarOverrides` (`resources`) <-> `stepSpecs`/`sidecarSpecs`
/// (`computeResources`) of a TaskRun spec or a PipelineRun's `taskRunSpecs[]` entry.
fn overrides(spec: &mut Value, direction: Direction) {
    for (v1beta1, v1) in [
        ("stepOverrides", "stepSpecs"),
        ("sidecarOverrides", "sidecarSpecs"),
    ] {
        rename_field(spec, v1beta1, v1, direction);
        let (_, now) = direction.names(v1beta1, v1);
        for entry in items(spec, now) {
            rename_field(entry, "resources", "computeResources", direction);
        }
    }
}

/// A PipelineRun's `spec` (taken out of it) and the rest of `run`.
fn pipeline_run(
    spec: &mut Value,
    run: &mut Value,
    deprecations: &mut Deprecations,
    direction: Direction,
) -> Result<(), ConversionError> {
    match direction {
        Direction::Up => run_settings_up(spec),
        Direction::Down => run_settings_down(spec),
    }
    for entry in items(spec, "taskRunSpecs") {
        rename_field(
            entry,
            "taskServiceAccountName",
            "serviceAccountName",
            direction,
        );
        rename_field(entry, "taskPodTemplate", "podTemplate", direction);
        overrides(entry, direction);
    }
    if let Some(reference) = spec.get_mut("pipelineRef").and_then(Value::as_object_mut) {
        reference.remove("bundle");
    }
    if let Some(embedded) = spec.get_mut("pipelineSpec") {
        pipeline_spec(embedded, deprecations, direction)?;
    }
    let Some(status) = run.get_mut("status").filter(|s| s.is_object()) else {
        return Ok(());
    };
    rename_field(status, "pipelineResults", "results", direction);
    provenance(status, direction);
    if let Some(ran) = status.get_mut("pipelineSpec") {
        pipeline_spec(ran, &mut Deprecations::default(), direction)?;
    }
    Ok(())
}

/// v1beta1's PipelineRun `serviceAccountName`, `podTemplate` and `timeout` into v1's
/// `taskRunTemplate` and `timeouts.pipeline` (`timeout` wins, as in Tekton's ConvertTo).
fn run_settings_up(spec: &mut Value) {
    let Some(fields) = spec.as_object_mut() else {
        return;
    };
    let mut template = Map::new();
    if let Some(account) = fields.remove("serviceAccountName") {
        template.insert("serviceAccountName".into(), account);
    }
    if let Some(pod) = fields.remove("podTemplate") {
        template.insert("podTemplate".into(), pod);
    }
    if !template.is_empty() {
        fields.insert("taskRunTemplate".into(), Value::Object(template));
    }
    if let Some(timeout) = fields.remove("timeout") {
        let timeouts = fields.entry("timeouts").or_insert_with(|| json!({}));
        if let Some(timeouts) = timeouts.as_object_mut() {
            timeouts.insert("pipeline".into(), timeout);
        }
    }
}

/// v1's `taskRunTemplate` back into v1beta1's PipelineRun fields.
fn run_settings_down(spec: &mut Value) {
    let Some(fields) = spec.as_object_mut() else {
        return;
    };
    let Some(Value::Object(mut template)) = fields.remove("taskRunTemplate") else {
        return;
    };
    for field in ["serviceAccountName", "podTemplate"] {
        if let Some(value) = template.remove(field) {
            fields.insert(field.into(), value);
        }
    }
}

/// v1beta1's provenance `configSource` is v1's `refSource` (which wins when both are set);
/// v1beta1 reads `refSource` as it is.
fn provenance(holder: &mut Value, direction: Direction) {
    let Some(provenance) = holder.get_mut("provenance").and_then(Value::as_object_mut) else {
        return;
    };
    if direction == Direction::Up {
        if let Some(config) = provenance.remove("configSource") {
            provenance.entry("refSource").or_insert(config);
        }
    }
}

/// The deprecated step fields of the Tasks of one object, by task name, as kept in its
/// [`TASK_DEPRECATIONS_ANNOTATION`].
#[derive(Debug, Default)]
struct Deprecations {
    by_task: Map<String, Value>,
}

impl Deprecations {
    fn read(object: &Value) -> Result<Deprecations, ConversionError> {
        let annotation = &object["metadata"]["annotations"][TASK_DEPRECATIONS_ANNOTATION];
        let Some(text) = annotation.as_str() else {
            return Ok(Deprecations::default());
        };
        match serde_json::from_str(text) {
            Ok(Value::Object(by_task)) => Ok(Deprecations { by_task }),
            Ok(other) => Err(ConversionError::Annotation(format!(
                "not an object: {other}"
            ))),
            Err(err) => Err(ConversionError::Annotation(err.to_string())),
        }
    }

    /// Sets the annotation to what is kept, or removes it when nothing is.
    fn write(&self, object: &mut Value) {
        let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        let Some(map) = annotations.as_object_mut() else {
            return;
        };
        if self.by_task.is_empty() {
            map.remove(TASK_DEPRECATIONS_ANNOTATION);
        } else {
            let text = Value::Object(self.by_task.clone()).to_string();
            map.insert(TASK_DEPRECATIONS_ANNOTATION.into(), json!(text));
        }
        if map.is_empty() {
            metadata.remove("annotations");
        }
    }

    /// Removes the deprecated fields from a v1beta1 spec's steps and template, keeping them.
    fn take_from(&mut self, spec: &mut Value, task_name: &str) {
        let steps: Vec<Value> = items(spec, "steps").map(take_deprecated).collect();
        let mut template = spec.get_mut("stepTemplate").map(take_deprecated);
        if let (Some(kept), Some(live)) = (&mut template, spec.get_mut("stepTemplate")) {
            if let Some(name) = live.as_object_mut().and_then(|t| t.remove("name")) {
                kept["name"] = name;
            }
        }
        let template = template.filter(|t| t.as_object().is_some_and(|t| !t.is_empty()));
        let any_step = steps
            .iter()
            .any(|s| s.as_object().is_some_and(|s| !s.is_empty()));
        if !any_step && template.is_none() {
            return;
        }
        let mut kept = Map::new();
        if any_step {
            kept.insert("deprecatedSteps".into(), Value::Array(steps));
        }
        if let Some(template) = template {
            kept.insert("deprecatedStepTemplate".into(), template);
        }
        self.by_task
            .insert(task_name.to_owned(), Value::Object(kept));
    }

    /// Puts back into a (now v1beta1) spec the fields kept for `task_name`.
    fn restore_into(&mut self, spec: &mut Value, task_name: &str) -> Result<(), ConversionError> {
        let Some(kept) = self.by_task.remove(task_name) else {
            return Ok(());
        };
        if let Some(steps) = kept["deprecatedSteps"].as_array() {
            let live: Vec<&mut Value> = items(spec, "steps").collect();
            if live.len() != steps.len() {
                return Err(ConversionError::StepCount);
            }
            for (step, fields) in live.into_iter().zip(steps) {
                merge_fields(step, fields);
            }
        }
        if let Some(template) = kept.get("deprecatedStepTemplate") {
            let live = spec
                .as_object_mut()
                .map(|s| s.entry("stepTemplate").or_insert_with(|| json!({})));
            if let Some(live) = live {
                merge_fields(live, template);
            }
        }
        Ok(())
    }
}

/// The deprecated fields of one step or template, removed from it.
fn take_deprecated(container: &mut Value) -> Value {
    let mut kept = Map::new();
    if let Some(fields) = container.as_object_mut() {
        for field in DEPRECATED_STEP_FIELDS {
            if let Some(value) = fields.remove(*field) {
                kept.insert((*field).to_owned(), value);
            }
        }
    }
    Value::Object(kept)
}

/// Sets on `container` each deprecated field (and a template's `name`) of `kept`.
fn merge_fields(container: &mut Value, kept: &Value) {
    let (Some(container), Some(kept)) = (container.as_object_mut(), kept.as_object()) else {
        return;
    };
    for (field, value) in kept {
        let known = DEPRECATED_STEP_FIELDS.contains(&field.as_str()) || field == "name";
        let empty = value.is_null() || value.as_str() == Some("");
        if known && !empty {
            container.insert(field.clone(), value.clone());
        }
    }
}

#[cfg(test)]
#[path = "conversion_tests.rs"]
mod tests;
