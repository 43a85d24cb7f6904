//! The PipelineRun controller's decision, with no I/O: the run and what it refers to in
//! ([`Observed`]), the steps of one reconcile out ([`PipelineRunAction`]), as Tekton
//! Pipelines v1.15.0's PipelineRun reconciler decides them (`docs/notes/tekton-runner-upstream.md`
//! §1.5–1.6, 2.2–2.3, 3, 4.2, 5.3, 6, 7).
//!
//! How a runtime drives it, on every change of the run or of one of its TaskRuns:
//! 1. read the PipelineRun; if [`pipeline_to_fetch`] names a Pipeline, get it from the
//!    run's namespace (`None` when it does not exist);
//! 2. get the Tasks [`tasks_to_fetch`] names (those that exist) and list the TaskRuns
//!    labelled [`child_selector`];
//! 3. call [`plan`] and apply the actions in order (see [`PipelineRunAction`]); a failed
//!    action ends the pass (the next reconcile plans again from what is there: planning is
//!    idempotent); requeue after [`PipelineRunAction::Requeue`] if nothing else changes.
//!
//! The modules, one concern each: [`prepare`] (Pipeline, Tasks, validation, substitution),
//! [`dag`] (the graph), [`refs`] (result references), [`resolve`] (variable values and
//! substitution), [`state`] (per-task facts, skipping, scheduling), [`condition`] (the
//! `Succeeded` condition), [`status`] (the other status fields), [`metadata`] (the run's
//! labels), [`results`] (pipeline results), [`taskrun`] (the TaskRun made for a task),
//! [`timeouts`] and [`failure`] (why a run cannot run).
//!
//! Refused by name (a `PipelineValidationFailed` condition naming the field): matrix, custom
//! tasks, resolvers, pipelines in pipelines, CEL when expressions, `volumeClaimTemplate`
//! workspaces.

pub mod condition;
pub mod controller;
pub mod dag;
pub mod failure;
pub mod metadata;
pub mod prepare;
pub mod refs;
pub mod resolve;
pub mod results;
pub mod state;
pub mod status;
pub mod taskrun;
pub mod timeouts;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::tekton::pipelinerun::spec_status;
use api::tekton::{Pipeline, PipelineRun, PipelineRunStatus, Task, TaskRun};
use jiff::Timestamp;

use self::condition::{Condition, RunClock};
use self::failure::RunFailure;
use self::prepare::Prepared;
use self::resolve::Values;
use self::state::{CANCELLED_BY_PIPELINE_RUN, Expired, Facts, Outcome, TIMED_OUT_BY_PIPELINE_RUN};
use self::status::{child_references, next_timeout, non_empty, skipped_tasks, start_time};
use self::taskrun::labels;
use self::timeouts::Timeouts;

/// Everything [`plan`] looks at.
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// The PipelineRun, as just read (defaulted by the webhook or not).
    pub pipeline_run: &'a PipelineRun,
    /// The Pipeline [`pipeline_to_fetch`] names, when it exists; ignored for a run that
    /// embeds its `pipelineSpec`. `None` makes the run fail `CouldntGetPipeline`.
    pub pipeline: Option<&'a Pipeline>,
    /// The Tasks of the run's namespace (at least those the pipeline tasks reference); a
    /// referenced Task not among them makes the run fail `CouldntGetTask`.
    pub tasks: &'a [Task],
    /// The run's TaskRuns: those labelled [`child_selector`].
    pub task_runs: &'a [TaskRun],
    /// The current time.
    pub now: Timestamp,
}

