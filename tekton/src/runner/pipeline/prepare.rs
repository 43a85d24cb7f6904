//! Everything decided before any task is scheduled (steps 5 and 6 of the reconcile): the
//! Pipeline (embedded or fetched), features Ferrovirt refuses, the graph, the run's params,
//! workspaces and `taskRunSpecs` checked, variables substituted (`status.pipelineSpec`), and
//! each pipeline task's Task found and its params checked; any failure ends the run.

use api::tekton::{PipelineSpec, PipelineTask, TaskSpec};

use super::dag::Graph;
use super::failure::RunFailure;
use super::refs;
use super::resolve::{self, ParamProblem, Values};
use super::state::{Outcome, TaskState};
use super::{Observed, pipeline_to_fetch};

/// The run, ready to be scheduled.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The Pipeline after params, context and workspace substitution.
    pub spec: PipelineSpec,
    pub graph: Graph,
    /// `tasks` then `finally`, each with its Task, none yet with its TaskRun.
    pub states: Vec<TaskState>,
    /// The run's params and `$(context.…)` values, for the run's workspace bindings.
    pub binding_values: Values,
}

/// Who's who in the messages: the run's namespace and name, the Pipeline's name.
struct Names<'a> {
    namespace: &'a str,
    run: &'a str,
    pipeline: String,
}

/// The Pipeline the run runs as written (embedded, or the fetched one it names), as upstream
/// stores it in `status.pipelineSpec` on first resolution, before checking it.
pub fn resolved_spec(o: &Observed) -> Option<PipelineSpec> {
    let pr = o.pipeline_run;
    if let Some(spec) = &pr.spec.pipeline_spec {
        return Some(spec.clone());
    }
    let wanted = pipeline_to_fetch(pr)?;
    o.pipeline
        .filter(|p| p.metadata.name.as_deref() == Some(wanted))
        .map(|p| p.spec.clone())
}

/// The Pipeline the run runs, or why there is none.
fn pipeline_spec(o: &Observed, names: &Names) -> Result<(PipelineSpec, String), RunFailure> {
    let pr = o.pipeline_run;
    if let Some(spec) = &pr.spec.pipeline_spec {
        return Ok((spec.clone(), names.run.to_string()));
    }
    let wanted = pr.spec.pipeline_ref.as_ref();
    if wanted.is_some_and(|r| r.resolver.is_some()) {
        return Err(unsupported(names, "spec.pipelineRef.resolver"));
    }
    let wanted = wanted.and_then(|r| r.name.clone()).unwrap_or_default();
    match o
        .pipeline
        .filter(|p| p.metadata.name.as_deref() == Some(wanted.as_str()))
    {
        Some(found) => Ok((found.spec.clone(), wanted)),
        None => Err(RunFailure::CouldntGetPipeline {
            namespace: names.namespace.to_string(),
            run: names.run.to_string(),
            detail: format!(
                "error when getting Pipeline for PipelineRun {}: tekton client cannot get pipeline {wanted} from local cluster: pipelines.tekton.dev {wanted:?} not found",
                names.run
            ),
        }),
    }
}

fn unsupported(names: &Names, field: &str) -> RunFailure {
    RunFailure::Unsupported {
        namespace: names.namespace.to_string(),
        pipeline: names.pipeline.clone(),
        field: field.to_string(),
    }
}

/// The first field of a pipeline task that Ferrovirt's runner does not run.
fn unsupported_field(task: &PipelineTask) -> Option<String> {
    if task.matrix.is_some() {
        return Some("matrix".into());
    }
    if task.pipeline_ref.is_some() {
        return Some("pipelineRef".into());
    }
    if task.pipeline_spec.is_some() {
        return Some("pipelineSpec".into());
    }
    if let Some(task_ref) = &task.task_ref {
        if task_ref.resolver.is_some() {
            return Some("taskRef.resolver".into());
        }
        if task_ref.kind.as_deref().is_some_and(|k| k != "Task") || task_ref.api_version.is_some() {
            return Some("taskRef.kind".into());
        }
    }
    if let Some(embedded) = &task.task_spec {
        if embedded.kind.is_some() || embedded.api_version.is_some() || embedded.spec.is_some() {
            return Some("taskSpec.kind".into());
        }
    }
    let cel = task
        .when
        .iter()
        .flatten()
        .position(|w| w.cel.as_deref().is_some_and(|c| !c.is_empty()));
    cel.map(|i| format!("when[{i}].cel"))
}

