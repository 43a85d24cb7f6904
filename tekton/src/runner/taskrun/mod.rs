//! The TaskRun controller of `ferrovirt up`: each TaskRun runs in a pod of step containers
//! on the local node agent, and its status follows the pod as Tekton's controller writes
//! it. On a cluster, Tekton Pipelines runs TaskRuns; this runs only where there is none.
//!
//! [`plan`](mod@plan) is the whole decision, with no I/O; [`run`] reads the TaskRun, its
//! Task and its pod, and applies what the plan returns.

pub mod plan;
pub mod pod;
pub mod resolve;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use api::tekton::{MANAGED_BY, MANAGED_BY_LABEL, Task, TaskRun, TaskRunStatus};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

pub use plan::{Observed, TaskRunAction, plan};
use resolve::ResolvedTask;

/// How often a running TaskRun is looked at without a change.
const RESYNC: Duration = Duration::from_secs(60);

/// Errors of the TaskRun controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
}

impl Error {
    /// The variant's name, for logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube(_) => "Kube",
        }
    }
}

/// The run's timeout: its own, or Tekton's default when it names none.
pub fn run_timeout(run: &TaskRun) -> Duration {
    crate::runner::duration::timeout(run.spec.timeout.as_deref())
        .unwrap_or(api::tekton::DEFAULT_TIMEOUT)
}

struct Context {
    client: Client,
}

/// The Task a run names: its own inline spec, or the Task of its namespace `taskRef` names,
/// or Tekton's message for one that cannot be had.
enum TaskLookup {
    Inline,
    Found(Box<Task>),
    Missing(String),
}

async fn lookup_task(ctx: &Context, run: &TaskRun) -> Result<TaskLookup, Error> {
    if run.spec.task_spec.is_some() {
        return Ok(TaskLookup::Inline);
    }
    let Some(reference) = run.spec.task_ref.as_ref() else {
        return Ok(TaskLookup::Missing(
            "the TaskRun names no Task: expected exactly one of spec.taskRef and spec.taskSpec"
                .into(),
        ));
    };
    if let Some(resolver) = reference.resolver.as_deref().filter(|r| !r.is_empty()) {
        return Ok(TaskLookup::Missing(format!(
            "the {resolver:?} resolver is not supported on ferrovirt up: name a Task of the TaskRun's namespace"
        )));
    }
    if let Some(kind) = reference
        .kind
        .as_deref()
        .filter(|k| !k.is_empty() && *k != "Task")
    {
        return Ok(TaskLookup::Missing(format!(
            "custom tasks (kind {kind:?}) are not supported on ferrovirt up"
        )));
    }
    let name = reference.name.clone().unwrap_or_default();
    let namespace = run.namespace().unwrap_or_default();
    let tasks = Api::<Task>::namespaced(ctx.client.clone(), &namespace);
    Ok(match tasks.get_opt(&name).await? {
        Some(task) => TaskLookup::Found(Box::new(task)),
        None => TaskLookup::Missing(format!(
            "error when listing tasks for taskRun {}: tasks.tekton.dev {name:?} not found",
            run.name_any()
        )),
    })
}

async fn reconcile(object: Arc<TaskRun>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let runs = Api::<TaskRun>::namespaced(ctx.client.clone(), &namespace);
    let Some(run) = runs.get_opt(&object.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let lookup = lookup_task(&ctx, &run).await?;
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &namespace);
    let pod = pods.get_opt(&pod::pod_name(&run)).await?;
    let task = match &lookup {
        TaskLookup::Inline => run
            .spec
            .task_spec
            .as_ref()
            .map(|spec| ResolvedTask {
                name: run.name_any(),
                spec,
                from_ref: false,
            })
            .ok_or_else(|| "the TaskRun's taskSpec is empty".to_string()),
        TaskLookup::Found(task) => Ok(ResolvedTask {
            name: task.name_any(),
            spec: &task.spec,
            from_ref: true,
        }),
        TaskLookup::Missing(message) => Err(message.clone()),
    };
    let actions = plan(&Observed {
        task_run: &run,
        task,
        pod: pod.as_ref(),
        now: jiff::Timestamp::now(),
    });
    let mut next = Action::requeue(RESYNC);
    for action in actions {
        match action {
            TaskRunAction::CreatePod(pod) => create_pod(&pods, &pod).await?,
            TaskRunAction::DeletePod(name) => delete_pod(&pods, &name).await?,
            TaskRunAction::WriteStatus(status) => write_status(&runs, &run, *status).await?,
            TaskRunAction::RequeueAfter(after) => next = Action::requeue(after.min(RESYNC)),
        }
    }
    Ok(next)
}

async fn create_pod(pods: &Api<Pod>, pod: &Pod) -> Result<(), Error> {
    match pods.create(&PostParams::default(), pod).await {
        Ok(_) => Ok(()),
        // Made by an earlier pass whose status write was lost: the next pass reads it.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err.into()),
    }
}

async fn delete_pod(pods: &Api<Pod>, name: &str) -> Result<(), Error> {
    match pods.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// Replaces the status, unless the run changed since it was read (a conflict, left to the
/// next pass, which sees the change).
async fn write_status(
    runs: &Api<TaskRun>,
    run: &TaskRun,
    status: TaskRunStatus,
) -> Result<(), Error> {
    let mut updated = run.clone();
    updated.status = Some(status);
    match runs
        .replace_status(&run.name_any(), &PostParams::default(), &updated)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(()),
        Err(err) => Err(err.into()),
    }
}

fn error_policy(run: Arc<TaskRun>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(taskrun = %run.name_any(), namespace = ?run.namespace(), error = err.metric_label(), %err, "TaskRun reconcile failed");
    Action::requeue(Duration::from_secs(2))
}

/// Runs the TaskRun controller until its watches end: TaskRuns are watched, with the pods
/// Tekton's label marks (each wakes the TaskRun that owns it).
pub async fn run(client: Client) {
    let ctx = Arc::new(Context {
        client: client.clone(),
    });
    let pods = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    Controller::new(
        Api::<TaskRun>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Pod>::all(client), pods)
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        if let Err(err) = result {
            tracing::debug!(%err, "TaskRun controller event");
        }
    })
    .await;
}
