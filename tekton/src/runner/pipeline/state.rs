//! The facts of one reconcile, per pipeline task (its TaskRun and what became of it) and for
//! the run (stopping, cancelled, timed out), and the decisions Tekton derives from them:
//! whether a task is done, skipped and why (`SkippingReason`), which tasks start now, and
//! the values of `$(tasks.T.results.R)`, `$(tasks.T.status)` and `$(tasks.status)`.

use std::collections::BTreeMap;

use api::tekton::pipelinerun::spec_status;
use api::tekton::results::TaskRunResult;
use api::tekton::{PipelineTask, TaskRun, TaskSpec};

use super::dag::Graph;
use super::refs::{self, ResultRef, Selector};
use super::resolve::Values;

/// The statusMessage of a TaskRun cancelled because its PipelineRun was cancelled.
pub const CANCELLED_BY_PIPELINE_RUN: &str =
    "TaskRun cancelled as the PipelineRun it belongs to has been cancelled.";
/// The statusMessage of a TaskRun cancelled because its PipelineRun ran out of time.
pub const TIMED_OUT_BY_PIPELINE_RUN: &str =
    "TaskRun cancelled as the PipelineRun it belongs to has timed out.";

/// What became of a pipeline task's TaskRun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No TaskRun yet.
    NotStarted,
    /// A TaskRun that has not ended (or was created by this plan).
    Running,
    Succeeded,
    /// Failed on its own (including its own timeout).
    Failed,
    /// Cancelled because the run was cancelled.
    Cancelled,
    /// Cancelled because the run (or its section) ran out of time; counts as failed.
    TimedOut,
}

impl Outcome {
    /// The outcome of a TaskRun, from its `Succeeded` condition and `spec.status`.
    pub fn of(run: &TaskRun) -> Outcome {
        let condition = run
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Succeeded"));
        match condition.map(|c| (c.status.as_str(), c.reason.as_deref())) {
            Some(("True", _)) => Outcome::Succeeded,
            Some(("False", Some("TaskRunCancelled"))) => {
                if run.spec.status_message.as_deref() == Some(TIMED_OUT_BY_PIPELINE_RUN) {
                    Outcome::TimedOut
                } else {
                    Outcome::Cancelled
                }
            }
            Some(("False", _)) => Outcome::Failed,
            _ => Outcome::Running,
        }
    }

    /// Ended, one way or another.
    pub fn is_finished(self) -> bool {
        !matches!(self, Outcome::NotStarted | Outcome::Running)
    }

    /// Ended without succeeding (Tekton's `isFailure`).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Failed | Outcome::Cancelled | Outcome::TimedOut
        )
    }
}

/// Why a task was not run (Tekton's `SkippingReason`, exact strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    WhenExpressions,
    ParentTasks,
    Stopping,
    GracefullyCancelled,
    GracefullyStopped,
    MissingResults,
    PipelineTimedOut,
    TasksTimedOut,
    FinallyTimedOut,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::WhenExpressions => "When Expressions evaluated to false",
            SkipReason::ParentTasks => "Parent Tasks were skipped",
            SkipReason::Stopping => "PipelineRun was stopping",
            SkipReason::GracefullyCancelled => "PipelineRun was gracefully cancelled",
            SkipReason::GracefullyStopped => "PipelineRun was gracefully stopped",
            SkipReason::MissingResults => "Results were missing",
            SkipReason::PipelineTimedOut => "PipelineRun timeout has been reached",
            SkipReason::TasksTimedOut => "PipelineRun Tasks timeout has been reached",
            SkipReason::FinallyTimedOut => "PipelineRun Finally timeout has been reached",
        }
    }

    /// Skipped because time ran out (counts toward a `Failed` run).
    pub fn is_timeout(self) -> bool {
        matches!(
            self,
            SkipReason::PipelineTimedOut | SkipReason::TasksTimedOut | SkipReason::FinallyTimedOut
        )
    }
}

/// One pipeline task in this reconcile.
#[derive(Debug, Clone)]
pub struct TaskState {
    /// The pipeline task, the run's params and context substituted.
    pub task: PipelineTask,
    pub finally: bool,
    /// The Task it runs (referenced or embedded), for its declared params and results.
    pub spec: Option<TaskSpec>,
    /// The name of the referenced Task, `None` for an embedded spec.
    pub task_name: Option<String>,
    /// Its TaskRun's name, when it has one.
    pub run_name: Option<String>,
    pub outcome: Outcome,
    /// Its TaskRun's condition reason.
    pub reason: String,
    pub results: Vec<TaskRunResult>,
    /// Its TaskRun already has `spec.status: TaskRunCancelled`.
    pub cancel_requested: bool,
}