/// One step of a reconcile, to be applied in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum PipelineRunAction {
    /// Merge-patch the PipelineRun's `metadata.labels` and `metadata.annotations` to these
    /// (the `tekton.dev/pipeline` label, the Pipeline's labels and annotations under the
    /// run's own).
    SetMetadata {
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
    /// Patch a TaskRun of the run with [`cancel_patch`]`(status_message)`; NotFound and
    /// "already complete" errors are to be ignored.
    CancelTaskRun {
        name: String,
        status_message: String,
    },
    /// Create this TaskRun (complete: name, namespace, labels, annotations, controller
    /// reference, spec); AlreadyExists is to be ignored (a lost status write).
    CreateTaskRun(Box<TaskRun>),
    /// Replace the PipelineRun's status (the `status` subresource) with this one.
    WriteStatus(Box<PipelineRunStatus>),
    /// Reconcile again after this long at the latest (the next timeout to check).
    Requeue(Duration),
}

/// The JSON patch that cancels a TaskRun, as Tekton sends it.
pub fn cancel_patch(status_message: &str) -> serde_json::Value {
    serde_json::json!([
        {"op": "add", "path": "/spec/status", "value": api::tekton::taskrun::spec_status::CANCELLED},
        {"op": "add", "path": "/spec/statusMessage", "value": status_message},
    ])
}

/// The Pipeline a run refers to by name, to be fetched from its namespace.
pub fn pipeline_to_fetch(run: &PipelineRun) -> Option<&str> {
    if run.spec.pipeline_spec.is_some() {
        return None;
    }
    run.spec.pipeline_ref.as_ref()?.name.as_deref()
}

/// The Tasks the run's pipeline (embedded, or `pipeline` it names) refers to by name, to be
/// fetched from its namespace.
pub fn tasks_to_fetch(run: &PipelineRun, pipeline: Option<&Pipeline>) -> BTreeSet<String> {
    let spec = match &run.spec.pipeline_spec {
        Some(spec) => Some(spec),
        None => pipeline.map(|p| &p.spec),
    };
    let Some(spec) = spec else {
        return BTreeSet::new();
    };
    [&spec.tasks, &spec.finally]
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| task.task_ref.as_ref()?.name.clone())
        .collect()
}

/// The label selector of a run's TaskRuns.
pub fn child_selector(run: &PipelineRun) -> String {
    format!(
        "{}={},{}={}",
        labels::PIPELINE_RUN,
        run.metadata.name.as_deref().unwrap_or_default(),
        labels::PIPELINE_RUN_UID,
        run.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// Decides what to do about a PipelineRun: nothing once it is done.
pub fn plan(o: &Observed) -> Vec<PipelineRunAction> {
    let run = o.pipeline_run;
    let before = run.status.clone().unwrap_or_default();
    if condition::is_done(&before) {
        return Vec::new();
    }
    let mut actions = Vec::new();
    actions.extend(metadata::metadata_action(o));
    let mut status = before.clone();
    let spec_status = run.spec.status.as_deref();
    let name = run.metadata.name.as_deref().unwrap_or_default();
    if spec_status == Some(spec_status::PENDING) && status.start_time.is_none() {
        let pending = Condition::unknown(
            "PipelineRunPending",
            format!("PipelineRun {name:?} is pending"),
        );
        condition::write(&mut status, &pending, o.now);
    } else {
        if status.start_time.is_none() {
            status.start_time = Some(condition::timestamp(o.now));
            condition::write(
                &mut status,
                &Condition::unknown("Started", String::new()),
                o.now,
            );
        }
        if spec_status == Some(spec_status::CANCELLED) {
            cancel(o, &mut status, &mut actions);
        } else {
            match prepare::prepare(o) {
                Ok(prepared) => run_tasks(o, prepared, &mut status, &mut actions),
                Err(failure) => {
                    if status.pipeline_spec.is_none() {
                        status.pipeline_spec = prepare::resolved_spec(o);
                    }
                    fail(&mut status, &failure, o.now)
                }
            }
        }
    }
    if status != before {
        actions.push(PipelineRunAction::WriteStatus(Box::new(status)));
    }
    // The requeue, if any, goes last (a stable sort keeps the others' order).
    actions.sort_by_key(|a| matches!(a, PipelineRunAction::Requeue(_)));
    actions
}

fn fail(status: &mut PipelineRunStatus, failure: &RunFailure, now: Timestamp) {
    let condition = Condition::failed(failure.reason(), failure.to_string());
    condition::write(status, &condition, now);
}

/// `spec.status: Cancelled`: every TaskRun cancelled, the run `Cancelled` at once.
fn cancel(o: &Observed, status: &mut PipelineRunStatus, actions: &mut Vec<PipelineRunAction>) {
    let mut names: Vec<String> = status
        .child_references
        .iter()
        .flatten()
        .filter_map(|c| c.name.clone())
        .collect();
    for tr in o.task_runs {
        let n = tr.metadata.name.clone().unwrap_or_default();
        if !names.contains(&n) {
            names.push(n);
        }
    }
    for n in names {
        let observed = o
            .task_runs
            .iter()
            .find(|tr| tr.metadata.name.as_deref() == Some(n.as_str()));
        if observed.is_some_and(|tr| Outcome::of(tr).is_finished()) {
            continue;
        }
        actions.push(PipelineRunAction::CancelTaskRun {
            name: n,
            status_message: CANCELLED_BY_PIPELINE_RUN.into(),
        });
    }
    let name = o.pipeline_run.metadata.name.as_deref().unwrap_or_default();
    let cancelled = Condition::failed("Cancelled", format!("PipelineRun {name:?} was cancelled"));
    condition::write(status, &cancelled, o.now);
}

/// The TaskRun of a pipeline task among the run's: the one named in `childReferences` (or
/// as it would be named), else one labelled with the task.
fn task_run_of<'a>(o: &Observed<'a>, task: &str) -> Option<&'a TaskRun> {
    let name = taskrun::task_run_name(o.pipeline_run, task);
    o.task_runs
        .iter()
        .find(|tr| tr.metadata.name.as_deref() == Some(name.as_str()))
        .or_else(|| {
            o.task_runs.iter().find(|tr| {
                tr.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(labels::PIPELINE_TASK))
                    .is_some_and(|t| t == task)
            })
        })
}

