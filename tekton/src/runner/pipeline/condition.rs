//! The PipelineRun's `Succeeded` condition: computed from the tasks' facts as Tekton's
//! `GetPipelineConditionStatus` does (§2.2 of the notes), and written as knative does, its
//! `lastTransitionTime` moving only when status, reason or message change.

use std::collections::BTreeMap;
use std::time::Duration;

use api::tekton::PipelineRunStatus;
use api::tekton::pipelinerun::spec_status;
use api::tekton::run_status::{self, RunCondition};
use jiff::Timestamp;

use super::state::{Facts, Outcome, SkipReason};

/// A condition to write: `True`, `False` or `Unknown`, its reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn unknown(reason: &str, message: String) -> Condition {
        Condition {
            status: "Unknown",
            reason: reason.to_string(),
            message,
        }
    }

    pub fn failed(reason: &str, message: String) -> Condition {
        Condition {
            status: "False",
            reason: reason.to_string(),
            message,
        }
    }

    /// Ended (True or False).
    pub fn is_done(&self) -> bool {
        self.status != "Unknown"
    }
}

/// A time as Kubernetes writes it, and read back.
pub use api::meta_time::{parse as parse_time, rfc3339 as timestamp};

/// The run's `Succeeded` condition, if it has one.
pub fn current(status: &PipelineRunStatus) -> Option<&RunCondition> {
    run_status::succeeded(status.conditions.as_deref())
}

/// Whether the run has ended.
pub fn is_done(status: &PipelineRunStatus) -> bool {
    current(status).is_some_and(|c| c.status == "True" || c.status == "False")
}

/// Writes `condition`, keeping `lastTransitionTime` when nothing of it changed; a done
/// condition also sets `completionTime` (to its transition time).
pub fn write(status: &mut PipelineRunStatus, condition: &Condition, now: Timestamp) {
    run_status::set_succeeded(
        &mut status.conditions,
        condition.status,
        &condition.reason,
        &condition.message,
        &timestamp(now),
    );
    if condition.is_done() && status.completion_time.is_none() {
        status.completion_time = current(status).and_then(|c| c.last_transition_time.clone());
    }
}

/// What the tasks count as, Tekton's `getPipelineTasksCount`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    succeeded: usize,
    failed: usize,
    ignored_failed: usize,
    cancelled: usize,
    incomplete: usize,
    skipped: usize,
    skipped_due_to_timeout: usize,
    validation_failed: usize,
}

fn count(facts: &Facts, skips: &BTreeMap<String, SkipReason>) -> Counts {
    let mut c = Counts::default();
    for s in &facts.states {
        match s.outcome {
            Outcome::Succeeded => c.succeeded += 1,
            Outcome::TimedOut => c.failed += 1,
            Outcome::Cancelled => c.cancelled += 1,
            Outcome::Failed if s.continues_on_error() => c.ignored_failed += 1,
            Outcome::Failed => c.failed += 1,
            _ if facts.validation_failed.contains_key(s.name()) => c.validation_failed += 1,
            _ => match skips.get(s.name()) {
                Some(reason) => {
                    c.skipped += 1;
                    if reason.is_timeout() {
                        c.skipped_due_to_timeout += 1;
                    }
                }
                None => c.incomplete += 1,
            },
        }
    }
    c
}

/// What the run needs, besides the tasks' facts, to word its condition.
pub struct RunClock<'a> {
    pub name: &'a str,
    pub spec_status: Option<&'a str>,
    /// `Some(timeout)` when `timeouts.pipeline` ran out.
    pub pipeline_expired: Option<Duration>,
    /// `Some(timeout)` when the tasks' timeout ran out.
    pub tasks_expired: Option<Duration>,
}

/// The condition of a run whose tasks are as `facts` says (`GetPipelineConditionStatus`).
pub fn of_tasks(facts: &Facts, skips: &BTreeMap<String, SkipReason>, run: &RunClock) -> Condition {
    let name = run.name;
    if let Some(timeout) = run.pipeline_expired {
        return Condition::failed(
            "PipelineRunTimeout",
            format!(
                "PipelineRun {name:?} failed to finish within {:?}",
                api::go_duration::format(timeout)
            ),
        );
    }
    let finally_done = facts.finally_done(skips);
    if let Some(timeout) = run.tasks_expired {
        if !facts.has_finally() || finally_done {
            return Condition::failed(
                "PipelineRunTimeout",
                format!(
                    "PipelineRun {name:?} failed due to tasks failed to finish within {:?}",
                    api::go_duration::format(timeout)
                ),
            );
        }
    }
    let c = count(facts, skips);
    let completed = c.succeeded + c.failed + c.cancelled + c.ignored_failed;
    let graceful = matches!(
        run.spec_status,
        Some(spec_status::CANCELLED_RUN_FINALLY | spec_status::STOPPED_RUN_FINALLY)
    );
    if c.incomplete == 0 {
        let mut message = if c.ignored_failed > 0 {
            format!(
                "Tasks Completed: {completed} (Failed: {} (Ignored: {}), Cancelled {}), Skipped: {}",
                c.failed + c.ignored_failed,
                c.ignored_failed,
                c.cancelled,
                c.skipped
            )
        } else {
            format!(
                "Tasks Completed: {completed} (Failed: {}, Cancelled {}), Skipped: {}",
                c.failed + c.ignored_failed,
                c.cancelled,
                c.skipped
            )
        };
        if c.validation_failed > 0 {
            message.push_str(&format!(", Failed Validation: {}", c.validation_failed));
            let mut errors = facts
                .validation_failed
                .values()
                .cloned()
                .collect::<Vec<_>>()
                .join("; ");
            if errors.len() > 1024 {
                let mut cut = 1024;
                while !errors.is_char_boundary(cut) {
                    cut -= 1;
                }
                errors.truncate(cut);
                errors.push_str("...");
            }
            message.push_str(&format!(" ({errors})"));
        }
        let done = |status: &'static str, reason: &str, message: String| Condition {
            status,
            reason: reason.to_string(),
            message,
        };
        return if c.validation_failed > 0 {
            done("False", "PipelineValidationFailed", message)
        } else if c.failed > 0 || c.skipped_due_to_timeout > 0 {
            done("False", "Failed", message)
        } else if graceful {
            done(
                "False",
                "Cancelled",
                format!("PipelineRun {name:?} was cancelled"),
            )
        } else if c.cancelled > 0 {
            done("False", "Cancelled", message)
        } else if c.skipped > 0 {
            done("True", "Completed", message)
        } else {
            done("True", "Succeeded", message)
        };
    }
    let reason = if run.tasks_expired.is_some() && facts.has_finally() && !finally_done {
        "PipelineRunTimeoutRunningFinally"
    } else if run.spec_status == Some(spec_status::CANCELLED_RUN_FINALLY) {
        "CancelledRunningFinally"
    } else if run.spec_status == Some(spec_status::STOPPED_RUN_FINALLY) {
        "StoppedRunningFinally"
    } else if c.cancelled > 0 || (c.failed > 0 && finally_done) {
        "PipelineRunStopping"
    } else {
        "Running"
    };
    Condition::unknown(
        reason,
        format!(
            "Tasks Completed: {completed} (Failed: {}, Cancelled {}), Incomplete: {}, Skipped: {}",
            c.failed, c.cancelled, c.incomplete, c.skipped
        ),
    )
}
