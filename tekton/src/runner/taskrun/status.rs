//! A TaskRun's status from its pod, as Tekton's controller reads it (`pkg/pod/status.go`):
//! each step's state with the start time and results its entrypoint left in the termination
//! message, the run's results typed as the Task declares them, and the `Succeeded`
//! condition with Tekton's reasons and messages.

use api::meta_time::rfc3339;
use api::tekton::params::ParamValue;
use api::tekton::results::TaskRunResult;
use api::tekton::run_status::{self, RunCondition};
use api::tekton::taskrun::StepState;
use api::tekton::{TaskRunStatus, TaskSpec};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::entrypoint::{INTERNAL_RESULT, RunResult, TASK_RUN_RESULT, parse_termination_message};
use crate::runner::taskrun::resolve::is_string_type;

/// Tekton's TaskRun reasons (`taskrun_types.go`, `pkg/pod/status.go`).
pub mod reason {
    pub const STARTED: &str = "Started";
    pub const RUNNING: &str = "Running";
    pub const PENDING: &str = "Pending";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const STEP_FAILED: &str = "StepFailed";
    pub const FAILURE_IGNORED: &str = "FailureIgnored";
    pub const CANCELLED: &str = "TaskRunCancelled";
    pub const TIMEOUT: &str = "TaskRunTimeout";
    pub const RESOLUTION_FAILED: &str = "TaskRunResolutionFailed";
    pub const VALIDATION_FAILED: &str = "TaskRunValidationFailed";
    pub const POD_CREATION_FAILED: &str = "PodCreationFailed";
    pub const PENDING_RUN: &str = "TaskRunPending";
    pub const TO_BE_RETRIED: &str = "ToBeRetried";
}

/// What Tekton prefixes a message with when the user's input is at fault.
pub const USER_ERROR: &str = "[User error] ";
pub const RUNNING_MESSAGE: &str = "Not all Steps in the Task have finished executing";
pub const SUCCEEDED_MESSAGE: &str = "All Steps have completed executing";

/// The run's `Succeeded` condition.
pub fn succeeded(status: &TaskRunStatus) -> Option<&RunCondition> {
    run_status::succeeded(status.conditions.as_deref())
}

/// Whether the run has ended (its condition is True or False).
pub fn is_done(status: &TaskRunStatus) -> bool {
    succeeded(status).is_some_and(|c| c.status != "Unknown")
}

/// Sets the `Succeeded` condition (knative's rules, [`run_status::set_succeeded`]); a run
/// that ends gets its completion time.
pub fn set_condition(
    status: &mut TaskRunStatus,
    state: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    let changed = run_status::set_succeeded(&mut status.conditions, state, reason, message, now);
    if changed && state != "Unknown" {
        status.completion_time = Some(now.into());
    }
}

/// Marks the run failed with `reason` and `message`.
pub fn fail(status: &mut TaskRunStatus, reason: &str, message: &str, now: &str) {
    set_condition(status, "False", reason, message, now);
}

