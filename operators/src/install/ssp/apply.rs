//! The SSP operator's reads and writes: the objects its plans look at, listed as JSON, and
//! the planned changes carried out (creates tolerate an object that appeared meanwhile,
//! deletes one already gone; replaces are conditional on the version read).

use std::collections::BTreeSet;

use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;

use super::boot_sources::{GOLDEN_IMAGES_NAMESPACE, Observed};
use super::plan::{Action, Change, Kind};
use super::{Error, rbac};
use crate::kit::{delete_ignoring_missing, is_status};

/// The name of the Template CRD, as a missing CRD is reported.
pub const TEMPLATE_CRD: &str = "templates.template.openshift.io";

fn api(client: &Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = kind.resource();
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Lists objects of `kind` (in `namespace`, else everywhere) as JSON with their type set.
pub async fn list(
    client: &Client,
    kind: Kind,
    namespace: Option<&str>,
) -> Result<Vec<Value>, Error> {
    let resource = kind.resource();
    let list = api(client, kind, namespace)
        .list(&ListParams::default())
        .await?;
    list.items
        .into_iter()
        .map(|item| {
            let mut value = serde_json::to_value(item)?;
            value["apiVersion"] = Value::String(resource.api_version.clone());
            value["kind"] = Value::String(resource.kind.clone());
            Ok(value)
        })
        .collect()
}

/// The Templates in `namespace`; an error naming the CRD when Templates are not served.
pub async fn templates(client: &Client, namespace: &str) -> Result<Vec<Value>, Error> {
    match list(client, Kind::Template, Some(namespace)).await {
        Err(Error::Kube(err)) if is_status(&err, 404) => {
            Err(Error::MissingCrds(vec![TEMPLATE_CRD.to_owned()]))
        }
        other => other,
    }
}

/// What the boot sources plan looks at.
pub async fn boot_sources(client: &Client) -> Result<Observed, Error> {
    let namespace = get(client, Kind::Namespace, None, GOLDEN_IMAGES_NAMESPACE).await?;
    let crons = list(client, Kind::DataImportCron, None).await?;
    let (data_sources, claims) = if namespace.is_some() {
        let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            Api::namespaced(client.clone(), GOLDEN_IMAGES_NAMESPACE);
        let claims: BTreeSet<String> = claims
            .list_metadata(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        (
            list(client, Kind::DataSource, Some(GOLDEN_IMAGES_NAMESPACE)).await?,
            claims,
        )
    } else {
        Default::default()
    };
    Ok(Observed {
        namespace,
        crons,
        data_sources,
        claims,
    })
}

/// One object of `kind` by name, as JSON with its type set.
pub async fn get(
    client: &Client,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<Value>, Error> {
    let resource = kind.resource();
    let Some(object) = api(client, kind, namespace).get_opt(name).await? else {
        return Ok(None);
    };
    let mut value = serde_json::to_value(object)?;
    value["apiVersion"] = Value::String(resource.api_version.clone());
    value["kind"] = Value::String(resource.kind.clone());
    Ok(Some(value))
}

/// The golden image roles as they are.
pub async fn roles(client: &Client) -> Result<rbac::Observed, Error> {
    let golden = Some(GOLDEN_IMAGES_NAMESPACE);
    Ok(rbac::Observed {
        view_role: get(client, Kind::Role, golden, rbac::VIEW_ROLE).await?,
        view_binding: get(client, Kind::RoleBinding, golden, rbac::VIEW_ROLE).await?,
        edit_role: get(client, Kind::ClusterRole, None, rbac::EDIT_CLUSTER_ROLE).await?,
    })
}

/// Carries out one planned change.
pub async fn apply(client: &Client, action: &Action) -> Result<(), Error> {
    let api = api(client, action.kind, action.namespace.as_deref());
    match &action.change {
        Change::Create(object) => {
            let object: DynamicObject = serde_json::from_value(object.clone())?;
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => tracing::info!(resource = %action.describe(), "created"),
                Err(err) if is_status(&err, 409) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Change::Replace(object) => {
            let object: DynamicObject = serde_json::from_value(object.clone())?;
            api.replace(&action.name, &PostParams::default(), &object)
                .await?;
            tracing::info!(resource = %action.describe(), "updated");
        }
        Change::Delete => {
            if delete_ignoring_missing(&api, &action.name).await? {
                tracing::info!(resource = %action.describe(), "deleted");
            }
        }
    }
    Ok(())
}

/// Carries out every planned change, in order.
pub async fn apply_all(client: &Client, actions: &[Action]) -> Result<(), Error> {
    for action in actions {
        apply(client, action).await?;
    }
    Ok(())
}
