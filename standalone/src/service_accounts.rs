//! The `default` ServiceAccount of every namespace, as kube-controller-manager's
//! serviceaccount controller keeps it: made when a namespace appears and made again when it
//! is deleted, so that a pod naming no service account (or naming `default`, as Tekton's
//! runs do) has one to run as.

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

/// The service account every namespace has.
pub const DEFAULT: &str = "default";

/// Keeps a `default` ServiceAccount in every namespace until the watch ends.
pub async fn run(client: Client) {
    let namespaces = Api::<Namespace>::all(client.clone());
    let accounts = Api::<ServiceAccount>::all(client.clone());
    // A namespace wakes its own; a deleted `default` account wakes its namespace.
    let from_namespaces = watcher(namespaces, watcher::Config::default())
        .touched_objects()
        .filter_map(|n| async move { n.ok().map(|n| n.name_any()) })
        .boxed();
    let from_accounts = watcher(
        accounts,
        watcher::Config::default().fields("metadata.name=default"),
    )
    .filter_map(|event| async move {
        match event {
            Ok(watcher::Event::Delete(account)) => account.namespace(),
            _ => None,
        }
    })
    .boxed();
    let mut wakes = futures_util::stream::select(from_namespaces, from_accounts);
    while let Some(namespace) = wakes.next().await {
        if let Err(err) = ensure(&client, &namespace).await {
            tracing::warn!(%namespace, %err, "creating the default service account");
        }
    }
}

async fn ensure(client: &Client, namespace: &str) -> Result<(), kube::Error> {
    let ns = Api::<Namespace>::all(client.clone())
        .get_opt(namespace)
        .await?;
    let terminating = ns
        .as_ref()
        .is_none_or(|n| n.metadata.deletion_timestamp.is_some());
    if terminating {
        return Ok(());
    }
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), namespace);
    let account = ServiceAccount {
        metadata: kube::api::ObjectMeta {
            name: Some(DEFAULT.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err),
    }
}
