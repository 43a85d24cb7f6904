//! The TaskRun reconciler's whole decision, with no I/O (Tekton's `pkg/reconciler/taskrun`,
//! condensed to what `ferrovirt up` runs): start the run, honour `spec.status`
//! (`TaskRunPending`, `TaskRunCancelled`) and the timeout, check the run's inputs against
//! its Task, make its pod, follow the pod to the end, and try a failed run again while it
//! has retries left.

use std::time::Duration;

use api::meta_time::{parse, rfc3339};
use api::tekton::taskrun::spec_status;
use api::tekton::{TaskRun, TaskRunStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::pod::{pod_name, task_run_pod};
use super::resolve::{self, ResolvedTask};
use super::run_timeout;
use super::status::{
    self, USER_ERROR, fail, from_pod, is_done, reason, set_condition, terminate_steps,
};
use crate::runner::duration::task_run_timed_out;
use crate::runner::labels::ON_ERROR_ANNOTATION;

/// What the reconciler saw.
pub struct Observed<'a> {
    pub task_run: &'a TaskRun,
    /// The Task it runs, or why it was not found (the message of `TaskRunResolutionFailed`).
    pub task: Result<ResolvedTask<'a>, String>,
    /// The pod of the run's current try, if it exists.
    pub pod: Option<&'a Pod>,
    pub now: jiff::Timestamp,
}

/// What the reconciler does.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskRunAction {
    CreatePod(Box<Pod>),
    DeletePod(String),
    WriteStatus(Box<TaskRunStatus>),
    /// Look again after this long (the time left before the run times out).
    RequeueAfter(Duration),
}

/// The actions that bring the run forward.
pub fn plan(observed: &Observed) -> Vec<TaskRunAction> {
    let run = observed.task_run;
    let now = rfc3339(observed.now);
    let before = run.status.clone().unwrap_or_default();
    let mut status = before.clone();
    let mut actions = Vec::new();
    if is_done(&status) {
        return leftover_pod(observed, &status).into_iter().collect();
    }
    let spec_status = run.spec.status.as_deref().unwrap_or_default();
    if spec_status == spec_status::PENDING && status.start_time.is_none() {
        let message = format!("TaskRun {:?} is pending", run.name_any());
        set_condition(&mut status, "Unknown", reason::PENDING_RUN, &message, &now);
        return write_if_changed(&before, status);
    }
    if status.start_time.is_none() {
        status.start_time = Some(start_time(run, observed.now));
        set_condition(&mut status, "Unknown", reason::STARTED, "", &now);
    }
    if spec_status == spec_status::CANCELLED {
        let message = format!(
            "TaskRun {:?} was cancelled. {}",
            run.name_any(),
            run.spec.status_message.as_deref().unwrap_or_default()
        );
        return end_early(observed, status, reason::CANCELLED, &message);
    }
    let timeout = run_timeout(run);
    let elapsed = elapsed(&status, observed.now);
    if !timeout.is_zero() && elapsed >= timeout {
        let message = task_run_timed_out(&run.name_any(), timeout);
        return end_early(observed, status, reason::TIMEOUT, &message);
    }
    let task = match &observed.task {
        Ok(task) => task,
        Err(message) => {
            fail(&mut status, reason::RESOLUTION_FAILED, message, &now);
            return write_if_changed(&before, status);
        }
    };
    let params = resolve::param_values(task, run)
        .and_then(|params| resolve::check_workspaces(task, run).map(|()| params));
    let params = match params {
        Ok(params) => params,
        Err(invalid) => {
            let message = format!("{USER_ERROR}{invalid}");
            fail(&mut status, reason::VALIDATION_FAILED, &message, &now);
            return write_if_changed(&before, status);
        }
    };
    let replacements = resolve::replacements(task, run, &params);
    let spec = resolve::substitute(task.spec, &replacements);
    status.task_spec = Some(spec.clone());
    match observed.pod {
        None => match task_run_pod(run, &spec, task.from_ref.then_some(task.name.as_str())) {
            Ok(pod) => {
                status.pod_name = pod_name(run);
                set_condition(
                    &mut status,
                    "Unknown",
                    reason::RUNNING,
                    status::RUNNING_MESSAGE,
                    &now,
                );
                actions.push(TaskRunAction::CreatePod(Box::new(pod)));
            }
            Err(refusal) => {
                let message = pod_creation_failed(run, task, &refusal.to_string());
                fail(&mut status, reason::POD_CREATION_FAILED, &message, &now);
                return write_if_changed(&before, status);
            }
        },
        Some(pod) => {
            let continue_on_error = run
                .annotations()
                .get(ON_ERROR_ANNOTATION)
                .map(String::as_str)
                == Some("continue");
            status = from_pod(&status, pod, &spec, continue_on_error, observed.now);
            if retries_left(run, &status) {
                status = retried(status, &now);
            }
        }
    }
    let done = is_done(&status);
    actions.extend(write_if_changed(&before, status));
    if !done && !timeout.is_zero() {
        actions.push(TaskRunAction::RequeueAfter(timeout.saturating_sub(elapsed)));
    }
    actions
}

