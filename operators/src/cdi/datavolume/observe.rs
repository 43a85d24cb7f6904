//! What one reconcile of a DataVolume decides from, read from the API server (and the
//! workers' progress from their metrics endpoints) into a [`plan::Observed`]. Only what the
//! plan may need is read: a clone's source only for a clone, the pods of a host-assisted
//! clone only for one.

use api::cdi::datavolume::{
    DataVolumeSource, DataVolumeSourcePvc, DataVolumeSourceSnapshot, SOURCE_REF_KIND_DATA_SOURCE,
};
use api::cdi::operator::CDI;
use api::cdi::{CDIConfig, DataSource, DataVolume, StorageProfile};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use kube::{Api, ResourceExt};

use super::clone_objects;
use super::context::{Context, Error};
use super::cross_namespace;
use super::host_clone;
use super::keys::{ANN_METRICS_ADDRESS, is_bare_claim};
use super::plan::{self, Blocked, CloneSource, Observed};
use super::pod;
use super::pvc;
use super::settings::{CDI_CONFIG, ClusterSettings, workload_placement};
use super::status;
use super::transfer::Transfer;
use crate::kit::volume_snapshot_resource;

/// Reads what a reconcile of `dv` decides from.
pub async fn observe(dv: &DataVolume, ctx: &Context) -> Result<Observed, Error> {
    let name = dv.name_any();
    let namespace = dv
        .namespace()
        .ok_or_else(|| Error::MissingNamespace(name.clone()))?;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut observed = Observed::new(dv.clone(), now);
    if dv.metadata.deletion_timestamp.is_some() {
        return Ok(observed);
    }
    observed.source = resolve_source(dv, ctx, &namespace).await?;
    let Ok(source) = observed.source.clone() else {
        return Ok(observed);
    };
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    observed.pvc = pvcs.get_opt(&name).await?;
    observed.settings = cluster_settings(ctx, dv, observed.pvc.as_ref()).await?;
    observed.can_sign_clones = host_clone::can_sign(ctx);
    if let Some(reference) = plan::clone_reference(&source) {
        observed.clone_source = Some(clone_source(ctx, &observed, &reference).await?);
    }
    let transfer = plan::transfer(&observed, &source);
    // A bare claim exists from the start: its clone is checked at every look until its
    // source pod is made (as CDI's clone controller does).
    let deciding = observed.pvc.is_none() || is_bare_claim(dv);
    if observed.clone_source.is_some() && deciding {
        observe_clone_permission(ctx, &mut observed, &source, &transfer).await?;
    }
    if let Some(pod_name) = plan::worker_pod_name(&transfer, &name) {
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
        observed.worker = pods.get_opt(&pod_name).await?;
    }
    // The uid the workers report under: the DataVolume's, or a bare claim's own.
    let owner = dv
        .metadata
        .uid
        .clone()
        .or_else(|| observed.pvc.as_ref().and_then(|p| p.metadata.uid.clone()))
        .unwrap_or_default();
    if let (Some(worker), Transfer::Import(_)) = (&observed.worker, &transfer) {
        if pod::phase(worker) == "Running" {
            observed.progress = scrape_progress(ctx, worker, &owner).await;
        }
    }
    if let Transfer::HostClone {
        namespace: src_ns,
        snapshot,
        ..
    } = &transfer
    {
        observe_host_clone(ctx, &mut observed, src_ns, *snapshot).await?;
    }
    Ok(observed)
}

/// A clone's source: whether it exists, its claim, and (before the target's claim exists, or
/// for a bare claim) the DataVolume that fills it.
async fn clone_source(
    ctx: &Context,
    observed: &Observed,
    (src_ns, src_name, snapshot): &(String, String, bool),
) -> Result<CloneSource, Error> {
    let (exists, claim) = if *snapshot {
        clone_of_snapshot(ctx, src_ns, src_name).await?
    } else {
        let claim = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), src_ns)
            .get_opt(src_name)
            .await?;
        (claim.is_some(), claim)
    };
    let mut clone = CloneSource {
        exists,
        claim,
        ..Default::default()
    };
    if (observed.pvc.is_none() || is_bare_claim(&observed.dv)) && !*snapshot {
        if let Some(owner) = clone.claim.as_ref().and_then(filling_data_volume) {
            clone.filled_by_data_volume = true;
            clone.filling_phase = Api::<DataVolume>::namespaced(ctx.client.clone(), src_ns)
                .get_opt(&owner)
                .await?
                .and_then(|d| d.status?.phase);
        }
    }
    Ok(clone)
}

