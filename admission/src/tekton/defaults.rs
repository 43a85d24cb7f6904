//! The defaults Tekton's webhook sets (`*_defaults.go`), for its default configuration
//! (`config-defaults`: 60 minutes, service account `default`, no default pod template).

use serde_json::{Value, json};

use api::tekton::params::{ParamSpec, param_type};
use api::tekton::refs::TASK_KIND;
use api::tekton::{DEFAULT_TIMEOUT, MANAGED_BY, MANAGED_BY_LABEL, V1BETA1};

/// Tekton's `default-service-account`.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Tekton's default timeout as Go prints it (`1h0m0s`), as its webhook writes it.
fn default_timeout() -> String {
    api::go_duration::format(DEFAULT_TIMEOUT)
}

/// `object` (a Task, TaskRun, Pipeline or PipelineRun of either version) with Tekton's
/// defaults set where it leaves them out.
pub fn set_defaults(object: &mut Value) {
    // What is not an object here the schema refuses; indexing into it would panic.
    if !object.is_object() {
        return;
    }
    if object["spec"].is_null() {
        object["spec"] = json!({});
    }
    let metadata = &object["metadata"];
    if !object["spec"].is_object() || !(metadata.is_object() || metadata.is_null()) {
        return;
    }
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let v1beta1 = object["apiVersion"] == V1BETA1;
    match kind.as_str() {
        "Task" => task_spec(&mut object["spec"]),
        "Pipeline" => pipeline_spec(&mut object["spec"]),
        "TaskRun" => task_run(object),
        "PipelineRun" if v1beta1 => pipeline_run_v1beta1(&mut object["spec"]),
        "PipelineRun" => pipeline_run(&mut object["spec"]),
        _ => {}
    }
}

fn task_run(run: &mut Value) {
    let labels = &mut run["metadata"]["labels"];
    let unset = labels.is_null() || labels.is_object() && labels.get(MANAGED_BY_LABEL).is_none();
    if unset {
        labels[MANAGED_BY_LABEL] = json!(MANAGED_BY);
    }
    let spec = &mut run["spec"];
    if let Some(reference) = spec.get_mut("taskRef") {
        task_ref(reference);
    }
    set_if_missing(spec, "timeout", &default_timeout());
    set_if_empty(spec, "serviceAccountName", DEFAULT_SERVICE_ACCOUNT);
    if let Some(embedded) = spec.get_mut("taskSpec") {
        task_spec(embedded);
    }
}

fn pipeline_run(spec: &mut Value) {
    set_if_missing(&mut spec["timeouts"], "pipeline", &default_timeout());
    set_if_empty(
        &mut spec["taskRunTemplate"],
        "serviceAccountName",
        DEFAULT_SERVICE_ACCOUNT,
    );
    if let Some(embedded) = spec.get_mut("pipelineSpec") {
        pipeline_spec(embedded);
    }
}

/// v1beta1's PipelineRun keeps the account on the spec, and a `timeout` counts as set.
fn pipeline_run_v1beta1(spec: &mut Value) {
    if spec.get("timeout").is_none() {
        set_if_missing(&mut spec["timeouts"], "pipeline", &default_timeout());
    }
    set_if_empty(spec, "serviceAccountName", DEFAULT_SERVICE_ACCOUNT);
    if let Some(embedded) = spec.get_mut("pipelineSpec") {
        pipeline_spec(embedded);
    }
}

/// A Task's parameter and result types.
fn task_spec(spec: &mut Value) {
    params(spec);
    for result in list(spec, "results") {
        if result.is_object() && result.get("type").is_none() {
            let object = result.get("properties").is_some();
            result["type"] = json!(if object {
                param_type::OBJECT
            } else {
                param_type::STRING
            });
        }
    }
}

/// A Pipeline's parameter types, and its tasks' references and inline Tasks.
fn pipeline_spec(spec: &mut Value) {
    params(spec);
    for field in ["tasks", "finally"] {
        for task in list(spec, field) {
            if let Some(reference) = task.get_mut("taskRef") {
                task_ref(reference);
            }
            if let Some(embedded) = task.get_mut("taskSpec") {
                task_spec(embedded);
            }
        }
    }
}

/// `kind: Task` on a reference by name (no resolver), as the webhook sets it.
fn task_ref(reference: &mut Value) {
    let resolver = reference["resolver"].as_str().unwrap_or_default();
    let kind = reference["kind"].as_str().unwrap_or_default();
    if reference.is_object() && resolver.is_empty() && kind.is_empty() {
        reference["kind"] = json!(TASK_KIND);
    }
}

