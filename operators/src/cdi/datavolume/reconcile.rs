//! One reconcile of a DataVolume: resolve its source, create its PVC, run its worker, mirror
//! the worker onto the PVC's annotations, write the status. The decisions are the pure
//! functions of [`super::pvc`], [`super::pod`] and [`super::status`]; this module makes the
//! API calls.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::cdi::datavolume::{
    DataVolumePhase, DataVolumeSource, DataVolumeSourcePvc, DataVolumeSourceSnapshot,
    SOURCE_REF_KIND_DATA_SOURCE, annotations,
};
use api::cdi::operator::DEFAULT_FILESYSTEM_OVERHEAD;
use api::cdi::{CDIConfig, DataSource, DataVolume, StorageProfile};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::pod::{self, WorkerSettings};
use super::pvc::{self, BLOCK, PvcInputs};
use super::status::{self, Observed, PhaseEvent};
use super::{
    ANN_CLONE_TYPE, ANN_METRICS_ADDRESS, Context, Error, Transfer, retain_after_completion,
};
use super::{cross_namespace, host_clone, upload};

/// CDIConfig feature gate under which DataVolumes wait for their first consumer.
const HONOR_WAIT_FOR_FIRST_CONSUMER: &str = "HonorWaitForFirstConsumer";

/// How often a running transfer is looked at again (progress).
const PROGRESS_INTERVAL: Duration = Duration::from_secs(3);
/// How often a blocked DataVolume is looked at again.
const BLOCKED_INTERVAL: Duration = Duration::from_secs(10);
/// How often a cross-namespace clone looks at its temporary claim.
const HANDOVER_INTERVAL: Duration = Duration::from_secs(1);
/// How often a clone looks at a source that is still being filled.
const SOURCE_WAIT_INTERVAL: Duration = Duration::from_secs(2);
/// The name of the cluster's CDIConfig.
pub const CDI_CONFIG: &str = "config";

/// The cluster configuration a DataVolume's PVC and pods depend on.
struct ClusterSettings {
    class: Option<StorageClass>,
    profile: Option<StorageProfile>,
    config: Option<CDIConfig>,
}

impl ClusterSettings {
    fn overhead(&self) -> f64 {
        let class = self.class.as_ref().map(|c| c.name_any());
        let from = |o: &api::cdi::operator::FilesystemOverhead| {
            class
                .as_ref()
                .and_then(|c| o.storage_class.as_ref()?.get(c).cloned())
                .or(o.global.clone())
        };
        let config = self.config.as_ref();
        config
            .and_then(|c| {
                c.status
                    .as_ref()?
                    .filesystem_overhead
                    .as_ref()
                    .and_then(from)
            })
            .or_else(|| config.and_then(|c| c.spec.filesystem_overhead.as_ref().and_then(from)))
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| (0.0..1.0).contains(v))
            .unwrap_or_else(|| DEFAULT_FILESYSTEM_OVERHEAD.parse().unwrap_or(0.06))
    }

    fn preallocation(&self, dv: &DataVolume) -> bool {
        dv.spec
            .preallocation
            .or_else(|| self.config.as_ref()?.spec.preallocation)
            .unwrap_or(false)
    }

    fn insecure(&self, endpoint: Option<&str>) -> bool {
        endpoint.is_some_and(|e| is_insecure_registry(self.config.as_ref(), e))
    }

    /// Whether the DataVolume waits for a consumer instead of binding through its worker pod:
    /// as CDI, only with CDIConfig's `HonorWaitForFirstConsumer` feature gate on a
    /// WaitForFirstConsumer class. Without the gate the worker pod is the first consumer.
    fn wait_for_first_consumer(&self) -> bool {
        let honored = self
            .config
            .as_ref()
            .and_then(|c| c.spec.feature_gates.as_ref())
            .is_some_and(|gates| gates.iter().any(|g| g == HONOR_WAIT_FOR_FIRST_CONSUMER));
        honored
            && self
                .class
                .as_ref()
                .and_then(|c| c.volume_binding_mode.as_deref())
                .is_some_and(|m| m == "WaitForFirstConsumer")
    }
}

/// Whether CDIConfig `spec.insecureRegistries` lists the host of `endpoint`
/// (`docker://host:port/repo:tag`): plain HTTP or an unverified certificate is allowed there.
pub fn is_insecure_registry(config: Option<&CDIConfig>, endpoint: &str) -> bool {
    let host = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    config
        .and_then(|c| c.spec.insecure_registries.as_ref())
        .is_some_and(|r| r.iter().any(|h| h == host))
}

