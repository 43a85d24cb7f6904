//! The TaskRun a PipelineRun makes for one pipeline task (`createTaskRun`, §6.5 of the
//! notes): its name, labels, annotations and controller reference, and its spec (params,
//! service account and pod template from `taskRunTemplate`/`taskRunSpecs`, timeout,
//! `taskRef` or the substituted embedded spec, workspaces bound from the run's).

use std::collections::BTreeMap;

use api::tekton::pipelinerun::PipelineTaskRunSpec;
use api::tekton::pod_template::PodTemplate;
use api::tekton::workspaces::WorkspaceBinding;
use api::tekton::{PipelineRun, TaskRun, TaskRunSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::failure::RunFailure;
use super::resolve::Values;
use super::state::TaskState;
use super::timeouts::Timeouts;
use crate::runner::names::child_name;

/// Labels Tekton puts on the objects of a run (`pkg/apis/pipeline/register.go`).
pub use crate::runner::labels::{self, DEFAULT_SERVICE_ACCOUNT, ON_ERROR_ANNOTATION};

/// The name of a pipeline task's TaskRun: the one recorded in `childReferences`, else
/// `ChildName(pipelineRun, "-" + task)`.
pub fn task_run_name(run: &PipelineRun, task: &str) -> String {
    let recorded = run
        .status
        .as_ref()
        .and_then(|s| s.child_references.as_ref())
        .and_then(|refs| {
            refs.iter().find(|r| {
                r.kind.as_deref() == Some("TaskRun")
                    && r.pipeline_task_name.as_deref() == Some(task)
            })
        })
        .and_then(|r| r.name.clone());
    recorded.unwrap_or_else(|| {
        child_name(
            run.metadata.name.as_deref().unwrap_or_default(),
            &format!("-{task}"),
        )
    })
}

/// What `taskRunTemplate` and the matching `taskRunSpecs` entry give a pipeline task's
/// TaskRun (`GetTaskRunSpec`).
pub fn task_run_spec(run: &PipelineRun, task: &str) -> PipelineTaskRunSpec {
    let template = run.spec.task_run_template.as_ref();
    let mut out = PipelineTaskRunSpec {
        pipeline_task_name: Some(task.to_string()),
        service_account_name: template
            .and_then(|t| t.service_account_name.clone())
            .filter(|s| !s.is_empty())
            .or_else(|| Some(DEFAULT_SERVICE_ACCOUNT.to_string())),
        pod_template: template.and_then(|t| t.pod_template.clone()),
        ..PipelineTaskRunSpec::default()
    };
    for entry in run.spec.task_run_specs.iter().flatten() {
        if entry.pipeline_task_name.as_deref() != Some(task) {
            continue;
        }
        out.pod_template = merge_pod_templates(entry.pod_template.as_ref(), out.pod_template);
        if let Some(sa) = entry.service_account_name.clone().filter(|s| !s.is_empty()) {
            out.service_account_name = Some(sa);
        }
        out.step_specs = entry.step_specs.clone();
        out.sidecar_specs = entry.sidecar_specs.clone();
        out.metadata = entry.metadata.clone();
        out.compute_resources = entry.compute_resources.clone();
        out.timeout = entry.timeout.clone();
    }
    out
}

/// A task's pod template over the run's: each field the task's sets wins.
fn merge_pod_templates(
    over: Option<&PodTemplate>,
    under: Option<PodTemplate>,
) -> Option<PodTemplate> {
    let Some(over) = over else {
        return under;
    };
    let Some(under) = under else {
        return Some(over.clone());
    };
    let (Ok(serde_json::Value::Object(mut base)), Ok(serde_json::Value::Object(top))) =
        (serde_json::to_value(&under), serde_json::to_value(over))
    else {
        return Some(over.clone());
    };
    base.extend(top);
    serde_json::from_value(serde_json::Value::Object(base)).ok()
}

/// Adds each of `added` whose key is not there yet (`addMetadataByPrecedence`).
fn add_absent(to: &mut BTreeMap<String, String>, added: Option<&BTreeMap<String, String>>) {
    for (k, v) in added.into_iter().flatten() {
        to.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// The controller reference of a child of `run`.
pub fn owner_reference(run: &PipelineRun) -> OwnerReference {
    OwnerReference {
        api_version: api::tekton::V1.to_string(),
        kind: "PipelineRun".to_string(),
        name: run.metadata.name.clone().unwrap_or_default(),
        uid: run.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn task_run_labels(
    run: &PipelineRun,
    state: &TaskState,
    spec: &PipelineTaskRunSpec,
) -> BTreeMap<String, String> {
    let mut own = run.metadata.labels.clone().unwrap_or_default();
    own.insert(
        labels::PIPELINE_RUN.into(),
        run.metadata.name.clone().unwrap_or_default(),
    );
    own.insert(
        labels::PIPELINE_RUN_UID.into(),
        run.metadata.uid.clone().unwrap_or_default(),
    );
    own.insert(labels::PIPELINE_TASK.into(), state.name().to_string());
    let member = if state.finally { "finally" } else { "tasks" };
    own.insert(labels::MEMBER_OF.into(), member.into());
    let embedded = embedded_metadata(state);
    layered([
        spec.metadata.as_ref().and_then(|m| m.labels.as_ref()),
        Some(&own),
        embedded.and_then(|m| m.labels.as_ref()),
    ])
}

fn task_run_annotations(
    run: &PipelineRun,
    state: &TaskState,
    spec: &PipelineTaskRunSpec,
) -> BTreeMap<String, String> {
    let mut own = run.metadata.annotations.clone().unwrap_or_default();
    own.retain(|k, _| !k.starts_with("chains.tekton.dev/"));
    let embedded = embedded_metadata(state);
    let mut out = layered([
        spec.metadata.as_ref().and_then(|m| m.annotations.as_ref()),
        Some(&own),
        embedded.and_then(|m| m.annotations.as_ref()),
    ]);
    if state.continues_on_error() {
        out.insert(ON_ERROR_ANNOTATION.into(), "continue".into());
    }
    out
}

/// A TaskRun's labels or annotations as Tekton layers them: the run spec's metadata, then the
/// PipelineRun's own (with Tekton's labels), then the embedded task spec's; the first layer
/// that sets a key wins.
fn layered(layers: [Option<&BTreeMap<String, String>>; 3]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for layer in layers {
        add_absent(&mut out, layer);
    }
    out
}

fn embedded_metadata(state: &TaskState) -> Option<&api::tekton::pipeline::EmbeddedMetadata> {
    state
        .task
        .task_spec
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
}

/// `a` and `b` joined as Go's `filepath.Join` joins two relative paths.
fn join_sub_paths(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let parts: Vec<&str> = [a, b]
        .into_iter()
        .flatten()
        .flat_map(|p| p.split('/'))
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// A binding of the run with the run's params and context put in its strings (claim,
/// ConfigMap and Secret names, subpath).
fn substituted_binding(binding: &WorkspaceBinding, run_values: &Values) -> WorkspaceBinding {
    let Ok(mut json) = serde_json::to_value(binding) else {
        return binding.clone();
    };
    run_values.json(&mut json);
    serde_json::from_value(json).unwrap_or_else(|_| binding.clone())
}

/// The TaskRun's workspaces: for each of the pipeline task's, the run's binding of the
/// Pipeline workspace it names, renamed to the Task's workspace, subpaths joined.
fn task_run_workspaces(
    run: &PipelineRun,
    state: &TaskState,
    run_values: &Values,
) -> Result<Option<Vec<WorkspaceBinding>>, RunFailure> {
    let Some(bindings) = state.task.workspaces.as_ref() else {
        return Ok(None);
    };
    let provided = run.spec.workspaces.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for binding in bindings {
        let pipeline_ws = binding.workspace.as_deref().unwrap_or(&binding.name);
        match provided.iter().find(|b| b.name == pipeline_ws) {
            Some(found) => {
                let mut bound = substituted_binding(found, run_values);
                bound.name = binding.name.clone();
                bound.sub_path =
                    join_sub_paths(bound.sub_path.as_deref(), binding.sub_path.as_deref());
                out.push(bound);
            }
            None => {
                let optional = state
                    .spec
                    .as_ref()
                    .and_then(|s| s.workspaces.as_ref())
                    .and_then(|ws| ws.iter().find(|w| w.name == binding.name))
                    .is_some_and(|w| w.optional == Some(true));
                if !optional {
                    return Err(RunFailure::UnboundTaskWorkspace {
                        workspace: pipeline_ws.to_string(),
                        task: state.name().to_string(),
                    });
                }
            }
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// The TaskRun for `state` (its pipeline task fully substituted), named `name`;
/// `run_values` are the run's params and context, put in the run's workspace bindings.
pub fn make(
    run: &PipelineRun,
    name: &str,
    state: &TaskState,
    timeouts: &Timeouts,
    run_values: &Values,
) -> Result<TaskRun, RunFailure> {
    let settings = task_run_spec(run, state.name());
    let task = &state.task;
    // taskRunSpecs' timeout, over the pipeline task's, over the section's.
    let timeout = settings
        .timeout
        .clone()
        .or_else(|| task.timeout.clone())
        .or_else(|| {
            timeouts
                .for_task_run(state.finally)
                .map(api::go_duration::format)
        });
    let (task_ref, task_spec) = match &state.task_name {
        Some(_) => (task.task_ref.clone(), None),
        None => (None, task.task_spec.as_ref().map(|e| e.task.clone())),
    };
    let annotations = task_run_annotations(run, state, &settings);
    let spec = TaskRunSpec {
        params: task.params.clone(),
        service_account_name: settings.service_account_name.clone(),
        task_ref,
        task_spec,
        retries: task.retries,
        timeout,
        pod_template: settings.pod_template.clone(),
        workspaces: task_run_workspaces(run, state, run_values)?,
        step_specs: settings.step_specs.clone(),
        sidecar_specs: settings.sidecar_specs.clone(),
        compute_resources: settings.compute_resources.clone(),
        ..TaskRunSpec::default()
    };
    let mut task_run = TaskRun::new(name, spec);
    task_run.metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: run.metadata.namespace.clone(),
        labels: Some(task_run_labels(run, state, &settings)),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: Some(vec![owner_reference(run)]),
        ..ObjectMeta::default()
    };
    Ok(task_run)
}

#[cfg(test)]
#[path = "taskrun_tests.rs"]
mod tests;
