use super::*;
use serde_json::json;

fn run(value: serde_json::Value) -> TaskRun {
    serde_json::from_value(value).unwrap()
}

fn spec(value: serde_json::Value) -> TaskSpec {
    serde_json::from_value(value).unwrap()
}

fn resolved(spec: &TaskSpec) -> ResolvedTask<'_> {
    ResolvedTask {
        name: "wait".into(),
        spec,
        from_ref: true,
    }
}

fn task() -> TaskSpec {
    spec(json!({
        "params": [
            {"name": "vmName", "type": "string"},
            {"name": "flags", "type": "array", "default": []},
            {"name": "timeout", "default": "1m"},
            {"name": "disk", "type": "object", "properties": {"size": {}}, "default": {"size": "1Gi"}},
        ],
        "results": [{"name": "name"}],
        "workspaces": [{"name": "data", "optional": true}, {"name": "keys", "mountPath": "/keys"}],
        "steps": [{
            "name": "wait",
            "image": "quay.io/ferrovirt/ferrovirt:latest",
            "command": ["ferrovirt", "task", "wait-for-vmi-status"],
            "args": ["--name", "$(params.vmName)", "$(params.flags[*])", "$(params['flags'])",
                     "--out=$(results.name.path)", "--size=$(params.disk.size)"],
            "env": [{"name": "NS", "value": "$(context.taskRun.namespace)/$(context.task.name)"},
                    {"name": "KEYS", "value": "$(workspaces.keys.path) $(workspaces.data.bound)"},
                    {"name": "EXIT", "value": "$(steps.step-wait.exitCode.path)"}],
        }],
    }))
}

fn a_run(params: serde_json::Value) -> TaskRun {
    run(json!({
        "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
        "metadata": {"name": "tr", "namespace": "tasks", "uid": "u-1"},
        "spec": {"params": params, "workspaces": [{"name": "keys", "emptyDir": {}}]},
    }))
}

#[test]
fn missing_and_mistyped_params_are_named_as_tekton_names_them() {
    let spec = task();
    let task = resolved(&spec);
    let missing = param_values(&task, &a_run(json!([]))).unwrap_err();
    assert_eq!(
        missing.to_string(),
        "invalid input params for task wait: missing values for these params which have no default values: [vmName]"
    );
    let mistyped = param_values(
        &task,
        &a_run(json!([{"name": "vmName", "value": ["a"]}, {"name": "flags", "value": "x"}])),
    )
    .unwrap_err();
    assert_eq!(
        mistyped.to_string(),
        "invalid input params for task wait: param types don't match the user-specified type: [vmName flags]"
    );
    // One expression may stand for an array, and undeclared params are ignored.
    let values = param_values(
        &task,
        &a_run(
            json!([{"name": "vmName", "value": "vm"}, {"name": "flags", "value": "$(params.x)"},
                      {"name": "extra", "value": "1"}]),
        ),
    )
    .unwrap();
    assert_eq!(values.len(), 4);
    assert_eq!(values["timeout"], ParamValue::String("1m".into()));
}

#[test]
fn workspaces_must_be_bound_and_declared() {
    let spec = task();
    let task = resolved(&spec);
    assert_eq!(check_workspaces(&task, &a_run(json!([]))), Ok(()));
    let unbound = run(json!({"metadata": {"name": "tr"}, "spec": {}}));
    assert_eq!(
        check_workspaces(&task, &unbound).unwrap_err().to_string(),
        r#"declared workspace "keys" is required but has not been bound"#
    );
    let extra = run(json!({"metadata": {"name": "tr"}, "spec": {"workspaces": [
        {"name": "keys", "emptyDir": {}}, {"name": "other", "emptyDir": {}}]}}));
    assert_eq!(
        check_workspaces(&task, &extra).unwrap_err().to_string(),
        r#"workspace binding "other" does not match any declared workspace"#
    );
}

#[test]
fn workspace_volumes_are_named_by_the_fnv_hash_of_the_binding() {
    // Values from FNV-1a computed independently of this code.
    assert_eq!(workspace_volume_name("source"), "ws-1bcf2");
    assert_eq!(workspace_volume_name("data"), "ws-d872e");
}

#[test]
fn every_variable_a_step_uses_is_replaced_and_arrays_expand_in_args() {
    let spec = task();
    let task = resolved(&spec);
    let run = a_run(json!([{"name": "vmName", "value": "vm-1"},
                           {"name": "flags", "value": ["--a", "--b"]}]));
    let values = param_values(&task, &run).unwrap();
    let out = substitute(&spec, &replacements(&task, &run, &values));
    let step = &out.steps.as_ref().unwrap()[0];
    assert_eq!(
        step.args.as_ref().unwrap(),
        &[
            "--name",
            "vm-1",
            "--a",
            "--b",
            "--a",
            "--b",
            "--out=/tekton/results/name",
            "--size=1Gi"
        ]
    );
    let env: Vec<&str> = step
        .env
        .iter()
        .flatten()
        .filter_map(|e| e.value.as_deref())
        .collect();
    assert_eq!(
        env,
        [
            "tasks/wait",
            "/keys false",
            "/tekton/steps/step-wait/exitCode"
        ]
    );
    // What is not a variable of the run stays as written.
    assert_eq!(
        step.command.as_ref().unwrap(),
        &["ferrovirt", "task", "wait-for-vmi-status"]
    );
}
