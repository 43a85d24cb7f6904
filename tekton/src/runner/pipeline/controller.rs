//! The PipelineRun controller of `ferrovirt up`: reads a run, its Pipeline, the Tasks of its
//! namespace and its TaskRuns, and applies what [`plan`](super::plan) decides. Its TaskRuns
//! are run by the TaskRun controller ([`crate::runner::taskrun`]). On a cluster, Tekton
//! Pipelines runs PipelineRuns; this runs only where there is none.

use std::sync::Arc;
use std::time::Duration;

use api::tekton::{Pipeline, PipelineRun, Task, TaskRun};
use futures_util::StreamExt;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::taskrun::labels;
use super::{
    Observed, PipelineRunAction, cancel_patch, child_selector, pipeline_to_fetch, plan,
    tasks_to_fetch,
};

/// How often a running PipelineRun is looked at without a change.
const RESYNC: Duration = Duration::from_secs(60);

/// Errors of the PipelineRun controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("invalid JSON patch: {0}")]
    Patch(#[from] serde_json::Error),
}

impl Error {
    /// The variant's name, for logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube(_) => "Kube",
            Self::Patch(_) => "Patch",
        }
    }
}

struct Context {
    client: Client,
}

async fn reconcile(object: Arc<PipelineRun>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let runs = Api::<PipelineRun>::namespaced(ctx.client.clone(), &namespace);
    let Some(run) = runs.get_opt(&object.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let pipeline = match pipeline_to_fetch(&run) {
        Some(name) => {
            Api::<Pipeline>::namespaced(ctx.client.clone(), &namespace)
                .get_opt(name)
                .await?
        }
        None => None,
    };
    let tasks_api = Api::<Task>::namespaced(ctx.client.clone(), &namespace);
    let mut tasks = Vec::new();
    for name in tasks_to_fetch(&run, pipeline.as_ref()) {
        tasks.extend(tasks_api.get_opt(&name).await?);
    }
    let task_runs_api = Api::<TaskRun>::namespaced(ctx.client.clone(), &namespace);
    let task_runs = task_runs_api
        .list(&ListParams::default().labels(&child_selector(&run)))
        .await?
        .items;
    let actions = plan(&Observed {
        pipeline_run: &run,
        pipeline: pipeline.as_ref(),
        tasks: &tasks,
        task_runs: &task_runs,
        now: jiff::Timestamp::now(),
    });
    let mut next = Action::requeue(RESYNC);
    for action in actions {
        match action {
            PipelineRunAction::SetMetadata {
                labels,
                annotations,
            } => {
                let patch = json!({"metadata": {"labels": labels, "annotations": annotations}});
                runs.patch(
                    &run.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await?;
            }
            PipelineRunAction::CancelTaskRun {
                name,
                status_message,
            } => cancel(&task_runs_api, &name, &status_message).await?,
            PipelineRunAction::CreateTaskRun(task_run) => {
                match task_runs_api
                    .create(&PostParams::default(), &task_run)
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(err) => return Err(err.into()),
                }
            }
            PipelineRunAction::WriteStatus(status) => {
                let mut updated = run.clone();
                updated.status = Some(*status);
                match runs
                    .replace_status(&run.name_any(), &PostParams::default(), &updated)
                    .await
                {
                    Ok(_) => {}
                    // Changed since read (a metadata patch above, or the user): planned again.
                    Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {
                        return Ok(Action::requeue(Duration::from_millis(200)));
                    }
                    Err(err) => return Err(err.into()),
                }
            }
            PipelineRunAction::Requeue(after) => next = Action::requeue(after.min(RESYNC)),
        }
    }
    Ok(next)
}

/// Cancels a TaskRun as Tekton does; one gone or already complete is left as it is.
async fn cancel(task_runs: &Api<TaskRun>, name: &str, message: &str) -> Result<(), Error> {
    let patch: json_patch::Patch = serde_json::from_value(cancel_patch(message))?;
    match task_runs
        .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 422 => Ok(()),
        Err(err) => Err(err.into()),
    }
}

fn error_policy(run: Arc<PipelineRun>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(pipelinerun = %run.name_any(), namespace = ?run.namespace(), error = err.metric_label(), %err, "PipelineRun reconcile failed");
    Action::requeue(Duration::from_secs(2))
}

/// Runs the PipelineRun controller until its watches end: PipelineRuns are watched, with
/// their TaskRuns (each wakes the PipelineRun that owns it).
pub async fn run(client: Client) {
    let ctx = Arc::new(Context {
        client: client.clone(),
    });
    let children = watcher::Config::default().labels(labels::PIPELINE_RUN);
    Controller::new(
        Api::<PipelineRun>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<TaskRun>::all(client), children)
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        if let Err(err) = result {
            tracing::debug!(%err, "PipelineRun controller event");
        }
    })
    .await;
}
