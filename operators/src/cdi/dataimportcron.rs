//! The DataImportCron controller (CDI's dataimportcron-controller) for registry sources: on
//! its schedule it asks the registry for the digest the template's image has now; a new
//! digest is imported as a DataVolume named after the managed DataSource and the digest,
//! the DataSource is pointed at the newest import once it succeeded, and imports beyond
//! `importsToKeep` are deleted. CDI polls with a CronJob running a poller image; here the
//! controller polls itself (CDI does so too for node-pull and ImageStream sources), so a
//! cluster needs no CronJob and the single machine no Job runner.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use api::cdi::dataimportcron::conditions::{PROGRESSING, UP_TO_DATE};
use api::cdi::dataimportcron::{
    DataImportCronGarbageCollect, DataImportCronRetentionPolicy, ImportStatus,
};
use api::cdi::datasource::CdiCondition;
use api::cdi::datavolume::DataVolumeSourcePvc;
use api::cdi::{
    CDIConfig, DataImportCron, DataImportCronStatus, DataSource, DataSourceSource, DataSourceSpec,
    DataVolume,
};
use api::common::ConditionStatus;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tempfile::TempDir;

use crate::cdi::datasource::{source_patch, without_heartbeats};
use crate::cdi::datavolume::settings::{CDI_CONFIG, is_insecure_registry};
use crate::kit::conditions::Heartbeat;
use crate::kit::{self, delete_ignoring_missing, patch_status};

pub use api::cdi::dataimportcron::CRON_LABEL;
/// The digest the source has now, as last polled.
pub const ANN_DESIRED_DIGEST: &str = "cdi.kubevirt.io/storage.import.sourceDesiredDigest";
/// When the schedule polls next (RFC 3339).
pub const ANN_NEXT_CRON_TIME: &str = "cdi.kubevirt.io/storage.import.nextCronTime";
/// When the schedule last polled (RFC 3339).
pub const ANN_LAST_CRON_TIME: &str = "cdi.kubevirt.io/storage.import.lastCronTime";
/// How many imports are kept when `importsToKeep` is not set.
const DEFAULT_IMPORTS_TO_KEEP: usize = 3;
/// How many hex digits of the digest name an import.
const DIGEST_SUFFIX: usize = 12;
/// How soon a cron that could not poll or import is looked at again.
const RETRY: Duration = Duration::from_secs(10);

/// Errors of the DataImportCron controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
}

/// The name of the import of `digest` (`sha256:...`): the DataSource's name and the first
/// twelve hex digits, as CDI names them.
pub fn import_name(data_source: &str, digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let short: String = hex.chars().take(DIGEST_SUFFIX).collect();
    format!("{data_source}-{short}")
}

/// `docker://host/repo:tag` (or `@sha256:...`) pinned to `digest`.
pub fn pinned_url(url: &str, digest: &str) -> String {
    let without_digest = url.split_once('@').map_or(url, |(name, _)| name);
    let scheme_end = without_digest.find("://").map_or(0, |i| i + 3);
    let (scheme, rest) = without_digest.split_at(scheme_end);
    // A tag follows the last ':' after the last '/' (a ':' before it is the port).
    let last_slash = rest.rfind('/').unwrap_or(0);
    let repository = match rest[last_slash..].find(':') {
        Some(colon) => &rest[..last_slash + colon],
        None => rest,
    };
    format!("{scheme}{repository}@{digest}")
}

/// When the schedule fires next after `now`.
pub fn next_run(
    schedule: &str,
    now: &chrono::DateTime<chrono::Utc>,
) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let cron = croner::Cron::from_str(schedule)
        .map_err(|e| format!("schedule {schedule:?} is not a cron expression: {e}"))?;
    cron.find_next_occurrence(now, false)
        .map_err(|e| format!("schedule {schedule:?} never fires: {e}"))
}

/// The DataVolume that imports `digest`: the template with its registry URL pinned to the
/// digest, labelled with the cron, owned by it unless the imports are to outlive it.
pub fn import_data_volume(cron: &DataImportCron, digest: &str) -> Option<DataVolume> {
    let template = &cron.spec.template;
    let mut spec = template.spec.clone();
    let registry = spec.source.as_mut()?.registry.as_mut()?;
    let url = registry.url.as_deref()?;
    registry.url = Some(pinned_url(url, digest));
    let mut metadata = template.metadata.clone().unwrap_or_default();
    metadata.name = Some(import_name(&cron.spec.managed_data_source, digest));
    metadata.namespace = cron.namespace();
    metadata.generate_name = None;
    metadata.resource_version = None;
    metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(CRON_LABEL.into(), cron.name_any());
    metadata.owner_references = owned_by(cron);
    Some(DataVolume {
        metadata,
        spec,
        status: None,
    })
}

