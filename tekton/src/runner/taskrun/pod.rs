//! The pod a TaskRun runs in on `ferrovirt up`, as Tekton builds it (`pkg/pod/pod.go`): one
//! container per step, `step-NAME`, each started by the step entrypoint (`ferrovirt task
//! step`) that orders it after the step before it and leaves its results in its termination
//! message; Tekton's internal directories as emptyDirs; the Task's volumes and the run's
//! workspaces; the run's service account; the TaskRun as controller owner.
//!
//! The node agent runs every container as a process of this machine's `ferrovirt` binary,
//! as root on the host, so a step may only run one of this binary's task commands: the
//! Task's own (`ferrovirt task NAME` in Ferrovirt's image) or the one a kubevirt
//! tekton-tasks image names (its binary, or `entrypoint` with `COMMAND`). A `script`, or
//! any other image, is refused by name; on a cluster, real Tekton runs those in containers.

use std::collections::BTreeMap;

use api::pod_contract::{image_repository_name, is_own_image};
use api::tekton::{MANAGED_BY, MANAGED_BY_LABEL, Step, StepTemplate, TaskRun, TaskSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, Pod, PodSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::catalog::DEFAULT_IMAGE;
use crate::results::TEKTON_RESULTS_DIR;
use crate::runner::labels::{self, DEFAULT_SERVICE_ACCOUNT};
use crate::runner::names::{child_name, step_container_name};
use crate::runner::taskrun::resolve::{STEPS_DIR, workspace_volume_name};
use crate::tasks::TaskCommand;

/// Where each step waits for the one before it (`/tekton/run/INDEX/out`).
const RUN_DIR: &str = "/tekton/run";
/// The repositories of kubevirt-tekton-tasks' images, whose binaries are this binary's tasks.
const KUBEVIRT_TASK_IMAGES: [&str; 2] = ["tekton-tasks", "tekton-tasks-disk-virt"];

/// Why a TaskRun's pod is not made on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "step {step:?} has a script, which ferrovirt up does not run: steps run on this host as root, so only the task commands of ferrovirt's image and of kubevirt's tekton-tasks images run here (a cluster with Tekton Pipelines runs scripts in containers)"
    )]
    Script { step: String },
    #[error(
        "step {step:?} runs image {image:?}, which ferrovirt up does not run: steps run on this host as root, so only ferrovirt's image (ferrovirt task NAME) and kubevirt's tekton-tasks images run here"
    )]
    Image { step: String, image: String },
    #[error("step {step:?} names no image")]
    NoImage { step: String },
    #[error("step {step:?} runs {command:?}, which is not one of ferrovirt's tasks")]
    UnknownTask { step: String, command: String },
    #[error("the Task has sidecars ({0}), which ferrovirt up does not run")]
    Sidecars(String),
    #[error("step {step:?} refers to a StepAction, which ferrovirt up does not run")]
    StepAction { step: String },
    #[error("workspace {0:?} is bound with a subPath, which ferrovirt up does not mount")]
    WorkspaceSubPath(String),
    #[error(
        "workspace {0:?} is bound to a volumeClaimTemplate, which ferrovirt up does not create"
    )]
    WorkspaceClaimTemplate(String),
}

