//! A pod's volumes: claims bound and published through CSI under the pod's root, Secrets,
//! ConfigMaps and emptyDirs written as files, and what is published recorded so that it is
//! unpublished when the pod ends, or by the next agent when this one was killed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferrovirt_hostpath::persist::{Readers, write_file};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use api::pod_contract::under_root;

use super::{AgentError, PodRun};
use crate::csi::{CsiClient, Mode};
use crate::provisioner::SELECTED_NODE;

/// A volume published for this pod, to unpublish when it ends. Kept in the pod's directory
/// too ([`published_record`]), so what an agent killed at the wrong moment left published is
/// unpublished by the next one.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Published {
    handle: String,
    staging: PathBuf,
    target: PathBuf,
}

/// Where a pod's publications are recorded.
pub(super) fn published_record(state_dir: &Path, pod_uid: &str) -> PathBuf {
    state_dir.join("pods").join(pod_uid).join("published.json")
}

/// Held while volumes are staged, published, unpublished or unstaged, so that a pod's
/// release never unstages a volume another pod is publishing meanwhile. A kubelet stages a
/// volume once per node and unstages it with its last pod; the records of what each pod
/// publishes ([`published_record`]) say which pods still use it, across restarts too.
static VOLUME_OPERATIONS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Unpublishes what a pod that no longer runs here left published (its agent was killed
/// after the pod ended and before it cleaned up), and forgets the record once all is done.
pub(super) async fn unpublish_leftovers(csi: &CsiClient, state_dir: &Path, pod_uid: &str) {
    let record = published_record(state_dir, pod_uid);
    let Ok(bytes) = std::fs::read(&record) else {
        return;
    };
    let published: Vec<Published> = match serde_json::from_slice(&bytes) {
        Ok(published) => published,
        Err(err) => {
            tracing::warn!(record = %record.display(), %err, "unreadable record of publications");
            Vec::new()
        }
    };
    tracing::info!(pod = %pod_uid, volumes = published.len(), "unpublishing what a pod left published");
    release(csi, state_dir, pod_uid, published).await;
}

/// Unpublishes `published`, a pod's publications, rewrites the pod's record with what could
/// not be, and unstages each volume no other pod's record names any more; whether all went.
async fn release(
    csi: &CsiClient,
    state_dir: &Path,
    pod_uid: &str,
    published: Vec<Published>,
) -> bool {
    let _serialized = VOLUME_OPERATIONS.lock().await;
    let mut left = Vec::new();
    let mut released: BTreeMap<String, PathBuf> = BTreeMap::new();
    for p in published {
        match csi.unpublish(&p.handle, &p.target).await {
            Ok(()) => {
                released.insert(p.handle.clone(), p.staging.clone());
            }
            Err(err) => {
                tracing::warn!(volume = %p.handle, %err, "cannot unpublish");
                left.push(p);
            }
        }
    }
    let record = published_record(state_dir, pod_uid);
    let rewritten = if left.is_empty() {
        std::fs::remove_file(&record).or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        })
    } else {
        let bytes = serde_json::to_vec(&left).unwrap_or_default();
        write_file(&record, &bytes, Readers::Owner)
    };
    if let Err(err) = rewritten {
        tracing::warn!(record = %record.display(), %err, "cannot rewrite the record of publications");
    }
    let in_use = handles_in_use(state_dir);
    let mut all = left.is_empty();
    for (handle, staging) in released {
        if in_use.contains(&handle) {
            continue;
        }
        if let Err(err) = csi.unstage(&handle, &staging).await {
            tracing::warn!(volume = %handle, %err, "cannot unstage");
            all = false;
        }
    }
    all
}

/// The volumes some pod's record says it publishes on this node.
pub(super) fn handles_in_use(state_dir: &Path) -> BTreeSet<String> {
    let Ok(pods) = std::fs::read_dir(state_dir.join("pods")) else {
        return BTreeSet::new();
    };
    pods.flatten()
        .filter_map(|pod| std::fs::read(pod.path().join("published.json")).ok())
        .filter_map(|bytes| serde_json::from_slice::<Vec<Published>>(&bytes).ok())
        .flatten()
        .map(|p| p.handle)
        .collect()
}

