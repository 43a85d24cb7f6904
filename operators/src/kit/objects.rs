//! Object writes that every controller makes alike: a delete that is done when the object is
//! already gone, and merge patches of annotations and of the status subresource.

use std::collections::BTreeMap;
use std::fmt::Debug;

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
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
}