/// Steps 7–13 of the reconcile: cancel for graceful cancel and timeouts, start what can
/// start, and write the status.
fn run_tasks(
    o: &Observed,
    prepared: Prepared,
    status: &mut PipelineRunStatus,
    actions: &mut Vec<PipelineRunAction>,
) {
    let run = o.pipeline_run;
    let Prepared {
        spec,
        graph,
        mut states,
        binding_values,
    } = prepared;
    for state in &mut states {
        if let Some(tr) = task_run_of(o, state.name()) {
            state.observe(tr);
        }
    }
    let timeouts = Timeouts::of(run.spec.timeouts.as_ref());
    let start = start_time(o, status);
    if let Some(start) = start {
        status.start_time = Some(condition::timestamp(start));
    }
    let finally_start = status
        .finally_start_time
        .as_deref()
        .and_then(condition::parse_time);
    let expired = Expired {
        pipeline: Timeouts::elapsed(Some(timeouts.pipeline), start, o.now),
        tasks: Timeouts::elapsed(timeouts.tasks, start, o.now),
        finally: Timeouts::elapsed(timeouts.finally, finally_start, o.now),
    };
    let mut facts = Facts {
        states,
        graph: &graph,
        spec_status: run.spec.status.clone(),
        expired,
        validation_failed: BTreeMap::new(),
    };
    cancel_running(&facts, actions);
    if !expired.pipeline {
        if let Err(failure) =
            start_tasks(o, &mut facts, &timeouts, &binding_values, status, actions)
        {
            fail(status, &failure, o.now);
            return;
        }
    }
    let skips = facts.skips();
    let name = run.metadata.name.as_deref().unwrap_or_default();
    let clock = RunClock {
        name,
        spec_status: run.spec.status.as_deref(),
        pipeline_expired: expired.pipeline.then_some(timeouts.pipeline),
        tasks_expired: timeouts.tasks.filter(|_| expired.tasks),
    };
    let condition = condition::of_tasks(&facts, &skips, &clock);
    status.child_references = non_empty(child_references(&facts, &skips));
    status.skipped_tasks = non_empty(skipped_tasks(&facts, &skips));
    let declared_results = spec.results.clone();
    status.pipeline_spec = Some(spec);
    if condition.is_done() {
        let results =
            results::pipeline_results(declared_results.as_deref().unwrap_or_default(), &facts);
        match results {
            Ok(results) => {
                condition::write(status, &condition, o.now);
                status.results = non_empty(results);
            }
            Err(names) => fail(
                status,
                &RunFailure::CouldntGetPipelineResult {
                    run: name.to_string(),
                    names,
                },
                o.now,
            ),
        }
        return;
    }
    condition::write(status, &condition, o.now);
    let finally_start = status
        .finally_start_time
        .as_deref()
        .and_then(condition::parse_time);
    if let Some(wait) = next_timeout(&timeouts, start, finally_start, o.now) {
        actions.push(PipelineRunAction::Requeue(wait));
    }
}

