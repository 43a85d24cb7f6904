use super::*;
use serde_json::json;

fn pod(statuses: serde_json::Value, phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "tr-pod"},
        "spec": {"containers": [{"name": "step-one"}, {"name": "step-two"}]},
        "status": {"phase": phase, "containerStatuses": statuses},
    }))
    .unwrap()
}

fn spec() -> TaskSpec {
    serde_json::from_value(
        json!({"results": [{"name": "name"}, {"name": "list", "type": "array"}]}),
    )
    .unwrap()
}

fn now() -> jiff::Timestamp {
    "2026-11-29T08:00:00Z".parse().unwrap()
}

fn terminated(code: i32, reason: &str, message: &str) -> serde_json::Value {
    json!({"terminated": {"exitCode": code, "reason": reason, "message": message,
                          "startedAt": "2026-11-29T07:59:00Z", "finishedAt": "2026-11-29T07:59:30Z"}})
}

#[test]
fn a_pod_whose_steps_all_ended_well_succeeds_with_typed_results() {
    let one = r#"[{"key":"name","value":"vm-1\n","type":1},{"key":"StartedAt","value":"2026-11-29T07:59:01.250Z","type":3}]"#;
    let two = r#"[{"key":"list","value":"[\"a\",\"b\"]","type":1},{"key":"name","value":"vm-2","type":1}]"#;
    let pod = pod(
        json!([{"name": "step-two", "state": terminated(0, "Completed", two), "image": "", "imageID": "", "ready": false, "restartCount": 0},
               {"name": "step-one", "state": terminated(0, "Completed", one), "image": "", "imageID": "", "ready": false, "restartCount": 0}]),
        "Succeeded",
    );
    let status = from_pod(&TaskRunStatus::default(), &pod, &spec(), false, now());
    let condition = succeeded(&status).unwrap();
    assert_eq!(
        (
            condition.status.as_str(),
            condition.reason.as_deref(),
            condition.message.as_deref()
        ),
        (
            "True",
            Some("Succeeded"),
            Some("All Steps have completed executing")
        )
    );
    assert_eq!(status.pod_name, "tr-pod");
    assert_eq!(
        status.completion_time.as_deref(),
        Some("2026-11-29T08:00:00Z")
    );
    let results = serde_json::to_value(&status.results).unwrap();
    assert_eq!(
        results,
        json!([{"name": "name", "type": "string", "value": "vm-2"},
               {"name": "list", "type": "array", "value": ["a", "b"]}])
    );
    let steps = serde_json::to_value(&status.steps).unwrap();
    assert_eq!(steps[0]["name"], "one");
    assert_eq!(steps[0]["container"], "step-one");
    assert_eq!(steps[0]["terminationReason"], "Completed");
    // The entrypoint's start time, to the second as an object's times are.
    assert_eq!(steps[0]["terminated"]["startedAt"], "2026-11-29T07:59:01Z");
    assert_eq!(
        steps[0]["terminated"]["message"],
        r#"[{"key":"name","value":"vm-1\n","type":1}]"#
    );
}

#[test]
fn the_first_failed_step_names_the_failure_and_skipped_steps_say_so() {
    let skipped = r#"[{"key":"StartedAt","value":"2026-11-29T07:59:01.000Z","type":3},{"key":"Reason","value":"Skipped","type":3}]"#;
    let pod = pod(
        json!([{"name": "step-one", "state": terminated(3, "Error", ""), "image": "", "imageID": "", "ready": false, "restartCount": 0},
               {"name": "step-two", "state": terminated(1, "Error", skipped), "image": "", "imageID": "", "ready": false, "restartCount": 0}]),
        "Failed",
    );
    let status = from_pod(&TaskRunStatus::default(), &pod, &spec(), false, now());
    let condition = succeeded(&status).unwrap();
    assert_eq!(condition.status, "False");
    assert_eq!(condition.reason.as_deref(), Some("StepFailed"));
    assert_eq!(
        condition.message.as_deref(),
        Some(r#""step-one" exited with code 3: Error"#)
    );
    let steps = status.steps.unwrap();
    assert_eq!(steps[1].termination_reason.as_deref(), Some("Skipped"));
    assert_eq!(steps[1].state.terminated.as_ref().unwrap().message, None);
    // A pipeline task that continues on error ignores the failure.
    let ignored = from_pod(&TaskRunStatus::default(), &pod, &spec(), true, now());
    assert_eq!(
        succeeded(&ignored).unwrap().reason.as_deref(),
        Some("FailureIgnored")
    );
}

#[test]
fn a_pending_pod_says_why_and_a_running_one_is_running() {
    let waiting = pod(
        json!([{"name": "step-one", "state": {"waiting": {"reason": "ContainerCreating", "message": "secret \"x\" not found"}},
                "image": "", "imageID": "", "ready": false, "restartCount": 0}]),
        "Pending",
    );
    let status = from_pod(&TaskRunStatus::default(), &waiting, &spec(), false, now());
    let condition = succeeded(&status).unwrap();
    assert_eq!(condition.reason.as_deref(), Some("Pending"));
    assert_eq!(
        condition.message.as_deref(),
        Some(r#"build step "step-one" is pending with reason "secret \"x\" not found""#)
    );
    assert_eq!(status.completion_time, None);
    let running = pod(
        json!([{"name": "step-one", "state": terminated(0, "Completed", ""), "image": "", "imageID": "", "ready": false, "restartCount": 0},
               {"name": "step-two", "state": {"running": {"startedAt": "2026-11-29T07:59:00Z"}}, "image": "", "imageID": "", "ready": true, "restartCount": 0}]),
        "Running",
    );
    let status = from_pod(&status, &running, &spec(), false, now());
    let condition = succeeded(&status).unwrap();
    assert_eq!(condition.reason.as_deref(), Some("Running"));
    assert_eq!(condition.message.as_deref(), Some(RUNNING_MESSAGE));
}

#[test]
fn a_condition_keeps_its_transition_time_until_it_changes() {
    let mut status = TaskRunStatus::default();
    set_condition(&mut status, "Unknown", "Running", "m", "t1");
    set_condition(&mut status, "Unknown", "Running", "m", "t2");
    assert_eq!(
        succeeded(&status).unwrap().last_transition_time.as_deref(),
        Some("t1")
    );
    set_condition(&mut status, "False", "Failed", "m", "t3");
    assert_eq!(
        succeeded(&status).unwrap().last_transition_time.as_deref(),
        Some("t3")
    );
    assert_eq!(status.completion_time.as_deref(), Some("t3"));
    assert_eq!(status.conditions.unwrap().len(), 1);
}
