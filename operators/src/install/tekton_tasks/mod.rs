//! The tekton-tasks operator (kubevirt/tekton-tasks-operator, later part of ssp-operator):
//! each TektonTasks CR with `spec.featureGates.deployTektonTaskResources` gets the KubeVirt
//! Tekton tasks of this project's catalogue in `spec.tasks.namespace` (else its own), and
//! their ClusterRoles, ServiceAccounts and RoleBindings (`<task>-task`, the last two in its
//! own namespace). Its status is the operator SDK's, as upstream writes it. When Tekton's
//! Task (`tasks.tekton.dev`) is not served the CR says so in its conditions and is looked
//! at again; nothing else happens until Tekton is there. The CR carries upstream's
//! finalizer; deleting it removes what it made.
//!
//! The decisions are a pure plan ([`plan`]); this module reads, writes and keeps the status
//! (SSP's status code, in upstream's words for this operator).

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use api::tekton_tasks::{OPERATOR_PAUSED_ANNOTATION, TektonTasks, TektonTasksStatus};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;

use self::plan::{MissingCrds, Observed};
use crate::install::ssp::Error;
use crate::install::ssp::apply::{apply_all, get, list};
use crate::install::ssp::plan::{Action, Change, Kind};
use crate::install::ssp::status::{Outcome, Words, status_in_words};
use crate::kit::{finalizer, is_status};

/// The finalizer on every TektonTasks, as upstream.
pub const FINALIZER: &str = "tekton-tasks.kubevirt.io/finalizer";
/// The finalizer older operators put; replaced by [`FINALIZER`].
pub const OLD_FINALIZER: &str = "finalize.tekton-tasks.kubevirt.io";
/// The operator's version, reported in the status and on each Task.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// How upstream's status messages name this operator's resources.
pub const WORDS: Words = Words {
    noun: "Tekton tasks",
    available: "Tekton operator is available",
};
/// How often a CR is checked again.
const RESYNC: Duration = Duration::from_secs(60);
/// How soon a CR waiting for Tekton is looked at again.
const WAIT_FOR_TEKTON: Duration = Duration::from_secs(10);

/// What the controller works with.
pub struct Context {
    /// The API server.
    pub client: Client,
    /// The image the Tasks' steps run.
    pub image: String,
}

/// What the plan looks at for `tt`: the Tasks of its tasks namespace (none when Tekton's
/// Task is not served), the accounts and bindings of its namespace, the tasks'
/// ClusterRoles.
async fn observe(client: &Client, tt: &TektonTasks) -> Result<Observed, Error> {
    let tasks = match list(client, Kind::Task, Some(&tt.tasks_namespace())).await {
        Ok(tasks) => Some(tasks),
        Err(Error::Kube(err)) if is_status(&err, 404) => None,
        Err(err) => return Err(err),
    };
    let namespace = tt.service_accounts_namespace();
    let mut cluster_roles = Vec::new();
    for name in plan::cluster_role_names() {
        cluster_roles.extend(get(client, Kind::ClusterRole, None, &name).await?);
    }
    Ok(Observed {
        tasks,
        service_accounts: list(client, Kind::ServiceAccount, Some(&namespace)).await?,
        role_bindings: list(client, Kind::RoleBinding, Some(&namespace)).await?,
        cluster_roles,
    })
}

/// The status messages of the resources that `actions` delete.
fn pending(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter(|a| a.change == Change::Delete)
        .map(|a| format!("{}: Resource is being deleted.", a.describe()))
        .collect()
}

