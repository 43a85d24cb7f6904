//! The refusals of Tekton's validating webhook that a run meets first: exactly one of a
//! reference and an inline spec, and a known `spec.status` (`taskrun_validation.go`,
//! `pipelinerun_validation.go`). Messages are knative's `FieldError`s, as Tekton words them.

use serde_json::Value;

use api::tekton::{pipelinerun, taskrun};

/// A run's problems, one per line, as knative joins them after `validation failed: `.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("validation failed: {}", .0.join("\n"))]
pub struct ValidationFailed(pub Vec<String>);

/// Tekton's checks of `object` (a TaskRun or PipelineRun; other kinds pass).
pub fn validate(object: &Value) -> Result<(), ValidationFailed> {
    let spec = &object["spec"];
    let problems = match object["kind"].as_str() {
        Some("TaskRun") => [
            exactly_one(spec, "taskRef", "taskSpec"),
            known_status(
                spec,
                TASK_RUN_STATUSES,
                "TaskRunCancelled or TaskRunPending",
            ),
        ],
        Some("PipelineRun") => [
            exactly_one(spec, "pipelineRef", "pipelineSpec"),
            known_status(
                spec,
                PIPELINE_RUN_STATUSES,
                "Cancelled, CancelledRunFinally, StoppedRunFinally or PipelineRunPending",
            ),
        ],
        _ => return Ok(()),
    };
    let problems: Vec<String> = problems.into_iter().flatten().collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ValidationFailed(problems))
    }
}

const TASK_RUN_STATUSES: &[&str] = &[
    taskrun::spec_status::CANCELLED,
    taskrun::spec_status::PENDING,
];

const PIPELINE_RUN_STATUSES: &[&str] = &[
    pipelinerun::spec_status::CANCELLED,
    pipelinerun::spec_status::CANCELLED_RUN_FINALLY,
    pipelinerun::spec_status::STOPPED_RUN_FINALLY,
    pipelinerun::spec_status::PENDING,
];

/// knative's `ErrMissingOneOf` / `ErrMultipleOneOf` for `spec.<reference>` and
/// `spec.<inline>`.
fn exactly_one(spec: &Value, reference: &str, inline: &str) -> Option<String> {
    let set = |field: &str| !spec[field].is_null();
    let got = match (set(reference), set(inline)) {
        (false, false) => "neither",
        (true, true) => "both",
        _ => return None,
    };
    Some(format!(
        "expected exactly one, got {got}: spec.{reference}, spec.{inline}"
    ))
}

/// `spec.status`, when set, must be one of `allowed`.
fn known_status(spec: &Value, allowed: &[&str], wording: &str) -> Option<String> {
    let status = spec["status"].as_str().filter(|s| !s.is_empty())?;
    (!allowed.contains(&status))
        .then(|| format!("invalid value: {status} should be {wording}: spec.status"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(object: Value) -> String {
        validate(&object).expect_err("refused").to_string()
    }

    #[test]
    fn a_task_run_names_exactly_one_task() {
        assert_eq!(
            refusal(json!({"kind": "TaskRun", "spec": {}})),
            "validation failed: expected exactly one, got neither: spec.taskRef, spec.taskSpec"
        );
        assert_eq!(
            refusal(json!({"kind": "TaskRun",
                           "spec": {"taskRef": {"name": "t"}, "taskSpec": {"steps": []}}})),
            "validation failed: expected exactly one, got both: spec.taskRef, spec.taskSpec"
        );
        assert_eq!(
            validate(&json!({"kind": "TaskRun", "spec": {"taskRef": {"name": "t"}}})),
            Ok(())
        );
    }

    #[test]
    fn a_pipeline_run_names_exactly_one_pipeline_and_a_known_status() {
        assert_eq!(
            refusal(json!({"kind": "PipelineRun", "spec": {"status": "Stopped"}})),
            "validation failed: expected exactly one, got neither: spec.pipelineRef, spec.pipelineSpec\n\
             invalid value: Stopped should be Cancelled, CancelledRunFinally, StoppedRunFinally or PipelineRunPending: spec.status"
        );
        let run = json!({"kind": "PipelineRun",
                         "spec": {"pipelineRef": {"name": "p"}, "status": "CancelledRunFinally"}});
        assert_eq!(validate(&run), Ok(()));
    }

    #[test]
    fn a_task_run_status_is_cancelled_or_pending() {
        assert_eq!(
            refusal(json!({"kind": "TaskRun",
                           "spec": {"taskRef": {"name": "t"}, "status": "Cancelled"}})),
            "validation failed: invalid value: Cancelled should be TaskRunCancelled or TaskRunPending: spec.status"
        );
    }
}
