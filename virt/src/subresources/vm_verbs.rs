//! The VM verbs start, stop and restart: the request body read, the VM and its instance
//! fetched, [`lifecycle`](super::lifecycle) decides, and its patches are applied in order
//! (the instance's grace period first, rolled back if the VM's patch then fails). 202 once
//! accepted, as upstream.

use api::kubevirt::{VirtualMachine, VirtualMachineInstance};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use super::lifecycle::{
    self, LifecycleChange, LifecycleError, RestartRequest, StartRequest, StopRequest, VmPatchTarget,
};
use super::{StatusError, dry_run, options};

type VmPath = Path<(String, String, String)>;

pub async fn start(state: State<Client>, path: VmPath, body: Bytes) -> Response {
    verb(state, path, &body, |options, vm, vmi| {
        let request = StartRequest {
            paused: options["paused"].as_bool().unwrap_or(false),
            dry_run: dry_run(options),
        };
        lifecycle::start(vm, vmi, request)
    })
    .await
}

pub async fn stop(state: State<Client>, path: VmPath, body: Bytes) -> Response {
    verb(state, path, &body, |options, vm, vmi| {
        let request = StopRequest {
            grace_period: options["gracePeriod"].as_i64(),
            dry_run: dry_run(options),
        };
        lifecycle::stop(vm, vmi, request)
    })
    .await
}

pub async fn restart(state: State<Client>, path: VmPath, body: Bytes) -> Response {
    verb(state, path, &body, |options, vm, vmi| {
        let request = RestartRequest {
            grace_period_seconds: options["gracePeriodSeconds"].as_i64(),
            dry_run: dry_run(options),
        };
        lifecycle::restart(vm, vmi, request)
    })
    .await
}

/// Reads the options, fetches the VM and its instance, lets `decide` choose the change
/// and carries it out.
async fn verb(
    State(client): State<Client>,
    Path((_, ns, name)): VmPath,
    body: &[u8],
    decide: impl FnOnce(
        &Value,
        &VirtualMachine,
        Option<&VirtualMachineInstance>,
    ) -> Result<LifecycleChange, LifecycleError>,
) -> Response {
    let decided = async {
        let options = options(body)?;
        let (vm, vmi) = fetch(&client, &ns, &name).await?;
        Ok(decide(&options, &vm, vmi.as_ref()))
    };
    carry_out(&client, &ns, &name, decided.await).await
}

async fn fetch(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(VirtualMachine, Option<VirtualMachineInstance>), StatusError> {
    let vm = Api::<VirtualMachine>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?
        .ok_or_else(|| StatusError::not_found("virtualmachine", name))?;
    let vmi = Api::<VirtualMachineInstance>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?;
    Ok((vm, vmi))
}

async fn carry_out(
    client: &Client,
    namespace: &str,
    name: &str,
    decided: Result<Result<LifecycleChange, LifecycleError>, StatusError>,
) -> Response {
    let change = match decided {
        Ok(Ok(change)) => change,
        Ok(Err(refused)) => return refusal(&refused, name),
        Err(err) => return err.into_response(),
    };
    match apply(client, namespace, name, &change).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(refused) => refusal(&refused, name),
    }
}

fn refusal(refused: &LifecycleError, name: &str) -> Response {
    let code = StatusCode::from_u16(refused.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(refused.status(name))).into_response()
}

async fn apply(
    client: &Client,
    namespace: &str,
    name: &str,
    change: &LifecycleChange,
) -> Result<(), LifecycleError> {
    // A dry run stops at the decision, which has made every check that could refuse the
    // request (KubeVirt also sends the patch with dryRun; it would write nothing).
    if change.dry_run {
        return Ok(());
    }
    let params = PatchParams::default();
    let vms = Api::<VirtualMachine>::namespaced(client.clone(), namespace);
    let vmis = Api::<VirtualMachineInstance>::namespaced(client.clone(), namespace);
    if let Some(grace) = &change.vmi {
        json_patch(&vmis, name, &grace.patch, &params, false).await?;
    }
    let Some(vm_patch) = &change.vm else {
        return Ok(());
    };
    let status = vm_patch.target == VmPatchTarget::Status;
    let result = json_patch(&vms, name, &vm_patch.patch, &params, status).await;
    if result.is_err()
        && let Some(grace) = &change.vmi
        && let Err(err) = json_patch(&vmis, name, &grace.rollback, &params, false).await
    {
        tracing::warn!(vmi = %name, %err, "cannot put the grace period back");
    }
    result
}

async fn json_patch<K>(
    api: &Api<K>,
    name: &str,
    patch: &Value,
    params: &PatchParams,
    status: bool,
) -> Result<(), LifecycleError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let operations: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| LifecycleError::Internal(format!("a malformed patch: {e}")))?;
    let patch = Patch::<()>::Json(operations);
    let result = if status {
        api.patch_status(name, params, &patch).await
    } else {
        api.patch(name, params, &patch).await
    };
    result.map(|_| ()).map_err(|e| match e {
        kube::Error::Api(status) => LifecycleError::from_failed_patch(status.code, &status.message),
        other => LifecycleError::Internal(other.to_string()),
    })
}