/// The pod of `run`, whose Task (its variables replaced) is `spec`.
pub fn task_run_pod(
    run: &TaskRun,
    spec: &TaskSpec,
    task_ref_name: Option<&str>,
) -> Result<Pod, Refusal> {
    if let Some(sidecars) = spec.sidecars.as_ref().filter(|s| !s.is_empty()) {
        let names: Vec<&str> = sidecars.iter().map(|s| s.name.as_str()).collect();
        return Err(Refusal::Sidecars(names.join(", ")));
    }
    let steps = spec.steps.as_deref().unwrap_or_default();
    let results: Vec<&str> = spec
        .results
        .iter()
        .flatten()
        .map(|r| r.name.as_str())
        .collect();
    let workspace_mounts = workspace_mounts(run, spec)?;
    let mut containers = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        let step = merged(step, spec.step_template.as_ref());
        let command = task_command(&step)?;
        let name = step_container_name(&step.name, index);
        let mut mounts = step.volume_mounts.clone().unwrap_or_default();
        mounts.extend(workspace_mounts.iter().cloned());
        mounts.extend(internal_mounts(index));
        containers.push(Container {
            name: name.clone(),
            image: Some(own_image(&step)),
            args: Some(entrypoint_args(&step, &name, index, &results, command)),
            env: step.env.clone(),
            env_from: step.env_from.clone(),
            working_dir: step.working_dir.clone(),
            volume_mounts: Some(mounts),
            termination_message_path: Some(termination_path(&name)),
            ..Default::default()
        });
    }
    let mut volumes = spec.volumes.clone().unwrap_or_default();
    volumes.extend(workspace_volumes(run));
    volumes.extend(internal_volumes(steps.len()));
    let template = run.spec.pod_template.clone().unwrap_or_default();
    Ok(Pod {
        metadata: pod_metadata(run, task_ref_name),
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            service_account_name: Some(service_account(run)),
            active_deadline_seconds: Some(active_deadline(run)),
            containers,
            volumes: Some(volumes),
            node_selector: template.node_selector,
            tolerations: template.tolerations,
            priority_class_name: template.priority_class_name,
            ..Default::default()
        }),
        status: None,
    })
}

/// The pod's name: `ChildName(taskRun, "-pod")`, with `-retryN` for the Nth retry.
pub fn pod_name(run: &TaskRun) -> String {
    let retries = run
        .status
        .as_ref()
        .and_then(|s| s.retries_status.as_ref())
        .map_or(0, Vec::len);
    let suffix = if retries == 0 {
        "-pod".to_string()
    } else {
        format!("-pod-retry{retries}")
    };
    child_name(&run.name_any(), &suffix)
}

/// Where step container `container` leaves its termination message. Every container of a
/// pod here shares one root, so each gets its own file rather than Tekton's
/// `/tekton/termination`.
pub fn termination_path(container: &str) -> String {
    format!("{STEPS_DIR}/{container}/termination")
}

fn service_account(run: &TaskRun) -> String {
    run.spec
        .service_account_name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.into())
}

/// Tekton's deadline: one and a half times the run's timeout, or the largest an int32 holds
/// for none.
fn active_deadline(run: &TaskRun) -> i64 {
    let timeout = super::run_timeout(run);
    if timeout.is_zero() {
        return i64::from(i32::MAX);
    }
    (timeout.as_secs_f64() * 1.5).ceil() as i64
}

fn pod_metadata(run: &TaskRun, task_ref_name: Option<&str>) -> ObjectMeta {
    let mut pod_labels: BTreeMap<String, String> = run.labels().clone();
    pod_labels.insert(labels::TASK_RUN.into(), run.name_any());
    pod_labels.insert(labels::TASK_RUN_UID.into(), run.uid().unwrap_or_default());
    pod_labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    if let Some(task) = task_ref_name {
        pod_labels.insert(labels::TASK.into(), task.into());
    }
    let mut annotations = run.annotations().clone();
    annotations.remove(MANAGED_BY_LABEL);
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    ObjectMeta {
        name: Some(pod_name(run)),
        namespace: run.namespace(),
        labels: Some(pod_labels),
        annotations: Some(annotations).filter(|a| !a.is_empty()),
        owner_references: Some(vec![owner_reference(run)]),
        ..Default::default()
    }
}

