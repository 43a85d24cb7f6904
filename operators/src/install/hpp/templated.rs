//! Makes a `pvcTemplate` pool ready on this machine: its claim created (see [`super::claims`]),
//! and once bound, its volume mounted at the pool's `path` through the CSI store, as upstream's
//! per-node pool Deployment mounts it there.

use std::path::PathBuf;

use api::hostpath::{HostPathProvisioner, StoragePool, StoragePoolStatus, pool_phase};
use ferrovirt_hostpath::{AccessType, Pool};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Resource};

use super::claims::{self, NAMESPACE, claim_status, not_bound, pool_claim};
use super::{Context, Error};

/// Where a templated pool stands.
pub enum Templated {
    /// Mounted at its path: serve it.
    Mounted {
        pool: Pool,
        status: StoragePoolStatus,
    },
    /// Not yet: why, and its status.
    Waiting {
        problem: String,
        status: StoragePoolStatus,
    },
}

/// This machine's node (the platform registers exactly one).
pub async fn this_node(ctx: &Context) -> Result<Option<String>, Error> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let list = nodes.list(&Default::default()).await?;
    Ok(list.items.first().and_then(|n| n.metadata.name.clone()))
}

async fn ensure_namespace(ctx: &Context) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    if namespaces.get_opt(NAMESPACE).await?.is_some() {
        return Ok(());
    }
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &namespace).await {
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        other => other.map(|_| ()).map_err(Error::from),
    }
}

/// The claim of `pool` on `node`, created from the template when missing.
async fn claim(
    ctx: &Context,
    cr: &HostPathProvisioner,
    pool: &StoragePool,
    node: &str,
) -> Result<PersistentVolumeClaim, Error> {
    ensure_namespace(ctx).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let name = claims::claim_name(&pool.name, node);
    if let Some(existing) = claims.get_opt(&name).await? {
        return Ok(existing);
    }
    let desired = pool_claim(pool, node, cr.controller_owner_ref(&()));
    tracing::info!(pool = %pool.name, claim = %name, "creating the storage pool's claim");
    match claims.create(&PostParams::default(), &desired).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(claims.get(&name).await?),
        Err(err) => Err(err.into()),
    }
}

fn status(pool: &StoragePool, phase: &str, claim: &PersistentVolumeClaim) -> StoragePoolStatus {
    StoragePoolStatus {
        name: pool.name.clone(),
        phase: phase.to_owned(),
        desired_ready: Some(1),
        current_ready: Some(i32::from(phase == pool_phase::READY)),
        claim_statuses: Some(vec![claim_status(claim)]),
    }
}

/// Brings templated `pool` of `cr` as far as it goes now on `node`.
pub async fn prepare(
    ctx: &Context,
    cr: &HostPathProvisioner,
    pool: &StoragePool,
    node: &str,
) -> Result<Templated, Error> {
    let claim = claim(ctx, cr, pool, node).await?;
    if let Some(problem) = not_bound(&claim) {
        let status = status(pool, pool_phase::PREPARING, &claim);
        return Ok(Templated::Waiting { problem, status });
    }
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let handle = volumes
        .get_opt(&volume_name)
        .await?
        .and_then(|pv| pv.spec?.csi.map(|csi| csi.volume_handle));
    let Some(handle) = handle else {
        let problem = format!(
            "storage pool {:?}: claim {} is bound to {volume_name:?}, which is not a volume of \
             this machine's CSI driver",
            pool.name,
            claim.metadata.name.as_deref().unwrap_or_default()
        );
        let status = status(pool, pool_phase::MOUNTING, &claim);
        return Ok(Templated::Waiting { problem, status });
    };
    let store = ctx.store.clone();
    let path = PathBuf::from(&pool.path);
    let target = path.clone();
    let mounted = tokio::task::spawn_blocking(move || {
        let access = AccessType::Mount {
            fs_type: "ext4".to_owned(),
            flags: Vec::new(),
        };
        store.stage(&handle, &target, &access)
    })
    .await?;
    if let Err(err) = mounted {
        let problem = format!(
            "storage pool {:?}: mounting its claim's volume at {}: {err}",
            pool.name, pool.path
        );
        let status = status(pool, pool_phase::MOUNTING, &claim);
        return Ok(Templated::Waiting { problem, status });
    }
    Ok(Templated::Mounted {
        pool: Pool {
            name: pool.name.clone(),
            path,
        },
        status: status(pool, pool_phase::READY, &claim),
    })
}
