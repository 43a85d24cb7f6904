//! virt-handler: the node's side of the VMIs scheduled on it. For each VMI whose
//! `status.nodeName` is this node it hands the VMI to its launcher (Sync) once the VMI
//! controller has marked it Scheduled, then follows the domain: Running, Paused, the guest
//! agent, the guest's OS and addresses. A VMI's end is its launcher's end, which the VMI
//! controller reads from the launcher pod; deletion stops the pod, whose SIGTERM the
//! launcher turns into an ACPI shutdown within the VMI's grace period.

pub mod launchers;
pub mod status;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::kubevirt::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase, keys};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tonic::transport::Channel;

use crate::guest_agent::GuestInfo;
use crate::launcher::DomainStatus;
use crate::launcher::control::proto::cmd_client::CmdClient;
use crate::launcher::control::proto::{EmptyRequest, ShutdownRequest, Vmi, VmiRequest};
pub use launchers::{LauncherLookupError, Launchers, SocketDirOf};

/// How often a running domain is looked at.
const POLL: Duration = Duration::from_secs(1);
/// How often the guest agent is asked about the guest.
const GUEST_INFO_EVERY: u32 = 5;
/// How long a started launcher pod gets to open its control socket.
const SOCKET_WAIT: Duration = Duration::from_secs(60);
/// The pauses between attempts to follow a VMI after an error.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// KubeVirt's default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The handler of one node.
pub struct Handler {
    pub client: Client,
    pub node: String,
    pub launchers: Launchers,
}