impl PodRun {
    pub(super) async fn publish_volumes(&mut self, root: &Path) -> Result<(), AgentError> {
        let spec = self.pod.spec.clone().unwrap_or_default();
        let namespace = self.pod.namespace().unwrap_or_default();
        let containers = self.containers().to_vec();
        for volume in spec.volumes.unwrap_or_default() {
            // Every container's paths for the volume, each once: containers share the pod's
            // root, so a volume two of them mount at one path is published there once.
            let mounts: BTreeSet<String> = containers
                .iter()
                .flat_map(|c| c.volume_mounts.iter().flatten())
                .filter(|m| m.name == volume.name)
                .map(|m| m.mount_path.clone())
                .collect();
            let devices: BTreeSet<String> = containers
                .iter()
                .flat_map(|c| c.volume_devices.iter().flatten())
                .filter(|d| d.name == volume.name)
                .map(|d| d.device_path.clone())
                .collect();
            let mounts: Vec<String> = mounts.into_iter().collect();
            if let Some(claim) = &volume.persistent_volume_claim {
                let pv = self.bound_volume(&namespace, &claim.claim_name).await?;
                let pv_spec = pv.spec.clone().unwrap_or_default();
                let Some(csi) = pv_spec.csi else {
                    return Err(self.error(format!("volume {} is not a CSI volume", pv.name_any())));
                };
                let mode = Mode::from_volume_mode(pv_spec.volume_mode.as_deref());
                let staging = self.agent().state_dir.join("staging").join(pv.name_any());
                for path in mounts.iter().chain(devices.iter()) {
                    let target = under_root(root, path);
                    let _serialized = VOLUME_OPERATIONS.lock().await;
                    self.agent()
                        .csi
                        .publish(&csi.volume_handle, mode, &staging, &target)
                        .await?;
                    self.published.push(Published {
                        handle: csi.volume_handle.clone(),
                        staging: staging.clone(),
                        target,
                    });
                    self.record_published()?;
                }
            } else if let Some(source) = &volume.secret {
                let name = source.secret_name.clone().unwrap_or_default();
                let api = Api::<Secret>::namespaced(self.agent().client.clone(), &namespace);
                // An optional Secret that does not exist is an empty directory.
                let secret = match source.optional {
                    Some(true) => api.get_opt(&name).await?.unwrap_or_default(),
                    _ => api.get(&name).await?,
                };
                let files: BTreeMap<String, Vec<u8>> = secret
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                write_files(root, &mounts, &files)?;
            } else if let Some(source) = &volume.config_map {
                let api = Api::<ConfigMap>::namespaced(self.agent().client.clone(), &namespace);
                let map = match source.optional {
                    Some(true) => api.get_opt(&source.name).await?.unwrap_or_default(),
                    _ => api.get(&source.name).await?,
                };
                let files: BTreeMap<String, Vec<u8>> = map
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect();
                write_files(root, &mounts, &files)?;
            } else {
                write_files(root, &mounts, &BTreeMap::new())?;
            }
        }
        Ok(())
    }

    /// The PV of a claim, once bound; selects this node for a claim waiting for a consumer.
    pub(super) async fn bound_volume(
        &self,
        namespace: &str,
        claim: &str,
    ) -> Result<PersistentVolume, AgentError> {
        let claims =
            Api::<PersistentVolumeClaim>::namespaced(self.agent().client.clone(), namespace);
        let mut selected = false;
        loop {
            let pvc = claims.get(claim).await?;
            let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
            let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
            if let (Some(volume), true) = (volume, bound) {
                return Ok(Api::<PersistentVolume>::all(self.agent().client.clone())
                    .get(&volume)
                    .await?);
            }
            if !selected && !pvc.annotations().contains_key(SELECTED_NODE) {
                let patch =
                    json!({"metadata": {"annotations": {SELECTED_NODE: self.agent().node}}});
                claims
                    .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                selected = true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Writes down what is published for the pod, before anything else can happen to it.
    pub(super) fn record_published(&self) -> Result<(), AgentError> {
        let uid = self.pod.uid().unwrap_or_default();
        let path = published_record(&self.agent().state_dir, &uid);
        let bytes = serde_json::to_vec(&self.published).unwrap_or_default();
        write_file(&path, &bytes, Readers::Owner).map_err(|source| AgentError::Io {
            what: "writing",
            path,
            source,
        })
    }

    pub(super) async fn cleanup(&mut self) -> Result<(), AgentError> {
        let uid = self.pod.uid().unwrap_or_default();
        let published = std::mem::take(&mut self.published);
        release(&self.agent().csi, &self.agent().state_dir, &uid, published).await;
        if let Some(pod_dir) = self.root().parent() {
            let _ = std::fs::remove_dir_all(pod_dir.join("root"));
        }
        Ok(())
    }
}

/// Materializes Secret/ConfigMap keys as files (and empty directories for emptyDir).
pub(super) fn write_files(
    root: &Path,
    mounts: &[String],
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<(), AgentError> {
    for mount in mounts {
        let dir = under_root(root, mount);
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| AgentError::Io { what, path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io("creating", &dir))?;
        for (key, content) in files {
            let path = dir.join(key);
            std::fs::write(&path, content).map_err(io("writing", &path))?;
        }
    }
    Ok(())
}