/// The source after a `sourceRef` is followed, or why it cannot be.
async fn resolve_source(
    dv: &DataVolume,
    ctx: &Context,
    namespace: &str,
) -> Result<Result<DataVolumeSource, (String, String)>, Error> {
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
        return Ok(Err((
            "NotFound".into(),
            format!("sourceRef kind {} is not supported", reference.kind),
        )));
    }
    let ns = reference.namespace.as_deref().unwrap_or(namespace);
    let sources: Api<DataSource> = Api::namespaced(ctx.client.clone(), ns);
    let Some(data_source) = sources.get_opt(&reference.name).await? else {
        return Ok(Err((
            "NotFound".into(),
            format!("DataSource {ns}/{} not found", reference.name),
        )));
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
    Ok(Err((
        "NotFound".into(),
        format!("DataSource {ns}/{} has no source", reference.name),
    )))
}

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
    Ok(ClusterSettings {
        class,
        profile,
        config,
    })
}

async fn publish(ctx: &Context, dv: &DataVolume, event: &PhaseEvent) {
    let ev = Event {
        type_: if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: event.reason.to_string(),
        note: Some(event.message.clone()),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    if let Err(err) = ctx.recorder.publish(&ev, &dv.object_ref(&())).await {
        tracing::warn!(%err, reason = event.reason, "cannot publish event");
    }
}

async fn write_status(
    ctx: &Context,
    dv: &DataVolume,
    namespace: &str,
    observed: &Observed<'_>,
) -> Result<Option<DataVolumePhase>, Error> {
    let (status, event) = status::desired_status(observed);
    if dv.status.as_ref() != Some(&status) {
        let api: Api<DataVolume> = Api::namespaced(ctx.client.clone(), namespace);
        api.patch_status(
            &dv.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
        tracing::debug!(datavolume = %dv.name_any(), phase = ?status.phase, "status written");
    }
    if let Some(event) = &event {
        publish(ctx, dv, event).await;
    }
    Ok(status.phase)
}

/// Reports on the DataVolume that it cannot go on (`reason`, `message`), and looks again
/// later.
async fn report_blocked(
    ctx: &Context,
    dv: &DataVolume,
    transfer: &Transfer,
    reason: &str,
    message: &str,
    now: &Time,
) -> Result<Action, Error> {
    let namespace = dv.namespace().unwrap_or_default();
    let observed = Observed {
        current: dv.status.as_ref(),
        transfer,
        pvc: None,
        wait_for_first_consumer: false,
        progress: None,
        blocked: Some((reason, message)),
        now,
    };
    write_status(ctx, dv, &namespace, &observed).await?;
    Ok(Action::requeue(BLOCKED_INTERVAL))
}

/// Reconciles one DataVolume.
pub async fn reconcile(dv: Arc<DataVolume>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = dv.name_any();
    let namespace = dv
        .namespace()
        .ok_or_else(|| Error::MissingNamespace(name.clone()))?;
    if dv.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes the PVC and pods through their owner references; a
        // cross-namespace clone's temporary claim in the source namespace has no owner.
        host_clone::clean_up(&ctx, &dv).await?;
        cross_namespace::clean_up(&ctx, &dv).await?;
        return Ok(Action::await_change());
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let source = match resolve_source(&dv, &ctx, &namespace).await? {
        Ok(source) => source,
        Err((reason, message)) => {
            let transfer = Transfer::Unsupported(message.clone());
            return report_blocked(&ctx, &dv, &transfer, &reason, &message, &now).await;
        }
    };
    let mut transfer = Transfer::from_source(&source);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut pvc = pvcs.get_opt(&name).await?;
    let settings = cluster_settings(&ctx, &dv, pvc.as_ref()).await?;
    let final_phase = dv
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .filter(|p| p.is_final());

    if let Some(existing) = &pvc {
        let owned = existing
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == dv.metadata.uid.as_ref() && o.controller == Some(true));
        if !owned {
            let message =
                format!("Resource {name:?} already exists and is not managed by DataVolume");
            let transfer = Transfer::Unsupported(message.clone());
            return report_blocked(&ctx, &dv, &transfer, "ErrResourceExists", &message, &now).await;
        }
    }

    // A clone source (a PVC, or a VolumeSnapshot to restore): CSI when possible, else
    // host-assisted.
    let clone_ref = match &transfer {
        Transfer::CsiClone {
            namespace,
            name,
            snapshot,
        } => Some((namespace.clone(), name.clone(), *snapshot)),
        _ => None,
    };
    let cross_namespace_source = clone_ref
        .as_ref()
        .filter(|(src_ns, _, _)| *src_ns != namespace)
        .map(|(src_ns, src_name, _)| (src_ns.as_str(), src_name.as_str()));
    let mut clone_source = None;
    let mut source_exists = true;
    if let Some((src_ns, src_name, snapshot)) = &clone_ref {
        let (exists, source_claim) = if *snapshot {
            clone_of_snapshot(&ctx, src_ns, src_name).await?
        } else {
            let claim = Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), src_ns)
                .get_opt(src_name)
                .await?;
            (claim.is_some(), claim)
        };
        let what = if *snapshot { "VolumeSnapshot" } else { "PVC" };
        if let (Some(source_pvc), None, false) = (&source_claim, &pvc, *snapshot) {
            if let Some(message) = unpopulated(&ctx, source_pvc).await? {
                report_blocked(
                    &ctx,
                    &dv,
                    &transfer,
                    "CloneSourceNotPopulated",
                    &message,
                    &now,
                )
                .await?;
                return Ok(Action::requeue(SOURCE_WAIT_INTERVAL));
            }
        }
        // A host-assisted copy, once started, stays one whatever becomes of its source.
        let copying = pvc.as_ref().is_some_and(|p| {
            p.annotations()
                .get(ANN_CLONE_TYPE)
                .is_some_and(|t| t == "copy")
        });
        match &source_claim {
            _ if !exists && pvc.is_none() => {
                let message = format!("Source {what} {src_ns}/{src_name} not found");
                return report_blocked(&ctx, &dv, &transfer, "NotFound", &message, &now).await;
            }
            _ if copying => transfer = host_clone_transfer((src_ns, src_name), *snapshot),
            Some(source_pvc) if !csi_clone(&dv, source_pvc, &settings) => {
                transfer = host_clone_transfer((src_ns, src_name), *snapshot);
            }
            _ => {}
        }
        if matches!(transfer, Transfer::HostClone { .. }) && pvc.is_none() {
            let source = source_claim.as_ref().filter(|_| !*snapshot);
            if let Some((reason, message)) = host_clone::not_ready(&ctx, source).await? {
                report_blocked(&ctx, &dv, &transfer, reason, &message, &now).await?;
                return Ok(Action::requeue(SOURCE_WAIT_INTERVAL));
            }
        }
        source_exists = exists;
        // A clone from another namespace needs its creator's permission there: its token.
        let cloning = !matches!(transfer, Transfer::Unsupported(_));
        if cross_namespace_source.is_some() && pvc.is_none() && cloning {
            if let Some(message) =
                cross_namespace::refusal(&ctx, &dv, (src_ns.as_str(), src_name.as_str())).await?
            {
                return report_blocked(
                    &ctx,
                    &dv,
                    &transfer,
                    "CloneValidationFailed",
                    &message,
                    &now,
                )
                .await;
            }
        }
        clone_source = source_claim;
    }
    // Only a CSI clone goes through a temporary claim; a host-assisted one has a source pod.
    let cross_namespace_source =
        cross_namespace_source.filter(|_| matches!(transfer, Transfer::CsiClone { .. }));

    if pvc.is_none() && final_phase.is_none() && !matches!(transfer, Transfer::Unsupported(_)) {
        let class_name = settings.class.as_ref().map(|c| c.name_any());
        let inputs = PvcInputs {
            transfer: &transfer,
            storage_class: class_name.as_deref(),
            profile: settings.profile.as_ref().and_then(|p| p.status.as_ref()),
            filesystem_overhead: settings.overhead(),
            clone_source: clone_source.as_ref(),
            preallocation: settings.preallocation(&dv),
            wait_for_first_consumer: settings.wait_for_first_consumer(),
        };
        let desired = match pvc::desired_pvc(&dv, &inputs) {
            Ok(desired) => desired,
            // The spec asks for a claim that cannot be made: the user has to change it.
            Err(err) => {
                let message = err.to_string();
                return report_blocked(&ctx, &dv, &transfer, "ErrClaimNotValid", &message, &now)
                    .await;
            }
        };
        pvc = match cross_namespace_source {
            Some(src) => cross_namespace::hand_over(&ctx, &dv, src, desired).await?,
            None => {
                tracing::info!(datavolume = %name, %namespace, "creating PVC");
                Some(pvcs.create(&PostParams::default(), &desired).await?)
            }
        };
    }
    if let (Some(claim), Some(_)) = (&pvc, cross_namespace_source) {
        cross_namespace::restore_reclaim_policy(&ctx, &dv, claim).await?;
    }

    let mut progress = None;
    if let (Some(claim), Transfer::Import(_) | Transfer::Upload | Transfer::HostClone { .. }) =
        (pvc.as_mut(), &transfer)
    {
        let is_upload = !matches!(transfer, Transfer::Import(_));
        let pod_name = if is_upload {
            pod::upload_pod_name(&name)
        } else {
            pod::importer_pod_name(&name)
        };
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
        let worker = pods.get_opt(&pod_name).await?;
        let ann = claim.annotations().clone();
        let done = final_phase.is_some()
            || ann
                .get(annotations::POD_PHASE)
                .is_some_and(|p| p == "Succeeded")
            || status::terminal_failure(claim).is_some();
        let wffc = settings.wait_for_first_consumer() && !is_bound(claim);
        match &worker {
            None if !done && !wffc => {
                let block =
                    claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) == Some(BLOCK);
                let source_endpoint = match &transfer {
                    Transfer::Import(s) => s.endpoint.clone(),
                    _ => None,
                };
                let worker_settings = WorkerSettings {
                    config: &ctx.config,
                    filesystem_overhead: if block { 0.0 } else { settings.overhead() },
                    preallocation: settings.preallocation(&dv),
                    insecure_tls: settings.insecure(source_endpoint.as_deref()),
                };
                let desired = match (&transfer, &clone_source) {
                    (Transfer::Import(source), _) => {
                        pod::importer_pod(&dv, claim, source, &worker_settings)
                    }
                    (
                        Transfer::HostClone {
                            namespace: src_ns,
                            name: src_name,
                            ..
                        },
                        _,
                    ) => pod::upload_pod(
                        &dv,
                        claim,
                        &worker_settings,
                        &host_clone::client_name((src_ns, src_name), claim),
                    ),
                    _ => pod::upload_pod(
                        &dv,
                        claim,
                        &worker_settings,
                        &ctx.config.upload_client_name,
                    ),
                };
                if is_upload {
                    upload::ensure_upload_server_prerequisites(&ctx, &dv, claim, &namespace)
                        .await?;
                }
                tracing::info!(datavolume = %name, pod = %pod_name, "creating worker pod");
                pods.create(&PostParams::default(), &desired).await?;
                let mut patch: BTreeMap<String, String> = BTreeMap::new();
                patch.insert(annotations::POD_PHASE.into(), "Pending".into());
                if !is_upload {
                    patch.insert(annotations::IMPORT_POD.into(), pod_name.clone());
                }
                *claim = patch_annotations(&pvcs, claim, patch).await?;
            }
            Some(_)
                if matches!(transfer, Transfer::HostClone { .. })
                    && status::terminal_failure(claim).is_some() =>
            {
                // The clone source failed for good: the upload server waits for nothing.
                delete_ignoring_missing(&pods, &pod_name).await?;
                let services: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
                delete_ignoring_missing(&services, &pod_name).await?;
            }
            Some(worker) => {
                let from_pod = pod::pvc_annotations_from_pod(worker, &ann);
                let changed: BTreeMap<String, String> = from_pod
                    .into_iter()
                    .filter(|(k, v)| ann.get(k) != Some(v))
                    .collect();
                if !changed.is_empty() {
                    *claim = patch_annotations(&pvcs, claim, changed).await?;
                }
                let phase = pod::phase(worker);
                let terminal = pod::terminal_failure(worker).is_some();
                if terminal || (phase == "Succeeded" && !retain_after_completion(&dv, Some(claim)))
                {
                    tracing::info!(datavolume = %name, pod = %pod_name, terminal, "deleting finished worker pod");
                    delete_ignoring_missing(&pods, &pod_name).await?;
                    if is_upload {
                        let services: Api<Service> =
                            Api::namespaced(ctx.client.clone(), &namespace);
                        delete_ignoring_missing(&services, &pod_name).await?;
                    }
                } else if phase == "Running" && !is_upload {
                    progress = scrape_progress(
                        &ctx,
                        worker,
                        dv.metadata.uid.as_deref().unwrap_or_default(),
                    )
                    .await;
                }
            }
            None => {}
        }
        if let Transfer::HostClone {
            namespace: src_ns,
            name: src_name,
            snapshot,
        } = &transfer
        {
            let clone = HostCloneRun {
                source: (src_ns, src_name),
                snapshot: *snapshot,
                source_claim: clone_source.as_ref(),
                source_exists,
                upload_pod: worker.as_ref(),
                finished: final_phase.is_some()
                    || claim
                        .annotations()
                        .get(annotations::POD_PHASE)
                        .is_some_and(|p| p == "Succeeded")
                    || status::terminal_failure(claim).is_some(),
            };
            if let Some(scraped) =
                drive_host_clone(&ctx, &dv, &settings, &pvcs, claim, &clone).await?
            {
                progress = Some(scraped);
            }
        }
    }

    let wffc = settings.wait_for_first_consumer() && pvc.as_ref().is_some_and(|p| !is_bound(p));
    let observed = Observed {
        current: dv.status.as_ref(),
        transfer: &transfer,
        pvc: pvc.as_ref(),
        wait_for_first_consumer: wffc,
        progress: progress.as_deref(),
        blocked: None,
        now: &now,
    };
    let phase = write_status(&ctx, &dv, &namespace, &observed).await?;
    Ok(match phase {
        Some(p) if p.is_final() => Action::await_change(),
        Some(DataVolumePhase::ImportInProgress | DataVolumePhase::CloneInProgress) => {
            Action::requeue(PROGRESS_INTERVAL)
        }
        _ if matches!(transfer, Transfer::Unsupported(_)) => Action::requeue(BLOCKED_INTERVAL),
        // The temporary claim of a cross-namespace clone has no owner to wake us up.
        _ if cross_namespace_source.is_some() && pvc.is_none() => {
            Action::requeue(HANDOVER_INTERVAL)
        }
        _ => Action::requeue(Duration::from_secs(60)),
    })
}

