//! The DataSource controller (CDI's datasource-controller): a DataSource names a PVC or a
//! VolumeSnapshot (or another DataSource) that DataVolumes clone through `sourceRef`; this
//! controller resolves it into `status.source` and keeps its `Ready` condition: a PVC is
//! ready once the DataVolume that fills it succeeded (or, without one, once it exists), a
//! snapshot once it is ready to use, a pointer when the DataSource it points at is.

use std::sync::Arc;
use std::time::Duration;

use api::cdi::datasource::{CONDITION_READY, CdiCondition, DataSourceSource, DataSourceStatus};
use api::cdi::{DataSource, DataVolume};
use api::common::ConditionStatus;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::kit::{self, conditions::Heartbeat};

/// How often a DataSource is looked at again without a change (snapshots are not watched).
const RESYNC: Duration = Duration::from_secs(60);

/// Errors of the DataSource controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
}

/// What the source of a DataSource was found to be.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// No pvc, snapshot or dataSource is set.
    NoSource,
    /// The PVC is filled by a DataVolume in this phase (`Succeeded` when done).
    DataVolume(String),
    /// The PVC exists and no DataVolume fills it.
    PvcOnly,
    /// Neither the PVC nor a DataVolume of that name exists.
    PvcNotFound,
    /// The snapshot exists; whether it is ready to use.
    Snapshot { ready: bool },
    /// The snapshot does not exist (or snapshots are not served).
    SnapshotNotFound,
    /// The DataSource pointed at, with its status.
    Pointer(Option<DataSourceStatus>),
    /// The DataSource pointed at does not exist.
    PointerNotFound,
}

/// The `Ready` condition's status, reason and message for what was observed, in CDI's words.
pub fn readiness(observed: &Observed) -> (ConditionStatus, String, String) {
    const READY: &str = "DataSource is ready to be consumed";
    let (status, reason, message) = match observed {
        Observed::NoSource => (false, "NoSource", "No source PVC set".to_string()),
        Observed::DataVolume(phase) if phase == "Succeeded" => (true, "Ready", READY.into()),
        Observed::DataVolume(phase) => (
            false,
            phase.as_str(),
            format!("Import DataVolume phase {phase}"),
        ),
        Observed::PvcOnly => (true, "Ready", READY.into()),
        Observed::PvcNotFound => (false, "NotFound", "PVC not found".into()),
        Observed::Snapshot { ready: true } => (true, "Ready", READY.into()),
        Observed::Snapshot { ready: false } => (
            false,
            "SnapshotNotReady",
            "Snapshot phase is not ready".into(),
        ),
        Observed::SnapshotNotFound => (false, "NotFound", "Snapshot not found".into()),
        Observed::Pointer(status) => {
            let ready = status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_READY));
            return match ready {
                Some(c) => (
                    c.status,
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                ),
                None => (
                    ConditionStatus::False,
                    "NotReady".into(),
                    "The referenced DataSource is not ready".into(),
                ),
            };
        }
        Observed::PointerNotFound => (false, "NotFound", "DataSource not found".into()),
    };
    let status = if status {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    (status, reason.to_string(), message)
}

/// The status to write: the resolved source (the pointee's for a pointer) and the Ready
/// condition, its transition time kept while its status holds.
pub fn desired_status(ds: &DataSource, observed: &Observed, now: &Time) -> DataSourceStatus {
    let source = match observed {
        Observed::Pointer(status) => status.as_ref().and_then(|s| s.source.clone()),
        _ => Some(ds.spec.source.clone()),
    };
    let (status, reason, message) = readiness(observed);
    // Only the Ready condition is written; CDI stamps its heartbeat at every pass.
    let mut conditions: Vec<CdiCondition> = ds
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_READY))
        .cloned()
        .into_iter()
        .collect();
    kit::conditions::set(
        &mut conditions,
        CONDITION_READY,
        status,
        Some(&reason),
        Some(&message),
        Heartbeat::Always,
        now,
    );
    DataSourceStatus {
        source,
        conditions: Some(conditions),
    }
}

/// Conditions with their heartbeats left out: a heartbeat alone is no reason to write.
pub(crate) fn without_heartbeats(
    conditions: &Option<Vec<CdiCondition>>,
) -> Option<Vec<CdiCondition>> {
    conditions.clone().map(|mut conditions| {
        for c in &mut conditions {
            c.last_heartbeat_time = None;
        }
        conditions
    })
}

/// A source as a merge patch: every kind named, the unset ones null, so that switching
/// from one kind to another removes the old one.
pub(crate) fn source_patch(source: &DataSourceSource) -> serde_json::Value {
    json!({
        "pvc": source.pvc,
        "snapshot": source.snapshot,
        "dataSource": source.data_source,
    })
}

