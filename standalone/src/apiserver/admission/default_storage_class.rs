//! The DefaultStorageClass admission plugin: a claim created without a class gets the
//! cluster's default class (the one annotated `storageclass.kubernetes.io/is-default-class`).

use serde_json::{Value, json};

use super::plugin::{AdmissionPlugin, Hook};
use super::request::{AdmissionRequest, Operation};
use crate::apiserver::errors::ApiError;
use crate::apiserver::object;

/// The plugin, as kube-apiserver names it.
pub fn plugin() -> AdmissionPlugin {
    let hook = Hook::Mutating(Box::new(|request, pvc| {
        admit(request, pvc)?;
        Ok(Vec::new())
    }));
    let claims = ("", "persistentvolumeclaims");
    AdmissionPlugin::built_in("DefaultStorageClass", claims, &[Operation::Create], hook)
}

/// A claim without a class gets the default.
fn admit(request: &AdmissionRequest, pvc: &mut Value) -> Result<(), ApiError> {
    if !pvc["spec"]["storageClassName"].is_null() {
        return Ok(());
    }
    let classes = request.list("storage.k8s.io", "storageclasses", None, usize::MAX)?;
    let default = classes.iter().find(|sc| {
        sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    });
    if let Some(sc) = default {
        pvc["spec"]["storageClassName"] = json!(object::name(sc));
    }
    Ok(())
}