/// The cancel patches for graceful cancellation and timeouts: running TaskRuns of the
/// sections concerned not yet asked to stop.
fn cancel_running(facts: &Facts, actions: &mut Vec<PipelineRunAction>) {
    let graceful = facts.spec_status.as_deref() == Some(spec_status::CANCELLED_RUN_FINALLY);
    for s in &facts.states {
        if s.outcome != Outcome::Running || s.cancel_requested {
            continue;
        }
        let message = if facts.expired.pipeline
            || (!s.finally && facts.expired.tasks)
            || (s.finally && facts.expired.finally)
        {
            TIMED_OUT_BY_PIPELINE_RUN
        } else if graceful && !s.finally {
            CANCELLED_BY_PIPELINE_RUN
        } else {
            continue;
        };
        if let Some(name) = &s.run_name {
            actions.push(PipelineRunAction::CancelTaskRun {
                name: name.clone(),
                status_message: message.into(),
            });
        }
    }
}

/// Creates the TaskRuns of the DAG tasks that can start, then (the DAG done) of the
/// finally tasks, noting each in the facts as running; none when one cannot be made.
fn start_tasks(
    o: &Observed,
    facts: &mut Facts,
    timeouts: &Timeouts,
    bindings: &Values,
    status: &mut PipelineRunStatus,
    actions: &mut Vec<PipelineRunAction>,
) -> Result<(), RunFailure> {
    let mut made = Vec::new();
    for name in facts.dag_candidates() {
        start_one(o, facts, &name, None, timeouts, bindings, &mut made)?;
    }
    let finally = facts.finally_candidates();
    if !finally.is_empty() {
        let statuses = facts.status_values(&facts.dag_skips());
        for name in &finally {
            start_one(
                o,
                facts,
                name,
                Some(&statuses),
                timeouts,
                bindings,
                &mut made,
            )?;
        }
        if status.finally_start_time.is_none() {
            status.finally_start_time = Some(condition::timestamp(o.now));
        }
    }
    actions.extend(made);
    Ok(())
}

fn start_one(
    o: &Observed,
    facts: &mut Facts,
    name: &str,
    statuses: Option<&Values>,
    timeouts: &Timeouts,
    bindings: &Values,
    actions: &mut Vec<PipelineRunAction>,
) -> Result<(), RunFailure> {
    let Some(state) = facts.state(name) else {
        return Ok(());
    };
    let mut retries = Values::default();
    let count = state.task.retries.unwrap_or_default().to_string();
    retries.insert_str("context.pipelineTask.retries", &count);
    let mut resolved = facts.resolved(state, statuses);
    resolved.task = retries.pipeline_task(&resolved.task);
    let run_name = taskrun::task_run_name(o.pipeline_run, name);
    let task_run = taskrun::make(o.pipeline_run, &run_name, &resolved, timeouts, bindings)?;
    actions.push(PipelineRunAction::CreateTaskRun(Box::new(task_run)));
    if let Some(state) = facts.state_mut(name) {
        state.run_name = Some(run_name);
        state.outcome = Outcome::Running;
    }
    Ok(())
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