/// The namespace a source reference means: its own, else the DataSource's.
fn namespace_of<'a>(reference: &'a str, ds: &'a DataSource) -> String {
    if reference.is_empty() {
        ds.namespace().unwrap_or_default()
    } else {
        reference.to_string()
    }
}

struct Context {
    client: Client,
}

async fn observe(ds: &DataSource, client: &Client) -> Result<Observed, Error> {
    let DataSourceSource {
        pvc,
        snapshot,
        data_source,
    } = &ds.spec.source;
    if let Some(pvc) = pvc {
        let ns = namespace_of(&pvc.namespace, ds);
        let dv = Api::<DataVolume>::namespaced(client.clone(), &ns)
            .get_opt(&pvc.name)
            .await?;
        if let Some(dv) = dv {
            let phase = dv
                .status
                .and_then(|s| s.phase)
                .map(|p| p.as_str().to_string())
                .unwrap_or_default();
            return Ok(Observed::DataVolume(phase));
        }
        let claim = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns)
            .get_opt(&pvc.name)
            .await?;
        return Ok(if claim.is_some() {
            Observed::PvcOnly
        } else {
            Observed::PvcNotFound
        });
    }
    if let Some(snapshot) = snapshot {
        let ns = namespace_of(&snapshot.namespace, ds);
        let resource = crate::kit::volume_snapshot_resource();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
        return Ok(match api.get_opt(&snapshot.name).await {
            Ok(Some(found)) => Observed::Snapshot {
                ready: found.data["status"]["readyToUse"] == json!(true),
            },
            Ok(None) => Observed::SnapshotNotFound,
            // A cluster without the snapshot API: there is no such snapshot either.
            Err(kube::Error::Api(e)) if e.code == 404 => Observed::SnapshotNotFound,
            Err(e) => return Err(e.into()),
        });
    }
    if let Some(pointer) = data_source {
        let ns = namespace_of(&pointer.namespace, ds);
        let pointee = Api::<DataSource>::namespaced(client.clone(), &ns)
            .get_opt(&pointer.name)
            .await?;
        return Ok(match pointee {
            Some(pointee) => Observed::Pointer(pointee.status),
            None => Observed::PointerNotFound,
        });
    }
    Ok(Observed::NoSource)
}

async fn reconcile(ds: Arc<DataSource>, ctx: Arc<Context>) -> Result<Action, Error> {
    let observed = observe(&ds, &ctx.client).await?;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut status = desired_status(&ds, &observed, &now);
    let unchanged = ds.status.as_ref().is_some_and(|current| {
        current.source == status.source
            && without_heartbeats(&current.conditions) == without_heartbeats(&status.conditions)
    });
    if !unchanged {
        if let Some(conditions) = status.conditions.as_mut() {
            conditions.retain(|c| c.type_ == CONDITION_READY);
        }
        let namespace = ds.namespace().unwrap_or_default();
        Api::<DataSource>::namespaced(ctx.client.clone(), &namespace)
            .patch_status(
                &ds.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "status": {
                        "source": status.source.as_ref().map(source_patch),
                        "conditions": status.conditions,
                    }
                })),
            )
            .await?;
    }
    Ok(Action::requeue(RESYNC))
}