/// The status of a run whose pod is `pod`; `continue_on_error` when its pipeline task
/// lets it fail (`FailureIgnored`).
pub fn from_pod(
    previous: &TaskRunStatus,
    pod: &Pod,
    spec: &TaskSpec,
    continue_on_error: bool,
    now: jiff::Timestamp,
) -> TaskRunStatus {
    let now = rfc3339(now);
    let mut status = previous.clone();
    if !is_done(&status) {
        set_condition(
            &mut status,
            "Unknown",
            reason::RUNNING,
            RUNNING_MESSAGE,
            &now,
        );
    }
    status.pod_name = pod.metadata.name.clone().unwrap_or_default();
    let pod_status = pod.status.clone().unwrap_or_default();
    let phase = pod_status.phase.clone().unwrap_or_default();
    let steps = step_statuses(pod);
    let complete = phase == "Succeeded"
        || phase == "Failed"
        || (matches!(phase.as_str(), "Running" | "Succeeded")
            && !steps.is_empty()
            && steps.iter().all(|s| terminated(s).is_some()));
    let messages: Vec<Vec<RunResult>> = steps.iter().map(termination_results).collect();
    status.steps = Some(
        steps
            .iter()
            .zip(&messages)
            .map(|(s, results)| step_state(s, results))
            .collect(),
    );
    if complete {
        let results = task_results(spec, &messages);
        status.results = Some(results).filter(|r| !r.is_empty());
        match failure(&phase, &steps) {
            Some((reason, message)) => {
                let reason = if continue_on_error {
                    reason::FAILURE_IGNORED
                } else {
                    reason
                };
                fail(&mut status, reason, &message, &now);
            }
            None => set_condition(
                &mut status,
                "True",
                reason::SUCCEEDED,
                SUCCEEDED_MESSAGE,
                &now,
            ),
        }
    } else if phase == "Pending" || phase.is_empty() && pod.status.is_some() {
        set_condition(
            &mut status,
            "Unknown",
            reason::PENDING,
            &waiting_message(pod),
            &now,
        );
    }
    status
}

/// The step containers' statuses, in the order of the pod's containers.
fn step_statuses(pod: &Pod) -> Vec<ContainerStatus> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let order: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
        .collect();
    order
        .iter()
        .filter(|name| name.starts_with("step-"))
        .filter_map(|name| statuses.iter().find(|s| &s.name == name).cloned())
        .collect()
}

fn terminated(
    status: &ContainerStatus,
) -> Option<&k8s_openapi::api::core::v1::ContainerStateTerminated> {
    status.state.as_ref().and_then(|s| s.terminated.as_ref())
}

fn termination_results(status: &ContainerStatus) -> Vec<RunResult> {
    terminated(status)
        .and_then(|t| t.message.as_deref())
        .filter(|m| !m.is_empty())
        .and_then(|m| parse_termination_message(m).ok())
        .unwrap_or_default()
}

fn internal<'a>(results: &'a [RunResult], key: &str) -> Option<&'a str> {
    results
        .iter()
        .find(|r| r.result_type == INTERNAL_RESULT && r.key == key)
        .map(|r| r.value.as_str())
}

/// One step's state: the pod's, with the entrypoint's start time, exit code and reason,
/// and the message replaced by the step's own results.
fn step_state(container: &ContainerStatus, results: &[RunResult]) -> StepState {
    let mut state = container.state.clone().unwrap_or_default();
    let mut termination_reason = None;
    if let Some(done) = state.terminated.as_mut() {
        if let Some(started) = internal(results, "StartedAt").and_then(|t| t.parse().ok()) {
            done.started_at = Some(Time(started));
        }
        termination_reason = done.reason.clone();
        if let Some(code) = internal(results, "ExitCode").and_then(|c| c.parse().ok()) {
            done.exit_code = code;
            termination_reason = Some("Continued".into());
        }
        if let Some(reason) = internal(results, "Reason") {
            termination_reason = Some(reason.into());
        }
        let own: Vec<&RunResult> = results
            .iter()
            .filter(|r| r.result_type != INTERNAL_RESULT)
            .collect();
        done.message = if own.is_empty() {
            None
        } else {
            serde_json::to_string(&own).ok()
        };
    }
    StepState {
        state,
        name: Some(
            container
                .name
                .strip_prefix("step-")
                .unwrap_or(&container.name)
                .into(),
        ),
        container: Some(container.name.clone()),
        image_id: Some(container.image_id.clone()).filter(|i| !i.is_empty()),
        termination_reason,
        ..Default::default()
    }
}

