//! hostpath-provisioner-operator's HostPathProvisioner controller on one machine: the CRs'
//! path pools (and the legacy `pathConfig`, as pool `legacy`) become the running CSI driver's
//! pools without a restart, each usable by a StorageClass with `storagePool: NAME`; a pool no
//! CR names any more stops taking volumes and, once it holds none, is forgotten (its
//! directory and what is in it are never removed). The status is upstream's: the operator SDK
//! conditions and `storagePoolStatuses`. A `pvcTemplate` pool gets a claim made from its
//! template, whose volume is mounted at the pool's path and served as the pool
//! ([`templated`]); until then the CR is Degraded with upstream's `StoragePoolNotReady`.

pub mod claims;
pub mod cluster;
pub mod plan;
pub mod pool_mounters;
pub mod status;
pub mod sync;
pub mod templated;

use std::sync::Arc;
use std::time::Duration;

use api::common::{ConditionStatus, operator_condition};
use api::hostpath::{HostPathProvisioner, StoragePoolStatus};
use ferrovirt_hostpath::HostPathStore;
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use crate::kit::{finalizer, patch_status, publish};
use status::{Outcome, POOL_NOT_READY, RECONCILE_FAILED, status_for};
use sync::{SyncReport, sync_pools};

/// Upstream's finalizer on the CR.
pub const FINALIZER: &str = "finalizer.delete.hostpath-provisioner";
/// The operator's version, reported in the status.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The controller's name in Events.
pub const REPORTER: &str = "hostpath-provisioner-operator";
/// How often the pools are checked again.
const RESYNC: Duration = Duration::from_secs(60);

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A blocking store call did not finish.
    #[error("storage pool task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl Error {
    /// The variant's name, as failures are counted.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "Kube",
            Error::Task(_) => "Task",
        }
    }
}

/// What the controller works with.
pub struct Context {
    pub client: Client,
    /// The CSI driver's pools and volumes.
    pub store: Arc<HostPathStore>,
    pub recorder: Recorder,
    /// One pool sync at a time: each brings the pools to what every CR asks.
    sync: tokio::sync::Mutex<()>,
}

impl Context {
    pub fn new(client: Client, store: Arc<HostPathStore>) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: REPORTER.to_owned(),
                instance: None,
            },
        );
        Context {
            client,
            store,
            recorder,
            sync: tokio::sync::Mutex::new(()),
        }
    }
}

/// Reconciles one HostPathProvisioner: syncs the pools and writes its status.
pub async fn reconcile(hpp: Arc<HostPathProvisioner>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<HostPathProvisioner> = Api::all(ctx.client.clone());
    let name = hpp.name_any();
    if hpp.metadata.deletion_timestamp.is_some() {
        // Its pools go (retired while they hold volumes) before the CR does.
        sync_pools(&ctx).await?;
        finalizer::remove_from_latest(&api, hpp.as_ref(), FINALIZER).await?;
        return Ok(Action::await_change());
    }
    finalizer::set(&api, hpp.as_ref(), FINALIZER, true).await?;
    if hpp
        .status
        .as_ref()
        .and_then(|s| s.observed_version.as_ref())
        .is_none()
    {
        publish(
            &ctx.recorder,
            hpp.as_ref(),
            false,
            "DeployStarted",
            "Started Deployment",
        )
        .await;
    }
    let report = sync_pools(&ctx).await;
    let (outcome, ready) = match &report {
        Ok(report) => outcome_for(report, &name),
        Err(err) => (
            Outcome::Failed {
                reason: RECONCILE_FAILED,
                message: format!("Unable to successfully reconcile: {err}"),
            },
            Vec::new(),
        ),
    };
    for message in report.iter().flat_map(|r| &r.retired) {
        publish(
            &ctx.recorder,
            hpp.as_ref(),
            true,
            "StoragePoolRetained",
            message,
        )
        .await;
    }
    write_status(&ctx, &hpp, &ready, &outcome).await?;
    report.map(|_| Action::requeue(RESYNC))
}

/// CR `name`'s outcome in `report`, and its pools' statuses.
fn outcome_for(report: &SyncReport, name: &str) -> (Outcome, Vec<StoragePoolStatus>) {
    let problems = report.problems.get(name).cloned().unwrap_or_default();
    let ready = report.pools.get(name).cloned().unwrap_or_default();
    if problems.is_empty() {
        return (Outcome::Healthy, ready);
    }
    let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    let outcome = Outcome::Failed {
        reason: POOL_NOT_READY,
        message: messages.join("; "),
    };
    (outcome, ready)
}

/// Writes the status after `outcome`, with upstream's Events on a change of health.
async fn write_status(
    ctx: &Context,
    hpp: &HostPathProvisioner,
    ready: &[StoragePoolStatus],
    outcome: &Outcome,
) -> Result<(), Error> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = status_for(hpp.status.as_ref(), ready, outcome, VERSION, &now);
    if hpp.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let api: Api<HostPathProvisioner> = Api::all(ctx.client.clone());
    patch_status(&api, &hpp.name_any(), &status).await?;
    let was_healthy = hpp
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.type_ == operator_condition::DEGRADED && c.status == ConditionStatus::False
            })
        });
    match outcome {
        Outcome::Healthy if !was_healthy => {
            publish(
                &ctx.recorder,
                hpp,
                false,
                "ProvisionerHealthy",
                "Provisioner Healthy",
            )
            .await
        }
        Outcome::Failed { reason, message } => {
            publish(&ctx.recorder, hpp, true, reason, message).await
        }
        Outcome::Healthy | Outcome::Deploying => {}
    }
    Ok(())
}

fn error_policy(_hpp: Arc<HostPathProvisioner>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(%err, label = err.metric_label(), "HostPathProvisioner reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the controller until its watch ends.
pub async fn run(client: Client, store: Arc<HostPathStore>) {
    let ctx = Arc::new(Context::new(client.clone(), store));
    Controller::new(
        Api::<HostPathProvisioner>::all(client),
        watcher::Config::default(),
    )
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        if let Err(err) = result {
            tracing::debug!(%err, "HostPathProvisioner controller event");
        }
    })
    .await;
}