/// The owner reference of what the cron creates, when its retention policy is `None`.
fn owned_by(
    cron: &DataImportCron,
) -> Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>> {
    (cron.spec.retention_policy == Some(DataImportCronRetentionPolicy::None))
        .then(|| cron.controller_owner_ref(&()))
        .flatten()
        .map(|owner| vec![owner])
}

/// The imports to delete: those of `cron` beyond the newest `importsToKeep`, oldest first
/// out, never the current one.
pub fn outdated_imports(
    cron: &DataImportCron,
    mut imports: Vec<(String, Option<Time>)>,
    current: Option<&str>,
) -> Vec<String> {
    if cron.spec.garbage_collect == Some(DataImportCronGarbageCollect::Never) {
        return Vec::new();
    }
    let keep = cron
        .spec
        .imports_to_keep
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(DEFAULT_IMPORTS_TO_KEEP);
    imports.sort_by(|a, b| b.1.cmp(&a.1));
    imports
        .into_iter()
        .skip(keep)
        .map(|(name, _)| name)
        .filter(|name| Some(name.as_str()) != current)
        .collect()
}

/// Whether the next digest may be imported while the current import's DataVolume
/// `exists` in `phase`: once it succeeded, failed for good, or is gone.
pub fn may_import_next(exists: bool, phase: Option<&str>) -> bool {
    !exists || matches!(phase, Some("Succeeded" | "Failed"))
}

/// The Progressing condition for the current import's DataVolume phase, in CDI's words.
pub fn progressing(phase: Option<&str>) -> (ConditionStatus, &str, String) {
    match phase {
        Some("ImportScheduled") => (
            ConditionStatus::False,
            "ImportScheduled",
            "Import is scheduled".into(),
        ),
        Some("ImportInProgress") => (
            ConditionStatus::True,
            "ImportProgressing",
            "Import is progressing".into(),
        ),
        None | Some("Succeeded") => (
            ConditionStatus::False,
            "NoImport",
            "No current import".into(),
        ),
        Some(other) => (
            ConditionStatus::False,
            other,
            format!("Import DataVolume phase {other}"),
        ),
    }
}

/// Sets condition `type_` in `conditions`, keeping its transition time while its status
/// holds; CDI stamps the heartbeat at every pass.
fn set_condition(
    conditions: &mut Vec<CdiCondition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    now: &Time,
) {
    kit::conditions::set(
        conditions,
        type_,
        status,
        Some(reason),
        Some(message),
        Heartbeat::Always,
        now,
    );
}

struct Context {
    client: Client,
}

/// What one pass decided to write back.
struct Outcome {
    status: DataImportCronStatus,
    annotations: Vec<(&'static str, String)>,
    requeue: Duration,
}

async fn poll_digest(ctx: &Context, cron: &DataImportCron, url: &str) -> Result<String, String> {
    let config = Api::<CDIConfig>::all(ctx.client.clone())
        .get_opt(CDI_CONFIG)
        .await
        .map_err(|e| e.to_string())?;
    let namespace = cron.namespace().unwrap_or_default();
    let registry = cron.spec.registry();
    let credentials = match registry.and_then(|r| r.secret_ref.as_deref()) {
        Some(secret) => Some(registry_credentials(ctx, &namespace, secret).await?),
        None => None,
    };
    // The CA files live as long as the poll.
    let cert_dir = match registry.and_then(|r| r.cert_config_map.as_deref()) {
        Some(map) => Some(registry_cas(ctx, &namespace, map).await?),
        None => None,
    };
    let options = importer::source::registry::RegistryOptions {
        insecure: is_insecure_registry(config.as_ref(), url),
        credentials,
        cert_dir: cert_dir.as_ref().map(|d| d.path().to_path_buf()),
        ..Default::default()
    };
    tracing::debug!(cron = %cron.name_any(), %url, "polling the registry");
    importer::source::registry::manifest_digest(url, &options)
        .await
        .map_err(|e| e.to_string())
}

/// The registry credentials of Secret `namespace/name` (CDI's `accessKeyId`, `secretKey`).
async fn registry_credentials(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<importer::source::http::Credentials, String> {
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("secretRef: Secret {namespace}/{name} not found"))?;
    let data = secret.data.unwrap_or_default();
    let field = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .ok_or_else(|| format!("secretRef: Secret {namespace}/{name} has no {key}"))
    };
    Ok(importer::source::http::Credentials {
        username: field("accessKeyId")?,
        password: field("secretKey")?,
    })
}