/// The name of the DataVolume that controls (fills) `claim`, if one does.
fn filling_data_volume(claim: &PersistentVolumeClaim) -> Option<String> {
    claim
        .owner_references()
        .iter()
        .find(|o| o.kind == "DataVolume" && o.controller == Some(true))
        .map(|o| o.name.clone())
}

/// What decides whether a clone may start: the pods using a host-assisted clone's source,
/// and, from another namespace, whether its clone token lets it.
async fn observe_clone_permission(
    ctx: &Context,
    observed: &mut Observed,
    source: &DataVolumeSource,
    transfer: &Transfer,
) -> Result<(), Error> {
    let Some((src_ns, src_name, snapshot)) = plan::clone_reference(source) else {
        return Ok(());
    };
    let dv = observed.dv.clone();
    let Some(clone) = observed.clone_source.as_mut() else {
        return Ok(());
    };
    if let (Transfer::HostClone { .. }, Some(claim), false) = (transfer, &clone.claim, snapshot) {
        if observed.can_sign_clones {
            clone.users = host_clone::pods_using(ctx, claim).await?;
        }
    }
    if Some(&src_ns) != dv.metadata.namespace.as_ref() {
        clone.refusal = cross_namespace::refusal(ctx, &dv, (&src_ns, &src_name)).await?;
    }
    Ok(())
}

/// A host-assisted clone's source side: the claim a snapshot is restored into, the source
/// pod, and its progress while it runs.
async fn observe_host_clone(
    ctx: &Context,
    observed: &mut Observed,
    src_ns: &str,
    snapshot: bool,
) -> Result<(), Error> {
    if snapshot {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), src_ns);
        observed.host_clone.restore_claim = claims
            .get_opt(&clone_objects::restore_claim_name(&observed.dv))
            .await?;
    }
    let Some(target_uid) = observed.pvc.as_ref().and_then(|p| p.metadata.uid.clone()) else {
        return Ok(());
    };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), src_ns);
    let source_pod = pods
        .get_opt(&pod::clone_source_pod_name(&target_uid))
        .await?;
    if let Some(running) = source_pod.as_ref().filter(|p| pod::phase(p) == "Running") {
        let owner = observed.dv.metadata.uid.clone().unwrap_or_default();
        observed.host_clone.progress = scrape_progress(ctx, running, &owner).await;
    }
    observed.host_clone.source_pod = source_pod;
    Ok(())
}

fn not_found(message: String) -> Blocked {
    Blocked {
        reason: "NotFound".to_string(),
        message,
    }
}

/// The source after a `sourceRef` is followed, or why it cannot be.
async fn resolve_source(
    dv: &DataVolume,
    ctx: &Context,
    namespace: &str,
) -> Result<Result<DataVolumeSource, Blocked>, Error> {
    if let Some(source) = &dv.spec.source {
        let mut source = source.clone();
        for reference in [
            source.pvc.as_mut().map(|p| &mut p.namespace),
            source.snapshot.as_mut().map(|s| &mut s.namespace),
        ]
        .into_iter()
        .flatten()
        {
            if reference.is_empty() {
                *reference = namespace.to_string();
            }
        }
        return Ok(Ok(source));
    }
    let Some(reference) = &dv.spec.source_ref else {
        return Ok(Ok(DataVolumeSource::default()));
    };
    if reference.kind != SOURCE_REF_KIND_DATA_SOURCE {
        return Ok(Err(not_found(format!(
            "sourceRef kind {} is not supported",
            reference.kind
        ))));
    }
    let ns = reference.namespace.as_deref().unwrap_or(namespace);
    let sources: Api<DataSource> = Api::namespaced(ctx.client.clone(), ns);
    let Some(data_source) = sources.get_opt(&reference.name).await? else {
        return Ok(Err(not_found(format!(
            "DataSource {ns}/{} not found",
            reference.name
        ))));
    };
    // The resolved source (a pointer's target's) once the DataSource controller wrote it.
    let src = data_source
        .status
        .as_ref()
        .and_then(|s| s.source.as_ref())
        .filter(|s| s.pvc.is_some() || s.snapshot.is_some())
        .unwrap_or(&data_source.spec.source);
    let or_here = |namespace: &str| {
        if namespace.is_empty() {
            ns.to_string()
        } else {
            namespace.to_string()
        }
    };
    if let Some(pvc) = &src.pvc {
        return Ok(Ok(DataVolumeSource {
            pvc: Some(DataVolumeSourcePvc {
                namespace: or_here(&pvc.namespace),
                name: pvc.name.clone(),
            }),
            ..Default::default()
        }));
    }
    if let Some(snapshot) = &src.snapshot {
        return Ok(Ok(DataVolumeSource {
            snapshot: Some(DataVolumeSourceSnapshot {
                namespace: or_here(&snapshot.namespace),
                name: snapshot.name.clone(),
            }),
            ..Default::default()
        }));
    }
    Ok(Err(not_found(format!(
        "DataSource {ns}/{} has no source",
        reference.name
    ))))
}

