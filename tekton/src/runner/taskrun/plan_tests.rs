use super::*;
use api::tekton::TaskSpec;
use serde_json::json;

fn task_spec() -> TaskSpec {
    serde_json::from_value(json!({
        "params": [{"name": "vmName"}],
        "results": [{"name": "name"}],
        "steps": [{"name": "wait", "image": "quay.io/ferrovirt/ferrovirt:latest",
                   "command": ["ferrovirt", "task", "wait-for-vmi-status"],
                   "env": [{"name": "VMI_NAME", "value": "$(params.vmName)"}]}],
    }))
    .unwrap()
}

fn task_run(spec: serde_json::Value, status: serde_json::Value) -> TaskRun {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
        "metadata": {"name": "tr", "namespace": "tasks", "uid": "u-1",
                     "creationTimestamp": "2026-11-29T07:59:59Z"},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

fn at(text: &str) -> jiff::Timestamp {
    text.parse().unwrap()
}

fn plan_for(run: &TaskRun, spec: &TaskSpec, pod: Option<&Pod>, now: &str) -> Vec<TaskRunAction> {
    plan(&Observed {
        task_run: run,
        task: Ok(ResolvedTask {
            name: "wait".into(),
            spec,
            from_ref: true,
        }),
        pod,
        now: at(now),
    })
}

fn written(actions: &[TaskRunAction]) -> serde_json::Value {
    actions
        .iter()
        .find_map(|a| match a {
            TaskRunAction::WriteStatus(status) => Some(serde_json::to_value(status).unwrap()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no status written: {actions:?}"))
}

#[test]
fn a_new_run_starts_and_gets_its_pod_with_its_params_substituted() {
    let spec = task_spec();
    let run = task_run(
        json!({"params": [{"name": "vmName", "value": "vm-1"}], "timeout": "1m"}),
        json!(null),
    );
    let actions = plan_for(&run, &spec, None, "2026-11-29T08:00:00Z");
    let TaskRunAction::CreatePod(pod) = &actions[0] else {
        panic!("{actions:?}")
    };
    assert_eq!(pod.metadata.name.as_deref(), Some("tr-pod"));
    let status = written(&actions);
    assert_eq!(status["podName"], "tr-pod");
    assert_eq!(status["startTime"], "2026-11-29T08:00:00Z");
    assert_eq!(status["conditions"][0]["reason"], "Running");
    assert_eq!(status["taskSpec"]["steps"][0]["env"][0]["value"], "vm-1");
    assert_eq!(
        actions.last(),
        Some(&TaskRunAction::RequeueAfter(Duration::from_secs(60)))
    );
}

#[test]
fn a_run_that_does_not_fit_its_task_fails_with_tekton_s_reason() {
    let spec = task_spec();
    let run = task_run(json!({}), json!(null));
    let status = written(&plan_for(&run, &spec, None, "2026-11-29T08:00:00Z"));
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(status["conditions"][0]["reason"], "TaskRunValidationFailed");
    assert_eq!(
        status["conditions"][0]["message"],
        "[User error] invalid input params for task wait: missing values for these params which have no default values: [vmName]"
    );
    assert_eq!(status["completionTime"], "2026-11-29T08:00:00Z");

    let missing = plan(&Observed {
        task_run: &run,
        task: Err(
            "error when listing tasks for taskRun tr: tasks.tekton.dev \"nope\" not found".into(),
        ),
        pod: None,
        now: at("2026-11-29T08:00:00Z"),
    });
    assert_eq!(
        written(&missing)["conditions"][0]["reason"],
        "TaskRunResolutionFailed"
    );
}

#[test]
fn a_step_that_is_not_a_task_command_fails_the_run_at_pod_creation() {
    let spec: TaskSpec = serde_json::from_value(json!({
        "steps": [{"name": "sh", "image": "alpine", "script": "echo hi"}]}))
    .unwrap();
    let run = task_run(json!({}), json!(null));
    let actions = plan_for(&run, &spec, None, "2026-11-29T08:00:00Z");
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, TaskRunAction::CreatePod(_)))
    );
    let status = written(&actions);
    assert_eq!(status["conditions"][0]["reason"], "PodCreationFailed");
    let message = status["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.starts_with(r#"failed to create task run pod "tr": step "sh" has a script"#),
        "{message}"
    );
    assert!(
        message.ends_with(". Maybe missing or invalid Task tasks/wait"),
        "{message}"
    );
}

#[test]
fn a_cancelled_run_ends_its_steps_and_deletes_its_pod() {
    let spec = task_spec();
    let run = task_run(
        json!({"params": [{"name": "vmName", "value": "vm-1"}], "status": "TaskRunCancelled"}),
        json!({"podName": "tr-pod", "startTime": "2026-11-29T08:00:00Z",
               "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running"}],
               "steps": [{"name": "wait", "container": "step-wait",
                          "running": {"startedAt": "2026-11-29T08:00:01Z"}}]}),
    );
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "tr-pod"}})).unwrap();
    let actions = plan_for(&run, &spec, Some(&pod), "2026-11-29T08:00:05Z");
    assert_eq!(actions[0], TaskRunAction::DeletePod("tr-pod".into()));
    let status = written(&actions);
    assert_eq!(status["conditions"][0]["reason"], "TaskRunCancelled");
    assert_eq!(
        status["conditions"][0]["message"],
        "TaskRun \"tr\" was cancelled. "
    );
    let step = &status["steps"][0];
    assert_eq!(step["terminated"]["exitCode"], 1);
    assert_eq!(step["terminated"]["reason"], "TaskRunCancelled");
    assert_eq!(
        step["terminated"]["message"],
        "Step wait terminated as pod tr-pod is terminated"
    );
    assert_eq!(step["terminated"]["startedAt"], "2026-11-29T08:00:01Z");
    assert_eq!(step["terminationReason"], "TaskRunCancelled");
}

