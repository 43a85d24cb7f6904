use super::*;
use api::tekton::pipelinerun::PipelineRunSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

const NOW: &str = "2026-11-29T10:00:00Z";

fn at(text: &str) -> Timestamp {
    text.parse().expect("a time")
}

fn run_with(extra: Value) -> PipelineRun {
    let mut pr = json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": "run", "namespace": "ns", "uid": "run-uid",
                     "creationTimestamp": NOW},
        "spec": {"pipelineRef": {"name": "build"}},
    });
    json_patch::merge(&mut pr, &extra);
    serde_json::from_value(pr).expect("a PipelineRun")
}

fn pipeline(spec: Value) -> Pipeline {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1", "kind": "Pipeline",
        "metadata": {"name": "build", "namespace": "ns", "labels": {"team": "virt"}},
        "spec": spec,
    }))
    .expect("a Pipeline")
}

fn task(name: &str, spec: Value) -> Task {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1", "kind": "Task",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
    }))
    .expect("a Task")
}

fn echo() -> Task {
    task(
        "echo",
        json!({"params": [{"name": "text", "default": "hi"}],
               "results": [{"name": "out"}, {"name": "list", "type": "array"}],
               "steps": [{"name": "s", "image": "busybox", "script": "echo $(params.text)"}]}),
    )
}

/// A pipeline task running `echo`.
fn pt(name: &str, extra: Value) -> Value {
    let mut t = json!({"name": name, "taskRef": {"name": "echo", "kind": "Task"}});
    json_patch::merge(&mut t, &extra);
    t
}

/// The world a runtime would keep: the run, its Pipeline, Tasks and TaskRuns.
struct World {
    run: PipelineRun,
    pipeline: Option<Pipeline>,
    tasks: Vec<Task>,
    task_runs: Vec<TaskRun>,
    now: Timestamp,
}

impl World {
    fn new(run: PipelineRun, spec: Value) -> World {
        World {
            run,
            pipeline: Some(pipeline(spec)),
            tasks: vec![echo()],
            task_runs: Vec::new(),
            now: at(NOW),
        }
    }

    fn plan(&self) -> Vec<PipelineRunAction> {
        plan(&Observed {
            pipeline_run: &self.run,
            pipeline: self.pipeline.as_ref(),
            tasks: &self.tasks,
            task_runs: &self.task_runs,
            now: self.now,
        })
    }

    /// Plans and applies what a runtime would.
    fn step(&mut self) -> Vec<PipelineRunAction> {
        let actions = self.plan();
        for action in &actions {
            match action {
                PipelineRunAction::SetMetadata {
                    labels,
                    annotations,
                } => {
                    self.run.metadata.labels = Some(labels.clone());
                    self.run.metadata.annotations = Some(annotations.clone());
                }
                PipelineRunAction::CreateTaskRun(tr) => {
                    let mut tr = (**tr).clone();
                    tr.metadata.creation_timestamp = Some(Time(self.now));
                    self.task_runs.push(tr);
                }
                PipelineRunAction::CancelTaskRun {
                    name,
                    status_message,
                } => {
                    let tr = self.task_run_mut(name);
                    tr.spec.status = Some("TaskRunCancelled".into());
                    tr.spec.status_message = Some(status_message.clone());
                }
                PipelineRunAction::WriteStatus(status) => {
                    self.run.status = Some((**status).clone())
                }
                PipelineRunAction::Requeue(_) => {}
            }
        }
        actions
    }

    fn task_run_mut(&mut self, name: &str) -> &mut TaskRun {
        self.task_runs
            .iter_mut()
            .find(|t| t.metadata.name.as_deref() == Some(name))
            .expect("the TaskRun exists")
    }

    /// Ends a TaskRun with this condition and results.
    fn end(&mut self, name: &str, status: &str, reason: &str, results: Value) {
        let tr = self.task_run_mut(name);
        tr.status = Some(
            serde_json::from_value(json!({
                "podName": format!("{name}-pod"),
                "conditions": [{"type": "Succeeded", "status": status, "reason": reason}],
                "results": results,
            }))
            .expect("a TaskRun status"),
        );
    }

    fn status(&self) -> &PipelineRunStatus {
        self.run.status.as_ref().expect("a status")
    }

    /// The `Succeeded` condition as (status, reason, message).
    fn condition(&self) -> (String, String, String) {
        let c = condition::current(self.status()).expect("a condition");
        (
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    }
}

fn created(actions: &[PipelineRunAction]) -> Vec<&TaskRun> {
    actions
        .iter()
        .filter_map(|a| match a {
            PipelineRunAction::CreateTaskRun(tr) => Some(tr.as_ref()),
            _ => None,
        })
        .collect()
}

fn created_names(actions: &[PipelineRunAction]) -> Vec<String> {
    created(actions)
        .iter()
        .map(|tr| tr.metadata.name.clone().unwrap_or_default())
        .collect()
}

fn cancels(actions: &[PipelineRunAction]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            PipelineRunAction::CancelTaskRun {
                name,
                status_message,
            } => Some((name.clone(), status_message.clone())),
            _ => None,
        })
        .collect()
}

