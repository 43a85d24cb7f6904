//! The local snapshot controller: what the snapshot-controller and csi-snapshotter sidecar do
//! on a cluster. A VolumeSnapshot of a claim bound to a volume of the local CSI driver gets a
//! snapshot from CreateSnapshot, a VolumeSnapshotContent bound to it, and `readyToUse`; when
//! the VolumeSnapshot is gone, a content with deletionPolicy Delete is deleted with its
//! snapshot. Level-triggered like the provisioner: every pass looks at all of them.

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::csi::{CsiClient, CsiError};

const RESYNC: Duration = Duration::from_secs(5);
const GROUP: &str = "snapshot.storage.k8s.io";

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Csi(#[from] CsiError),
}

/// The API of VolumeSnapshots (namespaced) or VolumeSnapshotContents (cluster-wide).
pub fn snapshot_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, "v1", kind))
}

pub struct LocalSnapshotter {
    pub client: Client,
    pub csi: CsiClient,
    /// The CSI driver whose volumes this snapshots.
    pub driver: String,
}

impl LocalSnapshotter {
    fn snapshots(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &snapshot_resource("VolumeSnapshot"))
    }

    fn contents(&self) -> Api<DynamicObject> {
        Api::all_with(
            self.client.clone(),
            &snapshot_resource("VolumeSnapshotContent"),
        )
    }

    /// Runs until the watches end.
    pub async fn run(self) -> Result<(), SnapshotError> {
        let mut wakeups = watcher(self.snapshots(), watcher::Config::default())
            .default_backoff()
            .boxed();
        loop {
            if let Err(err) = self.pass().await {
                tracing::warn!(%err, "snapshot pass failed");
            }
            tokio::select! {
                _ = wakeups.next() => {}
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    /// One look at every snapshot and content.
    pub async fn pass(&self) -> Result<(), SnapshotError> {
        let snapshots = self.snapshots().list(&ListParams::default()).await?.items;
        for snapshot in &snapshots {
            if let Err(err) = self.take(snapshot).await {
                tracing::warn!(snapshot = %snapshot.name_any(), %err, "cannot take snapshot");
            }
        }
        let contents = self.contents().list(&ListParams::default()).await?.items;
        for content in &contents {
            if let Err(err) = self.reclaim(content, &snapshots).await {
                tracing::warn!(content = %content.name_any(), %err, "cannot delete snapshot content");
            }
        }
        Ok(())
    }

    /// Takes the snapshot of a VolumeSnapshot that is not ready yet.
    async fn take(&self, snapshot: &DynamicObject) -> Result<(), SnapshotError> {
        let ready = snapshot.data["status"]["readyToUse"] == true;
        if ready || snapshot.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let namespace = snapshot.namespace().unwrap_or_default();
        let Some(claim_name) =
            snapshot.data["spec"]["source"]["persistentVolumeClaimName"].as_str()
        else {
            return Ok(());
        };
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let Some(volume_name) = claims
            .get_opt(claim_name)
            .await?
            .and_then(|c| c.spec?.volume_name)
        else {
            return Ok(());
        };
        let Some(volume) = Api::<PersistentVolume>::all(self.client.clone())
            .get_opt(&volume_name)
            .await?
        else {
            return Ok(());
        };
        let Some(csi) = volume
            .spec
            .and_then(|s| s.csi)
            .filter(|c| c.driver == self.driver)
        else {
            return Ok(());
        };
        let uid = snapshot.uid().unwrap_or_default();
        let content_name = format!("snapcontent-{uid}");
        let taken = self
            .csi
            .create_snapshot(&format!("snapshot-{uid}"), &csi.volume_handle)
            .await?;
        let now = k8s_openapi::jiff::Timestamp::now();
        let content = json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "VolumeSnapshotContent",
            "metadata": {"name": content_name},
            "spec": {
                "deletionPolicy": "Delete",
                "driver": self.driver,
                "source": {"volumeHandle": csi.volume_handle},
                "volumeSnapshotClassName": snapshot.data["spec"]["volumeSnapshotClassName"],
                "volumeSnapshotRef": {
                    "apiVersion": format!("{GROUP}/v1"), "kind": "VolumeSnapshot",
                    "namespace": namespace, "name": snapshot.name_any(), "uid": uid,
                },
            },
        });
        let content: DynamicObject = serde_json::from_value(content).map_err(|e| {
            kube::Error::Service(format!("building the VolumeSnapshotContent: {e}").into())
        })?;
        match self
            .contents()
            .create(&PostParams::default(), &content)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => return Err(err.into()),
        }
        let content_status = json!({"status": {
            "snapshotHandle": taken.handle,
            "readyToUse": taken.ready,
            "restoreSize": taken.size_bytes,
            "creationTime": i64::try_from(now.as_nanosecond()).unwrap_or(i64::MAX),
        }});
        self.contents()
            .patch_status(
                &content_name,
                &PatchParams::default(),
                &Patch::Merge(&content_status),
            )
            .await?;
        let snapshot_status = json!({"status": {
            "boundVolumeSnapshotContentName": content_name,
            "readyToUse": taken.ready,
            "restoreSize": taken.size_bytes.to_string(),
            "creationTime": now.to_string(),
        }});
        Api::<DynamicObject>::namespaced_with(
            self.client.clone(),
            &namespace,
            &snapshot_resource("VolumeSnapshot"),
        )
        .patch_status(
            &snapshot.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&snapshot_status),
        )
        .await?;
        tracing::info!(snapshot = %snapshot.name_any(), %namespace, handle = %taken.handle, "snapshot taken");
        Ok(())
    }

    /// Deletes a content of ours whose VolumeSnapshot is gone, with its snapshot, when its
    /// deletionPolicy says so.
    async fn reclaim(
        &self,
        content: &DynamicObject,
        snapshots: &[DynamicObject],
    ) -> Result<(), SnapshotError> {
        let spec = &content.data["spec"];
        if spec["driver"] != self.driver.as_str() {
            return Ok(());
        }
        let owner_uid = spec["volumeSnapshotRef"]["uid"].as_str();
        if snapshots.iter().any(|s| s.uid().as_deref() == owner_uid) {
            return Ok(());
        }
        if spec["deletionPolicy"] != "Delete" {
            return Ok(());
        }
        if let Some(handle) = content.data["status"]["snapshotHandle"].as_str() {
            self.csi.delete_snapshot(handle).await?;
        }
        match self
            .contents()
            .delete(&content.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err.into()),
        }
        tracing::info!(content = %content.name_any(), "deleted the snapshot of a deleted VolumeSnapshot");
        Ok(())
    }
}

/// The snapshot handle of a ready VolumeSnapshot `namespace/name`, `None` while it is not
/// ready (or does not exist).
pub async fn ready_snapshot_handle(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<String>, kube::Error> {
    let snapshots: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &snapshot_resource("VolumeSnapshot"),
    );
    let Some(snapshot) = snapshots.get_opt(name).await? else {
        return Ok(None);
    };
    let status = &snapshot.data["status"];
    let (true, Some(content_name)) = (
        status["readyToUse"] == true,
        status["boundVolumeSnapshotContentName"].as_str(),
    ) else {
        return Ok(None);
    };
    let contents: Api<DynamicObject> =
        Api::all_with(client.clone(), &snapshot_resource("VolumeSnapshotContent"));
    let content = contents.get_opt(content_name).await?;
    Ok(content.and_then(|c| {
        c.data["status"]["snapshotHandle"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(str::to_string)
    }))
}
