//! The local PV provisioner and binder: what external-provisioner and the PV controller do on
//! a cluster. A claim of a StorageClass served by the local CSI driver gets a volume from
//! CreateVolume (a clone when its dataSource is another claim, a restore when it is a
//! VolumeSnapshot), a PersistentVolume, and is
//! bound; WaitForFirstConsumer claims wait for the node agent to select the node; a released
//! volume with reclaim policy Delete is deleted. Level-triggered: every pass looks at all
//! claims and volumes, woken by watches and a periodic resync.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::csi::{ContentSource, CsiClient, CsiError, Mode};

pub use api::cdi::datavolume::annotations::SELECTED_NODE;
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const RESYNC: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Csi(#[from] CsiError),
    #[error("claim {claim}: {message}")]
    Claim { claim: String, message: String },
}

pub struct LocalProvisioner {
    pub client: Client,
    pub csi: CsiClient,
    /// The CSI driver name StorageClasses name as their provisioner.
    pub driver: String,
    pub node: String,
}

impl LocalProvisioner {
    /// Runs until the watches end.
    pub async fn run(self) -> Result<(), ProvisionError> {
        let claims = watcher(
            Api::<PersistentVolumeClaim>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff();
        let volumes = watcher(
            Api::<PersistentVolume>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff();
        let mut wakeups =
            futures_util::stream::select(claims.map(|_| ()).boxed(), volumes.map(|_| ()).boxed());
        loop {
            if let Err(err) = self.pass().await {
                tracing::warn!(%err, "provisioning pass failed");
            }
            tokio::select! {
                _ = wakeups.next() => {}
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    /// One look at every claim and volume.
    pub async fn pass(&self) -> Result<(), ProvisionError> {
        let classes: HashMap<String, StorageClass> = Api::<StorageClass>::all(self.client.clone())
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter(|sc| sc.provisioner == self.driver)
            .map(|sc| (sc.name_any(), sc))
            .collect();
        let claims = Api::<PersistentVolumeClaim>::all(self.client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let volumes = Api::<PersistentVolume>::all(self.client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        for claim in &claims {
            if let Err(err) = self.provision(claim, &classes, &volumes).await {
                tracing::warn!(claim = %claim.name_any(), %err, "cannot provision");
            }
        }
        for volume in &volumes {
            if let Err(err) = self.reclaim(volume, &claims).await {
                tracing::warn!(volume = %volume.name_any(), %err, "cannot reclaim");
            }
        }
        Ok(())
    }

    async fn provision(
        &self,
        claim: &PersistentVolumeClaim,
        classes: &HashMap<String, StorageClass>,
        volumes: &[PersistentVolume],
    ) -> Result<(), ProvisionError> {
        let spec = claim.spec.clone().unwrap_or_default();
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        if bound || claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        if let Some(volume_name) = &spec.volume_name {
            return self.bind_named(claim, volume_name, volumes).await;
        }
        let Some(class) = spec
            .storage_class_name
            .as_ref()
            .and_then(|c| classes.get(c))
        else {
            return Ok(());
        };
        let waits = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
        if waits && !claim.annotations().contains_key(SELECTED_NODE) {
            return Ok(());
        }
        let pv_name = format!("pvc-{}", claim.uid().unwrap_or_default());
        let volume = match volumes.iter().find(|v| v.name_any() == pv_name) {
            Some(volume) => volume.clone(),
            None => self.create_volume(claim, class, &pv_name, volumes).await?,
        };
        self.bind(claim, &volume).await
    }

    async fn create_volume(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        pv_name: &str,
        volumes: &[PersistentVolume],
    ) -> Result<PersistentVolume, ProvisionError> {
        let spec = claim.spec.clone().unwrap_or_default();
        let claim_name = format!(
            "{}/{}",
            claim.namespace().unwrap_or_default(),
            claim.name_any()
        );
        let requested = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .and_then(|q| api::quantity::parse_quantity(&q.0))
            .ok_or_else(|| ProvisionError::Claim {
                claim: claim_name.clone(),
                message: "spec.resources.requests.storage is missing or not a quantity".into(),
            })?;
        let mode = Mode::from_volume_mode(spec.volume_mode.as_deref());
        let content = self.content_source(claim, volumes).await?;
        let parameters: HashMap<String, String> = class
            .parameters
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        tracing::info!(claim = %claim_name, bytes = requested, "creating volume");
        let created = self
            .csi
            .create_volume(pv_name, requested as u64, mode, parameters, content)
            .await?;
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {
                "name": pv_name,
                "annotations": {PROVISIONED_BY: self.driver},
                "finalizers": ["kubernetes.io/pv-protection"],
            },
            "spec": {
                "capacity": {"storage": binary_quantity(created.capacity)},
                "accessModes": spec.access_modes.clone().unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
                "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into()),
                "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
                "storageClassName": class.name_any(),
                "claimRef": {
                    "kind": "PersistentVolumeClaim", "apiVersion": "v1",
                    "namespace": claim.namespace(), "name": claim.name_any(), "uid": claim.uid(),
                },
                "csi": {
                    "driver": self.driver,
                    "volumeHandle": created.handle,
                    "fsType": if mode == Mode::Filesystem { "ext4" } else { "" },
                    "volumeAttributes": created.context.into_iter().collect::<BTreeMap<_, _>>(),
                },
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [self.node]}
                ]}]}},
            }
        }))
        .map_err(|e| ProvisionError::Claim {
            claim: claim_name,
            message: format!("building its PersistentVolume: {e}"),
        })?;
        let api = Api::<PersistentVolume>::all(self.client.clone());
        Ok(api.create(&PostParams::default(), &pv).await?)
    }

    /// What the claim's volume starts as: a clone of the volume of another claim, or a
    /// restore of a ready VolumeSnapshot (its `dataSource`).
    async fn content_source(
        &self,
        claim: &PersistentVolumeClaim,
        volumes: &[PersistentVolume],
    ) -> Result<Option<ContentSource>, ProvisionError> {
        let spec = claim.spec.clone().unwrap_or_default();
        let Some(source) = spec
            .data_source_ref
            .map(|r| (r.kind, r.name))
            .or(spec.data_source.map(|r| (r.kind, r.name)))
        else {
            return Ok(None);
        };
        let namespace = claim.namespace().unwrap_or_default();
        let not_ready = |what: &str| ProvisionError::Claim {
            claim: claim.name_any(),
            message: format!("{what} {namespace}/{} is not ready yet", source.1),
        };
        match source.0.as_str() {
            "PersistentVolumeClaim" => {
                let handle = volumes.iter().find_map(|v| {
                    let pv_spec = v.spec.as_ref()?;
                    let claim_ref = pv_spec.claim_ref.as_ref()?;
                    let matches = claim_ref.name.as_deref() == Some(&source.1)
                        && claim_ref.namespace.as_deref() == Some(&namespace);
                    matches.then(|| pv_spec.csi.as_ref().map(|c| c.volume_handle.clone()))?
                });
                handle
                    .map(|h| Some(ContentSource::Volume(h)))
                    .ok_or_else(|| not_ready("clone source claim"))
            }
            "VolumeSnapshot" => {
                let handle =
                    crate::snapshotter::ready_snapshot_handle(&self.client, &namespace, &source.1)
                        .await?;
                handle
                    .map(|h| Some(ContentSource::Snapshot(h)))
                    .ok_or_else(|| not_ready("VolumeSnapshot"))
            }
            _ => Ok(None),
        }
    }

    /// A claim that names its volume (`spec.volumeName`) is bound to it once the volume is
    /// free for it: no claimRef, or one naming this claim (the PV controller's static binding).
    async fn bind_named(
        &self,
        claim: &PersistentVolumeClaim,
        volume_name: &str,
        volumes: &[PersistentVolume],
    ) -> Result<(), ProvisionError> {
        let Some(volume) = volumes.iter().find(|v| v.name_any() == volume_name) else {
            return Ok(());
        };
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        let free = claim_ref.is_none_or(|r| {
            r.namespace == claim.namespace()
                && r.name.as_deref() == Some(claim.name_any().as_str())
                && r.uid
                    .as_ref()
                    .is_none_or(|uid| Some(uid) == claim.uid().as_ref())
        });
        if !free {
            return Ok(());
        }
        self.bind(claim, volume).await
    }

    async fn bind(
        &self,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
    ) -> Result<(), ProvisionError> {
        let namespace = claim.namespace().unwrap_or_default();
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &namespace);
        let volumes = Api::<PersistentVolume>::all(self.client.clone());
        let params = PatchParams::default();
        let pv_spec = volume.spec.clone().unwrap_or_default();
        let capacity = pv_spec.capacity.clone().unwrap_or_default();
        let claim_patch = json!({
            "metadata": {"annotations": {BIND_COMPLETED: "yes"}},
            "spec": {"volumeName": volume.name_any()},
        });
        claims
            .patch(&claim.name_any(), &params, &Patch::Merge(&claim_patch))
            .await?;
        let status = json!({"status": {
            "phase": "Bound",
            "capacity": capacity,
            "accessModes": pv_spec.access_modes,
        }});
        claims
            .patch_status(&claim.name_any(), &params, &Patch::Merge(&status))
            .await?;
        let claim_ref = json!({"spec": {"claimRef": {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "namespace": namespace, "name": claim.name_any(), "uid": claim.uid(),
        }}});
        volumes
            .patch(&volume.name_any(), &params, &Patch::Merge(&claim_ref))
            .await?;
        volumes
            .patch_status(
                &volume.name_any(),
                &params,
                &Patch::Merge(&json!({"status": {"phase": "Bound"}})),
            )
            .await?;
        tracing::info!(claim = %claim.name_any(), volume = %volume.name_any(), "bound");
        Ok(())
    }

    /// Deletes a volume of ours whose claim is gone, when its reclaim policy says so.
    async fn reclaim(
        &self,
        volume: &PersistentVolume,
        claims: &[PersistentVolumeClaim],
    ) -> Result<(), ProvisionError> {
        if volume.annotations().get(PROVISIONED_BY) != Some(&self.driver) {
            return Ok(());
        }
        let spec = volume.spec.clone().unwrap_or_default();
        let Some(claim_uid) = spec.claim_ref.as_ref().and_then(|r| r.uid.clone()) else {
            // Free, or reserved for a claim by name that is yet to come: nothing to reclaim.
            return Ok(());
        };
        let claimed = claims.iter().any(|c| c.uid().as_ref() == Some(&claim_uid));
        if claimed {
            return Ok(());
        }
        let api = Api::<PersistentVolume>::all(self.client.clone());
        if spec.persistent_volume_reclaim_policy.as_deref() != Some("Delete") {
            let released = json!({"status": {"phase": "Released"}});
            api.patch_status(
                &volume.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&released),
            )
            .await?;
            return Ok(());
        }
        if let Some(csi) = &spec.csi {
            self.csi.delete_volume(&csi.volume_handle).await?;
        }
        let unprotect = json!({"metadata": {"finalizers": null}});
        api.patch(
            &volume.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&unprotect),
        )
        .await?;
        match api
            .delete(&volume.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err.into()),
        }
        tracing::info!(volume = %volume.name_any(), "deleted released volume");
        Ok(())
    }
}
/// A byte count as the quantity Kubernetes would print for it (binary SI, as the
/// external-provisioner writes capacities): `1Gi`, `1090Mi`, or plain bytes when no binary
/// suffix divides it.
fn binary_quantity(bytes: u64) -> String {
    let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut value = bytes;
    let mut suffix = 0;
    while value != 0 && value % 1024 == 0 && suffix + 1 < suffixes.len() {
        value /= 1024;
        suffix += 1;
    }
    format!("{value}{}", suffixes[suffix])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_are_binary_quantities() {
        assert_eq!(binary_quantity(1 << 30), "1Gi");
        assert_eq!(binary_quantity(1_142_947_840), "1090Mi");
        assert_eq!(binary_quantity(128 << 20), "128Mi");
        assert_eq!(binary_quantity(1000), "1000");
        assert_eq!(binary_quantity(0), "0");
    }
}
