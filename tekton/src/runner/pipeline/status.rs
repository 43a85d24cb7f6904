//! The parts of the PipelineRun's status besides its condition: `startTime` (the earliest
//! of the run and its TaskRuns), `childReferences`, `skippedTasks`, and when to look again.

use std::collections::BTreeMap;
use std::time::Duration;

use api::tekton::PipelineRunStatus;
use api::tekton::pipelinerun::{ChildStatusReference, SkippedTask};
use jiff::Timestamp;

use super::Observed;
use super::condition;
use super::state::{Facts, SkipReason};
use super::timeouts::{self, Timeouts};

/// The earliest of the run's start and its TaskRuns' creation.
pub fn start_time(o: &Observed, status: &PipelineRunStatus) -> Option<Timestamp> {
    let recorded = status.start_time.as_deref().and_then(condition::parse_time);
    o.task_runs
        .iter()
        .filter_map(|tr| tr.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .chain(recorded)
        .min()
}

/// `None` for no items, as Go's `omitempty` leaves a list out.
pub fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

/// `childReferences`: one per task with a TaskRun, in Pipeline order.
pub fn child_references(
    facts: &Facts,
    skips: &BTreeMap<String, SkipReason>,
) -> Vec<ChildStatusReference> {
    let statuses = facts.status_values(skips);
    facts
        .states
        .iter()
        .filter_map(|s| {
            let name = s.run_name.clone()?;
            let task = facts.resolved(s, s.finally.then_some(&statuses)).task;
            Some(ChildStatusReference {
                api_version: Some(api::tekton::V1.into()),
                kind: Some("TaskRun".into()),
                name: Some(name),
                display_name: task.display_name.clone(),
                pipeline_task_name: Some(task.name.clone()),
                when_expressions: task.when.clone(),
            })
        })
        .collect()
}

/// `skippedTasks`: each skipped task and why, with its when expressions (for a finally
/// task only when they are the reason).
pub fn skipped_tasks(facts: &Facts, skips: &BTreeMap<String, SkipReason>) -> Vec<SkippedTask> {
    let statuses = facts.status_values(skips);
    facts
        .states
        .iter()
        .filter_map(|s| {
            let reason = *skips.get(s.name())?;
            let task = facts.resolved(s, s.finally.then_some(&statuses)).task;
            let with_when = !s.finally || reason == SkipReason::WhenExpressions;
            Some(SkippedTask {
                name: s.name().to_string(),
                reason: reason.as_str().to_string(),
                when_expressions: task.when.filter(|_| with_when),
            })
        })
        .collect()
}

/// How long until the next of the run's clocks runs out.
pub fn next_timeout(
    timeouts: &Timeouts,
    start: Option<Timestamp>,
    finally_start: Option<Timestamp>,
    now: Timestamp,
) -> Option<Duration> {
    let clocks = [
        (Some(timeouts.pipeline), start),
        (timeouts.tasks, start),
        (timeouts.finally, finally_start),
    ];
    clocks
        .into_iter()
        .filter_map(|(timeout, from)| {
            let timeout = timeout.filter(|t| !t.is_zero())?;
            timeouts::remaining(timeout, from?, now)
        })
        .min()
}