/// The outcome of a deploy from its plan: deployed (with what is still going away), or
/// waiting for the CRDs named.
fn outcome_of(planned: &Result<Vec<Action>, MissingCrds>) -> Outcome {
    match planned {
        Ok(actions) => Outcome::Reconciled {
            pending: pending(actions),
        },
        Err(MissingCrds(crds)) => Outcome::MissingCrds(crds.clone()),
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

async fn patch_status(
    api: &Api<TektonTasks>,
    tt: &TektonTasks,
    status: &TektonTasksStatus,
) -> Result<(), Error> {
    let mut value = serde_json::to_value(status)?;
    value["paused"] = Value::Bool(status.paused);
    match crate::kit::objects::patch_status(api, &tt.name_any(), &value).await {
        Ok(_) => Ok(()),
        Err(err) if is_status(&err, 404) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// Writes the status after `outcome`, if it changed.
async fn write_status(
    api: &Api<TektonTasks>,
    tt: &TektonTasks,
    outcome: &Outcome,
) -> Result<(), Error> {
    let status = status_in_words(
        tt.status.as_ref(),
        tt.meta().generation,
        outcome,
        VERSION,
        &now(),
        WORDS,
    );
    if tt.status.as_ref() == Some(&status) {
        return Ok(());
    }
    patch_status(api, tt, &status).await
}

fn is_paused(tt: &TektonTasks) -> bool {
    tt.annotations()
        .get(OPERATOR_PAUSED_ANNOTATION)
        .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Reconciles one TektonTasks: its finalizer, what it deploys and its status.
pub async fn reconcile(tt: Arc<TektonTasks>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let api: Api<TektonTasks> =
        Api::namespaced(ctx.client.clone(), &tt.namespace().unwrap_or_default());
    if tt.meta().deletion_timestamp.is_some() {
        return cleanup(&api, &tt, &ctx).await;
    }
    if !finalizer::has(&*tt, FINALIZER) || finalizer::has(&*tt, OLD_FINALIZER) {
        let mut current = (*tt).clone();
        if let Some(patched) = finalizer::set(&api, &current, OLD_FINALIZER, false).await? {
            current = patched;
        }
        if let Some(patched) = finalizer::set(&api, &current, FINALIZER, true).await? {
            current = patched;
        }
        write_status(&api, &current, &Outcome::Reconciling).await?;
        return Ok(Requeue::requeue(Duration::from_millis(100)));
    }
    if is_paused(&tt) {
        if !tt.status.as_ref().is_some_and(|s| s.paused) {
            tracing::info!(tektontasks = %plan::owner_key(&tt), "pausing the tekton-tasks operator on it");
            let mut status = tt.status.clone().unwrap_or_default();
            status.paused = true;
            patch_status(&api, &tt, &status).await?;
        }
        return Ok(Requeue::await_change());
    }
    if tt.status.as_ref().and_then(|s| s.observed_generation) != tt.meta().generation {
        write_status(&api, &tt, &Outcome::Reconciling).await?;
    }
    let deployed = async {
        let observed = observe(&ctx.client, &tt).await?;
        let planned = plan::plan(&tt, &ctx.image, VERSION, &observed);
        if let Ok(actions) = &planned {
            apply_all(&ctx.client, actions).await?;
        }
        Ok::<_, Error>(planned)
    };
    let (outcome, result) = match deployed.await {
        Ok(planned) => {
            let outcome = outcome_of(&planned);
            let requeue = match &outcome {
                Outcome::MissingCrds(crds) => {
                    tracing::info!(tektontasks = %plan::owner_key(&tt), ?crds, "waiting for Tekton");
                    WAIT_FOR_TEKTON
                }
                _ => RESYNC,
            };
            (outcome, Ok(Requeue::requeue(requeue)))
        }
        Err(Error::Kube(err)) if is_status(&err, 409) => {
            return Ok(Requeue::requeue(Duration::from_millis(200)));
        }
        Err(err) => (Outcome::Failed(err.to_string()), Err(err)),
    };
    let latest = api
        .get_opt(&tt.name_any())
        .await?
        .unwrap_or_else(|| (*tt).clone());
    write_status(&api, &latest, &outcome).await?;
    result
}

/// Removes what `tt` made, then its finalizer.
async fn cleanup(
    api: &Api<TektonTasks>,
    tt: &TektonTasks,
    ctx: &Context,
) -> Result<Requeue, Error> {
    if !finalizer::has(tt, FINALIZER) && !finalizer::has(tt, OLD_FINALIZER) {
        return Ok(Requeue::await_change());
    }
    write_status(api, tt, &Outcome::Deleting).await?;
    let observed = observe(&ctx.client, tt).await?;
    apply_all(&ctx.client, &plan::cleanup(tt, &observed)).await?;
    finalizer::remove_from_latest(api, tt, FINALIZER).await?;
    finalizer::remove_from_latest(api, tt, OLD_FINALIZER).await?;
    tracing::info!(tektontasks = %plan::owner_key(tt), "Tekton tasks resources removed");
    Ok(Requeue::await_change())
}

fn error_policy(_tt: Arc<TektonTasks>, err: &Error, _ctx: Arc<Context>) -> Requeue {
    tracing::warn!(%err, label = err.metric_label(), "TektonTasks reconcile failed");
    Requeue::requeue(Duration::from_secs(5))
}

/// The TektonTasks that owner annotations name.
fn owning(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Option<ObjectRef<TektonTasks>> {
    let (namespace, name) = plan::owner_of(annotations)?;
    Some(ObjectRef::new(&name).within(&namespace))
}

/// Runs the TektonTasks controller until its watches end; the Tasks' steps run `image`.
/// Without Tekton the Task watch fails and retries; the CRs say why nothing is deployed.
pub async fn run(client: Client, image: String) {
    let ctx = Arc::new(Context {
        client: client.clone(),
        image,
    });
    let task = Kind::Task.resource();
    Controller::new(
        Api::<TektonTasks>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches_with(
        Api::<DynamicObject>::all_with(client, &task),
        task,
        watcher::Config::default(),
        |t| owning(t.annotations()),
    )
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        if let Err(err) = result {
            tracing::debug!(%err, "TektonTasks controller event");
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::common::ConditionStatus;
    use serde_json::json;

    #[test]
    fn a_missing_tekton_is_a_condition_in_upstreams_words() {
        let outcome = outcome_of(&Err(MissingCrds(vec![plan::TASK_CRD.into()])));
        let at = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let status = status_in_words(None, Some(1), &outcome, VERSION, &at, WORDS);
        assert_eq!(status.phase.as_deref(), Some("Deploying"));
        let conditions = status.conditions.unwrap();
        let available = conditions.iter().find(|c| c.type_ == "Available").unwrap();
        assert_eq!(available.status, ConditionStatus::False);
        assert_eq!(
            available.message.as_deref(),
            Some("Required CRDs are missing: tasks.tekton.dev")
        );
        let degraded = conditions.iter().find(|c| c.type_ == "Degraded").unwrap();
        assert_eq!(degraded.status, ConditionStatus::True);
    }

    #[test]
    fn deployed_reads_as_upstream_and_deletes_are_pending() {
        let at = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let outcome = outcome_of(&Ok(vec![]));
        let status = status_in_words(None, Some(1), &outcome, VERSION, &at, WORDS);
        assert_eq!(status.phase.as_deref(), Some("Deployed"));
        let conditions = status.conditions.unwrap();
        let message = |t: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == t)
                .and_then(|c| c.message.clone())
        };
        assert_eq!(
            message("Available").as_deref(),
            Some("Tekton operator is available")
        );
        assert_eq!(
            message("Progressing").as_deref(),
            Some("No Tekton tasks resources are progressing")
        );
        let delete = Action::on(
            Kind::Task,
            &json!({"metadata": {"name": "a", "namespace": "ns"}}),
            Change::Delete,
        );
        assert_eq!(
            outcome_of(&Ok(vec![delete])),
            Outcome::Reconciled {
                pending: vec!["Task ns/a: Resource is being deleted.".into()]
            }
        );
        let annotations = std::collections::BTreeMap::from([
            (plan::PRIMARY_RESOURCE.to_owned(), "kubevirt/tto".to_owned()),
            (
                plan::PRIMARY_RESOURCE_TYPE.to_owned(),
                plan::OWNER_TYPE.to_owned(),
            ),
        ]);
        assert_eq!(
            owning(&annotations),
            Some(ObjectRef::new("tto").within("kubevirt"))
        );
    }
}