/// The CA certificates of ConfigMap `namespace/name`, one file per key, in a temporary
/// directory (what the importer pod gets as a mounted ConfigMap).
async fn registry_cas(ctx: &Context, namespace: &str, name: &str) -> Result<TempDir, String> {
    let map = Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("certConfigMap: ConfigMap {namespace}/{name} not found"))?;
    let dir = tempfile::Builder::new()
        .prefix("ferrovirt-cron-ca-")
        .tempdir()
        .map_err(|e| format!("certConfigMap: {e}"))?;
    for (key, pem) in map.data.unwrap_or_default() {
        // Keys are file names in a mounted ConfigMap; anything else is skipped.
        if key.contains('/') || key.starts_with('.') {
            continue;
        }
        std::fs::write(dir.path().join(&key), pem).map_err(|e| format!("certConfigMap: {e}"))?;
    }
    Ok(dir)
}

async fn reconcile(cron: Arc<DataImportCron>, ctx: Arc<Context>) -> Result<Action, Error> {
    let outcome = evaluate(&cron, &ctx).await?;
    let name = cron.name_any();
    let namespace = cron.namespace().unwrap_or_default();
    let crons: Api<DataImportCron> = Api::namespaced(ctx.client.clone(), &namespace);
    let wanted: serde_json::Map<String, serde_json::Value> = outcome
        .annotations
        .iter()
        .filter(|(k, v)| cron.annotations().get(*k) != Some(v))
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    if !wanted.is_empty() {
        let patch = json!({"metadata": {"annotations": wanted}});
        crons
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let unchanged = cron.status.as_ref().is_some_and(|current| {
        let strip = |status: &DataImportCronStatus| DataImportCronStatus {
            conditions: without_heartbeats(&status.conditions),
            ..status.clone()
        };
        strip(current) == strip(&outcome.status)
    });
    if !unchanged {
        patch_status(&crons, &name, &outcome.status).await?;
    }
    Ok(Action::requeue(outcome.requeue))
}

/// One pass over a cron: poll when due, follow the current import, start the next, point
/// the DataSource at the newest, collect old imports.
async fn evaluate(cron: &DataImportCron, ctx: &Context) -> Result<Outcome, Error> {
    let mut pass = Pass::new(cron);
    let namespace = cron.namespace().unwrap_or_default();

    let Some(url) = registry_url(cron) else {
        let message = "only registry sources with a url are supported";
        pass.set_condition(
            PROGRESSING,
            ConditionStatus::False,
            "UnsupportedSource",
            message,
        );
        return Ok(pass.outcome());
    };
    let Some(polled) = poll_when_due(ctx, cron, &url, &mut pass).await else {
        return Ok(pass.outcome());
    };

    let data_volumes: Api<DataVolume> = Api::namespaced(ctx.client.clone(), &namespace);
    let current = current_import(&data_volumes, &pass.status).await?;
    follow_current_import(&mut pass, &current, &namespace);
    import_new_digest(&data_volumes, cron, &mut pass, &polled, &current).await?;

    ensure_data_source(ctx, cron, pass.status.last_imported_pvc.as_ref()).await?;
    if current.succeeded {
        collect_garbage(
            &data_volumes,
            cron,
            current.import.as_ref().map(|i| i.data_volume_name.as_str()),
        )
        .await?;
    }
    Ok(pass.outcome())
}

/// One pass's state: the time it runs at, and what it will write back.
struct Pass {
    now_chrono: chrono::DateTime<chrono::Utc>,
    now: Time,
    status: DataImportCronStatus,
    conditions: Vec<CdiCondition>,
    annotations: Vec<(&'static str, String)>,
    requeue: Duration,
}

impl Pass {
    /// A pass starting now from the cron's status.
    fn new(cron: &DataImportCron) -> Self {
        let now_chrono = chrono::Utc::now();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let mut status = cron.status.clone().unwrap_or_default();
        let conditions = status.conditions.take().unwrap_or_default();
        Pass {
            now_chrono,
            now,
            status,
            conditions,
            annotations: Vec::new(),
            requeue: Duration::from_secs(60),
        }
    }

    /// Sets condition `type_` as of this pass.
    fn set_condition(&mut self, type_: &str, status: ConditionStatus, reason: &str, message: &str) {
        set_condition(
            &mut self.conditions,
            type_,
            status,
            reason,
            message,
            &self.now,
        );
    }

    /// What the pass writes back.
    fn outcome(mut self) -> Outcome {
        self.status.conditions = Some(self.conditions);
        Outcome {
            status: self.status,
            annotations: self.annotations,
            requeue: self.requeue,
        }
    }
}

/// The registry URL of the cron's template, the only source it imports from.
fn registry_url(cron: &DataImportCron) -> Option<String> {
    cron.spec.registry().and_then(|r| r.url.clone())
}

/// What the schedule's poll found out.
struct Polled {
    /// The digest the source has, as last polled.
    desired: Option<String>,
    /// Why this pass's poll failed, if it did.
    failure: Option<String>,
}

/// Polls the registry when the schedule is due (at once for a new cron, as CDI's initial
/// poller Job does), noting the digest and the poll times on the cron and when to look
/// again. `None` when the schedule is not a cron expression (said in UpToDate).
async fn poll_when_due(
    ctx: &Context,
    cron: &DataImportCron,
    url: &str,
    pass: &mut Pass,
) -> Option<Polled> {
    let now_chrono = pass.now_chrono;
    let mut desired = cron.annotations().get(ANN_DESIRED_DIGEST).cloned();
    let mut poll_failure = None;
    let due = cron
        .annotations()
        .get(ANN_NEXT_CRON_TIME)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_none_or(|t| t <= now_chrono);
    match next_run(&cron.spec.schedule, &now_chrono) {
        Err(message) => {
            pass.set_condition(
                UP_TO_DATE,
                ConditionStatus::False,
                "InvalidSchedule",
                &message,
            );
            pass.requeue = RETRY;
            return None;
        }
        Ok(next) if due => {
            match poll_digest(ctx, cron, url).await {
                Ok(digest) => {
                    pass.annotations.push((ANN_DESIRED_DIGEST, digest.clone()));
                    pass.annotations
                        .push((ANN_LAST_CRON_TIME, now_chrono.to_rfc3339()));
                    pass.annotations
                        .push((ANN_NEXT_CRON_TIME, next.to_rfc3339()));
                    pass.status.last_execution_timestamp = Some(pass.now.clone());
                    desired = Some(digest);
                }
                Err(message) => {
                    tracing::warn!(cron = %cron.name_any(), %message, "polling the source failed");
                    poll_failure = Some(message);
                    pass.requeue = RETRY;
                }
            }
            pass.requeue = pass
                .requeue
                .min((next - now_chrono).to_std().unwrap_or(RETRY));
        }
        Ok(_) => {
            let next = cron
                .annotations()
                .get(ANN_NEXT_CRON_TIME)
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
            if let Some(next) = next {
                pass.requeue = (next.with_timezone(&chrono::Utc) - now_chrono)
                    .to_std()
                    .unwrap_or(RETRY)
                    .max(Duration::from_secs(1));
            }
        }
    }
    Some(Polled {
        desired,
        failure: poll_failure,
    })
}

/// The current import and the state of its DataVolume.
struct CurrentImport {
    import: Option<ImportStatus>,
    /// Its DataVolume's phase.
    phase: Option<&'static str>,
    /// Its DataVolume succeeded.
    succeeded: bool,
    /// The next digest may be imported in its place.
    replaceable: bool,
    /// Its DataVolume's name, when it failed.
    failed: Option<String>,
}

/// Reads the current import's DataVolume.
async fn current_import(
    data_volumes: &Api<DataVolume>,
    status: &DataImportCronStatus,
) -> Result<CurrentImport, Error> {
    let current = status
        .current_imports
        .as_ref()
        .and_then(|i| i.first())
        .cloned();
    let (exists, phase) = match &current {
        Some(import) => {
            let dv = data_volumes.get_opt(&import.data_volume_name).await?;
            let phase = dv.as_ref().and_then(|dv| dv.status.as_ref()?.phase);
            (dv.is_some(), phase.map(|p| p.as_str()))
        }
        None => (false, None),
    };
    let succeeded = phase == Some("Succeeded");
    let replaceable = current.is_none() || may_import_next(exists, phase);
    let failed = current
        .as_ref()
        .filter(|_| phase == Some("Failed"))
        .map(|i| i.data_volume_name.clone());
    Ok(CurrentImport {
        import: current,
        phase,
        succeeded,
        replaceable,
        failed,
    })
}

/// Records a succeeded current import as the last imported claim, and its progress in
/// Progressing.
fn follow_current_import(pass: &mut Pass, current: &CurrentImport, namespace: &str) {
    if let Some(import) = current.import.as_ref().filter(|_| current.succeeded) {
        let pvc = DataVolumeSourcePvc {
            namespace: namespace.to_string(),
            name: import.data_volume_name.clone(),
        };
        if pass.status.last_imported_pvc.as_ref() != Some(&pvc) {
            pass.status.last_imported_pvc = Some(pvc);
            pass.status.last_import_timestamp = Some(pass.now.clone());
        }
    }
    let (progress, reason, message) = progressing(current.phase);
    pass.set_condition(PROGRESSING, progress, reason, &message);
}

/// A new digest: imported once the current import is done (a failed one is replaced);
/// UpToDate says how far the imports are behind the source.
async fn import_new_digest(
    data_volumes: &Api<DataVolume>,
    cron: &DataImportCron,
    pass: &mut Pass,
    polled: &Polled,
    current: &CurrentImport,
) -> Result<(), Error> {
    let current_digest = current.import.as_ref().map(|i| i.digest.as_str());
    match polled.desired.as_deref() {
        Some(digest) if Some(digest) != current_digest => {
            pass.set_condition(
                UP_TO_DATE,
                ConditionStatus::False,
                "OutdatedImport",
                "Source digest updated since last import",
            );
            if current.replaceable
                && let Some(dv) = import_data_volume(cron, digest)
            {
                if let Some(failed) = &current.failed {
                    tracing::info!(cron = %cron.name_any(), datavolume = %failed, "replacing a failed import");
                    delete_ignoring_missing(data_volumes, failed).await?;
                }
                let name = dv.name_any();
                match data_volumes.create(&PostParams::default(), &dv).await {
                    Ok(_) => {
                        tracing::info!(cron = %cron.name_any(), datavolume = %name, %digest, "importing a new digest")
                    }
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
                pass.status.current_imports = Some(vec![ImportStatus {
                    data_volume_name: name,
                    digest: digest.to_string(),
                }]);
                pass.requeue = pass.requeue.min(RETRY);
            }
        }
        Some(_) if current.succeeded => pass.set_condition(
            UP_TO_DATE,
            ConditionStatus::True,
            "UpToDate",
            "Latest import is up to date",
        ),
        Some(_) => {
            pass.set_condition(
                UP_TO_DATE,
                ConditionStatus::False,
                "ImportProgressing",
                "Import is progressing",
            );
            pass.requeue = pass.requeue.min(RETRY);
        }
        // Why there is none, when a poll said why.
        None => pass.set_condition(
            UP_TO_DATE,
            ConditionStatus::False,
            "NoDigest",
            polled.failure.as_deref().unwrap_or("No source digest"),
        ),
    }
    Ok(())
}

/// The cron's labels a VM's inference reads, passed on to its DataSource as CDI does.
const PASSED_LABELS: [&str; 4] = [
    api::instancetype::DEFAULT_INSTANCETYPE_LABEL,
    api::instancetype::DEFAULT_INSTANCETYPE_KIND_LABEL,
    api::instancetype::DEFAULT_PREFERENCE_LABEL,
    api::instancetype::DEFAULT_PREFERENCE_KIND_LABEL,
];

/// The labels of the cron's DataSource: the cron's name, and its default instancetype and
/// preference labels.
fn data_source_labels(cron: &DataImportCron) -> std::collections::BTreeMap<String, String> {
    let mut labels: std::collections::BTreeMap<String, String> = cron
        .labels()
        .iter()
        .filter(|(key, _)| PASSED_LABELS.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.insert(CRON_LABEL.to_string(), cron.name_any());
    labels
}

/// Creates the managed DataSource (labelled with the cron) and points it at the newest
/// import. A DataSource of that name that another cron or a user made is left alone.
async fn ensure_data_source(
    ctx: &Context,
    cron: &DataImportCron,
    newest: Option<&DataVolumeSourcePvc>,
) -> Result<(), Error> {
    let namespace = cron.namespace().unwrap_or_default();
    let sources: Api<DataSource> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = &cron.spec.managed_data_source;
    let source = DataSourceSource {
        pvc: newest.cloned(),
        ..Default::default()
    };
    match sources.get_opt(name).await? {
        None => {
            let ds = DataSource {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.clone()),
                    labels: Some(data_source_labels(cron)),
                    owner_references: owned_by(cron),
                    ..Default::default()
                },
                spec: DataSourceSpec { source },
                status: None,
            };
            match sources.create(&PostParams::default(), &ds).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Some(ds) if ds.labels().get(CRON_LABEL) == Some(&cron.name_any()) => {
            if newest.is_some() && ds.spec.source != source {
                let patch = json!({"spec": {"source": source_patch(&source)}});
                sources
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            let labels = data_source_labels(cron);
            if labels.iter().any(|(k, v)| ds.labels().get(k) != Some(v)) {
                let patch = json!({"metadata": {"labels": labels}});
                sources
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
        Some(_) => {
            tracing::info!(cron = %cron.name_any(), datasource = %name, "DataSource is not managed by this cron; left alone");
        }
    }
    Ok(())
}

/// Deletes the cron's DataVolumes beyond `importsToKeep` (their PVCs go with them).
async fn collect_garbage(
    data_volumes: &Api<DataVolume>,
    cron: &DataImportCron,
    current: Option<&str>,
) -> Result<(), Error> {
    let selector = format!("{CRON_LABEL}={}", cron.name_any());
    let imports = data_volumes
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .map(|dv| (dv.name_any(), dv.metadata.creation_timestamp))
        .collect();
    for name in outdated_imports(cron, imports, current) {
        tracing::info!(cron = %cron.name_any(), datavolume = %name, "deleting an outdated import");
        delete_ignoring_missing(data_volumes, &name).await?;
    }
    Ok(())
}

fn error_policy(cron: Arc<DataImportCron>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(cron = %cron.name_any(), %err, "DataImportCron reconcile failed");
    Action::requeue(RETRY)
}

/// Runs the DataImportCron controller until its watches end.
pub async fn run(client: Client) {
    let crons: Api<DataImportCron> = Api::all(client.clone());
    let ctx = Arc::new(Context {
        client: client.clone(),
    });
    Controller::new(crons, watcher::Config::default())
        .watches(
            Api::<DataVolume>::all(client),
            watcher::Config::default().labels(CRON_LABEL),
            |dv| {
                let cron = dv.labels().get(CRON_LABEL)?.clone();
                Some(
                    kube::runtime::reflector::ObjectRef::<DataImportCron>::new(&cron)
                        .within(&dv.namespace()?),
                )
            },
        )
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "DataImportCron controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::dataimportcron::{DataImportCronSpec, DataVolumeTemplate};
    use api::cdi::datavolume::{DataVolumeSource, DataVolumeSourceRegistry, DataVolumeSpec};

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn cron(url: &str) -> DataImportCron {
        let mut cron = DataImportCron::new(
            "fedora-cron",
            DataImportCronSpec {
                template: DataVolumeTemplate {
                    api_version: None,
                    kind: None,
                    metadata: None,
                    spec: DataVolumeSpec {
                        source: Some(DataVolumeSource {
                            registry: Some(DataVolumeSourceRegistry {
                                url: Some(url.into()),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    status: None,
                },
                schedule: "0 */12 * * *".into(),
                managed_data_source: "fedora".into(),
                ..Default::default()
            },
        );
        cron.metadata.namespace = Some("golden".into());
        cron.metadata.uid = Some("uid-cron".into());
        cron
    }

    #[test]
    fn imports_are_named_after_the_datasource_and_the_digest() {
        assert_eq!(import_name("fedora", DIGEST), "fedora-0123456789ab");
    }

    #[test]
    fn the_url_is_pinned_to_the_digest() {
        assert_eq!(
            pinned_url("docker://registry:5000/disks/fedora:41", DIGEST),
            format!("docker://registry:5000/disks/fedora@{DIGEST}")
        );
        assert_eq!(
            pinned_url("docker://quay.io/containerdisks/fedora", DIGEST),
            format!("docker://quay.io/containerdisks/fedora@{DIGEST}")
        );
        assert_eq!(
            pinned_url("docker://host:5000/fedora@sha256:old", DIGEST),
            format!("docker://host:5000/fedora@{DIGEST}")
        );
    }

    #[test]
    fn the_schedule_is_standard_cron() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-23T10:17:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let next = next_run("0 */12 * * *", &now).unwrap();
        assert_eq!(next.to_rfc3339(), "2026-11-23T12:00:00+00:00");
        assert!(
            next_run("every day", &now)
                .unwrap_err()
                .contains("every day")
        );
    }

    #[test]
    fn the_import_is_the_template_pinned_labelled_and_owned_only_without_retention() {
        let mut c = cron("docker://registry:5000/fedora:latest");
        let dv = import_data_volume(&c, DIGEST).unwrap();
        assert_eq!(dv.name_any(), "fedora-0123456789ab");
        assert_eq!(dv.namespace().as_deref(), Some("golden"));
        assert_eq!(dv.labels()[CRON_LABEL], "fedora-cron");
        let url = dv.spec.source.unwrap().registry.unwrap().url.unwrap();
        assert!(url.ends_with(DIGEST), "{url}");
        assert!(dv.metadata.owner_references.is_none());
        c.spec.retention_policy = Some(DataImportCronRetentionPolicy::None);
        let dv = import_data_volume(&c, DIGEST).unwrap();
        assert_eq!(dv.metadata.owner_references.unwrap()[0].name, "fedora-cron");
    }

    #[test]
    fn garbage_is_the_oldest_beyond_imports_to_keep_never_the_current() {
        let at = |s| Some(Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap()));
        let imports = || {
            vec![
                ("a".to_string(), at(1)),
                ("d".to_string(), at(4)),
                ("b".to_string(), at(2)),
                ("c".to_string(), at(3)),
            ]
        };
        let mut c = cron("docker://r/f:1");
        assert_eq!(outdated_imports(&c, imports(), Some("d")), vec!["a"]);
        c.spec.imports_to_keep = Some(1);
        assert_eq!(outdated_imports(&c, imports(), Some("b")), vec!["c", "a"]);
        c.spec.garbage_collect = Some(DataImportCronGarbageCollect::Never);
        assert!(outdated_imports(&c, imports(), None).is_empty());
    }

    #[test]
    fn the_data_source_carries_the_crons_default_instancetype_and_preference() {
        let mut cron = cron("docker://quay.io/containerdisks/fedora:latest");
        cron.metadata.labels = Some(
            [
                ("instancetype.kubevirt.io/default-instancetype", "u1.medium"),
                ("instancetype.kubevirt.io/default-preference", "fedora"),
                ("app.kubernetes.io/name", "data-sources"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        let labels = data_source_labels(&cron);
        assert_eq!(labels[CRON_LABEL], "fedora-cron");
        assert_eq!(
            labels["instancetype.kubevirt.io/default-instancetype"],
            "u1.medium"
        );
        assert_eq!(
            labels["instancetype.kubevirt.io/default-preference"],
            "fedora"
        );
        assert!(!labels.contains_key("app.kubernetes.io/name"));
    }

    #[test]
    fn the_next_digest_waits_for_the_current_import_to_end() {
        assert!(may_import_next(false, None));
        assert!(may_import_next(true, Some("Succeeded")));
        assert!(may_import_next(true, Some("Failed")));
        assert!(!may_import_next(true, Some("ImportInProgress")));
        assert!(!may_import_next(true, None));
        assert_eq!(
            progressing(Some("ImportInProgress")).0,
            ConditionStatus::True
        );
        assert_eq!(progressing(Some("Succeeded")).1, "NoImport");
        assert_eq!(
            progressing(Some("Failed")).2,
            "Import DataVolume phase Failed"
        );
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let at = |s| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            UP_TO_DATE,
            ConditionStatus::False,
            "NoDigest",
            "x",
            &at(1),
        );
        set_condition(
            &mut conditions,
            UP_TO_DATE,
            ConditionStatus::False,
            "OutdatedImport",
            "y",
            &at(2),
        );
        assert_eq!(conditions[0].last_transition_time, Some(at(1)));
        assert_eq!(conditions[0].reason.as_deref(), Some("OutdatedImport"));
        set_condition(
            &mut conditions,
            UP_TO_DATE,
            ConditionStatus::True,
            "UpToDate",
            "z",
            &at(3),
        );
        assert_eq!(conditions[0].last_transition_time, Some(at(3)));
        assert_eq!(conditions.len(), 1);
    }
}