/// The StorageClass, StorageProfile and CDIConfig the DataVolume's claim depends on.
async fn cluster_settings(
    ctx: &Context,
    dv: &DataVolume,
    pvc: Option<&PersistentVolumeClaim>,
) -> Result<ClusterSettings, Error> {
    let classes: Api<StorageClass> = Api::all(ctx.client.clone());
    let named = pvc
        .and_then(|p| p.spec.as_ref()?.storage_class_name.clone())
        .or_else(|| dv.spec.pvc.as_ref()?.storage_class_name.clone())
        .or_else(|| dv.spec.storage.as_ref()?.storage_class_name.clone());
    let class = match named {
        Some(name) => classes.get_opt(&name).await?,
        // A PVC written without a class gets none (Kubernetes may still default it).
        None if dv.spec.pvc.is_some() && pvc.is_none() => None,
        None => {
            let list = classes.list(&Default::default()).await?;
            pvc::default_storage_class(&list.items).cloned()
        }
    };
    let profile = match &class {
        Some(c) => {
            Api::<StorageProfile>::all(ctx.client.clone())
                .get_opt(&c.name_any())
                .await?
        }
        None => None,
    };
    let config = Api::<CDIConfig>::all(ctx.client.clone())
        .get_opt(CDI_CONFIG)
        .await?;
    let cdis = Api::<CDI>::all(ctx.client.clone())
        .list(&Default::default())
        .await?;
    Ok(ClusterSettings {
        class,
        profile,
        config,
        workload: workload_placement(&cdis.items)?,
    })
}

/// Whether VolumeSnapshot `namespace/name` exists, and the claim it was taken of (which
/// gives a restore its node and, when the DataVolume names none, its size).
async fn clone_of_snapshot(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<(bool, Option<PersistentVolumeClaim>), Error> {
    let snapshots: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), namespace, &volume_snapshot_resource());
    let Some(snapshot) = snapshots.get_opt(name).await? else {
        return Ok((false, None));
    };
    let Some(claim) = snapshot.data["spec"]["source"]["persistentVolumeClaimName"].as_str() else {
        return Ok((true, None));
    };
    let claim = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), namespace)
        .get_opt(claim)
        .await?;
    Ok((true, claim))
}

/// The worker's progress from its Prometheus endpoint (`http://<podIP>:8443/metrics`, or
/// the address a node agent annotated), `None` when it cannot be read.
async fn scrape_progress(ctx: &Context, worker: &Pod, owner_uid: &str) -> Option<String> {
    let address = match worker.annotations().get(ANN_METRICS_ADDRESS) {
        Some(address) => address.clone(),
        None => format!(
            "{}:{}",
            worker.status.as_ref()?.pod_ip.as_ref()?,
            pod::METRICS_PORT
        ),
    };
    let url = format!("http://{address}/metrics");
    let text = match ctx.http.get(&url).send().await {
        Ok(response) => response.text().await.ok()?,
        Err(err) => {
            tracing::debug!(%url, %err, "cannot read progress");
            return None;
        }
    };
    status::parse_progress(&text, owner_uid)
}