impl TaskState {
    /// Takes in the facts of the task's TaskRun.
    pub fn observe(&mut self, run: &TaskRun) {
        self.run_name = run.metadata.name.clone();
        self.outcome = Outcome::of(run);
        let status = run.status.as_ref();
        self.reason = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Succeeded"))
            .and_then(|c| c.reason.clone())
            .unwrap_or_default();
        self.results = status.and_then(|s| s.results.clone()).unwrap_or_default();
        self.cancel_requested =
            run.spec.status.as_deref() == Some(api::tekton::taskrun::spec_status::CANCELLED);
    }

    pub fn name(&self) -> &str {
        &self.task.name
    }

    /// `onError: continue`: its failure does not stop the run.
    pub fn continues_on_error(&self) -> bool {
        self.task.on_error.as_deref() == Some("continue")
    }
}

/// Which of the run's clocks have run out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    pub pipeline: bool,
    pub tasks: bool,
    pub finally: bool,
}

/// Why a result reference cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingResult {
    /// The task whose result is referenced.
    pub task: String,
    pub result: String,
    /// The referenced task succeeded (yet did not emit the result).
    pub succeeded: bool,
}

/// Every pipeline task of the run and the run's own state.
#[derive(Debug, Clone)]
pub struct Facts<'g> {
    /// `tasks` then `finally`, in Pipeline order.
    pub states: Vec<TaskState>,
    pub graph: &'g Graph,
    /// The run's `spec.status`.
    pub spec_status: Option<String>,
    pub expired: Expired,
    /// The DAG tasks whose result references failed to resolve, with the error.
    pub validation_failed: BTreeMap<String, String>,
}