impl Handler {
    /// Labels the node `kubevirt.io/schedulable=true`, which launcher pods select, as
    /// KubeVirt's virt-handler does once it runs there; retried until it is done, as no
    /// VMI can land on the node before.
    async fn mark_schedulable(&self) {
        let patch = json!({"metadata": {"labels": {keys::NODE_SCHEDULABLE_LABEL: "true"}}});
        let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(self.client.clone());
        let mut pause = RETRY_FIRST;
        while let Err(err) = nodes
            .patch(&self.node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::error!(node = %self.node, %err, "cannot mark the node schedulable for VMIs; retrying");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RETRY_MAX);
        }
    }

    /// Marks the node schedulable for VMIs, then follows its VMIs until the watch ends.
    pub async fn run(self) {
        self.mark_schedulable().await;
        let handler = Arc::new(self);
        let following: Arc<Mutex<HashMap<String, ()>>> = Arc::default();
        let api = Api::<VirtualMachineInstance>::all(handler.client.clone());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            let vmi = match event {
                Ok(watcher::Event::Apply(vmi) | watcher::Event::InitApply(vmi)) => vmi,
                Ok(_) => continue,
                Err(err) => {
                    tracing::warn!(%err, "VMI watch");
                    continue;
                }
            };
            if !handler.is_mine(&vmi) {
                continue;
            }
            let uid = vmi.uid().unwrap_or_default();
            if lock(&following).insert(uid.clone(), ()).is_some() {
                continue;
            }
            let handler = handler.clone();
            let following = following.clone();
            tokio::spawn(async move {
                handler.follow_until_gone(vmi).await;
                lock(&following).remove(&uid);
            });
        }
        tracing::error!("virt-handler's VMI watch ended");
    }

    /// A VMI of this node that is being started, runs, or is being stopped.
    fn is_mine(&self, vmi: &VirtualMachineInstance) -> bool {
        let status = vmi.status.as_ref();
        status.and_then(|s| s.node_name.as_deref()) == Some(self.node.as_str())
            && matches!(
                status.and_then(|s| s.phase),
                Some(Phase::Scheduled | Phase::Running)
            )
    }

    /// Follows the VMI, starting again after an error (with a growing pause), until the
    /// VMI is gone, replaced or no longer this node's.
    async fn follow_until_gone(&self, vmi: VirtualMachineInstance) {
        let name = format!("{}/{}", vmi.namespace().unwrap_or_default(), vmi.name_any());
        let mut pause = RETRY_FIRST;
        loop {
            match self.follow(&vmi).await {
                Ok(()) => return,
                Err(err) => tracing::info!(vmi = %name, %err, "following the VMI again shortly"),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RETRY_MAX);
        }
    }

    /// Starts the VMI's domain if it is not yet, reports on it, and shuts it down with the
    /// VMI's current grace period once the VMI is being deleted; `Ok` when there is nothing
    /// more to follow.
    async fn follow(&self, first: &VirtualMachineInstance) -> Result<(), HandlerError> {
        let api = Api::<VirtualMachineInstance>::namespaced(
            self.client.clone(),
            &first.namespace().unwrap_or_default(),
        );
        let (name, uid) = (first.name_any(), first.uid());
        let current =
            |vmi: Option<VirtualMachineInstance>| vmi.filter(|v| v.uid() == uid && self.is_mine(v));
        let Some(vmi) = current(api.get_opt(&name).await?) else {
            return Ok(());
        };
        let pod = self.launchers.pod(&vmi).await?;
        let mut launcher = self.launchers.connect_to(&vmi, &pod, SOCKET_WAIT).await?;
        let pod_ip = pod.status.and_then(|s| s.pod_ip);
        let mut tick = 0u32;
        let mut guest: Option<GuestInfo> = None;
        // The grace period the launcher was last asked to shut down within.
        let mut shutdown_sent: Option<i64> = None;
        loop {
            let Some(vmi) = current(api.get_opt(&name).await?) else {
                return Ok(());
            };
            let now = Time(k8s_openapi::jiff::Timestamp::now());
            if vmi.metadata.deletion_timestamp.is_some() {
                let grace = vmi
                    .spec
                    .termination_grace_period_seconds
                    .unwrap_or(DEFAULT_GRACE_SECONDS);
                // Again when a forced stop shortened the grace period meanwhile.
                if shutdown_sent.is_none_or(|sent| grace < sent) {
                    shutdown(&mut launcher, &vmi, grace).await?;
                    shutdown_sent = Some(grace);
                }
            } else if vmi.status.as_ref().and_then(|s| s.phase) == Some(Phase::Scheduled) {
                if let Some(patch) = self
                    .sync(&mut launcher, &vmi, pod_ip.as_deref(), &now)
                    .await?
                {
                    write_status(&api, &vmi, patch).await;
                }
            } else {
                let domain = domain(&mut launcher).await?;
                if domain.guest_agent_connected && tick.is_multiple_of(GUEST_INFO_EVERY) {
                    guest = guest_info(&mut launcher).await.or(guest);
                }
                tick = tick.wrapping_add(1);
                if let Some(patch) =
                    status::running(&vmi, &domain, guest.as_ref(), pod_ip.as_deref(), &now)
                {
                    write_status(&api, &vmi, patch).await;
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Hands the VMI to its launcher: the status to write, the domain running or refused.
    /// A call that did not reach the launcher is an error, tried again; only the
    /// launcher's refusal fails the VMI.
    async fn sync(
        &self,
        launcher: &mut CmdClient<Channel>,
        vmi: &VirtualMachineInstance,
        pod_ip: Option<&str>,
        now: &Time,
    ) -> Result<Option<Value>, HandlerError> {
        let request = VmiRequest {
            vmi: Some(Vmi {
                vmi_json: serde_json::to_vec(vmi).unwrap_or_default(),
            }),
        };
        let response = launcher.sync_virtual_machine(request).await?.into_inner();
        if response.success {
            tracing::info!(vmi = %vmi.name_any(), "the domain runs");
            Ok(Some(status::started(vmi, pod_ip, now)))
        } else {
            Ok(Some(status::failed_to_start(vmi, &response.message, now)))
        }
    }
}

/// Asks the launcher to shut the domain down within `grace` seconds, the VMI's grace period
/// as it is now (`virtctl stop --force --grace-period` shortens it before the VMI is
/// deleted); 0 kills it at once.
async fn shutdown(
    launcher: &mut CmdClient<Channel>,
    vmi: &VirtualMachineInstance,
    grace: i64,
) -> Result<(), HandlerError> {
    tracing::info!(vmi = %vmi.name_any(), grace, "shutting the domain down");
    if grace <= 0 {
        launcher.kill_virtual_machine(EmptyRequest {}).await?;
    } else {
        launcher
            .shutdown_virtual_machine(ShutdownRequest {
                grace_period_seconds: grace,
            })
            .await?;
    }
    Ok(())
}

/// Why the handler stopped following a VMI.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error(transparent)]
    Lookup(#[from] LauncherLookupError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the launcher stopped answering: {0}")]
    Launcher(#[from] tonic::Status),
}

async fn domain(launcher: &mut CmdClient<Channel>) -> Result<DomainStatus, HandlerError> {
    let answer = launcher.get_domain(EmptyRequest {}).await?.into_inner();
    Ok(serde_json::from_str(&answer.domain).unwrap_or_default())
}

async fn guest_info(launcher: &mut CmdClient<Channel>) -> Option<GuestInfo> {
    let answer = launcher
        .get_guest_info(EmptyRequest {})
        .await
        .ok()?
        .into_inner();
    serde_json::from_str(&answer.guest_info_response).ok()
}

/// A status patch guarded by the VMI's resourceVersion: a concurrent write by the VMI
/// controller wins and the next poll recomputes.
async fn write_status(
    api: &Api<VirtualMachineInstance>,
    vmi: &VirtualMachineInstance,
    status: Value,
) {
    let patch = json!({"metadata": {"resourceVersion": vmi.resource_version()}, "status": status});
    if let Err(err) = api
        .patch_status(
            &vmi.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::debug!(vmi = %vmi.name_any(), %err, "status not written; trying again");
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
