use super::*;
use serde_json::json;

fn task_run(status: serde_json::Value, message: Option<&str>) -> TaskRun {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
        "metadata": {"name": "tr"},
        "spec": {"statusMessage": message},
        "status": {"podName": "", "conditions": [status]},
    }))
    .unwrap()
}

#[test]
fn a_task_runs_outcome_comes_from_its_condition_and_cancel_message() {
    let of = |status: serde_json::Value, message| Outcome::of(&task_run(status, message));
    assert_eq!(
        of(json!({"type": "Succeeded", "status": "True"}), None),
        Outcome::Succeeded
    );
    assert_eq!(
        of(json!({"type": "Succeeded", "status": "Unknown"}), None),
        Outcome::Running
    );
    assert_eq!(
        of(
            json!({"type": "Succeeded", "status": "False", "reason": "StepFailed"}),
            None
        ),
        Outcome::Failed
    );
    assert_eq!(
        of(
            json!({"type": "Succeeded", "status": "False", "reason": "TaskRunCancelled"}),
            Some(CANCELLED_BY_PIPELINE_RUN)
        ),
        Outcome::Cancelled
    );
    assert_eq!(
        of(
            json!({"type": "Succeeded", "status": "False", "reason": "TaskRunCancelled"}),
            Some(TIMED_OUT_BY_PIPELINE_RUN)
        ),
        Outcome::TimedOut
    );
}

#[test]
fn skipping_reasons_are_tektons_strings() {
    assert_eq!(
        SkipReason::ParentTasks.as_str(),
        "Parent Tasks were skipped"
    );
    assert_eq!(SkipReason::MissingResults.as_str(), "Results were missing");
    assert_eq!(
        SkipReason::TasksTimedOut.as_str(),
        "PipelineRun Tasks timeout has been reached"
    );
    assert!(SkipReason::FinallyTimedOut.is_timeout());
    assert!(!SkipReason::Stopping.is_timeout());
}