impl Facts<'_> {
    pub fn state(&self, name: &str) -> Option<&TaskState> {
        self.states.iter().find(|s| s.name() == name)
    }

    pub fn state_mut(&mut self, name: &str) -> Option<&mut TaskState> {
        self.states.iter_mut().find(|s| s.name() == name)
    }

    pub fn has_finally(&self) -> bool {
        self.states.iter().any(|s| s.finally)
    }

    fn gracefully_cancelled(&self) -> bool {
        self.spec_status.as_deref() == Some(spec_status::CANCELLED_RUN_FINALLY)
    }

    fn gracefully_stopped(&self) -> bool {
        self.spec_status.as_deref() == Some(spec_status::STOPPED_RUN_FINALLY)
    }

    /// A DAG task failed (or failed validation) and does not continue on error.
    pub fn is_stopping(&self) -> bool {
        self.states.iter().filter(|s| !s.finally).any(|s| {
            (s.outcome.is_failure() || self.validation_failed.contains_key(s.name()))
                && !s.continues_on_error()
        })
    }

    /// Why each DAG task is skipped, if it is (`ResolvedPipelineTask.skip`, first match).
    pub fn dag_skips(&self) -> BTreeMap<String, SkipReason> {
        let mut cache = BTreeMap::new();
        for name in self.graph.topological() {
            self.dag_skip(name, &mut cache);
        }
        cache
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    }

    /// Why each task is skipped, if it is: DAG tasks as upstream's `skip`, finally tasks
    /// (once the DAG is done) as `IsFinallySkipped`.
    pub fn skips(&self) -> BTreeMap<String, SkipReason> {
        let mut out = self.dag_skips();
        if self.dag_done(&out) {
            let statuses = self.status_values(&out);
            for state in self.states.iter().filter(|s| s.finally) {
                if let Some(reason) = self.finally_skip(state, &statuses) {
                    out.insert(state.name().to_string(), reason);
                }
            }
        }
        out
    }

    /// Whether a DAG task is done: ended, skipped or failed validation.
    fn is_done(&self, name: &str, skips: &BTreeMap<String, Option<SkipReason>>) -> bool {
        self.state(name).is_some_and(|s| s.outcome.is_finished())
            || self.validation_failed.contains_key(name)
            || matches!(skips.get(name), Some(Some(_)))
    }

    fn parents_done(&self, name: &str, skips: &mut BTreeMap<String, Option<SkipReason>>) -> bool {
        let parents: Vec<String> = self.graph.parents(name).cloned().collect();
        parents.iter().all(|p| {
            self.dag_skip(p, skips);
            self.is_done(p, skips)
        })
    }

    /// Whether every DAG task is done (given the skips).
    pub fn dag_done(&self, skips: &BTreeMap<String, SkipReason>) -> bool {
        self.states.iter().filter(|s| !s.finally).all(|s| {
            s.outcome.is_finished()
                || self.validation_failed.contains_key(s.name())
                || skips.contains_key(s.name())
        })
    }

    /// Why a DAG task is skipped (`ResolvedPipelineTask.skip`, first match), memoized.
    fn dag_skip(
        &self,
        name: &str,
        cache: &mut BTreeMap<String, Option<SkipReason>>,
    ) -> Option<SkipReason> {
        if let Some(known) = cache.get(name) {
            return *known;
        }
        let reason = self.decide_dag_skip(name, cache);
        cache.insert(name.to_string(), reason);
        reason
    }

    fn decide_dag_skip(
        &self,
        name: &str,
        cache: &mut BTreeMap<String, Option<SkipReason>>,
    ) -> Option<SkipReason> {
        let state = self.state(name)?;
        if state.outcome != Outcome::NotStarted || self.validation_failed.contains_key(name) {
            return None;
        }
        if self.is_stopping() {
            return Some(SkipReason::Stopping);
        }
        if self.gracefully_cancelled() {
            return Some(SkipReason::GracefullyCancelled);
        }
        if self.gracefully_stopped() {
            return Some(SkipReason::GracefullyStopped);
        }
        let parents_done = self.parents_done(name, cache);
        if parents_done && !self.when_allows(state, &Values::default()) {
            return Some(SkipReason::WhenExpressions);
        }
        let parents: Vec<String> = self.graph.parents(name).cloned().collect();
        let parent_skipped = parents.iter().any(
            |p| matches!(self.dag_skip(p, cache), Some(r) if r != SkipReason::WhenExpressions),
        );
        if parent_skipped {
            return Some(SkipReason::ParentTasks);
        }
        if parents_done {
            if let Err(missing) = self.result_values(&refs::task_result_refs(&state.task)) {
                let referenced_when_skipped = matches!(
                    self.dag_skip(&missing.task, cache),
                    Some(SkipReason::WhenExpressions)
                );
                if state.continues_on_error() || referenced_when_skipped {
                    return Some(SkipReason::MissingResults);
                }
            }
            if self.expired.pipeline {
                return Some(SkipReason::PipelineTimedOut);
            }
            if self.expired.tasks {
                return Some(SkipReason::TasksTimedOut);
            }
        }
        None
    }

    /// Why a finally task is skipped, once the DAG is done (`IsFinallySkipped`).
    fn finally_skip(&self, state: &TaskState, statuses: &Values) -> Option<SkipReason> {
        if state.outcome != Outcome::NotStarted {
            return None;
        }
        if self
            .result_values(&refs::task_result_refs(&state.task))
            .is_err()
        {
            return Some(SkipReason::MissingResults);
        }
        if !self.when_allows(state, statuses) {
            return Some(SkipReason::WhenExpressions);
        }
        if self.expired.pipeline {
            return Some(SkipReason::PipelineTimedOut);
        }
        if self.expired.finally {
            return Some(SkipReason::FinallyTimedOut);
        }
        None
    }

    /// Whether a task's when expressions (results and `extra`, for finally tasks their
    /// statuses, substituted) all hold.
    fn when_allows(&self, state: &TaskState, extra: &Values) -> bool {
        let Some(when) = state.task.when.as_ref() else {
            return true;
        };
        let mut values = self
            .result_values(&refs::task_result_refs(&state.task))
            .unwrap_or_default();
        values.extend(extra);
        when.iter().all(|w| {
            let mut w = w.clone();
            w.input = w.input.as_deref().map(|t| values.text(t));
            w.values = w
                .values
                .as_deref()
                .map(|v| values.replacements.apply_list(v));
            w.allows()
        })
    }

    /// The values of result references, from the TaskRuns of the referenced tasks (which
    /// must have ended), or the first that cannot be resolved.
    pub fn result_values(&self, refs: &[ResultRef]) -> Result<Values, MissingResult> {
        let mut values = Values::default();
        for r in refs {
            let state = self.state(&r.task);
            let outcome = state.map_or(Outcome::NotStarted, |s| s.outcome);
            let missing = MissingResult {
                task: r.task.clone(),
                result: r.result.clone(),
                succeeded: outcome == Outcome::Succeeded,
            };
            if !outcome.is_finished() {
                return Err(missing);
            }
            let found = state
                .and_then(|s| s.results.iter().find(|res| res.name == r.result))
                .filter(|res| selects(&r.selector, &res.value));
            match found {
                Some(res) => values.insert(
                    &[format!("tasks.{}.results.{}", r.task, r.result)],
                    &res.value,
                ),
                None => return Err(missing),
            }
        }
        Ok(values)
    }

    /// A task with the results it reads (and `statuses`, for finally tasks) put in, when
    /// they resolve.
    pub fn resolved(&self, state: &TaskState, statuses: Option<&Values>) -> TaskState {
        let mut values = self
            .result_values(&refs::task_result_refs(&state.task))
            .unwrap_or_default();
        if let Some(statuses) = statuses {
            values.extend(statuses);
        }
        let mut out = state.clone();
        out.task = values.pipeline_task(&state.task);
        out
    }

    /// `$(tasks.T.status)`, `$(tasks.T.reason)` of each DAG task and `$(tasks.status)`, for
    /// finally tasks.
    pub fn status_values(&self, dag_skips: &BTreeMap<String, SkipReason>) -> Values {
        let mut values = Values::default();
        let skips = dag_skips;
        let dag: Vec<&TaskState> = self.states.iter().filter(|s| !s.finally).collect();
        for s in &dag {
            let status = match s.outcome {
                Outcome::Succeeded => "Succeeded",
                o if o.is_failure() => "Failed",
                _ => "None",
            };
            values.insert_str(&format!("tasks.{}.status", s.name()), status);
            values.insert_str(&format!("tasks.{}.reason", s.name()), &s.reason);
        }
        let aggregate = if !self.dag_done(skips) {
            "None"
        } else if dag.iter().any(|s| s.outcome.is_failure()) {
            "Failed"
        } else if dag.iter().any(|s| skips.contains_key(s.name())) {
            "Completed"
        } else {
            "Succeeded"
        };
        values.insert_str("tasks.status", aggregate);
        values
    }

    /// The DAG tasks to start now: not started, not skipped, every parent done; those
    /// whose result references cannot be resolved are recorded as failing validation
    /// instead, and then none starts (as upstream empties its queue).
    pub fn dag_candidates(&mut self) -> Vec<String> {
        let skips = self.skips();
        let done = |facts: &Self, name: &str| {
            facts.state(name).is_some_and(|s| s.outcome.is_finished())
                || facts.validation_failed.contains_key(name)
                || skips.contains_key(name)
        };
        let candidates: Vec<String> = self
            .states
            .iter()
            .filter(|s| !s.finally && s.outcome == Outcome::NotStarted)
            .filter(|s| !skips.contains_key(s.name()))
            .filter(|s| !self.validation_failed.contains_key(s.name()))
            .filter(|s| self.graph.parents(s.name()).all(|p| done(self, p)))
            .map(|s| s.name().to_string())
            .collect();
        let mut failed = BTreeMap::new();
        for name in &candidates {
            let Some(state) = self.state(name) else {
                continue;
            };
            if let Err(missing) = self.result_values(&refs::task_result_refs(&state.task)) {
                failed.insert(name.clone(), validation_message(&missing, name));
            }
        }
        if failed.is_empty() {
            candidates
        } else {
            self.validation_failed.extend(failed);
            Vec::new()
        }
    }

    /// The finally tasks to start now: once the DAG is done, those not started nor skipped.
    pub fn finally_candidates(&self) -> Vec<String> {
        let skips = self.skips();
        if !self.dag_done(&skips) {
            return Vec::new();
        }
        self.states
            .iter()
            .filter(|s| s.finally && s.outcome == Outcome::NotStarted)
            .filter(|s| !skips.contains_key(s.name()))
            .map(|s| s.name().to_string())
            .collect()
    }

    /// Whether every finally task is done (ended or skipped); true without finally tasks.
    pub fn finally_done(&self, skips: &BTreeMap<String, SkipReason>) -> bool {
        self.states
            .iter()
            .filter(|s| s.finally)
            .all(|s| s.outcome.is_finished() || skips.contains_key(s.name()))
    }
}

/// Whether a result's value has what the reference selects.
fn selects(selector: &Selector, value: &api::tekton::ParamValue) -> bool {
    use api::tekton::ParamValue;
    match (selector, value) {
        (Selector::Index(i), ParamValue::Array(items)) => *i < items.len(),
        (Selector::Index(_), _) => false,
        (Selector::Key(k), ParamValue::Object(fields)) => fields.contains_key(k),
        (Selector::Key(_), _) => false,
        _ => true,
    }
}

/// The validation error of a task whose result reference cannot be resolved.
fn validation_message(missing: &MissingResult, target: &str) -> String {
    if missing.succeeded {
        format!(
            "task {:?} completed successfully but did not emit the result {:?}, which is referenced by task {target:?}",
            missing.task, missing.result
        )
    } else {
        format!(
            "Invalid task result reference: Could not find result with name {} for pipeline task {}",
            missing.result, missing.task
        )
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
