//! The DefaultStorageClass admission plugin: a claim created without a class gets the
//! cluster's default class (the one annotated `storageclass.kubernetes.io/is-default-class`).

use serde_json::{Value, json};

use crate::apiserver::errors::ApiError;
use crate::apiserver::object;
use crate::apiserver::resources::ResourceType;
use crate::apiserver::store::Store;

/// The DefaultStorageClass admission plugin: a claim without a class gets the default.
pub fn admit(store: &Store, rt: &ResourceType, pvc: &mut Value) -> Result<(), ApiError> {
    if !rt.group.is_empty()
        || rt.plural != "persistentvolumeclaims"
        || !pvc["spec"]["storageClassName"].is_null()
    {
        return Ok(());
    }
    let (classes, _) = store.list("storage.k8s.io/storageclasses", None, None)?;
    let default = classes.iter().find(|sc| {
        sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    });
    if let Some(sc) = default {
        pvc["spec"]["storageClassName"] = json!(object::name(sc));
    }
    Ok(())
}
