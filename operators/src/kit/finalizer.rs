//! Finalizers a controller puts on the objects it reconciles and takes off when it has
//! cleaned up. Every write is conditional on what was read (the resourceVersion, or the
//! finalizer list itself), so a concurrent change conflicts instead of being overwritten.

use std::fmt::Debug;

use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::objects::is_status;

/// Whether `object` carries `finalizer`.
pub fn has<K: Resource>(object: &K, finalizer: &str) -> bool {
    object.finalizers().iter().any(|f| f == finalizer)
}

/// `finalizers` with `finalizer` added (`present`) or taken off, keeping the others in order;
/// `None` when it is so already.
pub fn with(finalizers: &[String], finalizer: &str, present: bool) -> Option<Vec<String>> {
    let has = finalizers.iter().any(|f| f == finalizer);
    match (has, present) {
        (false, true) => {
            let mut list = finalizers.to_vec();
            list.push(finalizer.to_string());
            Some(list)
        }
        (true, false) => Some(
            finalizers
                .iter()
                .filter(|f| *f != finalizer)
                .cloned()
                .collect(),
        ),
        _ => None,
    }
}

/// The merge patch that sets an object's finalizers, conditional on `resource_version`; the
/// last finalizer off removes the list.
pub fn merge_patch(resource_version: Option<&str>, finalizers: &[String]) -> Value {
    let list = if finalizers.is_empty() {
        Value::Null
    } else {
        json!(finalizers)
    };
    json!({"metadata": {"finalizers": list, "resourceVersion": resource_version}})
}

/// The JSON patch that adds (`add`) or removes `finalizer`, failing if the finalizer list
/// changed since `meta` was read (or, with no list yet, the resourceVersion). It is put
/// last when added.
pub fn json_patch(meta: &ObjectMeta, finalizer: &str, add: bool) -> Value {
    let current = meta.finalizers.clone();
    let mut next: Vec<String> = current
        .iter()
        .flatten()
        .filter(|f| f.as_str() != finalizer)
        .cloned()
        .collect();
    if add {
        next.push(finalizer.to_string());
    }
    match current {
        Some(current) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "replace", "path": "/metadata/finalizers", "value": next},
        ]),
        None => {
            let mut ops = Vec::new();
            if let Some(rv) = &meta.resource_version {
                ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
            }
            ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": next}));
            Value::Array(ops)
        }
    }
}

/// Adds `finalizer` to `object` (`present`) or takes it off, against the version that was
/// read; returns the object as patched, `None` when there was nothing to change.
pub async fn set<K>(
    api: &Api<K>,
    object: &K,
    finalizer: &str,
    present: bool,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let Some(finalizers) = with(object.finalizers(), finalizer, present) else {
        return Ok(None);
    };
    let patch = merge_patch(object.meta().resource_version.as_deref(), &finalizers);
    let patched = api
        .patch(
            &object.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(Some(patched))
}

/// Takes `finalizer` off `object` as it is now on the server (the observed copy may be
/// older). An object that is gone, or replaced by another of its name, is left alone.
pub async fn remove_from_latest<K>(
    api: &Api<K>,
    object: &K,
    finalizer: &str,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if !has(object, finalizer) {
        return Ok(());
    }
    let Some(current) = api.get_opt(&object.name_any()).await? else {
        return Ok(());
    };
    if current.meta().uid != object.meta().uid {
        return Ok(());
    }
    match set(api, &current, finalizer, false).await {
        Ok(_) => Ok(()),
        Err(err) if is_status(&err, 404) => Ok(()),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FINALIZER: &str = "example.com/cleanup";

    #[test]
    fn the_finalizer_is_added_and_removed_keeping_the_others() {
        let others = vec!["example.com/keep".to_string()];
        let added = with(&others, FINALIZER, true).expect("added");
        assert_eq!(
            added,
            vec!["example.com/keep".to_string(), FINALIZER.into()]
        );
        assert_eq!(with(&added, FINALIZER, true), None);
        assert_eq!(with(&added, FINALIZER, false), Some(others.clone()));
        assert_eq!(with(&others, FINALIZER, false), None);
    }

    #[test]
    fn finalizer_patches_are_conditional_on_the_resource_version() {
        let patch = merge_patch(Some("7"), &[FINALIZER.to_string()]);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["metadata"]["finalizers"], json!([FINALIZER]));
        // The last finalizer off removes the list.
        assert!(merge_patch(Some("7"), &[]).get("metadata").unwrap()["finalizers"].is_null());
    }

    #[test]
    fn json_patches_test_the_list_they_replace() {
        let meta = ObjectMeta {
            finalizers: Some(vec!["example.com/keep".into()]),
            resource_version: Some("3".into()),
            ..Default::default()
        };
        let patch = json_patch(&meta, FINALIZER, true);
        assert_eq!(patch[0]["op"], "test");
        assert_eq!(patch[0]["value"], json!(["example.com/keep"]));
        assert_eq!(patch[1]["value"], json!(["example.com/keep", FINALIZER]));
        let bare = ObjectMeta {
            resource_version: Some("3".into()),
            ..Default::default()
        };
        let patch = json_patch(&bare, FINALIZER, true);
        assert_eq!(patch[0]["path"], "/metadata/resourceVersion");
        assert_eq!(patch[1]["value"], json!([FINALIZER]));
    }
}