/// What the reconcile knows of a host-assisted clone.
struct HostCloneRun<'a> {
    /// The source as the DataVolume names it.
    source: (&'a str, &'a str),
    /// Whether it is a VolumeSnapshot (copied from a claim it is restored into).
    snapshot: bool,
    /// The source PVC, or the claim the snapshot was taken of.
    source_claim: Option<&'a PersistentVolumeClaim>,
    /// Whether the source (PVC or VolumeSnapshot) still exists.
    source_exists: bool,
    /// The target's upload server pod.
    upload_pod: Option<&'a Pod>,
    /// The copy is complete or failed for good.
    finished: bool,
}

/// The source side of a host-assisted clone: its restore claim (for a snapshot), its source
/// pod, the source's state on the target `claim`, the clean-up once finished. Returns the
/// progress the running source pod serves.
async fn drive_host_clone(
    ctx: &Context,
    dv: &DataVolume,
    settings: &ClusterSettings,
    pvcs: &Api<PersistentVolumeClaim>,
    claim: &mut PersistentVolumeClaim,
    clone: &HostCloneRun<'_>,
) -> Result<Option<String>, Error> {
    let (src_ns, src_name) = clone.source;
    let block = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) == Some(BLOCK);
    let worker_settings = WorkerSettings {
        config: &ctx.config,
        filesystem_overhead: if block { 0.0 } else { settings.overhead() },
        preallocation: settings.preallocation(dv),
        insecure_tls: false,
    };
    let restored = if clone.snapshot && !clone.finished {
        host_clone::ensure_restore_claim(ctx, dv, clone.source, clone.source_claim).await?
    } else {
        None
    };
    let pod_source = if clone.snapshot {
        restored.as_ref()
    } else {
        clone.source_claim
    };
    let target = host_clone::Target {
        dv,
        pvc: claim,
        source: clone.source,
        upload_pod: clone.upload_pod,
        finished: clone.finished,
    };
    let state = if !clone.finished && pod_source.is_none() && !clone.source_exists {
        let what = if clone.snapshot {
            "VolumeSnapshot"
        } else {
            "PVC"
        };
        let message = format!("Source {what} {src_ns}/{src_name} {}", pod::SOURCE_DELETED);
        host_clone::SourceState::Failed(message)
    } else {
        host_clone::drive_source(ctx, &target, pod_source, &worker_settings).await?
    };
    let mut progress = None;
    match state {
        host_clone::SourceState::Running(source_pod) => {
            *claim = mirror_source(pvcs, claim, &source_pod).await?;
            let owner = dv.metadata.uid.as_deref().unwrap_or_default();
            progress = scrape_progress(ctx, &source_pod, owner).await;
        }
        host_clone::SourceState::Waiting(source_pod) => {
            *claim = mirror_source(pvcs, claim, &source_pod).await?;
        }
        host_clone::SourceState::Failed(message) => {
            tracing::warn!(datavolume = %dv.name_any(), %message, "clone source failed");
            let failed = host_clone::failure_annotations(&message);
            *claim = patch_annotations(pvcs, claim, failed).await?;
        }
        host_clone::SourceState::Absent => {}
    }
    if clone.finished {
        if clone.snapshot {
            host_clone::delete_restore_claim(ctx, dv, src_ns).await?;
        }
        // Its source pod and restore claim are gone: nothing is left to clean up.
        cross_namespace::remove_finalizer(ctx, dv).await?;
    }
    Ok(progress)
}