#[test]
fn a_run_past_its_timeout_fails_with_the_timeout_quoted() {
    let spec = task_spec();
    let run = task_run(
        json!({"params": [{"name": "vmName", "value": "vm-1"}], "timeout": "1m"}),
        json!({"podName": "tr-pod", "startTime": "2026-11-29T08:00:00Z",
               "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running"}]}),
    );
    let early = plan_for(&run, &spec, None, "2026-11-29T08:00:30Z");
    assert!(
        early.contains(&TaskRunAction::RequeueAfter(Duration::from_secs(30))),
        "{early:?}"
    );
    let late = plan_for(&run, &spec, None, "2026-11-29T08:01:00Z");
    let status = written(&late);
    assert_eq!(status["conditions"][0]["reason"], "TaskRunTimeout");
    assert_eq!(
        status["conditions"][0]["message"],
        r#"TaskRun "tr" failed to finish within "1m0s""#
    );
}

#[test]
fn a_pending_run_waits_and_a_done_run_is_left_alone() {
    let spec = task_spec();
    let pending = task_run(json!({"status": "TaskRunPending"}), json!(null));
    let status = written(&plan_for(&pending, &spec, None, "2026-11-29T08:00:00Z"));
    assert_eq!(status["conditions"][0]["reason"], "TaskRunPending");
    assert_eq!(
        status["conditions"][0]["message"],
        "TaskRun \"tr\" is pending"
    );
    assert!(status.get("startTime").is_none());

    let done = task_run(
        json!({}),
        json!({"podName": "tr-pod", "conditions": [{"type": "Succeeded", "status": "True", "reason": "Succeeded"}]}),
    );
    assert_eq!(plan_for(&done, &spec, None, "2026-11-29T08:00:00Z"), vec![]);
}

#[test]
fn a_failed_try_with_retries_left_is_archived_and_tried_again() {
    let spec = task_spec();
    let run = task_run(
        json!({"params": [{"name": "vmName", "value": "vm-1"}], "retries": 1}),
        json!({"podName": "tr-pod", "startTime": "2026-11-29T08:00:00Z",
               "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running"}]}),
    );
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "tr-pod"},
        "spec": {"containers": [{"name": "step-wait"}]},
        "status": {"phase": "Failed", "containerStatuses": [
            {"name": "step-wait", "image": "", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}}))
    .unwrap();
    let status = written(&plan_for(&run, &spec, Some(&pod), "2026-11-29T08:00:10Z"));
    assert_eq!(status["conditions"][0]["status"], "Unknown");
    assert_eq!(status["conditions"][0]["reason"], "ToBeRetried");
    assert_eq!(
        status["conditions"][0]["message"],
        r#""step-wait" exited with code 1: Error"#
    );
    assert_eq!(status["podName"], "");
    assert!(status.get("startTime").is_none());
    assert_eq!(status["retriesStatus"][0]["podName"], "tr-pod");
    assert_eq!(
        status["retriesStatus"][0]["conditions"][0]["reason"],
        "StepFailed"
    );
}
