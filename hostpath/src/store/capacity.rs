//! What each pool can still give to new and growing volumes: its free space less what its
//! volumes may still grow into, kept as running totals and recounted when it matters.

use std::collections::HashMap;

use super::images::{image_len, occupied_bytes};
use super::{HostPathStore, IMAGE_NAME, Inner};
use crate::error::{Error, IoContext, Result};
use crate::pool::Pool;

/// The capacity bookkeeping of the pools: what volumes may still grow into, kept as running
/// totals so a create does not stat every volume.
#[derive(Default)]
pub(super) struct Promises {
    /// Per volume: its image's length less what the image occupied when last counted.
    pub(super) by_volume: HashMap<String, u64>,
    /// Per pool: the sum of its volumes' promises.
    pub(super) by_pool: HashMap<String, u64>,
    /// Per pool: the image bytes of volumes being created or grown right now.
    pub(super) reserved: HashMap<String, u64>,
}

impl Promises {
    /// Sets (or with `None` removes) what volume `id` of `pool` may still grow into.
    pub(super) fn set(&mut self, pool: &str, id: &str, promise: Option<u64>) {
        let total = self.by_pool.entry(pool.to_string()).or_default();
        if let Some(old) = self.by_volume.remove(id) {
            *total = total.saturating_sub(old);
        }
        if let Some(promise) = promise {
            self.by_volume.insert(id.to_string(), promise);
            *total += promise;
        }
    }

    /// Adds `bytes` to what volume `id` of `pool` may still grow into (it was expanded).
    pub(super) fn grow(&mut self, pool: &str, id: &str, bytes: u64) {
        let current = self.by_volume.get(id).copied().unwrap_or(0);
        self.set(pool, id, Some(current + bytes));
    }

    pub(super) fn promised(&self, pool: &str) -> u64 {
        let total = self.by_pool.get(pool).copied().unwrap_or(0);
        total.saturating_add(self.reserved.get(pool).copied().unwrap_or(0))
    }

    pub(super) fn unreserve(&mut self, pool: &str, bytes: u64) {
        if let Some(reserved) = self.reserved.get_mut(pool) {
            *reserved = reserved.saturating_sub(bytes);
        }
    }
}

impl HostPathStore {
    /// Bytes a pool can still give to new images: what its filesystem has free, less what
    /// existing volumes may still grow into (their image's length minus what it already
    /// occupies, counted afresh here). A filesystem volume's image is longer than the volume's
    /// size (see [`crate::VolumeMode::largest_size_within`]).
    pub fn available_bytes(&self, pool: Option<&str>) -> Result<u64> {
        let pool = self.pool(pool)?;
        if self.pool_set().find(&pool.name).is_some_and(|e| e.retired) {
            return Ok(0);
        }
        let mut inner = self.lock();
        self.count_occupancy(&mut inner, &pool);
        self.available_locked(&inner, &pool)
    }

    /// Free space less the running total of promises. Between counts a volume's promise only
    /// overstates what it may still take (its image grows, its promise does not shrink), so
    /// this errs on the safe side.
    pub(super) fn available_locked(&self, inner: &Inner, pool: &Pool) -> Result<u64> {
        let vfs = rustix::fs::statvfs(&pool.path).at("statfs", &pool.path)?;
        let free = vfs.f_bavail.saturating_mul(vfs.f_frsize);
        Ok(free.saturating_sub(inner.promises.promised(&pool.name)))
    }

    /// Counts again what each volume of `pool` occupies, and so what it may still take: up to
    /// its image's full length.
    pub(super) fn count_occupancy(&self, inner: &mut Inner, pool: &Pool) {
        let Inner { records, promises } = inner;
        for volume in records.volumes.values().filter(|v| v.pool == pool.name) {
            let image = Self::volume_dir(pool, &volume.id).join(IMAGE_NAME);
            let occupied = occupied_bytes(&image);
            let promise = image_len(volume.mode, volume.size).saturating_sub(occupied);
            promises.set(&pool.name, &volume.id, Some(promise));
        }
    }

    /// Sets `bytes` of `pool` aside for the image of a volume being made or grown, or refuses
    /// when they are not there (after counting occupancy afresh, so a stale total never
    /// refuses wrongly).
    pub(super) fn reserve(&self, inner: &mut Inner, pool: &Pool, bytes: u64) -> Result<()> {
        let mut available = self.available_locked(inner, pool)?;
        if bytes > available {
            self.count_occupancy(inner, pool);
            available = self.available_locked(inner, pool)?;
        }
        if bytes > available {
            return Err(Error::ResourceExhausted {
                pool: pool.name.clone(),
                requested: bytes,
                available,
            });
        }
        *inner
            .promises
            .reserved
            .entry(pool.name.clone())
            .or_default() += bytes;
        Ok(())
    }

    /// Capacity figures of every pool: its name, whether it takes new volumes, and the bytes
    /// it can still give.
    pub fn pool_capacities(&self) -> Vec<(Pool, bool, Result<u64>)> {
        self.pool_entries()
            .into_iter()
            .map(|e| {
                let available = self.available_bytes(Some(&e.pool.name));
                (e.pool, !e.retired, available)
            })
            .collect()
    }
}