fn error_policy(ds: Arc<DataSource>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(datasource = %ds.name_any(), %err, "DataSource reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// The DataSources of `store` whose source is the object `namespace/name` (a PVC or the
/// DataVolume filling it, a VolumeSnapshot, or a DataSource they point at).
fn referring(store: &Store<DataSource>, namespace: &str, name: &str) -> Vec<ObjectRef<DataSource>> {
    store
        .state()
        .iter()
        .filter(|ds| {
            let source = &ds.spec.source;
            let names = |ns: &str, n: &str| n == name && namespace_of(ns, ds) == namespace;
            source
                .pvc
                .as_ref()
                .is_some_and(|p| names(&p.namespace, &p.name))
                || source
                    .data_source
                    .as_ref()
                    .is_some_and(|p| names(&p.namespace, &p.name))
                || source
                    .snapshot
                    .as_ref()
                    .is_some_and(|s| names(&s.namespace, &s.name))
        })
        .map(|ds| ObjectRef::from_obj(ds.as_ref()))
        .collect()
}

/// Runs the DataSource controller until its watches end.
pub async fn run(client: Client) {
    let sources: Api<DataSource> = Api::all(client.clone());
    let controller = Controller::new(sources.clone(), watcher::Config::default());
    let store = controller.store();
    let by_pvc = store.clone();
    let by_pointer = store.clone();
    let by_snapshot = store.clone();
    let snapshots = crate::kit::volume_snapshot_resource();
    let ctx = Arc::new(Context {
        client: client.clone(),
    });
    controller
        .watches(
            Api::<DataVolume>::all(client.clone()),
            watcher::Config::default(),
            move |dv| referring(&store, &dv.namespace().unwrap_or_default(), &dv.name_any()),
        )
        .watches(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            watcher::Config::default(),
            move |pvc| {
                referring(
                    &by_pvc,
                    &pvc.namespace().unwrap_or_default(),
                    &pvc.name_any(),
                )
            },
        )
        .watches_with(
            Api::<DynamicObject>::all_with(client.clone(), &snapshots),
            snapshots.clone(),
            watcher::Config::default(),
            move |snapshot| {
                referring(
                    &by_snapshot,
                    &snapshot.namespace().unwrap_or_default(),
                    &snapshot.name_any(),
                )
            },
        )
        .watches(sources, watcher::Config::default(), move |ds| {
            referring(
                &by_pointer,
                &ds.namespace().unwrap_or_default(),
                &ds.name_any(),
            )
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "DataSource controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::datasource::{DataSourceRefSourceDataSource, DataSourceSpec};
    use api::cdi::datavolume::DataVolumeSourcePvc;

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
    }

    fn pvc_source(namespace: &str) -> DataSource {
        let mut ds = DataSource::new(
            "fedora",
            DataSourceSpec {
                source: DataSourceSource {
                    pvc: Some(DataVolumeSourcePvc {
                        namespace: namespace.into(),
                        name: "fedora-golden".into(),
                    }),
                    ..Default::default()
                },
            },
        );
        ds.metadata.namespace = Some("images".into());
        ds
    }

    #[test]
    fn readiness_follows_the_datavolume_then_the_pvc() {
        let ready = |o: Observed| readiness(&o);
        assert_eq!(
            ready(Observed::DataVolume("ImportInProgress".into())),
            (
                ConditionStatus::False,
                "ImportInProgress".into(),
                "Import DataVolume phase ImportInProgress".into()
            )
        );
        assert_eq!(
            ready(Observed::DataVolume("Succeeded".into())).0,
            ConditionStatus::True
        );
        assert_eq!(ready(Observed::PvcOnly).1, "Ready");
        assert_eq!(
            ready(Observed::PvcNotFound),
            (
                ConditionStatus::False,
                "NotFound".into(),
                "PVC not found".into()
            )
        );
        assert_eq!(ready(Observed::NoSource).1, "NoSource");
        assert_eq!(
            ready(Observed::Snapshot { ready: false }).1,
            "SnapshotNotReady"
        );
    }

    #[test]
    fn status_keeps_the_transition_time_while_readiness_holds() {
        let mut ds = pvc_source("");
        let first = desired_status(&ds, &Observed::PvcNotFound, &at(100));
        assert_eq!(first.source, Some(ds.spec.source.clone()));
        ds.status = Some(first);
        let again = desired_status(&ds, &Observed::DataVolume("Pending".into()), &at(200));
        let condition = &again.conditions.as_ref().unwrap()[0];
        assert_eq!(condition.last_transition_time, Some(at(100)));
        assert_eq!(condition.reason.as_deref(), Some("Pending"));
        ds.status = Some(again);
        let done = desired_status(&ds, &Observed::DataVolume("Succeeded".into()), &at(300));
        let condition = &done.conditions.as_ref().unwrap()[0];
        assert_eq!(condition.status, ConditionStatus::True);
        assert_eq!(condition.last_transition_time, Some(at(300)));
    }

    #[test]
    fn a_pointer_takes_the_source_and_readiness_of_its_target() {
        let target = pvc_source("images");
        let target_status = desired_status(&target, &Observed::PvcOnly, &at(1));
        let pointer = DataSource::new(
            "fedora-latest",
            DataSourceSpec {
                source: DataSourceSource {
                    data_source: Some(DataSourceRefSourceDataSource {
                        namespace: "images".into(),
                        name: "fedora".into(),
                    }),
                    ..Default::default()
                },
            },
        );
        let status = desired_status(&pointer, &Observed::Pointer(Some(target_status)), &at(2));
        assert_eq!(status.source, Some(target.spec.source.clone()));
        let condition = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(condition.status, ConditionStatus::True);
        // Until the target exists the status shows the pointer itself.
        let missing = desired_status(&pointer, &Observed::PointerNotFound, &at(2));
        assert_eq!(missing.source, Some(pointer.spec.source.clone()));
    }

    #[test]
    fn an_empty_namespace_means_the_datasources_own() {
        assert_eq!(namespace_of("", &pvc_source("")), "images");
        assert_eq!(namespace_of("other", &pvc_source("other")), "other");
    }
}