/// When the run started: now, but never before it was created.
fn start_time(run: &TaskRun, now: jiff::Timestamp) -> String {
    let created = run.creation_timestamp().map(|t| t.0);
    rfc3339(created.filter(|c| *c > now).unwrap_or(now))
}

fn elapsed(status: &TaskRunStatus, now: jiff::Timestamp) -> Duration {
    let Some(start) = status.start_time.as_deref().and_then(parse) else {
        return Duration::ZERO;
    };
    now.duration_since(start)
        .try_into()
        .unwrap_or(Duration::ZERO)
}

/// A run cancelled or out of time: its steps end with `reason` and its pod is deleted.
fn end_early(
    observed: &Observed,
    mut status: TaskRunStatus,
    reason: &str,
    message: &str,
) -> Vec<TaskRunAction> {
    let run = observed.task_run;
    let now = rfc3339(observed.now);
    let created = run
        .creation_timestamp()
        .map(|t| rfc3339(t.0))
        .unwrap_or_else(|| now.clone());
    fail(&mut status, reason, message, &now);
    terminate_steps(&mut status, reason, &created, &now);
    let mut actions = Vec::new();
    if let Some(pod) = observed.pod {
        actions.push(TaskRunAction::DeletePod(pod.name_any()));
    }
    actions.push(TaskRunAction::WriteStatus(Box::new(status)));
    actions
}

/// The pod of a run cancelled or timed out that is still there (its deletion was missed).
fn leftover_pod(observed: &Observed, status: &TaskRunStatus) -> Option<TaskRunAction> {
    let pod = observed.pod?;
    let ended_early = status::succeeded(status)
        .and_then(|c| c.reason.as_deref())
        .is_some_and(|r| r == reason::CANCELLED || r == reason::TIMEOUT);
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    let deleting = pod.metadata.deletion_timestamp.is_some();
    (ended_early && !finished && !deleting).then(|| TaskRunAction::DeletePod(pod.name_any()))
}

fn pod_creation_failed(run: &TaskRun, task: &ResolvedTask, why: &str) -> String {
    let what = if task.from_ref {
        format!(
            "Maybe missing or invalid Task {}/{}",
            run.namespace().unwrap_or_default(),
            task.name
        )
    } else {
        "Maybe invalid TaskSpec".to_string()
    };
    format!(
        "failed to create task run pod {:?}: {why}. {what}",
        run.name_any()
    )
}

/// A failed run that has tries left (not a cancelled one).
fn retries_left(run: &TaskRun, status: &TaskRunStatus) -> bool {
    let failed = status::succeeded(status).is_some_and(|c| c.status == "False");
    let tried = status.retries_status.as_ref().map_or(0, Vec::len);
    failed && tried < usize::try_from(run.spec.retries.unwrap_or(0)).unwrap_or(0)
}

/// The status of a run to be tried again: this try archived in `retriesStatus`, and the
/// run pending a new pod (`ToBeRetried`).
fn retried(status: TaskRunStatus, now: &str) -> TaskRunStatus {
    let message = status::succeeded(&status)
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    let mut archived = status.clone();
    archived.retries_status = None;
    let mut next = status;
    next.retries_status
        .get_or_insert_with(Vec::new)
        .push(archived);
    next.start_time = None;
    next.completion_time = None;
    next.pod_name = String::new();
    next.results = None;
    set_condition(&mut next, "Unknown", reason::TO_BE_RETRIED, &message, now);
    next
}

fn write_if_changed(before: &TaskRunStatus, after: TaskRunStatus) -> Vec<TaskRunAction> {
    if *before == after {
        Vec::new()
    } else {
        vec![TaskRunAction::WriteStatus(Box::new(after))]
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