fn cond(status: &str, reason: &str, message: &str) -> (String, String, String) {
    (status.into(), reason.into(), message.into())
}

fn param(tr: &TaskRun, name: &str) -> Value {
    let p = tr
        .spec
        .params
        .iter()
        .flatten()
        .find(|p| p.name == name)
        .expect("the param is passed");
    serde_json::to_value(&p.value).expect("a value")
}

fn skipped(w: &World) -> Vec<(String, String)> {
    w.status()
        .skipped_tasks
        .iter()
        .flatten()
        .map(|s| (s.name.clone(), s.reason.clone()))
        .collect()
}

fn linear() -> Value {
    json!({"tasks": [pt("a", json!({})), pt("b", json!({"runAfter": ["a"]}))]})
}

#[test]
fn a_linear_pipeline_creates_each_task_as_the_previous_succeeds() {
    let mut w = World::new(run_with(json!({})), linear());
    let actions = w.step();
    assert_eq!(created_names(&actions), ["run-a"]);
    assert_eq!(
        w.condition(),
        cond(
            "Unknown",
            "Running",
            "Tasks Completed: 0 (Failed: 0, Cancelled 0), Incomplete: 2, Skipped: 0"
        )
    );
    assert_eq!(w.status().start_time.as_deref(), Some(NOW));
    let labels = w.run.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("tekton.dev/pipeline").map(String::as_str),
        Some("build")
    );
    assert_eq!(labels.get("team").map(String::as_str), Some("virt"));
    assert_eq!(
        serde_json::to_value(&w.status().child_references).unwrap(),
        json!([{"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "name": "run-a",
                "pipelineTaskName": "a"}])
    );
    assert_eq!(
        actions.last(),
        Some(&PipelineRunAction::Requeue(Duration::from_secs(3600)))
    );
    assert!(matches!(
        actions.first(),
        Some(PipelineRunAction::SetMetadata { .. })
    ));

    w.end("run-a", "True", "Succeeded", json!([]));
    w.now = at("2026-11-29T10:01:00Z");
    assert_eq!(created_names(&w.step()), ["run-b"]);
    assert_eq!(
        w.condition(),
        cond(
            "Unknown",
            "Running",
            "Tasks Completed: 1 (Failed: 0, Cancelled 0), Incomplete: 1, Skipped: 0"
        )
    );

    w.end("run-b", "True", "Succeeded", json!([]));
    w.now = at("2026-11-29T10:02:00Z");
    let actions = w.step();
    assert!(created(&actions).is_empty());
    assert_eq!(
        w.condition(),
        cond(
            "True",
            "Succeeded",
            "Tasks Completed: 2 (Failed: 0, Cancelled 0), Skipped: 0"
        )
    );
    assert_eq!(
        w.status().completion_time.as_deref(),
        Some("2026-11-29T10:02:00Z")
    );
    assert!(w.step().is_empty(), "a done run is left alone");
}

#[test]
fn planning_again_over_what_the_last_plan_made_changes_nothing() {
    let mut w = World::new(run_with(json!({})), linear());
    w.step();
    w.now = at("2026-11-29T10:00:30Z");
    let again = w.plan();
    assert!(created(&again).is_empty(), "{again:?}");
    assert!(
        !again
            .iter()
            .any(|a| matches!(a, PipelineRunAction::WriteStatus(_))),
        "{again:?}"
    );
    // A lost status write: the TaskRun is found by its label, not made twice.
    w.run.status = None;
    let replanned = w.plan();
    assert!(created(&replanned).is_empty(), "{replanned:?}");
}