/// The Task's results from every step's termination message, typed as declared; a later
/// value of a result replaces an earlier one in its place.
fn task_results(spec: &TaskSpec, messages: &[Vec<RunResult>]) -> Vec<TaskRunResult> {
    let mut results: Vec<TaskRunResult> = Vec::new();
    for result in messages.iter().flatten() {
        if result.result_type != TASK_RUN_RESULT {
            continue;
        }
        let declared = spec.results.iter().flatten().find(|r| r.name == result.key);
        let string = is_string_type(declared.and_then(|d| d.type_.as_deref()));
        let value = if string {
            ParamValue::String(result.value.clone())
        } else {
            serde_json::from_str::<serde_json::Value>(&result.value)
                .map(ParamValue::from_json)
                .unwrap_or_else(|_| ParamValue::String(result.value.clone()))
        };
        let entry = TaskRunResult {
            name: result.key.clone(),
            type_: Some(value.type_name().into()),
            value,
        };
        match results.iter_mut().find(|r| r.name == entry.name) {
            Some(existing) => *existing = entry,
            None => results.push(entry),
        }
    }
    results
}

/// Why a finished pod failed, as Tekton classifies it: the first step that exited non-zero
/// (`StepFailed`), else a failed pod (`Failed`); `None` when it succeeded.
fn failure(phase: &str, steps: &[ContainerStatus]) -> Option<(&'static str, String)> {
    let failed = steps
        .iter()
        .find(|s| terminated(s).is_some_and(|t| t.exit_code != 0));
    if let Some(step) = failed {
        let results = termination_results(step);
        let done = terminated(step)?;
        let message = if internal(&results, "Reason") == Some("TimeoutExceeded") {
            format!(
                "{:?} exited because the step exceeded the specified timeout limit",
                step.name
            )
        } else {
            match done.reason.as_deref().filter(|r| !r.is_empty()) {
                Some(reason) => {
                    format!(
                        "{:?} exited with code {}: {reason}",
                        step.name, done.exit_code
                    )
                }
                None => format!("{:?} exited with code {}", step.name, done.exit_code),
            }
        };
        return Some((reason::STEP_FAILED, message));
    }
    (phase == "Failed").then(|| {
        (
            reason::FAILED,
            "build failed for unspecified reasons.".to_string(),
        )
    })
}

/// Why a pod is pending (Tekton's `getWaitingMessage`).
fn waiting_message(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    for container in status.container_statuses.iter().flatten() {
        let waiting = container.state.as_ref().and_then(|s| s.waiting.as_ref());
        if let Some(message) = waiting
            .and_then(|w| w.message.as_deref())
            .filter(|m| !m.is_empty())
        {
            return format!(
                "build step {:?} is pending with reason {message:?}",
                container.name
            );
        }
    }
    for condition in status.conditions.iter().flatten() {
        if condition.status != "True" {
            return format!(
                "pod status {:?}:{:?}; message: {:?}",
                condition.type_,
                condition.status,
                condition.message.clone().unwrap_or_default()
            );
        }
    }
    status
        .message
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "Pending".into())
}

/// Every step still running or waiting as terminated by the run's end (`reason`): what
/// Tekton records when it cancels or times out a run and deletes its pod.
pub fn terminate_steps(status: &mut TaskRunStatus, reason: &str, created: &str, now: &str) {
    let pod = status.pod_name.clone();
    let now_time = now.parse().ok().map(Time);
    let created_time = created.parse().ok().map(Time);
    for step in status.steps.iter_mut().flatten() {
        if step.state.terminated.is_some() {
            continue;
        }
        let started = step
            .state
            .running
            .as_ref()
            .and_then(|r| r.started_at.clone())
            .or_else(|| created_time.clone());
        let name = step.name.clone().unwrap_or_default();
        step.state = k8s_openapi::api::core::v1::ContainerState {
            terminated: Some(k8s_openapi::api::core::v1::ContainerStateTerminated {
                exit_code: 1,
                reason: Some(reason.into()),
                message: Some(format!("Step {name} terminated as pod {pod} is terminated")),
                started_at: started,
                finished_at: now_time.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        step.termination_reason = Some(reason.into());
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
