//! One pool sync: what every live HostPathProvisioner asks for (its path pools, and its
//! `pvcTemplate` pools once mounted) planned against the pools the store serves, carried out,
//! and reported per CR.

use std::collections::BTreeMap;

use api::hostpath::{HostPathProvisioner, StoragePoolStatus};
use ferrovirt_hostpath::{HostPathStore, PoolRemoval};
use kube::{Api, ResourceExt};

use super::plan::{CrPools, PoolPlan, PoolRefusal, plan, pools_of};
use super::status::ready_pool;
use super::templated::{self, Templated};
use super::{Context, Error};

/// The result of one pool sync, per CR.
#[derive(Debug, Default)]
pub struct SyncReport {
    /// Per CR: the statuses of its pools.
    pub pools: BTreeMap<String, Vec<StoragePoolStatus>>,
    /// Per CR: what it names that is not served, and why.
    pub problems: BTreeMap<String, Vec<PoolRefusal>>,
    /// Pools retired (removed from every CR while holding volumes): messages.
    pub retired: Vec<String>,
}

/// What every live CR asks for, oldest first, with the problems of CRs that fail validation.
fn wanted_by_crs(crs: &[HostPathProvisioner], report: &mut SyncReport) -> Vec<(String, CrPools)> {
    let mut live: Vec<&HostPathProvisioner> = crs
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .collect();
    live.sort_by_key(|c| (c.creation_timestamp().map(|t| t.0), c.name_any()));
    let mut wanted = Vec::new();
    for cr in live {
        match pools_of(cr) {
            Ok(pools) => wanted.push((cr.name_any(), pools)),
            Err(invalid) => report
                .problems
                .entry(cr.name_any())
                .or_default()
                .push(PoolRefusal {
                    pool: String::new(),
                    message: invalid.to_string(),
                }),
        }
    }
    wanted
}

/// Carries out `plan` on the store; failures are reported per pool.
async fn apply(
    ctx: &Context,
    plan: PoolPlan,
) -> Result<(BTreeMap<String, String>, Vec<String>), Error> {
    let store = ctx.store.clone();
    Ok(tokio::task::spawn_blocking(move || {
        let mut failed = BTreeMap::new();
        let mut retired = Vec::new();
        for pool in plan.add {
            if let Err(err) = store.add_pool(pool.clone()) {
                tracing::warn!(pool = %pool.name, %err, "cannot serve storage pool");
                failed.insert(
                    pool.name.clone(),
                    format!("storage pool {:?}: {err}", pool.name),
                );
            }
        }
        let entries = store.pool_entries();
        for name in plan.remove {
            match store.remove_pool(&name) {
                Ok(PoolRemoval::Retained { volumes, snapshots }) => retired.push(format!(
                    "storage pool {name:?} was removed but holds {volumes} volumes and \
                     {snapshots} snapshots: it keeps serving them and takes no new ones"
                )),
                Ok(PoolRemoval::Removed) => {
                    let path = entries.iter().find(|e| e.pool.name == name);
                    if let Some(entry) = path {
                        unmount_backing_volume(&store, &entry.pool.path);
                    }
                }
                Ok(PoolRemoval::Absent) => {}
                Err(err) => tracing::warn!(pool = %name, %err, "cannot remove storage pool"),
            }
        }
        (failed, retired)
    })
    .await?)
}

/// Unmounts the volume a `pvcTemplate` pool was mounted from, once the pool is gone.
fn unmount_backing_volume(store: &HostPathStore, path: &std::path::Path) {
    let backing = store
        .volumes()
        .into_iter()
        .find(|v| v.staged.as_deref() == Some(path));
    if let Some(volume) = backing {
        tracing::info!(volume = %volume.id, path = %path.display(), "unmounting a removed pool's volume");
        if let Err(err) = store.unstage(&volume.id, path) {
            tracing::warn!(volume = %volume.id, %err, "cannot unmount a removed pool's volume");
        }
    }
}

/// Brings the store's pools to what every live CR asks for.
pub async fn sync_pools(ctx: &Context) -> Result<SyncReport, Error> {
    let _one_at_a_time = ctx.sync.lock().await;
    let api: Api<HostPathProvisioner> = Api::all(ctx.client.clone());
    let crs = api.list(&Default::default()).await?.items;
    let mut report = SyncReport::default();
    let mut wanted = wanted_by_crs(&crs, &mut report);
    let templated = prepare_templated(ctx, &crs, &mut wanted, &mut report).await?;
    let plan = plan(&wanted, &ctx.store.pool_entries());
    for (cr, conflicts) in &plan.conflicts {
        report
            .problems
            .entry(cr.clone())
            .or_default()
            .extend(conflicts.clone());
    }
    let (failed, retired) = apply(ctx, plan.clone()).await?;
    report.retired = retired;
    for (cr, pools) in wanted {
        let problems = report.problems.entry(cr.clone()).or_default();
        let statuses = report.pools.entry(cr.clone()).or_default();
        let conflicted: Vec<String> = plan
            .conflicts
            .get(&cr)
            .into_iter()
            .flatten()
            .map(|r| r.pool.clone())
            .collect();
        for pool in pools.wanted {
            if let Some(message) = failed.get(&pool.name) {
                problems.push(PoolRefusal {
                    pool: pool.name.clone(),
                    message: message.clone(),
                });
            } else if !conflicted.contains(&pool.name) {
                let key = (cr.clone(), pool.name.clone());
                let status = templated.get(&key).cloned();
                statuses.push(status.unwrap_or_else(|| ready_pool(&pool.name)));
            }
        }
    }
    Ok(report)
}

/// Brings every live CR's `pvcTemplate` pools as far as they go: a mounted one joins the
/// CR's wanted pools (its status is returned, keyed by CR and pool); one still waiting is a
/// problem of its CR, with its status.
async fn prepare_templated(
    ctx: &Context,
    crs: &[HostPathProvisioner],
    wanted: &mut [(String, CrPools)],
    report: &mut SyncReport,
) -> Result<BTreeMap<(String, String), StoragePoolStatus>, Error> {
    let mut mounted = BTreeMap::new();
    if wanted.iter().all(|(_, pools)| pools.templated.is_empty()) {
        return Ok(mounted);
    }
    let Some(node) = templated::this_node(ctx).await? else {
        return Ok(mounted);
    };
    for (name, pools) in wanted.iter_mut() {
        let Some(cr) = crs.iter().find(|c| &c.name_any() == name) else {
            continue;
        };
        for pool in std::mem::take(&mut pools.templated) {
            match templated::prepare(ctx, cr, &pool, &node).await? {
                Templated::Mounted { pool, status } => {
                    mounted.insert((name.clone(), pool.name.clone()), status);
                    pools.wanted.push(pool);
                }
                Templated::Waiting { problem, status } => {
                    report
                        .problems
                        .entry(name.clone())
                        .or_default()
                        .push(PoolRefusal {
                            pool: pool.name.clone(),
                            message: problem,
                        });
                    report.pools.entry(name.clone()).or_default().push(status);
                }
            }
        }
    }
    Ok(mounted)
}