/// Every declared parameter's `type` (see [`ParamSpec::defaulted_type`]), and `string` for
/// the keys of an object parameter that name none.
fn params(spec: &mut Value) {
    for param in list(spec, "params") {
        let Ok(declared) = serde_json::from_value::<ParamSpec>(param.clone()) else {
            continue; // the schema refuses it
        };
        param["type"] = json!(declared.defaulted_type());
        let properties = param.get_mut("properties").and_then(Value::as_object_mut);
        for property in properties.into_iter().flat_map(|p| p.values_mut()) {
            if property.get("type").is_none() && property.is_object() {
                property["type"] = json!(param_type::STRING);
            }
        }
    }
}

fn list<'a>(object: &'a mut Value, field: &str) -> impl Iterator<Item = &'a mut Value> {
    object
        .get_mut(field)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

fn set_if_missing(object: &mut Value, field: &str, value: &str) {
    if object.is_null() {
        *object = json!({});
    }
    if object.is_object() && object.get(field).is_none_or(Value::is_null) {
        object[field] = json!(value);
    }
}

fn set_if_empty(object: &mut Value, field: &str, value: &str) {
    if object.is_null() {
        *object = json!({});
    }
    let empty = object.get(field).is_none_or(|v| v.is_null() || v == "");
    if object.is_object() && empty {
        object[field] = json!(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_run_gets_tektons_defaults() {
        let mut run = json!({"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
            "metadata": {"name": "r"},
            "spec": {"taskRef": {"name": "t"},
                     "taskSpec": {"params": [{"name": "a", "default": ["x"]}],
                                  "results": [{"name": "r"}]}}});
        set_defaults(&mut run);
        assert_eq!(
            run["metadata"]["labels"],
            json!({MANAGED_BY_LABEL: MANAGED_BY})
        );
        assert_eq!(run["spec"]["taskRef"], json!({"name": "t", "kind": "Task"}));
        assert_eq!(run["spec"]["timeout"], "1h0m0s");
        assert_eq!(run["spec"]["serviceAccountName"], "default");
        assert_eq!(run["spec"]["taskSpec"]["params"][0]["type"], "array");
        assert_eq!(run["spec"]["taskSpec"]["results"][0]["type"], "string");
    }

    #[test]
    fn what_a_task_run_sets_is_kept() {
        let mut run = json!({"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
            "metadata": {"labels": {MANAGED_BY_LABEL: "me"}},
            "spec": {"taskRef": {"resolver": "git"}, "timeout": "0s",
                     "serviceAccountName": "builder"}});
        let before = run.clone();
        set_defaults(&mut run);
        assert_eq!(run, before);
    }

    #[test]
    fn a_pipeline_run_gets_a_timeout_and_an_account() {
        let mut run = json!({"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
            "spec": {"pipelineSpec": {"params": [{"name": "p", "properties": {"k": {}}}],
                                      "tasks": [{"name": "t", "taskRef": {"name": "x"}}]}}});
        set_defaults(&mut run);
        assert_eq!(run["spec"]["timeouts"], json!({"pipeline": "1h0m0s"}));
        assert_eq!(
            run["spec"]["taskRunTemplate"],
            json!({"serviceAccountName": "default"})
        );
        let pipeline = &run["spec"]["pipelineSpec"];
        assert_eq!(
            pipeline["params"][0],
            json!({"name": "p", "type": "object", "properties": {"k": {"type": "string"}}})
        );
        assert_eq!(pipeline["tasks"][0]["taskRef"]["kind"], "Task");
    }

    #[test]
    fn an_object_of_the_wrong_shape_is_left_to_the_schema() {
        for mut odd in [
            json!({"kind": "TaskRun", "spec": "x"}),
            json!({"kind": "TaskRun", "metadata": "x", "spec": {}}),
            json!({"kind": "Task", "spec": {"results": ["x"], "params": [3]}}),
            json!({"kind": "PipelineRun", "spec": {"timeouts": "x", "taskRunTemplate": []}}),
            json!([1]),
        ] {
            set_defaults(&mut odd);
        }
    }

    #[test]
    fn a_v1beta1_pipeline_run_with_a_timeout_gets_no_timeouts() {
        let mut run = json!({"apiVersion": V1BETA1, "kind": "PipelineRun",
            "spec": {"timeout": "5m"}});
        set_defaults(&mut run);
        assert_eq!(
            run["spec"],
            json!({"timeout": "5m", "serviceAccountName": "default"})
        );
    }
}
