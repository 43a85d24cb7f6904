//! Object writes that every controller makes alike: a delete that is done when the object is
//! already gone, merge patches of annotations and of the status subresource, and a status
//! replaced only if the object is as it was read.

use std::collections::BTreeMap;
use std::fmt::Debug;

use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// Whether `err` is the API server's answer with HTTP status `code`.
pub fn is_status(err: &kube::Error, code: u16) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == code)
}

/// Deletes object `name` (its dependents in the background); one already gone is deleted.
/// Returns whether it was there.
pub async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str) -> Result<bool, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(err) if is_status(&err, 404) => Ok(false),
        Err(err) => Err(err),
    }
}

/// Merges `annotations` into object `name`'s; returns the object as patched.
pub async fn patch_annotations<K>(
    api: &Api<K>,
    name: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<K, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    let patch = json!({ "metadata": { "annotations": annotations } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// Merges `status` into object `name`'s status subresource; returns the object as patched.
pub async fn patch_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<K, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let patch = json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// A JSON patch replacing the status of `object`, which fails (409 or 422) when the object
/// changed since it was read.
pub fn status_replace_patch<K: Resource, S: Serialize>(
    object: &K,
    status: &S,
) -> Result<Patch<()>, kube::Error> {
    let mut ops = Vec::new();
    if let Some(rv) = &object.meta().resource_version {
        ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
    }
    ops.push(json!({"op": "add", "path": "/status", "value": status}));
    let patch =
        serde_json::from_value(serde_json::Value::Array(ops)).map_err(kube::Error::SerdeError)?;
    Ok(Patch::Json(patch))
}

/// Replaces the status of `object` unless it changed since it was read or is gone, which are
/// left to the next reconcile; whether it was written.
pub async fn replace_status_if_unchanged<K, S>(
    api: &Api<K>,
    object: &K,
    status: &S,
) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let patch = status_replace_patch(object, status)?;
    match api
        .patch_status(&object.name_any(), &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_status(&e, 404) || is_status(&e, 409) || is_status(&e, 422) => {
            tracing::debug!(name = %object.name_any(), error = %e, "status not written; it is looked at again");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_told_apart_by_code() {
        let not_found = kube::Error::Api(
            kube::core::Status::failure("gone", "NotFound")
                .with_code(404)
                .boxed(),
        );
        assert!(is_status(&not_found, 404));
        assert!(!is_status(&not_found, 409));
    }

    #[test]
    fn a_status_replacement_tests_the_resource_version_first() {
        let mut object = k8s_openapi::api::core::v1::ConfigMap::default();
        object.metadata.resource_version = Some("7".into());
        let Patch::Json(patch) = status_replace_patch(&object, &json!({"phase": "Ready"})).unwrap()
        else {
            panic!("a JSON patch");
        };
        assert_eq!(
            serde_json::to_value(patch).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/status", "value": {"phase": "Ready"}}
            ])
        );
    }
}
