//! The pools the store serves: adding one at runtime, removing or retiring one, and
//! forgetting a retired pool once it holds nothing.

use std::fs;

use super::{HostPathStore, Inner, PoolRemoval};
use crate::error::{Error, IoContext, Result};
use crate::pool::{Pool, PoolEntry};

impl HostPathStore {
    /// The pools served now, retired ones included; the first is the default.
    pub fn pools(&self) -> Vec<Pool> {
        self.pool_entries().into_iter().map(|e| e.pool).collect()
    }

    /// The pools served now, with where each came from and whether it is retired.
    pub fn pool_entries(&self) -> Vec<PoolEntry> {
        self.pool_set().entries().to_vec()
    }

    /// Serves `pool` from now on (creating its directories), puts a retired pool of that name
    /// back in service, or moves an added pool that holds nothing to another directory.
    /// Persisted: the next open serves it too. Returns whether anything changed.
    pub fn add_pool(&self, pool: Pool) -> Result<bool> {
        {
            let set = self.pool_set();
            if let Some(existing) = set.check_add(&pool)?
                && existing.pool == pool
                && !existing.retired
            {
                return Ok(false);
            }
        }
        create_pool_dirs(&pool)?;
        let mut inner = self.lock();
        let (volumes, snapshots) = Self::held_by(&inner, &pool.name);
        let mut set = self.pool_set_mut();
        if let Some(existing) = set.find(&pool.name)
            && existing.pool.path != pool.path
            && volumes + snapshots > 0
        {
            return Err(Error::FailedPrecondition(format!(
                "storage pool {:?} holds {volumes} volumes and {snapshots} snapshots in {}; it \
                 cannot move to {}",
                pool.name,
                existing.pool.path.display(),
                pool.path.display()
            )));
        }
        let changed = set.add(pool.clone())?;
        if changed {
            set.save()?;
            tracing::info!(pool = %pool.name, path = %pool.path.display(), "storage pool added");
        }
        drop(set);
        self.count_occupancy(&mut inner, &pool);
        Ok(changed)
    }

    /// Stops serving pool `name`: gone if it holds nothing, else retired (it serves what it
    /// holds, takes no new volumes). Nothing on disk is removed. Pools given at open cannot be
    /// removed.
    pub fn remove_pool(&self, name: &str) -> Result<PoolRemoval> {
        let inner = self.lock();
        let (volumes, snapshots) = Self::held_by(&inner, name);
        let reserved = inner.promises.reserved.get(name).copied().unwrap_or(0);
        let empty = volumes + snapshots == 0 && reserved == 0;
        let mut set = self.pool_set_mut();
        let Some(entry) = set.find(name) else {
            return Ok(PoolRemoval::Absent);
        };
        let was_retired = entry.retired;
        set.remove(name, empty)?;
        if empty {
            set.save()?;
            tracing::info!(pool = name, "storage pool removed");
            return Ok(PoolRemoval::Removed);
        }
        if !was_retired {
            set.save()?;
            tracing::warn!(
                pool = name,
                volumes,
                snapshots,
                "storage pool removed from the configuration while it holds volumes: retired"
            );
        }
        Ok(PoolRemoval::Retained { volumes, snapshots })
    }

    /// How many volumes and snapshots pool `name` holds.
    pub(super) fn held_by(inner: &Inner, name: &str) -> (usize, usize) {
        let volumes = inner.records.volumes.values().filter(|v| v.pool == name);
        let snapshots = inner.records.snapshots.values().filter(|s| s.pool == name);
        (volumes.count(), snapshots.count())
    }

    /// Forgets retired pool `name` once it holds nothing more.
    pub(super) fn forget_if_emptied(&self, name: &str) {
        let retired = self.pool_set().find(name).is_some_and(|e| e.retired);
        if retired && let Err(err) = self.remove_pool(name) {
            tracing::warn!(pool = name, %err, "cannot forget an emptied retired pool");
        }
    }

    pub(super) fn pool(&self, name: Option<&str>) -> Result<Pool> {
        self.pool_set().get(name).cloned()
    }
}

/// Makes a pool's `csi` and `csi-snapshots` directories.
pub(super) fn create_pool_dirs(pool: &Pool) -> Result<()> {
    for dir in [pool.path.join("csi"), pool.path.join("csi-snapshots")] {
        fs::create_dir_all(&dir).at("create", &dir)?;
    }
    Ok(())
}
