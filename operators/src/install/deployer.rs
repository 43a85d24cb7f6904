//! Putting an operator's rendered manifests ([`super::manifests`]) on the cluster and
//! taking them off again, whatever their kinds.

use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use serde_json::Value;

use super::manifests::object_key;

/// Puts each of `objects` in place as `manager`. Their `caBundle`s are the components' to
/// fill in, so APIServices and webhook configurations are only created when missing, as are
/// claims, whose spec cannot change once bound; everything else is applied, so a hand edit
/// of a field the manifests set is put back.
pub async fn ensure_all(
    client: &Client,
    manager: &str,
    objects: &[Value],
) -> Result<(), kube::Error> {
    for object in objects {
        ensure(client, manager, object).await?;
    }
    Ok(())
}

async fn ensure(client: &Client, manager: &str, object: &Value) -> Result<(), kube::Error> {
    let api = api_for(client, object);
    let (kind, _, name) = object_key(object);
    let dynamic: DynamicObject =
        serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
    if matches!(
        kind.as_str(),
        "APIService"
            | "MutatingWebhookConfiguration"
            | "ValidatingWebhookConfiguration"
            | "PersistentVolumeClaim"
            | "Job"
    ) {
        return match api.create(&PostParams::default(), &dynamic).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(err) => Err(err),
        };
    }
    api.patch(
        &name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&dynamic),
    )
    .await?;
    Ok(())
}

/// Deletes each of `objects`, the last first; those already gone are fine.
pub async fn remove_all(client: &Client, objects: &[Value]) -> Result<(), kube::Error> {
    for object in objects.iter().rev() {
        let (_, _, name) = object_key(object);
        match api_for(client, object)
            .delete(&name, &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// The API of `object`'s kind, in its namespace if it has one.
fn api_for(client: &Client, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (kind, namespace, _) = object_key(object);
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &kind));
    if namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), &namespace, &resource)
    }
}
