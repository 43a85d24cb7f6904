//! Writes to a Pod object: its finalizer released, patches guarded by its resourceVersion,
//! and its status.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{AgentError, POD_FINALIZER, RELEASE_ATTEMPTS};

/// Drops this agent's finalizer from `pod`, if it holds one.
pub(super) async fn release(client: &Client, pod: &Pod) {
    let result = patch_guarded(client, pod, |current| {
        if !current.finalizers().iter().any(|f| f == POD_FINALIZER) {
            return None;
        }
        let finalizers: Vec<&String> = current
            .finalizers()
            .iter()
            .filter(|f| *f != POD_FINALIZER)
            .collect();
        Some(json!({"metadata": {"finalizers": finalizers}}))
    })
    .await;
    if let Err(err) = result {
        tracing::warn!(pod = %pod.name_any(), %err, "cannot release the pod");
    }
}

/// Merges the patch `change` makes of the pod as it is now (nothing when it makes none),
/// guarded by that resourceVersion: a concurrent change (a deletion, a status write, another
/// finalizer) makes it read the pod again and retry rather than overwrite it. The pod as
/// patched, or `None` when it is gone (or another pod of that name) or needs no change.
pub(super) async fn patch_guarded(
    client: &Client,
    pod: &Pod,
    change: impl Fn(&Pod) -> Option<Value>,
) -> Result<Option<Pod>, kube::Error> {
    let api = Api::<Pod>::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    for _ in 0..RELEASE_ATTEMPTS {
        let current = match api.get_opt(&pod.name_any()).await? {
            Some(current) if current.uid() == pod.uid() => current,
            _ => return Ok(None),
        };
        let Some(mut patch) = change(&current) else {
            return Ok(Some(current));
        };
        patch["metadata"]["resourceVersion"] = json!(current.resource_version());
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(patched) => return Ok(Some(patched)),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
            Err(err) => return Err(err),
        }
    }
    Err(kube::Error::Api(
        kube::core::Status::failure(
            &format!("pod {} keeps changing", pod.name_any()),
            "Conflict",
        )
        .with_code(409)
        .boxed(),
    ))
}

pub(super) async fn patch_status(
    client: &Client,
    pod: &Pod,
    status: &Value,
) -> Result<(), AgentError> {
    let api = Api::<Pod>::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(status),
    )
    .await?;
    Ok(())
}

pub(super) fn now() -> String {
    rfc3339(jiff::Timestamp::now())
}

pub(super) use api::meta_time::rfc3339;
