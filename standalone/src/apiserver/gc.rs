//! The garbage collector and namespace finalizer: deletes objects whose owners are all
//! gone, carries out foreground deletion (dependents first, then the owner), and empties a
//! terminating namespace before removing it. It follows the store's change stream on its
//! own thread and sweeps everything at start and whenever it fell behind.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::errors::ApiError;
use super::object;
use super::objects::{FOREGROUND_FINALIZER, Objects, Propagation};
use super::store::{ChangeEvent, EventType, ObjectKey};

/// Runs the collector until `shutdown` changes. Its database work runs on blocking threads.
pub fn spawn(objects: Arc<Objects>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut changes = objects.store.subscribe();
    let collector = Arc::new(GarbageCollector { objects });
    tokio::spawn(async move {
        let run = |job: Job| {
            let collector = collector.clone();
            tokio::task::spawn_blocking(move || match job {
                Job::Sweep => collector.sweep(),
                Job::Change(event) => collector.on_change(&event),
            })
        };
        let _ = run(Job::Sweep).await;
        loop {
            let job = tokio::select! {
                _ = shutdown.changed() => return,
                change = changes.recv() => match change {
                    Ok(event) => Job::Change(event),
                    Err(RecvError::Lagged(_)) => Job::Sweep,
                    Err(RecvError::Closed) => return,
                },
            };
            let _ = run(job).await;
        }
    });
}

enum Job {
    Sweep,
    Change(Arc<ChangeEvent>),
}

struct GarbageCollector {
    objects: Arc<Objects>,
}

impl GarbageCollector {
    fn on_change(&self, event: &ChangeEvent) {
        let result = match event.kind {
            EventType::Deleted => self.after_delete(event),
            _ if object::is_deleting(&event.object) => {
                self.progress_deletion(&event.resource, &event.object)
            }
            _ => Ok(()),
        };
        if let Err(err) = result {
            tracing::warn!(resource = %event.resource, %err, "garbage collection failed");
        }
    }

    fn sweep(&self) {
        if let Err(err) = self
            .collect_orphans()
            .and_then(|_| self.progress_namespaces())
        {
            tracing::warn!(%err, "garbage collection sweep failed");
        }
    }

    fn after_delete(&self, event: &ChangeEvent) -> Result<(), ApiError> {
        self.collect_orphans()?;
        let owners = event.object["metadata"]["ownerReferences"]
            .as_array()
            .cloned();
        for owner in owners.into_iter().flatten() {
            let Some(uid) = owner["uid"].as_str() else {
                continue;
            };
            if let Some(key) = self.objects.store.find_uid(uid)? {
                if let Some(owner) =
                    self.objects
                        .store
                        .get(&key.resource, &key.namespace, &key.name)?
                {
                    if object::is_deleting(&owner) {
                        self.progress_deletion(&key.resource, &owner)?;
                    }
                }
            }
        }
        if !event.namespace.is_empty() {
            if let Some(ns) = self
                .objects
                .store
                .get("/namespaces", "", &event.namespace)?
            {
                if object::is_deleting(&ns) {
                    self.progress_namespace(&event.namespace)?;
                }
            }
        }
        Ok(())
    }

    fn progress_deletion(&self, resource: &str, owner: &Value) -> Result<(), ApiError> {
        if resource == "/namespaces" {
            return self.progress_namespace(object::name(owner));
        }
        if !object::finalizers(owner)
            .iter()
            .any(|f| f == FOREGROUND_FINALIZER)
        {
            return Ok(());
        }
        let dependents = self.objects.store.dependents(object::uid(owner))?;
        for key in &dependents {
            self.delete(key)?;
        }
        if dependents.is_empty() {
            let ns = owner["metadata"]["namespace"].as_str().unwrap_or_default();
            if let Some((rt, version)) = self.objects.type_of_key(resource) {
                self.objects.remove_finalizer(
                    &rt,
                    &version,
                    ns,
                    object::name(owner),
                    FOREGROUND_FINALIZER,
                )?;
            }
        }
        Ok(())
    }

    fn collect_orphans(&self) -> Result<(), ApiError> {
        for key in self.objects.store.orphans()? {
            self.delete(&key)?;
        }
        Ok(())
    }

    fn progress_namespaces(&self) -> Result<(), ApiError> {
        let (namespaces, _) = self.objects.store.list("/namespaces", None, None)?;
        for ns in namespaces.iter().filter(|ns| object::is_deleting(ns)) {
            self.progress_namespace(object::name(ns))?;
        }
        Ok(())
    }

    /// Deletes what is left in a terminating namespace; once it is empty, the namespace.
    fn progress_namespace(&self, namespace: &str) -> Result<(), ApiError> {
        let contents = self.objects.store.keys_in_namespace(namespace)?;
        for (resource, name) in &contents {
            self.delete(&ObjectKey {
                resource: resource.clone(),
                namespace: namespace.to_string(),
                name: name.clone(),
            })?;
        }
        if contents.is_empty() {
            if let Some((rt, version)) = self.objects.type_of_key("/namespaces") {
                ignore_missing(self.objects.delete(
                    &rt,
                    &version,
                    "",
                    namespace,
                    Propagation::Background,
                    None,
                ))?;
            }
        }
        Ok(())
    }

    fn delete(&self, key: &ObjectKey) -> Result<(), ApiError> {
        let Some(current) = self
            .objects
            .store
            .get(&key.resource, &key.namespace, &key.name)?
        else {
            return Ok(());
        };
        if object::is_deleting(&current) {
            return Ok(());
        }
        let Some((rt, version)) = self.objects.type_of_key(&key.resource) else {
            return Ok(());
        };
        tracing::debug!(resource = %key.resource, namespace = %key.namespace, name = %key.name, "collecting");
        ignore_missing(self.objects.delete(
            &rt,
            &version,
            &key.namespace,
            &key.name,
            Propagation::Background,
            None,
        ))
    }
}

fn ignore_missing(result: Result<Value, ApiError>) -> Result<(), ApiError> {
    match result {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(err) => Err(err),
    }
}