#[test]
fn parallel_roots_start_in_one_plan_and_their_join_after_both() {
    let spec = json!({"tasks": [
        pt("a", json!({})), pt("b", json!({})),
        pt("c", json!({"runAfter": ["a", "b"]})),
    ]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(created_names(&w.step()), ["run-a", "run-b"]);
    w.end("run-a", "True", "Succeeded", json!([]));
    assert!(created(&w.step()).is_empty());
    w.end("run-b", "True", "Succeeded", json!([]));
    assert_eq!(created_names(&w.step()), ["run-c"]);
}

#[test]
fn a_result_reference_orders_the_tasks_and_passes_the_value() {
    let spec = json!({"tasks": [
        pt("b", json!({"params": [
            {"name": "text", "value": "image is $(tasks.a.results.out)"},
            {"name": "all", "value": "$(tasks.a.results.list[*])"},
            {"name": "first", "value": "$(tasks.a.results.list[0])"},
        ]})),
        pt("a", json!({})),
    ]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(created_names(&w.step()), ["run-a"]);
    w.end(
        "run-a",
        "True",
        "Succeeded",
        json!([{"name": "out", "value": "quay.io/x"}, {"name": "list", "type": "array", "value": ["p", "q"]}]),
    );
    let actions = w.step();
    let b = created(&actions)[0];
    assert_eq!(param(b, "text"), json!("image is quay.io/x"));
    assert_eq!(param(b, "all"), json!(["p", "q"]));
    assert_eq!(param(b, "first"), json!("p"));
}

#[test]
fn a_task_whose_when_is_false_is_skipped_and_its_run_after_child_still_runs() {
    let spec = json!({
    "params": [{"name": "go", "default": "no"}],
    "tasks": [
        pt("a", json!({"when": [{"input": "$(params.go)", "operator": "in", "values": ["yes"]}]})),
        pt("b", json!({"runAfter": ["a"]})),
    ]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(created_names(&w.step()), ["run-b"]);
    assert_eq!(
        serde_json::to_value(&w.status().skipped_tasks).unwrap(),
        json!([{"name": "a", "reason": "When Expressions evaluated to false",
                "whenExpressions": [{"input": "no", "operator": "in", "values": ["yes"]}]}])
    );
    w.end("run-b", "True", "Succeeded", json!([]));
    w.step();
    assert_eq!(
        w.condition(),
        cond(
            "True",
            "Completed",
            "Tasks Completed: 1 (Failed: 0, Cancelled 0), Skipped: 1"
        )
    );
}

#[test]
fn a_failure_stops_the_dag_then_finally_runs_and_sees_the_failure() {
    let spec = json!({
        "tasks": [pt("a", json!({})), pt("b", json!({"runAfter": ["a"]})), pt("c", json!({}))],
        "finally": [pt("report", json!({"params": [
            {"name": "text", "value": "$(tasks.a.status) $(tasks.a.reason) $(tasks.status) $(tasks.c.status)"}]}))],
    });
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(created_names(&w.step()), ["run-a", "run-c"]);
    w.end("run-a", "False", "StepFailed", json!([]));
    assert!(created(&w.step()).is_empty());
    assert_eq!(
        skipped(&w),
        [("b".into(), "PipelineRun was stopping".into())]
    );
    assert_eq!(
        w.condition(),
        cond(
            "Unknown",
            "Running",
            "Tasks Completed: 1 (Failed: 1, Cancelled 0), Incomplete: 2, Skipped: 1"
        )
    );

    w.end("run-c", "True", "Succeeded", json!([]));
    w.now = at("2026-11-29T10:05:00Z");
    let actions = w.step();
    assert_eq!(created_names(&actions), ["run-report"]);
    assert_eq!(
        param(created(&actions)[0], "text"),
        json!("Failed StepFailed Failed Succeeded")
    );
    assert_eq!(
        created(&actions)[0].metadata.labels.as_ref().unwrap()["tekton.dev/memberOf"],
        "finally"
    );
    assert_eq!(
        w.status().finally_start_time.as_deref(),
        Some("2026-11-29T10:05:00Z")
    );

    w.end("run-report", "True", "Succeeded", json!([]));
    w.step();
    assert_eq!(
        w.condition(),
        cond(
            "False",
            "Failed",
            "Tasks Completed: 3 (Failed: 1, Cancelled 0), Skipped: 1"
        )
    );
}

#[test]
fn without_finally_a_failure_makes_the_run_stopping_until_the_others_end() {
    let spec = json!({"tasks": [pt("a", json!({})), pt("c", json!({}))]});
    let mut w = World::new(run_with(json!({})), spec);
    w.step();
    w.end("run-a", "False", "StepFailed", json!([]));
    w.step();
    assert_eq!(
        w.condition(),
        cond(
            "Unknown",
            "PipelineRunStopping",
            "Tasks Completed: 1 (Failed: 1, Cancelled 0), Incomplete: 1, Skipped: 0"
        )
    );
}

#[test]
fn a_failure_of_a_task_that_continues_on_error_does_not_stop_the_run() {
    let spec = json!({"tasks": [
        pt("a", json!({"onError": "continue"})),
        pt("b", json!({"runAfter": ["a"]})),
    ]});
    let mut w = World::new(run_with(json!({})), spec);
    let actions = w.step();
    assert_eq!(
        created(&actions)[0].metadata.annotations.as_ref().unwrap()["pipeline.tekton.dev/pipeline-task-on-error"],
        "continue"
    );
    w.end("run-a", "False", "FailureIgnored", json!([]));
    assert_eq!(created_names(&w.step()), ["run-b"]);
    w.end("run-b", "True", "Succeeded", json!([]));
    w.step();
    assert_eq!(
        w.condition(),
        cond(
            "True",
            "Succeeded",
            "Tasks Completed: 2 (Failed: 1 (Ignored: 1), Cancelled 0), Skipped: 0"
        )
    );
}

#[test]
fn cancelling_patches_the_running_task_runs_and_ends_the_run() {
    let mut w = World::new(run_with(json!({})), linear());
    w.step();
    w.run.spec.status = Some("Cancelled".into());
    w.now = at("2026-11-29T10:03:00Z");
    let actions = w.step();
    assert_eq!(
        cancels(&actions),
        [(
            "run-a".into(),
            "TaskRun cancelled as the PipelineRun it belongs to has been cancelled.".into()
        )]
    );
    assert_eq!(
        w.condition(),
        cond("False", "Cancelled", "PipelineRun \"run\" was cancelled")
    );
    assert_eq!(
        w.status().completion_time.as_deref(),
        Some("2026-11-29T10:03:00Z")
    );
    assert_eq!(
        cancel_patch("m"),
        json!([{"op": "add", "path": "/spec/status", "value": "TaskRunCancelled"},
               {"op": "add", "path": "/spec/statusMessage", "value": "m"}])
    );
}

#[test]
fn a_graceful_cancel_cancels_the_dag_then_runs_finally() {
    let spec = json!({"tasks": linear()["tasks"].clone(), "finally": [pt("f", json!({}))]});
    let mut w = World::new(run_with(json!({})), spec);
    w.step();
    w.run.spec.status = Some("CancelledRunFinally".into());
    let actions = w.step();
    assert_eq!(cancels(&actions).len(), 1);
    assert!(created(&actions).is_empty());
    assert_eq!(w.condition().1, "CancelledRunningFinally");
    assert_eq!(
        skipped(&w),
        [("b".into(), "PipelineRun was gracefully cancelled".into())]
    );
    assert!(cancels(&w.step()).is_empty(), "asked once");
    w.end("run-a", "False", "TaskRunCancelled", json!([]));
    assert_eq!(created_names(&w.step()), ["run-f"]);
    // A cancelled task is a failed one: the run is now stopping (checked first upstream).
    assert_eq!(
        skipped(&w),
        [("b".into(), "PipelineRun was stopping".into())]
    );
    w.end("run-f", "True", "Succeeded", json!([]));
    w.step();
    assert_eq!(
        w.condition(),
        cond("False", "Cancelled", "PipelineRun \"run\" was cancelled")
    );
}

#[test]
fn a_run_out_of_time_cancels_its_task_runs_and_times_out() {
    let mut w = World::new(run_with(json!({})), linear());
    w.step();
    w.now = at("2026-11-29T11:00:01Z");
    let actions = w.step();
    assert_eq!(
        cancels(&actions),
        [(
            "run-a".into(),
            "TaskRun cancelled as the PipelineRun it belongs to has timed out.".into()
        )]
    );
    assert_eq!(
        w.condition(),
        cond(
            "False",
            "PipelineRunTimeout",
            "PipelineRun \"run\" failed to finish within \"1h0m0s\""
        )
    );
}

#[test]
fn a_pending_run_waits_without_starting() {
    let mut w = World::new(
        run_with(json!({"spec": {"status": "PipelineRunPending"}})),
        linear(),
    );
    let actions = w.step();
    assert!(created(&actions).is_empty());
    assert_eq!(
        w.condition(),
        cond(
            "Unknown",
            "PipelineRunPending",
            "PipelineRun \"run\" is pending"
        )
    );
    assert_eq!(w.status().start_time, None);
}

fn failure_of(w: &mut World) -> (String, String, String) {
    let actions = w.step();
    assert!(created(&actions).is_empty(), "{actions:?}");
    assert_eq!(w.status().completion_time.as_deref(), Some(NOW));
    w.condition()
}

#[test]
fn a_missing_pipeline_fails_the_run() {
    let mut w = World::new(run_with(json!({})), linear());
    w.pipeline = None;
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "CouldntGetPipeline",
            "Error retrieving pipeline for pipelinerun ns/run: error when getting Pipeline for PipelineRun run: tekton client cannot get pipeline build from local cluster: pipelines.tekton.dev \"build\" not found"
        )
    );
}

#[test]
fn a_missing_task_fails_the_run() {
    let spec = json!({"tasks": [{"name": "a", "taskRef": {"name": "nope"}}]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "CouldntGetTask",
            "Pipeline ns/build can't be Run; it contains Tasks that don't exist: Couldn't retrieve Task \"nope\": tasks.tekton.dev \"nope\" not found"
        )
    );
}

#[test]
fn a_missing_param_fails_the_run() {
    let spec = json!({"params": [{"name": "x"}, {"name": "y"}, {"name": "z", "default": "1"}],
                      "tasks": [pt("a", json!({}))]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "ParameterMissing",
            "[User error] PipelineRun ns/run is missing some parameters required by Pipeline ns/build: pipelineRun missing parameters: [x y]"
        )
    );
    assert_eq!(
        w.status().pipeline_spec,
        w.pipeline.as_ref().map(|p| p.spec.clone()),
        "the spec as written is recorded"
    );
}

#[test]
fn a_param_a_task_requires_but_is_not_passed_fails_the_run() {
    let mut w = World::new(run_with(json!({})), linear());
    w.tasks = vec![task(
        "echo",
        json!({"params": [{"name": "text"}], "steps": [{"name": "s", "image": "busybox"}]}),
    )];
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "PipelineValidationFailed",
            "[User error] Validation failed for pipelinerun run with error invalid input params for task echo: missing values for these params which have no default values: [text]"
        )
    );
}

#[test]
fn a_cycle_fails_the_run() {
    let spec = json!({"tasks": [pt("a", json!({"runAfter": ["b"]})), pt("b", json!({"runAfter": ["a"]}))]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "PipelineInvalidGraph",
            "[User error] PipelineRun ns/run's Pipeline DAG is invalid: cycle detected; task \"a\" depends on \"b\""
        )
    );
}

#[test]
fn an_unbound_workspace_fails_the_run() {
    let spec = json!({"workspaces": [{"name": "src"}, {"name": "cache", "optional": true}],
                      "tasks": [pt("a", json!({}))]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "InvalidWorkspaceBindings",
            "[User error] PipelineRun ns/run doesn't bind Pipeline ns/build's Workspaces correctly: pipeline requires workspace with name \"src\" be provided by pipelinerun"
        )
    );
}

#[test]
fn a_reference_to_an_undeclared_result_fails_the_run() {
    let spec = json!({"tasks": [pt("a", json!({})),
        pt("b", json!({"params": [{"name": "text", "value": "$(tasks.a.results.nope)"}]}))]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "InvalidTaskResultReference",
            "[User error] invalid result reference in pipeline task \"b\": \"nope\" is not a named result returned by pipeline task \"a\""
        )
    );
}

#[test]
fn a_result_a_succeeded_task_did_not_emit_fails_validation() {
    let spec = json!({"tasks": [pt("a", json!({})),
        pt("b", json!({"params": [{"name": "text", "value": "$(tasks.a.results.out)"}]}))]});
    let mut w = World::new(run_with(json!({})), spec);
    w.step();
    w.end("run-a", "True", "Succeeded", json!([]));
    assert!(created(&w.step()).is_empty());
    assert_eq!(
        w.condition(),
        cond(
            "False",
            "PipelineValidationFailed",
            "Tasks Completed: 1 (Failed: 0, Cancelled 0), Skipped: 0, Failed Validation: 1 (task \"a\" completed successfully but did not emit the result \"out\", which is referenced by task \"b\")"
        )
    );
}

#[test]
fn unsupported_features_are_refused_by_name() {
    let spec = json!({"tasks": [pt("a", json!({"matrix": {"params": [{"name": "text", "value": ["x"]}]}}))]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "PipelineValidationFailed",
            "Pipeline ns/build can't be Run; spec.tasks[0].matrix is not supported by Ferrovirt's PipelineRun runner"
        )
    );
    let spec = json!({"tasks": [pt("a", json!({})),
        pt("b", json!({"when": [{"cel": "'a' == 'a'"}]}))]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(
        failure_of(&mut w).2,
        "Pipeline ns/build can't be Run; spec.tasks[1].when[0].cel is not supported by Ferrovirt's PipelineRun runner"
    );
}

#[test]
fn pipeline_results_are_written_when_the_run_ends() {
    let spec = json!({
    "tasks": [pt("a", json!({}))],
    "finally": [pt("f", json!({}))],
    "results": [
        {"name": "image", "value": "at $(tasks.a.results.out)"},
        {"name": "all", "type": "array", "value": "$(tasks.a.results.list[*])"},
        {"name": "last", "value": "$(finally.f.results.out)"},
    ]});
    let mut w = World::new(run_with(json!({})), spec);
    w.step();
    w.end(
        "run-a",
        "True",
        "Succeeded",
        json!([{"name": "out", "value": "x"}, {"name": "list", "value": ["1", "2"]}]),
    );
    w.step();
    w.end(
        "run-f",
        "True",
        "Succeeded",
        json!([{"name": "out", "value": "done"}]),
    );
    w.step();
    assert_eq!(w.condition().1, "Succeeded");
    assert_eq!(
        serde_json::to_value(&w.status().results).unwrap(),
        json!([{"name": "image", "value": "at x"}, {"name": "all", "value": ["1", "2"]},
               {"name": "last", "value": "done"}])
    );
}

#[test]
fn the_task_run_is_made_as_tekton_makes_it() {
    let run = run_with(json!({
    "metadata": {"labels": {"app": "demo"}, "annotations": {"note": "n", "chains.tekton.dev/x": "y"}},
    "spec": {
        "params": [{"name": "name", "value": "vm-1"}, {"name": "flags", "value": ["-a", "-b"]}],
        "taskRunTemplate": {"serviceAccountName": "runner"},
        "taskRunSpecs": [{"pipelineTaskName": "inline", "serviceAccountName": "special",
                           "metadata": {"labels": {"extra": "1"}}}],
        "workspaces": [{"name": "shared", "subPath": "base", "emptyDir": {}}],
    }}));
    let spec = json!({
    "params": [{"name": "name"}, {"name": "flags", "type": "array"}],
    "workspaces": [{"name": "shared"}],
    "tasks": [
        pt("ref", json!({"params": [{"name": "text", "value": "$(params.name) in $(context.pipelineRun.namespace)"},
                                    {"name": "args", "value": "$(params.flags[*])"}],
                         "retries": 2, "timeout": "5m0s"})),
        {"name": "inline",
         "workspaces": [{"name": "data", "workspace": "shared", "subPath": "inner"}],
         "taskSpec": {"metadata": {"labels": {"app": "overridden", "kind": "inline"}},
                      "workspaces": [{"name": "data"}],
                      "steps": [{"name": "s", "image": "busybox",
                                 "args": ["$(params.flags)", "$(context.pipeline.name)/$(context.pipelineRun.uid)"]}]}},
    ]});
    let mut w = World::new(run, spec);
    let actions = w.step();
    let made = created(&actions);
    assert_eq!(made.len(), 2);
    assert_eq!(
        serde_json::to_value(made[0]).unwrap(),
        json!({
            "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
            "metadata": {
                "name": "run-ref", "namespace": "ns",
                "labels": {"app": "demo", "tekton.dev/memberOf": "tasks",
                           "tekton.dev/pipelineRun": "run", "tekton.dev/pipelineRunUID": "run-uid",
                           "tekton.dev/pipelineTask": "ref"},
                "annotations": {"note": "n"},
                "ownerReferences": [{"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
                                     "name": "run", "uid": "run-uid",
                                     "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {
                "params": [{"name": "text", "value": "vm-1 in ns"}, {"name": "args", "value": ["-a", "-b"]}],
                "serviceAccountName": "runner",
                "taskRef": {"name": "echo", "kind": "Task"},
                "retries": 2,
                "timeout": "5m0s",
            },
        })
    );
    let inline = serde_json::to_value(made[1]).unwrap();
    assert_eq!(inline["spec"]["serviceAccountName"], "special");
    assert_eq!(
        inline["metadata"]["labels"]["app"], "demo",
        "the run's labels win over the embedded spec's"
    );
    assert_eq!(inline["metadata"]["labels"]["kind"], "inline");
    assert_eq!(inline["metadata"]["labels"]["extra"], "1");
    assert_eq!(
        inline["spec"]["workspaces"],
        json!([{"name": "data", "subPath": "base/inner", "emptyDir": {}}])
    );
    assert_eq!(
        inline["spec"]["taskSpec"]["steps"][0]["args"],
        json!(["-a", "-b", "build/run-uid"])
    );
    assert_eq!(inline["spec"].get("taskRef"), None);
}

#[test]
fn an_embedded_pipeline_is_named_after_the_run() {
    let run = run_with(json!({"spec": {"pipelineRef": null, "pipelineSpec": {
        "tasks": [{"name": "a", "taskSpec": {"steps": [{"name": "s", "image": "x", "script": "$(context.pipeline.name)"}]}}]}}}));
    let mut w = World::new(run, json!({}));
    w.pipeline = None;
    let actions = w.step();
    let tr = serde_json::to_value(created(&actions)[0]).unwrap();
    assert_eq!(tr["spec"]["taskSpec"]["steps"][0]["script"], "run");
    assert_eq!(
        w.run.metadata.labels.as_ref().unwrap()["tekton.dev/pipeline"],
        "run"
    );
    assert!(
        w.status().pipeline_spec.is_some(),
        "the spec as run is recorded"
    );
}

#[test]
fn a_section_timeout_longer_than_the_default_is_given_to_the_task_runs() {
    let run = run_with(json!({"spec": {"timeouts": {"pipeline": "3h", "finally": "30m"}}}));
    let mut w = World::new(run, linear());
    let actions = w.step();
    assert_eq!(
        created(&actions)[0].spec.timeout.as_deref(),
        Some("2h30m0s")
    );
    let run = run_with(json!({"spec": {"timeouts": {"pipeline": "2h"}}}));
    let mut w = World::new(run, linear());
    let actions = w.step();
    assert_eq!(created(&actions)[0].spec.timeout, None);
}

#[test]
fn a_tasks_timeout_cancels_the_dag_and_runs_finally() {
    let run = run_with(json!({"spec": {"timeouts": {"pipeline": "1h", "tasks": "10m"}}}));
    let spec = json!({"tasks": linear()["tasks"].clone(), "finally": [pt("f", json!({}))]});
    let mut w = World::new(run, spec);
    let actions = w.step();
    assert!(actions.contains(&PipelineRunAction::Requeue(Duration::from_secs(600))));
    w.now = at("2026-11-29T10:10:01Z");
    let actions = w.step();
    assert_eq!(
        cancels(&actions),
        [(
            "run-a".into(),
            "TaskRun cancelled as the PipelineRun it belongs to has timed out.".into()
        )]
    );
    w.end("run-a", "False", "TaskRunCancelled", json!([]));
    assert_eq!(created_names(&w.step()), ["run-f"]);
    assert_eq!(w.condition().1, "PipelineRunTimeoutRunningFinally");
    assert_eq!(
        skipped(&w),
        [("b".into(), "PipelineRun was stopping".into())]
    );
    w.end("run-f", "True", "Succeeded", json!([]));
    w.step();
    assert_eq!(
        w.condition(),
        cond(
            "False",
            "PipelineRunTimeout",
            "PipelineRun \"run\" failed due to tasks failed to finish within \"10m0s\""
        )
    );
}

#[test]
fn the_condition_keeps_its_transition_time_while_it_does_not_change() {
    let mut w = World::new(run_with(json!({})), linear());
    w.step();
    let first = condition::current(w.status())
        .unwrap()
        .last_transition_time
        .clone();
    w.now = at("2026-11-29T10:00:40Z");
    w.step();
    let second = condition::current(w.status())
        .unwrap()
        .last_transition_time
        .clone();
    assert_eq!(first, second);
    assert_eq!(first.as_deref(), Some(NOW));
}

#[test]
fn the_spec_type_is_used_for_observed() {
    // Observed borrows; a runtime builds it from its caches.
    let run = PipelineRun::new("r", PipelineRunSpec::default());
    let o = Observed {
        pipeline_run: &run,
        pipeline: None,
        tasks: &[],
        task_runs: &[],
        now: at(NOW),
    };
    assert_eq!(pipeline_to_fetch(o.pipeline_run), None);
    assert_eq!(
        child_selector(o.pipeline_run),
        "tekton.dev/pipelineRun=r,tekton.dev/pipelineRunUID="
    );
}

#[test]
fn a_when_skip_does_not_cascade_but_missing_results_and_their_children_are_skipped() {
    let spec = json!({"tasks": [
        pt("a", json!({"when": [{"input": "x", "operator": "notin", "values": ["x"]}]})),
        pt("b", json!({"params": [{"name": "text", "value": "$(tasks.a.results.out)"}]})),
        pt("c", json!({"runAfter": ["b"]})),
        pt("d", json!({"runAfter": ["a"]})),
    ]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(created_names(&w.step()), ["run-d"]);
    assert_eq!(
        skipped(&w),
        [
            ("a".into(), "When Expressions evaluated to false".into()),
            ("b".into(), "Results were missing".into()),
            ("c".into(), "Parent Tasks were skipped".into()),
        ]
    );
}

#[test]
fn a_finally_task_can_be_guarded_by_the_aggregate_status() {
    let spec = json!({
    "tasks": [pt("a", json!({}))],
    "finally": [
        pt("on-failure", json!({"when": [{"input": "$(tasks.status)", "operator": "in", "values": ["Failed"]}]})),
        pt("always", json!({})),
    ]});
    let mut w = World::new(run_with(json!({})), spec);
    w.step();
    w.end("run-a", "True", "Succeeded", json!([]));
    assert_eq!(created_names(&w.step()), ["run-always"]);
    assert_eq!(
        serde_json::to_value(&w.status().skipped_tasks).unwrap(),
        json!([{"name": "on-failure", "reason": "When Expressions evaluated to false",
                "whenExpressions": [{"input": "Succeeded", "operator": "in", "values": ["Failed"]}]}])
    );
    w.end("run-always", "True", "Succeeded", json!([]));
    w.step();
    assert_eq!(
        w.condition(),
        cond(
            "True",
            "Completed",
            "Tasks Completed: 2 (Failed: 0, Cancelled 0), Skipped: 1"
        )
    );
}

#[test]
fn params_of_the_wrong_type_and_task_run_specs_of_no_task_fail_the_run() {
    let spec = json!({"params": [{"name": "l", "type": "array"}], "tasks": [pt("a", json!({}))]});
    let run = run_with(json!({"spec": {"params": [{"name": "l", "value": "s"}]}}));
    let mut w = World::new(run, spec);
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "ParameterTypeMismatch",
            "[User error] PipelineRun ns/run parameters have mismatching types with Pipeline ns/build's parameters: parameters have inconsistent types : [l]"
        )
    );
    let run = run_with(json!({"spec": {"taskRunSpecs": [{"pipelineTaskName": "ghost"}]}}));
    let mut w = World::new(run, linear());
    assert_eq!(
        failure_of(&mut w),
        cond(
            "False",
            "InvalidTaskRunSpecs",
            "[User error] PipelineRun ns/run doesn't define taskRunSpecs correctly: pipelineRun's taskrunSpecs defined wrong taskName: \"ghost\", does not exist in Pipeline"
        )
    );
}

#[test]
fn the_pipeline_label_is_kept_once_set_and_the_pipelines_metadata_merged_once() {
    let run = run_with(json!({"metadata": {"labels": {"team": "mine"}}}));
    let mut w = World::new(run, linear());
    if let Some(p) = w.pipeline.as_mut() {
        p.metadata.annotations = Some(
            [
                ("doc".to_string(), "d".to_string()),
                (metadata::LAST_APPLIED.to_string(), "{}".to_string()),
            ]
            .into(),
        );
    }
    w.step();
    assert_eq!(
        serde_json::to_value(&w.run.metadata.labels).unwrap(),
        json!({"team": "mine", "tekton.dev/pipeline": "build"})
    );
    assert_eq!(
        serde_json::to_value(&w.run.metadata.annotations).unwrap(),
        json!({"doc": "d"})
    );
    w.run.metadata.labels = Some([("tekton.dev/pipeline".to_string(), "other".to_string())].into());
    let actions = w.plan();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, PipelineRunAction::SetMetadata { .. })),
        "{actions:?}"
    );
}

#[test]
fn the_start_time_is_the_earliest_of_the_run_and_its_task_runs() {
    let mut w = World::new(run_with(json!({})), linear());
    w.now = at("2026-11-29T09:59:00Z");
    w.step();
    // The status was lost; the next reconcile starts later but finds the TaskRun.
    w.run.status = None;
    w.now = at(NOW);
    w.step();
    assert_eq!(
        w.status().start_time.as_deref(),
        Some("2026-11-29T09:59:00Z")
    );
}

#[test]
fn an_unbound_workspace_a_task_declares_optional_is_left_out() {
    let spec = json!({
        "workspaces": [{"name": "cache", "optional": true}],
        "tasks": [{"name": "a", "workspaces": [{"name": "cache"}],
                   "taskSpec": {"workspaces": [{"name": "cache", "optional": true}],
                                "steps": [{"name": "s", "image": "i"}]}}]});
    let mut w = World::new(run_with(json!({})), spec);
    let actions = w.step();
    assert_eq!(created(&actions)[0].spec.workspaces, None);
}

#[test]
fn the_runs_bindings_take_its_params_and_a_task_its_retry_count() {
    let run = run_with(json!({"spec": {
        "params": [{"name": "vm", "value": "vm-1"}],
        "workspaces": [{"name": "data", "subPath": "$(params.vm)/$(context.pipelineRun.name)",
                        "persistentVolumeClaim": {"claimName": "claim-$(params.vm)"}}]}}));
    let spec = json!({
        "params": [{"name": "vm"}],
        "workspaces": [{"name": "data"}],
        "tasks": [pt("a", json!({"retries": 3, "workspaces": [{"name": "out", "workspace": "data"}],
                                 "params": [{"name": "text", "value": "$(context.pipelineTask.retries)"}]}))]});
    let mut w = World::new(run, spec);
    let actions = w.step();
    let tr = created(&actions)[0];
    assert_eq!(param(tr, "text"), json!("3"));
    assert_eq!(
        serde_json::to_value(&tr.spec.workspaces).unwrap(),
        json!([{"name": "out", "subPath": "vm-1/run",
                "persistentVolumeClaim": {"claimName": "claim-vm-1"}}])
    );
}

#[test]
fn a_finally_task_reading_a_result_that_was_never_made_is_skipped() {
    let spec = json!({
    "tasks": [pt("a", json!({"when": [{"input": "x", "operator": "in", "values": ["y"]}]})),
              pt("b", json!({}))],
    "finally": [
        pt("use", json!({"params": [{"name": "text", "value": "$(tasks.a.results.out)"}]})),
        pt("tell", json!({"params": [{"name": "text", "value": "$(tasks.a.status)/$(tasks.b.status)"}]})),
    ]});
    let mut w = World::new(run_with(json!({})), spec);
    assert_eq!(created_names(&w.step()), ["run-b"]);
    w.end("run-b", "True", "Succeeded", json!([]));
    let actions = w.step();
    assert_eq!(created_names(&actions), ["run-tell"]);
    assert_eq!(param(created(&actions)[0], "text"), json!("None/Succeeded"));
    assert_eq!(
        serde_json::to_value(&w.status().skipped_tasks).unwrap(),
        json!([
            {"name": "a", "reason": "When Expressions evaluated to false",
             "whenExpressions": [{"input": "x", "operator": "in", "values": ["y"]}]},
            {"name": "use", "reason": "Results were missing"},
        ])
    );
}

#[test]
fn only_the_tasks_the_pipeline_names_are_fetched() {
    let run: PipelineRun = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"pipelineSpec": {
            "tasks": [
                {"name": "a", "taskRef": {"name": "keys"}},
                {"name": "b", "taskSpec": {"steps": [{"name": "s", "image": "x"}]}},
                {"name": "c", "taskRef": {"name": "keys"}},
            ],
            "finally": [{"name": "f", "taskRef": {"name": "cleanup-vm"}}],
        }},
    }))
    .unwrap();
    let names: Vec<String> = tasks_to_fetch(&run, None).into_iter().collect();
    assert_eq!(names, ["cleanup-vm", "keys"]);

    let by_ref: PipelineRun = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "r"}, "spec": {"pipelineRef": {"name": "p"}},
    }))
    .unwrap();
    assert!(tasks_to_fetch(&by_ref, None).is_empty());
    let pipeline: Pipeline = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {"tasks": [{"name": "a", "taskRef": {"name": "wait"}}]},
    }))
    .unwrap();
    let names: Vec<String> = tasks_to_fetch(&by_ref, Some(&pipeline))
        .into_iter()
        .collect();
    assert_eq!(names, ["wait"]);
}