/// Refuses what Ferrovirt does not run, naming the field.
fn check_supported(o: &Observed, spec: &PipelineSpec, names: &Names) -> Result<(), RunFailure> {
    for (section, tasks) in [("tasks", &spec.tasks), ("finally", &spec.finally)] {
        for (i, task) in tasks.iter().flatten().enumerate() {
            if let Some(field) = unsupported_field(task) {
                return Err(unsupported(names, &format!("spec.{section}[{i}].{field}")));
            }
        }
    }
    let bindings = o.pipeline_run.spec.workspaces.iter().flatten();
    for (i, binding) in bindings.enumerate() {
        if binding.volume_claim_template.is_some() {
            return Err(unsupported(
                names,
                &format!("PipelineRun spec.workspaces[{i}].volumeClaimTemplate"),
            ));
        }
    }
    Ok(())
}

fn graph(spec: &PipelineSpec, names: &Names) -> Result<Graph, RunFailure> {
    let tasks: Vec<(String, Vec<String>)> = spec
        .tasks
        .iter()
        .flatten()
        .map(|t| (t.name.clone(), refs::dependencies(t)))
        .collect();
    Graph::build(&tasks).map_err(|e| RunFailure::InvalidGraph {
        namespace: names.namespace.to_string(),
        run: names.run.to_string(),
        detail: e.to_string(),
    })
}

fn check_params(o: &Observed, spec: &PipelineSpec, names: &Names) -> Result<(), RunFailure> {
    let declared = spec.params.as_deref().unwrap_or_default();
    let passed = o.pipeline_run.spec.params.as_deref().unwrap_or_default();
    let (namespace, run, pipeline) = (
        names.namespace.to_string(),
        names.run.to_string(),
        names.pipeline.clone(),
    );
    match resolve::check_params(declared, passed) {
        Ok(()) => Ok(()),
        Err(ParamProblem::Missing(missing)) => Err(RunFailure::ParameterMissing {
            namespace,
            run,
            pipeline,
            missing,
        }),
        Err(ParamProblem::TypeMismatch(names)) => Err(RunFailure::ParameterTypeMismatch {
            namespace,
            run,
            pipeline,
            names,
        }),
    }
}

fn check_workspaces(o: &Observed, spec: &PipelineSpec, names: &Names) -> Result<(), RunFailure> {
    let bound = o
        .pipeline_run
        .spec
        .workspaces
        .as_deref()
        .unwrap_or_default();
    let unbound = spec
        .workspaces
        .iter()
        .flatten()
        .filter(|w| w.optional != Some(true))
        .find(|w| !bound.iter().any(|b| b.name == w.name));
    match unbound {
        None => Ok(()),
        Some(w) => Err(RunFailure::InvalidWorkspaceBindings {
            namespace: names.namespace.to_string(),
            run: names.run.to_string(),
            pipeline: names.pipeline.clone(),
            workspace: w.name.clone(),
        }),
    }
}

fn check_task_run_specs(
    o: &Observed,
    spec: &PipelineSpec,
    names: &Names,
) -> Result<(), RunFailure> {
    let all = || {
        spec.tasks
            .iter()
            .flatten()
            .chain(spec.finally.iter().flatten())
    };
    for entry in o.pipeline_run.spec.task_run_specs.iter().flatten() {
        let name = entry.pipeline_task_name.clone().unwrap_or_default();
        if !all().any(|t| t.name == name) {
            return Err(RunFailure::InvalidTaskRunSpecs {
                namespace: names.namespace.to_string(),
                run: names.run.to_string(),
                task: name,
            });
        }
    }
    Ok(())
}

