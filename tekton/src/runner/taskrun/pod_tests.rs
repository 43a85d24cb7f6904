use super::*;
use serde_json::json;

fn step(value: serde_json::Value) -> Step {
    serde_json::from_value(value).unwrap()
}

fn args(value: serde_json::Value) -> Result<Vec<String>, Refusal> {
    task_command(&step(value))
}

#[test]
fn own_and_kubevirt_images_run_their_task_commands() {
    assert_eq!(
        args(
            json!({"name": "s", "image": "quay.io/ferrovirt/ferrovirt:latest",
                    "command": ["ferrovirt", "task", "generate-ssh-keys"], "args": ["--x"]})
        ),
        Ok(vec![
            "task".into(),
            "generate-ssh-keys".into(),
            "--x".into()
        ])
    );
    assert_eq!(
        args(
            json!({"name": "createvm", "image": "quay.io/kubevirt/tekton-tasks:v0.26.0",
                    "command": ["create-vm"], "args": ["--output=yaml"]})
        ),
        Ok(vec![
            "task".into(),
            "create-vm".into(),
            "--output=yaml".into()
        ])
    );
    assert_eq!(
        args(
            json!({"name": "w", "image": "quay.io/kubevirt/tekton-tasks:v0.26.0",
                    "command": ["entrypoint"], "env": [{"name": "COMMAND", "value": "wait-for-vmi-status"}]})
        ),
        Ok(vec!["task".into(), "wait-for-vmi-status".into()])
    );
}

#[test]
fn scripts_other_images_and_unknown_commands_are_refused_by_name() {
    let script = args(
        json!({"name": "sh", "image": "quay.io/ferrovirt/ferrovirt:latest",
                             "script": "rm -rf /"}),
    );
    assert_eq!(script, Err(Refusal::Script { step: "sh".into() }));
    assert!(
        script
            .unwrap_err()
            .to_string()
            .starts_with(r#"step "sh" has a script"#)
    );
    assert_eq!(
        args(json!({"name": "b", "image": "busybox", "command": ["true"]})),
        Err(Refusal::Image {
            step: "b".into(),
            image: "busybox".into()
        })
    );
    assert_eq!(
        args(
            json!({"name": "x", "image": "quay.io/ferrovirt/ferrovirt:latest",
                    "command": ["ferrovirt", "up"]})
        ),
        Err(Refusal::UnknownTask {
            step: "x".into(),
            command: "up".into()
        })
    );
    // The entrypoint itself is not a task a Task may name.
    assert!(matches!(
        args(
            json!({"name": "x", "image": "quay.io/ferrovirt/ferrovirt:latest",
                    "command": ["ferrovirt", "task", "step"]})
        ),
        Err(Refusal::UnknownTask { .. })
    ));
}

fn task_run() -> TaskRun {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
        "metadata": {"name": "keys", "namespace": "tasks", "uid": "u-1",
                     "labels": {"team": "a"}},
        "spec": {"serviceAccountName": "generate-ssh-keys-task", "timeout": "10m",
                 "workspaces": [{"name": "data", "emptyDir": {}}]},
    }))
    .unwrap()
}

#[test]
fn the_pod_runs_each_step_after_the_one_before_it() {
    let spec: TaskSpec = serde_json::from_value(json!({
        "results": [{"name": "a"}, {"name": "b"}],
        "workspaces": [{"name": "data"}],
        "stepTemplate": {"env": [{"name": "SHARED", "value": "1"}]},
        "steps": [
            {"name": "one", "image": "quay.io/ferrovirt/ferrovirt:latest",
             "command": ["ferrovirt", "task", "generate-ssh-keys"]},
            {"name": "two", "image": "quay.io/kubevirt/tekton-tasks:v0.26.0", "onError": "continue",
             "command": ["entrypoint"], "env": [{"name": "COMMAND", "value": "wait-for-vmi-status"}]},
        ],
    }))
    .unwrap();
    let pod = task_run_pod(&task_run(), &spec, Some("generate-ssh-keys")).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("keys-pod"));
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["tekton.dev/taskRun"], "keys");
    assert_eq!(labels["tekton.dev/taskRunUID"], "u-1");
    assert_eq!(labels["tekton.dev/task"], "generate-ssh-keys");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "tekton-pipelines");
    assert_eq!(labels["team"], "a");
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("TaskRun", Some(true))
    );
    let spec = pod.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("generate-ssh-keys-task")
    );
    assert_eq!(spec.active_deadline_seconds, Some(900));
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["step-one", "step-two"]);
    let two = &spec.containers[1];
    assert_eq!(two.image.as_deref(), Some(DEFAULT_IMAGE));
    assert_eq!(
        two.args.clone().unwrap(),
        [
            "task",
            "step",
            "--wait-file",
            "/tekton/run/0/out",
            "--post-file",
            "/tekton/run/1/out",
            "--termination-path",
            "/tekton/steps/step-two/termination",
            "--step-metadata-dir",
            "/tekton/steps/step-two",
            "--results",
            "a,b",
            "--on-error",
            "continue",
            "--",
            "task",
            "wait-for-vmi-status",
        ]
    );
    assert_eq!(
        two.termination_message_path.as_deref(),
        Some("/tekton/steps/step-two/termination")
    );
    let env: Vec<&str> = two.env.iter().flatten().map(|e| e.name.as_str()).collect();
    assert_eq!(env, ["SHARED", "COMMAND"]);
    let mounts: Vec<&str> = two
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(
        mounts,
        [
            "/workspace/data",
            "/tekton/results",
            "/tekton/steps",
            "/tekton/run/1"
        ]
    );
    assert!(
        spec.volumes
            .unwrap()
            .iter()
            .any(|v| v.name == "ws-d872e" && v.empty_dir.is_some())
    );
}

#[test]
fn a_retry_gets_a_pod_of_its_own_and_sidecars_are_refused() {
    let mut run = task_run();
    run.status = Some(api::tekton::TaskRunStatus {
        retries_status: Some(vec![Default::default()]),
        ..Default::default()
    });
    assert_eq!(pod_name(&run), "keys-pod-retry1");
    let spec: TaskSpec = serde_json::from_value(json!({
        "steps": [], "sidecars": [{"name": "db", "image": "postgres"}]}))
    .unwrap();
    assert_eq!(
        task_run_pod(&run, &spec, None).unwrap_err().to_string(),
        "the Task has sidecars (db), which ferrovirt up does not run"
    );
}
