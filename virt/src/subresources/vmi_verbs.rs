//! The VMI verbs: pause, unpause, softreboot and reset go to the VMI's launcher;
//! guestosinfo, userlist and filesystemlist ask its guest agent. Each first checks the VMI
//! as virt-api does and answers KubeVirt's conflicts.

use api::kubevirt::vmi::condition_types;
use api::kubevirt::{VirtualMachineInstance, VirtualMachineInstancePhase};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{StatusError, Subresources, dry_run, fetch_vmi, launcher, options};
use crate::guest_agent::GuestInfo;
use crate::launcher::control::proto::EmptyRequest;

const VMI: &str = "virtualmachineinstance";
const VMI_NOT_RUNNING: &str = "VMI is not running";
/// Pause answers with the VM's wording, as upstream's pause handler does.
const VM_NOT_RUNNING: &str = "VM is not running";
const VMI_NOT_PAUSED: &str = "VMI is not paused";
const VMI_ALREADY_PAUSED: &str = "VMI is already paused";
const NO_GUEST_AGENT: &str = "VMI does not have guest agent connected";

type VmiPath = Path<(String, String, String)>;

/// What a verb asks the launcher for.
#[derive(Clone, Copy)]
enum Command {
    Pause,
    Unpause,
    SoftReboot,
    Reset,
}

pub async fn pause(
    state: State<Subresources>,
    Path((_, ns, name)): VmiPath,
    body: Bytes,
) -> Result<StatusCode, StatusError> {
    verb(state, &ns, &name, &body, Command::Pause).await
}

pub async fn unpause(
    state: State<Subresources>,
    Path((_, ns, name)): VmiPath,
    body: Bytes,
) -> Result<StatusCode, StatusError> {
    verb(state, &ns, &name, &body, Command::Unpause).await
}

pub async fn soft_reboot(
    state: State<Subresources>,
    Path((_, ns, name)): VmiPath,
    body: Bytes,
) -> Result<StatusCode, StatusError> {
    verb(state, &ns, &name, &body, Command::SoftReboot).await
}

pub async fn reset(
    state: State<Subresources>,
    Path((_, ns, name)): VmiPath,
    body: Bytes,
) -> Result<StatusCode, StatusError> {
    verb(state, &ns, &name, &body, Command::Reset).await
}

async fn verb(
    State(state): State<Subresources>,
    namespace: &str,
    name: &str,
    body: &[u8],
    command: Command,
) -> Result<StatusCode, StatusError> {
    let dry_run = dry_run(&options(body)?);
    let vmi = fetch_vmi(&state.client, namespace, name).await?;
    check(&vmi, command)?;
    if dry_run {
        return Ok(StatusCode::OK);
    }
    let mut launcher = launcher(&state, &vmi).await?;
    let answer = match command {
        Command::Pause => launcher.pause_virtual_machine(EmptyRequest {}).await,
        Command::Unpause => launcher.unpause_virtual_machine(EmptyRequest {}).await,
        Command::SoftReboot => launcher.soft_reboot_virtual_machine(EmptyRequest {}).await,
        Command::Reset => launcher.reset_virtual_machine(EmptyRequest {}).await,
    };
    match answer.map(|r| r.into_inner()) {
        Ok(response) if response.success => Ok(StatusCode::OK),
        Ok(response) => Err(StatusError::internal(response.message)),
        Err(status) => Err(StatusError::internal(status.message().to_owned())),
    }
}

fn is_running(vmi: &VirtualMachineInstance) -> bool {
    vmi.phase() == Some(VirtualMachineInstancePhase::Running)
}

/// virt-api's checks before a verb is passed on.
fn check(vmi: &VirtualMachineInstance, command: Command) -> Result<(), StatusError> {
    let name = vmi.metadata.name.as_deref().unwrap_or_default();
    let paused = vmi.condition_holds(condition_types::PAUSED);
    let refusal = match command {
        Command::Pause if !is_running(vmi) => Some(VM_NOT_RUNNING),
        Command::Pause if paused => Some(VMI_ALREADY_PAUSED),
        Command::Unpause if !is_running(vmi) => Some(VMI_NOT_RUNNING),
        Command::Unpause if !paused => Some(VMI_NOT_PAUSED),
        Command::SoftReboot | Command::Reset if !is_running(vmi) => Some(VM_NOT_RUNNING),
        Command::SoftReboot if paused => Some("VMI is paused"),
        _ => None,
    };
    match refusal {
        Some(cause) => Err(StatusError::conflict(VMI, name, cause)),
        None => Ok(()),
    }
}

/// The guest agent's report, after virt-api's checks.
async fn guest(
    state: &Subresources,
    namespace: &str,
    name: &str,
) -> Result<GuestInfo, StatusError> {
    let vmi = fetch_vmi(&state.client, namespace, name).await?;
    if !is_running(&vmi) {
        return Err(StatusError::conflict(VMI, name, VMI_NOT_RUNNING));
    }
    if !vmi.condition_holds(condition_types::AGENT_CONNECTED) {
        return Err(StatusError::conflict(VMI, name, NO_GUEST_AGENT));
    }
    let mut launcher = launcher(state, &vmi).await?;
    let answer = launcher
        .get_guest_info(EmptyRequest {})
        .await
        .map_err(|s| StatusError::internal(s.message().to_owned()))?
        .into_inner();
    serde_json::from_str(&answer.guest_info_response)
        .map_err(|_| StatusError::conflict(VMI, name, NO_GUEST_AGENT))
}

pub async fn guest_os_info(
    State(state): State<Subresources>,
    Path((_, ns, name)): VmiPath,
) -> Result<Json<Value>, StatusError> {
    let info = guest(&state, &ns, &name).await?;
    Ok(Json(json!({
        "guestAgentVersion": info.guest_agent_version,
        "hostname": info.hostname,
        "os": info.os,
        "userList": info.user_list,
        "fsInfo": {"disks": info.fs_info},
    })))
}

pub async fn user_list(
    State(state): State<Subresources>,
    Path((_, ns, name)): VmiPath,
) -> Result<Json<Value>, StatusError> {
    let info = guest(&state, &ns, &name).await?;
    Ok(Json(json!({"metadata": {}, "items": info.user_list})))
}

pub async fn filesystem_list(
    State(state): State<Subresources>,
    Path((_, ns, name)): VmiPath,
) -> Result<Json<Value>, StatusError> {
    let info = guest(&state, &ns, &name).await?;
    Ok(Json(json!({"metadata": {}, "items": info.fs_info})))
}
