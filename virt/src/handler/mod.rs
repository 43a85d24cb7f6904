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

use api::kubevirt::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tonic::transport::Channel;

use crate::guest_agent::GuestInfo;
use crate::launcher::control::proto::cmd_client::CmdClient;
use crate::launcher::control::proto::{EmptyRequest, Vmi, VmiRequest};
pub use launchers::{LauncherLookupError, Launchers, SocketDirOf};
use status::DomainReport;

/// How often a running domain is looked at.
const POLL: Duration = Duration::from_secs(1);
/// How often the guest agent is asked about the guest.
const GUEST_INFO_EVERY: u32 = 5;
/// How long a started launcher pod gets to open its control socket.
const SOCKET_WAIT: Duration = Duration::from_secs(60);

/// The handler of one node.
pub struct Handler {
    pub client: Client,
    pub node: String,
    pub launchers: Launchers,
}

impl Handler {
    /// Follows the VMIs of this node until the watch ends.
    pub async fn run(self) {
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
                let name = format!("{}/{}", vmi.namespace().unwrap_or_default(), vmi.name_any());
                if let Err(err) = handler.follow(vmi).await {
                    tracing::warn!(vmi = %name, %err, "stopped following the VMI");
                }
                lock(&following).remove(&uid);
            });
        }
        tracing::error!("virt-handler's VMI watch ended");
    }

    /// A VMI of this node that is being started or runs.
    fn is_mine(&self, vmi: &VirtualMachineInstance) -> bool {
        let status = vmi.status.as_ref();
        status.and_then(|s| s.node_name.as_deref()) == Some(self.node.as_str())
            && matches!(
                status.and_then(|s| s.phase),
                Some(Phase::Scheduled | Phase::Running)
            )
            && vmi.metadata.deletion_timestamp.is_none()
    }

    /// Starts the VMI's domain if it is not yet, then reports on it until the VMI ends.
    async fn follow(&self, vmi: VirtualMachineInstance) -> Result<(), HandlerError> {
        let api = Api::<VirtualMachineInstance>::namespaced(
            self.client.clone(),
            &vmi.namespace().unwrap_or_default(),
        );
        let name = vmi.name_any();
        let mut launcher = self.launchers.connect(&vmi, SOCKET_WAIT).await?;
        let mut tick = 0u32;
        let mut guest: Option<GuestInfo> = None;
        loop {
            let Some(vmi) = api.get_opt(&name).await? else {
                return Ok(());
            };
            if !self.is_mine(&vmi) {
                return Ok(());
            }
            let now = Time(k8s_openapi::jiff::Timestamp::now());
            let phase = vmi.status.as_ref().and_then(|s| s.phase);
            let patch = if phase == Some(Phase::Scheduled) {
                Some(self.sync(&mut launcher, &vmi, &now).await)
            } else {
                let domain = domain(&mut launcher).await?;
                if domain.guest_agent_connected && tick.is_multiple_of(GUEST_INFO_EVERY) {
                    guest = guest_info(&mut launcher).await.or(guest);
                }
                tick = tick.wrapping_add(1);
                status::running(&vmi, &domain, guest.as_ref(), &now)
            };
            if let Some(patch) = patch {
                write_status(&api, &vmi, patch).await;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Hands the VMI to its launcher; the status to write either way.
    async fn sync(
        &self,
        launcher: &mut CmdClient<Channel>,
        vmi: &VirtualMachineInstance,
        now: &Time,
    ) -> Value {
        let request = VmiRequest {
            vmi: Some(Vmi {
                vmi_json: serde_json::to_vec(vmi).unwrap_or_default(),
            }),
        };
        let answer = launcher.sync_virtual_machine(request).await;
        match answer.map(|r| r.into_inner()) {
            Ok(response) if response.success => {
                tracing::info!(vmi = %vmi.name_any(), "the domain runs");
                status::started(vmi, now)
            }
            Ok(response) => status::failed_to_start(vmi, &response.message, now),
            Err(status) => status::failed_to_start(vmi, status.message(), now),
        }
    }
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

async fn domain(launcher: &mut CmdClient<Channel>) -> Result<DomainReport, HandlerError> {
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