fn owner_reference(run: &TaskRun) -> OwnerReference {
    OwnerReference {
        api_version: TaskRun::api_version(&()).into_owned(),
        kind: TaskRun::kind(&()).into_owned(),
        name: run.name_any(),
        uid: run.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A step with the step template's fields where it leaves them unset; env and mounts are
/// the template's followed by the step's, a step's variable replacing the template's of the
/// same name (Tekton's `MergeStepsWithStepTemplate`).
fn merged(step: &Step, template: Option<&StepTemplate>) -> Step {
    let Some(template) = template else {
        return step.clone();
    };
    let mut step = step.clone();
    step.image = step.image.or_else(|| template.image.clone());
    step.command = step.command.or_else(|| template.command.clone());
    step.args = step.args.or_else(|| template.args.clone());
    step.working_dir = step.working_dir.or_else(|| template.working_dir.clone());
    let mut env: Vec<EnvVar> = template.env.clone().unwrap_or_default();
    for var in step.env.take().unwrap_or_default() {
        env.retain(|v| v.name != var.name);
        env.push(var);
    }
    step.env = Some(env).filter(|e| !e.is_empty());
    let mut mounts = template.volume_mounts.clone().unwrap_or_default();
    mounts.extend(step.volume_mounts.take().unwrap_or_default());
    step.volume_mounts = Some(mounts).filter(|m| !m.is_empty());
    let mut env_from = template.env_from.clone().unwrap_or_default();
    env_from.extend(step.env_from.take().unwrap_or_default());
    step.env_from = Some(env_from).filter(|e| !e.is_empty());
    step
}

/// The arguments of this binary that run `step`: `task NAME ...`, or why not.
pub fn task_command(step: &Step) -> Result<Vec<String>, Refusal> {
    let name = || step.name.clone();
    if step.script.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(Refusal::Script { step: name() });
    }
    if step.step_ref.is_some() {
        return Err(Refusal::StepAction { step: name() });
    }
    let Some(image) = step.image.as_deref().filter(|i| !i.is_empty()) else {
        return Err(Refusal::NoImage { step: name() });
    };
    let command = step.command.clone().unwrap_or_default();
    let args = step.args.clone().unwrap_or_default();
    let ours: Vec<String> = if is_own_image(image) {
        // `ferrovirt task NAME` (the binary by any path), then the args.
        let binary = command.first().map(|c| basename(c));
        let rest = match binary {
            Some("ferrovirt") => command[1..].to_vec(),
            _ => command.clone(),
        };
        rest.into_iter().chain(args).collect()
    } else if KUBEVIRT_TASK_IMAGES.contains(&image_repository_name(image)) {
        kubevirt_image_command(step, &command, args)
    } else {
        return Err(Refusal::Image {
            step: name(),
            image: image.to_owned(),
        });
    };
    let task = ours.get(1).cloned().unwrap_or_default();
    let known = ours.first().is_some_and(|a| a == "task") && task != "step" && is_task(&task);
    if !known {
        return Err(Refusal::UnknownTask {
            step: name(),
            command: ours.join(" "),
        });
    }
    Ok(ours)
}

/// Whether `name` is one of this binary's tasks, by name or alias (`create-vm`).
fn is_task(name: &str) -> bool {
    use clap::Subcommand;
    TaskCommand::augment_subcommands(clap::Command::new("task"))
        .find_subcommand(name)
        .is_some()
}

/// A kubevirt tekton-tasks image's step as this binary's task: its binary is the task
/// (`create-vm`, `modify-data-object`), or its `entrypoint` runs the one `COMMAND` names.
fn kubevirt_image_command(step: &Step, command: &[String], args: Vec<String>) -> Vec<String> {
    let binary = command.first().map(|c| basename(c)).unwrap_or_default();
    let task = if binary == "entrypoint" {
        step.env
            .iter()
            .flatten()
            .find(|v| v.name == "COMMAND")
            .and_then(|v| v.value.clone())
            .unwrap_or_default()
    } else {
        binary.to_owned()
    };
    let rest = command.iter().skip(1).cloned().chain(args);
    ["task".to_string(), task].into_iter().chain(rest).collect()
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The image the container runs: the step's own where it is Ferrovirt's, else Ferrovirt's
/// default (a kubevirt tekton-tasks step runs this binary's copy of its command).
fn own_image(step: &Step) -> String {
    match step.image.as_deref() {
        Some(image) if is_own_image(image) => image.to_owned(),
        _ => DEFAULT_IMAGE.to_owned(),
    }
}

fn entrypoint_args(
    step: &Step,
    container: &str,
    index: usize,
    results: &[&str],
    command: Vec<String>,
) -> Vec<String> {
    let mut args = vec!["task".to_string(), "step".to_string()];
    if index > 0 {
        args.extend(["--wait-file".into(), format!("{RUN_DIR}/{}/out", index - 1)]);
    }
    args.extend([
        "--post-file".into(),
        format!("{RUN_DIR}/{index}/out"),
        "--termination-path".into(),
        termination_path(container),
        "--step-metadata-dir".into(),
        format!("{STEPS_DIR}/{container}"),
    ]);
    if !results.is_empty() {
        args.extend(["--results".into(), results.join(",")]);
    }
    if let Some(on_error) = step.on_error.as_deref().filter(|o| !o.is_empty()) {
        args.extend(["--on-error".into(), on_error.to_owned()]);
    }
    if let Some(timeout) = step.timeout.as_deref().filter(|t| !t.is_empty()) {
        args.extend(["--timeout".into(), timeout.to_owned()]);
    }
    args.push("--".into());
    args.extend(command);
    args
}

/// Tekton's own directories, as emptyDirs: results, the steps' files, and each step's run
/// directory.
fn internal_volumes(steps: usize) -> Vec<Volume> {
    let empty = |name: String| Volume {
        name,
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    };
    let mut volumes = vec![
        empty("tekton-internal-results".into()),
        empty("tekton-internal-steps".into()),
    ];
    volumes.extend((0..steps).map(|i| empty(format!("tekton-internal-run-{i}"))));
    volumes
}

fn internal_mounts(index: usize) -> Vec<VolumeMount> {
    let mount = |name: String, path: String| VolumeMount {
        name,
        mount_path: path,
        ..Default::default()
    };
    vec![
        mount("tekton-internal-results".into(), TEKTON_RESULTS_DIR.into()),
        mount("tekton-internal-steps".into(), STEPS_DIR.into()),
        mount(
            format!("tekton-internal-run-{index}"),
            format!("{RUN_DIR}/{index}"),
        ),
    ]
}

/// Each bound workspace as a volume named as Tekton names it.
fn workspace_volumes(run: &TaskRun) -> Vec<Volume> {
    run.spec
        .workspaces
        .iter()
        .flatten()
        .map(|binding| Volume {
            name: workspace_volume_name(&binding.name),
            persistent_volume_claim: binding.persistent_volume_claim.clone(),
            empty_dir: binding.empty_dir.clone(),
            config_map: binding.config_map.clone(),
            secret: binding.secret.clone(),
            projected: binding.projected.clone(),
            csi: binding.csi.clone(),
            ..Default::default()
        })
        .collect()
}

/// Where every step mounts each bound workspace.
fn workspace_mounts(run: &TaskRun, spec: &TaskSpec) -> Result<Vec<VolumeMount>, Refusal> {
    let mut mounts = Vec::new();
    for binding in run.spec.workspaces.iter().flatten() {
        if binding.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(Refusal::WorkspaceSubPath(binding.name.clone()));
        }
        if binding.volume_claim_template.is_some() {
            return Err(Refusal::WorkspaceClaimTemplate(binding.name.clone()));
        }
        let Some(declared) = spec
            .workspaces
            .iter()
            .flatten()
            .find(|w| w.name == binding.name)
        else {
            continue;
        };
        mounts.push(VolumeMount {
            name: workspace_volume_name(&binding.name),
            mount_path: declared.mount_path(),
            read_only: declared.read_only.filter(|r| *r),
            ..Default::default()
        });
    }
    Ok(mounts)
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