/// The Task a pipeline task runs: the referenced one (with its name) or its embedded spec.
fn task_of(
    o: &Observed,
    task: &PipelineTask,
    names: &Names,
) -> Result<(Option<TaskSpec>, Option<String>), RunFailure> {
    match task.task_ref.as_ref().and_then(|r| r.name.clone()) {
        Some(name) => {
            let found = o
                .tasks
                .iter()
                .find(|t| t.metadata.name.as_deref() == Some(name.as_str()));
            match found {
                Some(t) => Ok((Some(t.spec.clone()), Some(name))),
                None => Err(RunFailure::CouldntGetTask {
                    namespace: names.namespace.to_string(),
                    pipeline: names.pipeline.clone(),
                    task: name,
                }),
            }
        }
        None => Ok((task.task_spec.as_ref().map(|e| e.task.clone()), None)),
    }
}

/// Refuses a pipeline task that passes no value for a param its Task requires.
fn check_task_params(state: &TaskState, names: &Names) -> Result<(), RunFailure> {
    let passed = state.task.params.as_deref().unwrap_or_default();
    let declared = state.spec.as_ref().and_then(|s| s.params.as_deref());
    let missing: Vec<String> = declared
        .unwrap_or_default()
        .iter()
        .filter(|d| d.default.is_none() && !passed.iter().any(|p| p.name == d.name))
        .map(|d| d.name.clone())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(RunFailure::TaskParameterMissing {
        run: names.run.to_string(),
        task: state.task_name.clone().unwrap_or_default(),
        missing,
    })
}

/// Refuses a reference to a result the referenced Task does not declare (checked before
/// the first TaskRun, as upstream).
fn check_result_refs(states: &[TaskState]) -> Result<(), RunFailure> {
    for state in states {
        for r in refs::task_result_refs(&state.task) {
            let declared = states
                .iter()
                .find(|s| s.name() == r.task)
                .and_then(|s| s.spec.as_ref())
                .map(|s| s.results.iter().flatten().any(|res| res.name == r.result));
            if declared == Some(false) {
                return Err(RunFailure::InvalidTaskResultReference {
                    task: state.name().to_string(),
                    result: r.result,
                    referenced: r.task,
                });
            }
        }
    }
    Ok(())
}

/// Everything about the run that does not depend on its TaskRuns, or why it cannot run.
pub fn prepare(o: &Observed) -> Result<Prepared, RunFailure> {
    let pr = o.pipeline_run;
    let namespace = pr.metadata.namespace.as_deref().unwrap_or_default();
    let run = pr.metadata.name.as_deref().unwrap_or_default();
    let mut names = Names {
        namespace,
        run,
        pipeline: run.to_string(),
    };
    let (raw, pipeline_name) = pipeline_spec(o, &names)?;
    names.pipeline = pipeline_name.clone();
    check_supported(o, &raw, &names)?;
    let graph = graph(&raw, &names)?;
    check_params(o, &raw, &names)?;
    check_workspaces(o, &raw, &names)?;
    check_task_run_specs(o, &raw, &names)?;

    let passed = pr.spec.params.as_deref().unwrap_or_default();
    let mut values = resolve::param_values(raw.params.as_deref().unwrap_or_default(), passed);
    values.extend(&resolve::context_values(pr, &pipeline_name));
    let binding_values = values.clone();
    values.extend(&resolve::workspace_values(&raw, pr));
    let spec = resolve::apply_to_spec(&raw, &values);

    let mut states = Vec::new();
    let sections = [(false, &spec.tasks), (true, &spec.finally)];
    for (finally, tasks) in sections {
        for task in tasks.iter().flatten() {
            let (task_spec, task_name) = task_of(o, task, &names)?;
            let state = TaskState {
                task: task.clone(),
                finally,
                spec: task_spec,
                task_name,
                run_name: None,
                outcome: Outcome::NotStarted,
                reason: String::new(),
                results: Vec::new(),
                cancel_requested: false,
            };
            check_task_params(&state, &names)?;
            states.push(state);
        }
    }
    let before_first_task_run = o.task_runs.is_empty()
        && pr
            .status
            .as_ref()
            .and_then(|s| s.child_references.as_ref())
            .is_none_or(|c| c.is_empty());
    if before_first_task_run {
        check_result_refs(&states)?;
    }
    Ok(Prepared {
        spec,
        graph,
        states,
        binding_values,
    })
}