/// Records the clone source pod's Running condition on the target PVC, when it changed.
async fn mirror_source(
    pvcs: &Api<PersistentVolumeClaim>,
    claim: &PersistentVolumeClaim,
    source_pod: &Pod,
) -> Result<PersistentVolumeClaim, Error> {
    let changed = host_clone::source_annotations(source_pod, claim.annotations());
    if changed.is_empty() {
        return Ok(claim.clone());
    }
    patch_annotations(pvcs, claim, changed).await
}

/// Whether VolumeSnapshot `namespace/name` exists, and the claim it was taken of (which
/// gives a restore its node and, when the DataVolume names none, its size).
async fn clone_of_snapshot(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<(bool, Option<PersistentVolumeClaim>), Error> {
    let snapshots: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        namespace,
        &crate::volume_snapshot_resource(),
    );
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

/// Why a clone source is not ready to be copied: its DataVolume has not succeeded yet (a
/// copy now would take a half-written image). A claim no DataVolume fills is ready as it is.
async fn unpopulated(
    ctx: &Context,
    source: &PersistentVolumeClaim,
) -> Result<Option<String>, Error> {
    let Some(owner) = source
        .owner_references()
        .iter()
        .find(|o| o.kind == "DataVolume" && o.controller == Some(true))
    else {
        return Ok(None);
    };
    let namespace = source.namespace().unwrap_or_default();
    let owner_dv = Api::<DataVolume>::namespaced(ctx.client.clone(), &namespace)
        .get_opt(&owner.name)
        .await?;
    let phase = owner_dv.and_then(|d| d.status?.phase);
    Ok(match phase {
        Some(DataVolumePhase::Succeeded) => None,
        phase => Some(format!(
            "source PVC {namespace}/{} is not populated yet: its DataVolume is {}",
            source.name_any(),
            phase.map_or("Pending", |p| p.as_str())
        )),
    })
}

/// The transfer of a clone that a CSI clone cannot make: a host-assisted copy of a PVC, or of
/// a VolumeSnapshot restored into a temporary claim of its own class.
fn host_clone_transfer(source: (&str, &str), snapshot: bool) -> Transfer {
    Transfer::HostClone {
        namespace: source.0.to_string(),
        name: source.1.to_string(),
        snapshot,
    }
}

fn csi_clone(
    dv: &DataVolume,
    source_pvc: &PersistentVolumeClaim,
    settings: &ClusterSettings,
) -> bool {
    let class = settings.class.as_ref().map(|c| c.name_any());
    let profile = settings.profile.as_ref().and_then(|p| p.status.as_ref());
    let mode = pvc::desired_volume_mode(dv, profile);
    pvc::csi_clone_possible(source_pvc, class.as_deref(), &mode)
}

fn is_bound(pvc: &PersistentVolumeClaim) -> bool {
    pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

pub(super) async fn patch_annotations(
    pvcs: &Api<PersistentVolumeClaim>,
    pvc: &PersistentVolumeClaim,
    annotations: BTreeMap<String, String>,
) -> Result<PersistentVolumeClaim, Error> {
    let patch = json!({ "metadata": { "annotations": annotations } });
    Ok(pvcs
        .patch(
            &pvc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?)
}

pub(super) async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(err.into()),
    }
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
