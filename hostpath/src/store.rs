//! The hostpath store: every pool, volume and snapshot of this node, the operations on them, and
//! their persisted records.
//!
//! Ordering rules that make a kill -9 harmless: data first, record second on creation (an image
//! without a record is an orphan, removed at the next start, and the CO's retry makes it again);
//! record first, data second on deletion. Records live in a [`Journal`]: one shared fsync per
//! change. An operation holds the ids it works on for its whole duration ([`IdLocks`]) and the
//! in-memory state only for its bookkeeping, so calls on different volumes run side by side.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::copy::{CopyMethod, copy_image};
use crate::error::{Error, IoContext, Result};
use crate::journal::Journal;
use crate::oplock::IdLocks;
use crate::persist::{RecordDir, sync_dir};
use crate::pool::{Pool, PoolEntry, PoolSet};
use crate::{filesystem, loopdev, mount};

/// Size given to a volume whose request names none.
pub const DEFAULT_VOLUME_SIZE: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const IMAGE_NAME: &str = "volume.img";
/// The journal's log is folded into its snapshot once it has this many lines (or twice as many
/// as there are records, whichever is more).
const COMPACT_AFTER_LINES: u64 = 4096;

/// How a volume is consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeMode {
    /// An ext4 filesystem, mounted.
    Filesystem,
    /// A raw block device (a loop device).
    Block,
}

/// What a new volume is filled from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeSource {
    /// Restored from this snapshot.
    Snapshot(String),
    /// Cloned from this volume.
    Volume(String),
}

/// A request to create a volume.
#[derive(Clone, Debug)]
pub struct CreateVolume {
    /// The CO's name for it; the key for idempotency.
    pub name: String,
    /// At least this many bytes (0: unspecified).
    pub required_bytes: u64,
    /// At most this many bytes (0: unlimited).
    pub limit_bytes: u64,
    /// The pool; `None` is the default pool.
    pub pool: Option<String>,
    pub mode: VolumeMode,
    pub source: Option<VolumeSource>,
    /// An inline ephemeral volume: deleted when unpublished.
    pub ephemeral: bool,
}

/// A volume as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeRecord {
    pub id: String,
    pub name: String,
    pub pool: String,
    /// The image's length in bytes: the most the volume can hold.
    pub size: u64,
    pub mode: VolumeMode,
    pub source: Option<VolumeSource>,
    pub created_unix_secs: u64,
    #[serde(default)]
    pub ephemeral: bool,
    /// The staging path, when staged.
    #[serde(default)]
    pub staged: Option<PathBuf>,
    /// Published target paths, each with whether it is read-only.
    #[serde(default)]
    pub published: BTreeMap<PathBuf, bool>,
    /// The filesystem inside is smaller than the image (after an expansion, a restore into a
    /// bigger volume); grown at the next stage or node expansion.
    #[serde(default)]
    pub grow_fs: bool,
}

/// A request to snapshot a volume.
#[derive(Clone, Debug)]
pub struct CreateSnapshot {
    pub name: String,
    pub source_volume_id: String,
}

/// A snapshot as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub id: String,
    pub name: String,
    pub source_volume_id: String,
    pub pool: String,
    pub size: u64,
    pub created_unix_secs: u64,
    pub created_nanos: u32,
}

/// How a volume is being staged or published.
#[derive(Clone, Debug)]
pub enum AccessType {
    /// Mount the filesystem, with these mount options.
    Mount { fs_type: String, flags: Vec<String> },
    /// Hand out the block device.
    Block,
}

/// Usage figures of a published volume.
#[derive(Clone, Debug, Default)]
pub struct VolumeStats {
    pub total_bytes: u64,
    pub used_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    pub total_inodes: Option<u64>,
    pub used_inodes: Option<u64>,
    pub free_inodes: Option<u64>,
    /// Why the volume is abnormal, if it is.
    pub abnormal: Option<String>,
}

/// Every record, as the journal's snapshot holds them.
#[derive(Default, Serialize, Deserialize)]
struct Records {
    volumes: BTreeMap<String, VolumeRecord>,
    snapshots: BTreeMap<String, SnapshotRecord>,
}

/// One change of the records, as the journal logs it.
#[derive(Serialize, Deserialize)]
enum Change {
    PutVolume(VolumeRecord),
    RemoveVolume(String),
    PutSnapshot(SnapshotRecord),
    RemoveSnapshot(String),
}

impl Records {
    fn apply(&mut self, change: Change) {
        match change {
            Change::PutVolume(record) => {
                self.volumes.insert(record.id.clone(), record);
            }
            Change::RemoveVolume(id) => {
                self.volumes.remove(&id);
            }
            Change::PutSnapshot(record) => {
                self.snapshots.insert(record.id.clone(), record);
            }
            Change::RemoveSnapshot(id) => {
                self.snapshots.remove(&id);
            }
        }
    }

    fn len(&self) -> u64 {
        (self.volumes.len() + self.snapshots.len()) as u64
    }
}

/// The capacity bookkeeping of the pools: what volumes may still grow into, kept as running
/// totals so a create does not stat every volume.
#[derive(Default)]
struct Promises {
    /// Per volume: its size less what its image occupied when last counted.
    by_volume: HashMap<String, u64>,
    /// Per pool: the sum of its volumes' promises.
    by_pool: HashMap<String, u64>,
    /// Per pool: the sizes of volumes being created or grown right now.
    reserved: HashMap<String, u64>,
}

impl Promises {
    /// Sets (or with `None` removes) what volume `id` of `pool` may still grow into.
    fn set(&mut self, pool: &str, id: &str, promise: Option<u64>) {
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
    fn grow(&mut self, pool: &str, id: &str, bytes: u64) {
        let current = self.by_volume.get(id).copied().unwrap_or(0);
        self.set(pool, id, Some(current + bytes));
    }

    fn promised(&self, pool: &str) -> u64 {
        let total = self.by_pool.get(pool).copied().unwrap_or(0);
        total.saturating_add(self.reserved.get(pool).copied().unwrap_or(0))
    }

    fn unreserve(&mut self, pool: &str, bytes: u64) {
        if let Some(reserved) = self.reserved.get_mut(pool) {
            *reserved = reserved.saturating_sub(bytes);
        }
    }
}

#[derive(Default)]
struct Inner {
    records: Records,
    promises: Promises,
}

/// What [`HostPathStore::remove_pool`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolRemoval {
    /// The pool was not there.
    Absent,
    /// The pool held nothing and is gone.
    Removed,
    /// The pool still holds volumes or snapshots: it serves them, takes no new volumes, and
    /// is forgotten once the last is deleted. Nothing on disk is removed.
    Retained { volumes: usize, snapshots: usize },
}

/// Every pool, volume and snapshot of this node.
///
/// Lock order: `inner` before `pools`; `pools` is never held while `inner` is taken.
pub struct HostPathStore {
    pools: RwLock<PoolSet>,
    state_dir: PathBuf,
    journal: Journal,
    ids: IdLocks,
    inner: Mutex<Inner>,
}

fn now() -> (u64, u32) {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (since.as_secs(), since.subsec_nanos())
}

/// The id for a CO-given name: the name itself when it is path-safe (Kubernetes' `pvc-<uid>`
/// and `snapshot-<uid>` are), otherwise `h-` and a 64-bit FNV-1a hash of it.
pub fn id_for_name(name: &str) -> String {
    let safe = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && !name.starts_with("h-")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if safe {
        return name.to_string();
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("h-{hash:016x}")
}

/// The size to give a volume: the request rounded up to whole MiB (4 KiB when the limit does
/// not allow that), within `[required, limit]`.
fn choose_size(required: u64, limit: u64, minimum: u64) -> Result<u64> {
    if limit != 0 && required > limit {
        return Err(Error::InvalidArgument(format!(
            "required bytes {required} exceed limit bytes {limit}"
        )));
    }
    let wanted = if required == 0 {
        if limit != 0 {
            limit.min(DEFAULT_VOLUME_SIZE)
        } else {
            DEFAULT_VOLUME_SIZE
        }
    } else {
        required
    }
    .max(minimum);
    for unit in [MIB, 4096] {
        let rounded = wanted.div_ceil(unit).saturating_mul(unit);
        if limit == 0 || rounded <= limit {
            return Ok(rounded);
        }
    }
    Err(Error::OutOfRange(format!(
        "no size of whole 4 KiB blocks between {wanted} and {limit} bytes"
    )))
}

impl HostPathStore {
    /// Opens the store: creates the pools' directories, loads the records from `state_dir` and
    /// removes what interrupted operations left behind. The first pool is the default.
    /// Pools added at runtime before (kept in the state directory) are opened too.
    pub fn open(pools: Vec<Pool>, state_dir: impl Into<PathBuf>) -> Result<Self> {
        let state_dir = state_dir.into();
        let pools = PoolSet::open(pools, &state_dir)?;
        for entry in pools.entries() {
            create_pool_dirs(&entry.pool)?;
        }
        let (journal, mut records) = Journal::open(&state_dir.join("journal"), Records::apply)?;
        let legacy = Self::load_record_files(&state_dir, &mut records)?;
        if legacy {
            journal.compact(&records)?;
            Self::remove_record_files(&state_dir)?;
        }
        let store = Self {
            pools: RwLock::new(pools),
            state_dir,
            journal,
            ids: IdLocks::default(),
            inner: Mutex::new(Inner {
                records,
                promises: Promises::default(),
            }),
        };
        store.remove_orphans()?;
        store.restore_lost_images()?;
        let mut inner = store.lock();
        for pool in store.pools() {
            store.count_occupancy(&mut inner, &pool);
        }
        drop(inner);
        Ok(store)
    }

    /// Adds the records an earlier version kept one file each (`volumes/`, `snapshots/`);
    /// returns whether there were any.
    fn load_record_files(state_dir: &Path, records: &mut Records) -> Result<bool> {
        let volumes = state_dir.join("volumes");
        let snapshots = state_dir.join("snapshots");
        if !volumes.exists() && !snapshots.exists() {
            return Ok(false);
        }
        for record in RecordDir::open(volumes)?.load_all::<VolumeRecord>()? {
            records.apply(Change::PutVolume(record));
        }
        for record in RecordDir::open(snapshots)?.load_all::<SnapshotRecord>()? {
            records.apply(Change::PutSnapshot(record));
        }
        Ok(true)
    }

    /// Removes the record files once the journal holds their records.
    fn remove_record_files(state_dir: &Path) -> Result<()> {
        for dir in [state_dir.join("volumes"), state_dir.join("snapshots")] {
            absent_is_ok(fs::remove_dir_all(&dir)).at("remove", &dir)?;
        }
        sync_dir(state_dir)
    }

    /// Makes again the image of an empty volume whose record survived a power cut that its
    /// image did not (new empty images are not fsynced: they hold nothing to lose).
    fn restore_lost_images(&self) -> Result<()> {
        let inner = self.lock();
        for record in inner.records.volumes.values() {
            let Ok(image) = self.volume_image(record) else {
                continue;
            };
            if record.source.is_some() || image.exists() {
                continue;
            }
            tracing::warn!(volume = %record.id, "making again the empty image a crash lost");
            if let Some(dir) = image.parent() {
                fs::create_dir_all(dir).at("create", dir)?;
            }
            create_sparse_image(&image, image_len(record.mode, record.size))?;
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave records half-written (they are written
        // atomically), so a poisoned lock is safe to take over.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pool_set(&self) -> RwLockReadGuard<'_, PoolSet> {
        // Changes to the set are made whole under the write lock before it is released.
        self.pools.read().unwrap_or_else(|p| p.into_inner())
    }

    fn pool_set_mut(&self) -> RwLockWriteGuard<'_, PoolSet> {
        self.pools.write().unwrap_or_else(|p| p.into_inner())
    }

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
    fn held_by(inner: &Inner, name: &str) -> (usize, usize) {
        let volumes = inner.records.volumes.values().filter(|v| v.pool == name);
        let snapshots = inner.records.snapshots.values().filter(|s| s.pool == name);
        (volumes.count(), snapshots.count())
    }

    /// Forgets retired pool `name` once it holds nothing more.
    fn forget_if_emptied(&self, name: &str) {
        let retired = self.pool_set().find(name).is_some_and(|e| e.retired);
        if retired && let Err(err) = self.remove_pool(name) {
            tracing::warn!(pool = name, %err, "cannot forget an emptied retired pool");
        }
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

    /// Where the store keeps its records (and ephemeral volumes' staging directories).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    fn pool(&self, name: Option<&str>) -> Result<Pool> {
        self.pool_set().get(name).cloned()
    }

    fn volume_dir(pool: &Pool, id: &str) -> PathBuf {
        pool.path.join("csi").join(id)
    }

    /// The image file of a volume.
    pub fn volume_image(&self, record: &VolumeRecord) -> Result<PathBuf> {
        let pool = self.pool(Some(&record.pool)).map_err(|_| {
            Error::FailedPrecondition(format!(
                "volume {} is in storage pool {:?}, which is not configured",
                record.id, record.pool
            ))
        })?;
        Ok(Self::volume_dir(&pool, &record.id).join(IMAGE_NAME))
    }

    fn snapshot_image(&self, record: &SnapshotRecord) -> Result<PathBuf> {
        let pool = self.pool(Some(&record.pool)).map_err(|_| {
            Error::FailedPrecondition(format!(
                "snapshot {} is in storage pool {:?}, which is not configured",
                record.id, record.pool
            ))
        })?;
        Ok(pool
            .path
            .join("csi-snapshots")
            .join(format!("{}.img", record.id)))
    }

    /// Removes images that have no record: left by a create or delete that was interrupted.
    /// Only what this store makes is touched (a directory holding just `volume.img`, a
    /// snapshot `.img`), never other content of the pool.
    fn remove_orphans(&self) -> Result<()> {
        let inner = self.lock();
        for pool in self.pools() {
            let csi = pool.path.join("csi");
            for entry in fs::read_dir(&csi).at("read directory", &csi)? {
                let entry = entry.at("read directory", &csi)?;
                let id = entry.file_name().to_string_lossy().into_owned();
                if inner
                    .records
                    .volumes
                    .get(&id)
                    .is_some_and(|v| v.pool == pool.name)
                {
                    continue;
                }
                let dir = entry.path();
                let Ok(children) = fs::read_dir(&dir) else {
                    continue;
                };
                let children: Vec<_> = children.flatten().map(|c| c.file_name()).collect();
                let ours = children.iter().all(|c| {
                    let c = c.to_string_lossy();
                    c == IMAGE_NAME || c.starts_with(".volume.img")
                });
                if ours {
                    tracing::warn!(pool = %pool.name, volume = %id, "removing orphaned volume image");
                    fs::remove_dir_all(&dir).at("remove", &dir)?;
                }
            }
            let snaps = pool.path.join("csi-snapshots");
            for entry in fs::read_dir(&snaps).at("read directory", &snaps)? {
                let entry = entry.at("read directory", &snaps)?;
                let file = entry.file_name().to_string_lossy().into_owned();
                let Some(id) = file.strip_suffix(".img") else {
                    continue;
                };
                if inner
                    .records
                    .snapshots
                    .get(id)
                    .is_none_or(|s| s.pool != pool.name)
                {
                    tracing::warn!(pool = %pool.name, snapshot = %id, "removing orphaned snapshot image");
                    fs::remove_file(entry.path()).at("remove", &entry.path())?;
                }
            }
        }
        Ok(())
    }

    /// Bytes a pool can still give to new volumes: what its filesystem has free, less what
    /// existing volumes may still grow into (their size minus what they already occupy,
    /// counted afresh here).
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
    fn available_locked(&self, inner: &Inner, pool: &Pool) -> Result<u64> {
        let vfs = rustix::fs::statvfs(&pool.path).at("statfs", &pool.path)?;
        let free = vfs.f_bavail.saturating_mul(vfs.f_frsize);
        Ok(free.saturating_sub(inner.promises.promised(&pool.name)))
    }

    /// Counts again what each volume of `pool` occupies, and so what it may still take.
    fn count_occupancy(&self, inner: &mut Inner, pool: &Pool) {
        let Inner { records, promises } = inner;
        for volume in records.volumes.values().filter(|v| v.pool == pool.name) {
            let image = Self::volume_dir(pool, &volume.id).join(IMAGE_NAME);
            let occupied = occupied_bytes(&image);
            let promise = volume.size.saturating_sub(occupied);
            promises.set(&pool.name, &volume.id, Some(promise));
        }
    }

    /// Sets `bytes` of `pool` aside for a volume being made or grown, or refuses when they are
    /// not there (after counting occupancy afresh, so a stale total never refuses wrongly).
    fn reserve(&self, inner: &mut Inner, pool: &Pool, bytes: u64) -> Result<()> {
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

    /// Records `change` (applied to the in-memory state by `apply`, under the same lock, so the
    /// log's order is the state's) and returns once it is durable.
    fn record(&self, change: Change, apply: impl FnOnce(&mut Inner)) -> Result<()> {
        let mut inner = self.lock();
        let ticket = self.journal.append(&change)?;
        inner.records.apply(change);
        apply(&mut inner);
        let lines = self.journal.lines();
        if lines >= COMPACT_AFTER_LINES.max(2 * inner.records.len()) {
            self.journal.compact(&inner.records)?;
        }
        drop(inner);
        self.journal.commit(ticket)
    }

    /// Returns once every change recorded so far is durable: an answer that reports state
    /// another call has just changed waits for it.
    fn settled(&self) -> Result<()> {
        self.journal.commit(self.journal.written())
    }

    /// Saves a changed volume record.
    fn put_volume(&self, record: VolumeRecord) -> Result<()> {
        self.record(Change::PutVolume(record), |_| {})
    }

    /// Creates a volume, or returns the existing one of the same name if it is compatible.
    pub fn create_volume(&self, req: &CreateVolume) -> Result<VolumeRecord> {
        if req.name.is_empty() {
            return Err(Error::InvalidArgument("volume name is required".into()));
        }
        let id = id_for_name(&req.name);
        let source_id = match &req.source {
            None => None,
            Some(VolumeSource::Snapshot(id) | VolumeSource::Volume(id)) => Some(id.as_str()),
        };
        let mut ids = vec![id.as_str()];
        ids.extend(source_id);
        let _held = self.ids.lock(&ids);
        let (pool, planned) = {
            let mut inner = self.lock();
            // Resolved under the lock `remove_pool` takes: a pool being removed either is
            // gone here or sees this volume's reservation and is retired instead.
            let pool = self.pool_set().for_new_volume(req.pool.as_deref())?.clone();
            let planned = self.plan_volume(&mut inner, req, &pool, &id)?;
            (pool, planned)
        };
        let (source_image, size, source_size) = match planned {
            PlannedVolume::Exists(existing) => {
                self.settled()?;
                return Ok(*existing);
            }
            PlannedVolume::New {
                source_image,
                size,
                source_size,
            } => (source_image, size, source_size),
        };
        let made = self.make_image(
            &pool,
            &id,
            image_len(req.mode, size),
            source_image.as_deref(),
        );
        let occupied = match made {
            Ok(occupied) => occupied,
            Err(err) => {
                self.lock().promises.unreserve(&pool.name, size);
                return Err(err);
            }
        };
        let record = VolumeRecord {
            id: id.clone(),
            name: req.name.clone(),
            pool: pool.name.clone(),
            size,
            mode: req.mode,
            source: req.source.clone(),
            created_unix_secs: now().0,
            ephemeral: req.ephemeral,
            staged: None,
            published: BTreeMap::new(),
            grow_fs: size > source_size && source_size > 0,
        };
        let recorded = self.record(Change::PutVolume(record.clone()), |inner| {
            inner.promises.unreserve(&pool.name, size);
            let promise = size.saturating_sub(occupied);
            inner.promises.set(&pool.name, &id, Some(promise));
        });
        if let Err(err) = recorded {
            // Not logged (a full or failing state disk): the image is an orphan.
            let mut inner = self.lock();
            if !inner.records.volumes.contains_key(&id) {
                inner.promises.unreserve(&pool.name, size);
                let _ = fs::remove_dir_all(Self::volume_dir(&pool, &id));
            }
            return Err(err);
        }
        Ok(record)
    }

    /// Decides what a create makes: nothing (a compatible volume of that name exists), or a
    /// volume of a size, filled from a source image, whose size is set aside in the pool.
    fn plan_volume(
        &self,
        inner: &mut Inner,
        req: &CreateVolume,
        pool: &Pool,
        id: &str,
    ) -> Result<PlannedVolume> {
        if let Some(existing) = inner.records.volumes.get(id) {
            let fits = existing.size >= req.required_bytes
                && (req.limit_bytes == 0 || existing.size <= req.limit_bytes);
            if existing.name == req.name
                && fits
                && existing.source == req.source
                && existing.mode == req.mode
                && existing.pool == pool.name
            {
                return Ok(PlannedVolume::Exists(Box::new(existing.clone())));
            }
            return Err(Error::AlreadyExists(format!(
                "volume {:?} exists with size {}, mode {:?}, pool {:?} and source {:?}",
                req.name, existing.size, existing.mode, existing.pool, existing.source
            )));
        }
        // Where the data comes from, and the smallest size that holds it.
        let source_image = match &req.source {
            None => None,
            Some(VolumeSource::Snapshot(snap)) => {
                let snap = inner.records.snapshots.get(snap).ok_or_else(|| {
                    Error::NotFound(format!("source snapshot {snap:?} does not exist"))
                })?;
                Some((self.snapshot_image(snap)?, snap.size))
            }
            Some(VolumeSource::Volume(vol)) => {
                let vol = inner.records.volumes.get(vol).ok_or_else(|| {
                    Error::NotFound(format!("source volume {vol:?} does not exist"))
                })?;
                Some((self.volume_image(vol)?, vol.size))
            }
        };
        let source_size = source_image.as_ref().map_or(0, |(_, size)| *size);
        if req.limit_bytes != 0 && source_size > req.limit_bytes {
            return Err(Error::OutOfRange(format!(
                "the source holds {source_size} bytes, more than the limit of {} bytes",
                req.limit_bytes
            )));
        }
        let size = choose_size(req.required_bytes, req.limit_bytes, source_size)?;
        self.reserve(inner, pool, size)?;
        Ok(PlannedVolume::New {
            source_image: source_image.map(|(image, _)| image),
            size,
            source_size,
        })
    }

    /// Makes a volume's image of `len` bytes, a copy of `source` or empty, and returns the
    /// bytes it occupies. A copy is fsynced with its directories before its record is written;
    /// an empty image is not (it holds nothing to lose, and [`Self::restore_lost_images`] makes
    /// it again should a power cut take it).
    fn make_image(&self, pool: &Pool, id: &str, len: u64, source: Option<&Path>) -> Result<u64> {
        let dir = Self::volume_dir(pool, id);
        if dir.exists() {
            // Left by an interrupted create of this very name: start over.
            fs::remove_dir_all(&dir).at("remove", &dir)?;
        }
        fs::create_dir(&dir).at("create", &dir)?;
        let image = dir.join(IMAGE_NAME);
        let made = match source {
            Some(src) => copy_image(src, &image).and_then(|method| {
                tracing::debug!(volume = %id, ?method, "volume filled from its source");
                let file = OpenOptions::new()
                    .write(true)
                    .open(&image)
                    .at("open", &image)?;
                file.set_len(len).at("resize", &image)?;
                file.sync_all().at("fsync", &image)?;
                sync_dir(&dir)?;
                sync_dir(&pool.path.join("csi"))
            }),
            None => create_sparse_image(&image, len),
        };
        if let Err(err) = made {
            let _ = fs::remove_dir_all(&dir);
            return Err(err);
        }
        Ok(occupied_bytes(&image))
    }

    /// Deletes a volume; deleting one that does not exist succeeds.
    pub fn delete_volume(&self, id: &str) -> Result<()> {
        let _held = self.ids.lock(&[id]);
        let Some(record) = self.lock().records.volumes.get(id).cloned() else {
            return Ok(());
        };
        if record.staged.is_some() || !record.published.is_empty() {
            return Err(Error::FailedPrecondition(format!(
                "volume {id} is still staged or published on this node"
            )));
        }
        let image = self.volume_image(&record)?;
        self.record(Change::RemoveVolume(id.to_string()), |inner| {
            inner.promises.set(&record.pool, id, None);
        })?;
        let _ = loopdev::detach_all(&image);
        if let Some(dir) = image.parent() {
            absent_is_ok(fs::remove_dir_all(dir)).at("remove", dir)?;
        }
        self.forget_if_emptied(&record.pool);
        Ok(())
    }

    /// One volume.
    pub fn volume(&self, id: &str) -> Result<VolumeRecord> {
        self.lock()
            .records
            .volumes
            .get(id)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("volume {id:?} does not exist")))
    }

    /// Every volume, ordered by id.
    pub fn volumes(&self) -> Vec<VolumeRecord> {
        self.lock().records.volumes.values().cloned().collect()
    }

    /// Why a volume is abnormal (its pool is gone, its image is missing), or `None`.
    pub fn volume_condition(&self, record: &VolumeRecord) -> Option<String> {
        match self.volume_image(record) {
            Err(err) => Some(err.to_string()),
            Ok(image) if !image.exists() => {
                Some(format!("volume image {} is missing", image.display()))
            }
            Ok(_) => None,
        }
    }

    /// Grows a volume to at least `required` bytes (never shrinks). Returns the new size and
    /// whether the node must act (grow the filesystem, refresh the loop device).
    pub fn expand_volume(&self, id: &str, required: u64, limit: u64) -> Result<(u64, bool)> {
        let _held = self.ids.lock(&[id]);
        let record = self.volume(id)?;
        if limit != 0 && record.size > limit {
            return Err(Error::OutOfRange(format!(
                "volume {id} already holds {} bytes, more than the limit of {limit}",
                record.size
            )));
        }
        if required <= record.size {
            return Ok((record.size, record.mode == VolumeMode::Filesystem));
        }
        let size = choose_size(required, limit, 0)?;
        let pool = self.pool(Some(&record.pool))?;
        let growth = size - record.size;
        self.reserve(&mut self.lock(), &pool, growth)?;
        let image = self.volume_image(&record)?;
        let grown = OpenOptions::new()
            .write(true)
            .open(&image)
            .and_then(|file| {
                file.set_len(image_len(record.mode, size))?;
                file.sync_all()
            })
            .at("resize", &image);
        if let Err(err) = grown {
            self.lock().promises.unreserve(&pool.name, growth);
            return Err(err);
        }
        let mut updated = record;
        updated.size = size;
        updated.grow_fs = updated.mode == VolumeMode::Filesystem;
        let recorded = self.record(Change::PutVolume(updated), |inner| {
            inner.promises.unreserve(&pool.name, growth);
            inner.promises.grow(&pool.name, id, growth);
        });
        if recorded.is_err() && self.volume(id).is_ok_and(|r| r.size < size) {
            self.lock().promises.unreserve(&pool.name, growth);
        }
        recorded.map(|()| (size, true))
    }

    /// Snapshots a volume (reflink where possible), or returns the existing snapshot of that
    /// name if it is of the same volume. The copy method is `None` when nothing was copied.
    pub fn create_snapshot(
        &self,
        req: &CreateSnapshot,
    ) -> Result<(SnapshotRecord, Option<CopyMethod>)> {
        if req.name.is_empty() {
            return Err(Error::InvalidArgument("snapshot name is required".into()));
        }
        let id = id_for_name(&req.name);
        let _held = self.ids.lock(&[&id, &req.source_volume_id]);
        let existing = self.lock().records.snapshots.get(&id).cloned();
        if let Some(existing) = existing {
            if existing.name == req.name && existing.source_volume_id == req.source_volume_id {
                self.settled()?;
                return Ok((existing, None));
            }
            return Err(Error::AlreadyExists(format!(
                "snapshot {:?} exists for volume {:?}",
                req.name, existing.source_volume_id
            )));
        }
        let volume = self.volume(&req.source_volume_id).map_err(|_| {
            Error::NotFound(format!(
                "source volume {:?} does not exist",
                req.source_volume_id
            ))
        })?;
        let src = self.volume_image(&volume)?;
        // Flush what a mounted filesystem still holds in memory, so the copy is consistent
        // with what the workload has written and synced.
        if let Some(staged) = &volume.staged
            && let Ok(dir) = fs::File::open(staged)
        {
            let _ = rustix::fs::syncfs(&dir);
        }
        let (secs, nanos) = now();
        let record = SnapshotRecord {
            id: id.clone(),
            name: req.name.clone(),
            source_volume_id: volume.id.clone(),
            pool: volume.pool.clone(),
            size: volume.size,
            created_unix_secs: secs,
            created_nanos: nanos,
        };
        let dst = self.snapshot_image(&record)?;
        if dst.exists() {
            fs::remove_file(&dst).at("remove", &dst)?;
        }
        let method = copy_image(&src, &dst)?;
        if let Some(parent) = dst.parent() {
            sync_dir(parent)?;
        }
        self.record(Change::PutSnapshot(record.clone()), |_| {})?;
        Ok((record, Some(method)))
    }

    /// Deletes a snapshot; deleting one that does not exist succeeds.
    pub fn delete_snapshot(&self, id: &str) -> Result<()> {
        let _held = self.ids.lock(&[id]);
        let Some(record) = self.lock().records.snapshots.get(id).cloned() else {
            return Ok(());
        };
        self.record(Change::RemoveSnapshot(id.to_string()), |_| {})?;
        if let Ok(image) = self.snapshot_image(&record) {
            absent_is_ok(fs::remove_file(&image)).at("remove", &image)?;
        }
        self.forget_if_emptied(&record.pool);
        Ok(())
    }

    /// One snapshot.
    pub fn snapshot(&self, id: &str) -> Result<SnapshotRecord> {
        self.lock()
            .records
            .snapshots
            .get(id)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("snapshot {id:?} does not exist")))
    }

    /// Every snapshot, ordered by id.
    pub fn snapshots(&self) -> Vec<SnapshotRecord> {
        self.lock().records.snapshots.values().cloned().collect()
    }

    fn check_access(record: &VolumeRecord, access: &AccessType) -> Result<()> {
        match (record.mode, access) {
            (VolumeMode::Block, AccessType::Mount { .. }) => Err(Error::InvalidArgument(format!(
                "volume {} is a block volume and cannot be mounted",
                record.id
            ))),
            (VolumeMode::Filesystem, AccessType::Block) => Err(Error::InvalidArgument(format!(
                "volume {} is a filesystem volume and cannot be used as a block device",
                record.id
            ))),
            (_, AccessType::Mount { fs_type, .. }) if !fs_type.is_empty() && fs_type != "ext4" => {
                Err(Error::InvalidArgument(format!(
                    "filesystem type {fs_type:?} is not supported (only ext4)"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Stages a volume at `staging`: attaches its image to a loop device and, for a filesystem
    /// volume, formats it on first use and mounts it there.
    pub fn stage(&self, id: &str, staging: &Path, access: &AccessType) -> Result<()> {
        let _held = self.ids.lock(&[id]);
        let mut record = self.volume(id)?;
        Self::check_access(&record, access)?;
        if let Some(current) = &record.staged {
            if current != staging {
                return Err(Error::AlreadyExists(format!(
                    "volume {id} is already staged at {}",
                    current.display()
                )));
            }
            // Still in place (after a reboot it is not, and is set up again below).
            let in_place = match record.mode {
                VolumeMode::Block => !loopdev::find(&self.volume_image(&record)?)?.is_empty(),
                VolumeMode::Filesystem => mount::mount_at(staging)?.is_some(),
            };
            if in_place {
                return Ok(());
            }
        }
        let image = self.volume_image(&record)?;
        match access {
            AccessType::Block => {
                loopdev::attach(&image)?;
            }
            AccessType::Mount { flags, .. } => {
                if filesystem::ensure_ext4(&image)? {
                    record.grow_fs = false;
                }
                if record.grow_fs && loopdev::find(&image)?.is_empty() {
                    // Not in use anywhere: grow it offline, before it is mounted.
                    filesystem::grow_ext4_offline(&image)?;
                    record.grow_fs = false;
                }
                let device = loopdev::attach(&image)?;
                fs::create_dir_all(staging).at("create", staging)?;
                if let Err(err) = mount::mount_ext4(&device, staging, flags, false) {
                    let _ = loopdev::detach_all(&image);
                    return Err(err);
                }
            }
        }
        record.staged = Some(staging.to_path_buf());
        self.put_volume(record)
    }

    /// Unstages a volume: unmounts the staging path and detaches the loop device.
    pub fn unstage(&self, id: &str, staging: &Path) -> Result<()> {
        let _held = self.ids.lock(&[id]);
        let mut record = self.volume(id)?;
        if let Some(target) = record.published.keys().next() {
            return Err(Error::FailedPrecondition(format!(
                "volume {id} is still published at {}",
                target.display()
            )));
        }
        if record.mode == VolumeMode::Filesystem {
            mount::unmount_if_mounted(staging)?;
        }
        if let Ok(image) = self.volume_image(&record) {
            loopdev::detach_all(&image)?;
        }
        if record.staged.is_some() {
            record.staged = None;
            self.put_volume(record)?;
        }
        Ok(())
    }

    /// Publishes a staged volume at `target`: a bind mount of the staging directory, or of a
    /// loop device (a read-only one of its own for a read-only publication). With
    /// `exclusive` (CSI's SINGLE_NODE_SINGLE_WRITER) it is refused while the volume is
    /// published at another target. A publication that fails leaves nothing behind: no
    /// mount, no loop device of its own, no target it made.
    pub fn publish(
        &self,
        id: &str,
        staging: &Path,
        target: &Path,
        access: &AccessType,
        read_only: bool,
        exclusive: bool,
    ) -> Result<()> {
        let _held = self.ids.lock(&[id]);
        let mut record = self.volume(id)?;
        Self::check_access(&record, access)?;
        if record.staged.as_deref() != Some(staging) {
            return Err(Error::FailedPrecondition(format!(
                "volume {id} is not staged at {}",
                staging.display()
            )));
        }
        if let Some(existing) = record.published.get(target)
            && mount::mount_at(target)?.is_some()
        {
            if *existing == read_only {
                return Ok(());
            }
            return Err(Error::AlreadyExists(format!(
                "volume {id} is already published at {} with read-only {existing}",
                target.display()
            )));
        }
        // Only publications still mounted count: a record a reboot left behind does not.
        let mounted_elsewhere =
            |t: &&PathBuf| t.as_path() != target && mount::mount_at(t).ok().flatten().is_some();
        if exclusive && let Some(other) = record.published.keys().find(mounted_elsewhere) {
            return Err(Error::FailedPrecondition(format!(
                "volume {id} is single-writer and already published at {}",
                other.display()
            )));
        }
        let mut made = Publication::default();
        let published = self
            .mount_publication(&record, staging, target, access, read_only, &mut made)
            .and_then(|()| {
                record.published.insert(target.to_path_buf(), read_only);
                self.put_volume(record)
            });
        if published.is_err() {
            made.undo(target);
        }
        published
    }

    /// Mounts a publication at `target`, noting in `made` what it made.
    fn mount_publication(
        &self,
        record: &VolumeRecord,
        staging: &Path,
        target: &Path,
        access: &AccessType,
        read_only: bool,
        made: &mut Publication,
    ) -> Result<()> {
        match access {
            AccessType::Mount { .. } => {
                made.target = !target.exists();
                fs::create_dir_all(target).at("create", target)?;
                mount::bind(staging, target, read_only)?;
            }
            AccessType::Block => {
                let image = self.volume_image(record)?;
                let device = if read_only {
                    let device = loopdev::attach_read_only(&image)?;
                    made.device = Some(device.clone());
                    device
                } else {
                    loopdev::attach(&image)?
                };
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent).at("create", parent)?;
                }
                if !target.exists() {
                    fs::File::create(target).at("create", target)?;
                    made.target = true;
                }
                mount::bind(&device, target, read_only)?;
            }
        }
        made.mounted = true;
        Ok(())
    }

    /// Unpublishes a volume from `target` and removes the target path.
    pub fn unpublish(&self, id: &str, target: &Path) -> Result<()> {
        let _held = self.ids.lock(&[id]);
        let mut record = self.volume(id)?;
        // A read-only block publication has a read-only loop device of its own: the bind
        // mount's root names it (devtmpfs-relative, "/loop7").
        let own_device = match mount::mount_at(target)? {
            Some(entry) if record.mode == VolumeMode::Block => {
                let device =
                    Path::new("/dev").join(entry.root.strip_prefix("/").unwrap_or(&entry.root));
                loopdev::is_read_only(&device).then_some(device)
            }
            _ => None,
        };
        while mount::unmount_if_mounted(target)? {}
        if let Some(device) = own_device {
            loopdev::detach(&device)?;
        }
        match fs::symlink_metadata(target) {
            Ok(meta) if meta.is_dir() => fs::remove_dir(target).at("remove", target)?,
            Ok(_) => fs::remove_file(target).at("remove", target)?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(Error::io("stat", target, err)),
        }
        if record.published.remove(target).is_some() {
            self.put_volume(record)?;
        }
        Ok(())
    }

    /// Makes the node see a volume's new size: refreshes its loop device and grows its
    /// filesystem online. Returns the volume's size.
    pub fn node_expand(&self, id: &str) -> Result<u64> {
        let _held = self.ids.lock(&[id]);
        let mut record = self.volume(id)?;
        let image = self.volume_image(&record)?;
        let devices = loopdev::find(&image)?;
        for device in &devices {
            loopdev::refresh_size(device)?;
        }
        // A filesystem volume that is not staged grows offline at its next stage.
        if record.mode == VolumeMode::Filesystem
            && record.grow_fs
            && let Some(device) = devices.first()
        {
            filesystem::grow_ext4_online(device)?;
            record.grow_fs = false;
            let size = record.size;
            self.put_volume(record)?;
            return Ok(size);
        }
        Ok(record.size)
    }

    /// Usage of a volume published or staged at `path`.
    pub fn volume_stats(&self, id: &str, path: &Path) -> Result<VolumeStats> {
        let record = self.volume(id)?;
        if !path.exists() {
            return Err(Error::NotFound(format!(
                "volume path {} does not exist",
                path.display()
            )));
        }
        let mut stats = VolumeStats {
            total_bytes: record.size,
            abnormal: self.volume_condition(&record),
            ..VolumeStats::default()
        };
        if record.mode == VolumeMode::Filesystem {
            if mount::mount_at(path)?.is_none() {
                stats.abnormal = Some(format!("volume {id} is not mounted at {}", path.display()));
                return Ok(stats);
            }
            let vfs = rustix::fs::statvfs(path).at("statfs", path)?;
            stats.total_bytes = vfs.f_blocks * vfs.f_frsize;
            stats.available_bytes = Some(vfs.f_bavail * vfs.f_frsize);
            stats.used_bytes = Some(vfs.f_blocks.saturating_sub(vfs.f_bfree) * vfs.f_frsize);
            stats.total_inodes = Some(vfs.f_files);
            stats.free_inodes = Some(vfs.f_ffree);
            stats.used_inodes = Some(vfs.f_files.saturating_sub(vfs.f_ffree));
        }
        Ok(stats)
    }
}

/// What a create makes.
enum PlannedVolume {
    Exists(Box<VolumeRecord>),
    New {
        source_image: Option<PathBuf>,
        size: u64,
        source_size: u64,
    },
}

/// Makes an empty (sparse) image of `len` bytes.
/// Makes a pool's `csi` and `csi-snapshots` directories.
fn create_pool_dirs(pool: &Pool) -> Result<()> {
    for dir in [pool.path.join("csi"), pool.path.join("csi-snapshots")] {
        fs::create_dir_all(&dir).at("create", &dir)?;
    }
    Ok(())
}

fn create_sparse_image(image: &Path, len: u64) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o660)
        .open(image)
        .at("create", image)?;
    file.set_len(len).at("resize", image)
}

/// The bytes an image occupies on disk (0 when it is missing).
fn occupied_bytes(image: &Path) -> u64 {
    fs::metadata(image).map_or(0, |m| m.blocks() * 512)
}

/// Removal is idempotent: something already gone is removed.
fn absent_is_ok(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The length of a volume's image for `size` bytes of capacity: a filesystem volume's image
/// also holds the filesystem's own metadata.
fn image_len(mode: VolumeMode, size: u64) -> u64 {
    match mode {
        VolumeMode::Filesystem => filesystem::image_len(size),
        VolumeMode::Block => size,
    }
}

/// What a publication in progress has made, to undo if it fails.
#[derive(Default)]
struct Publication {
    /// The target path did not exist before.
    target: bool,
    /// A loop device of its own (a read-only publication's).
    device: Option<PathBuf>,
    /// The bind mount is in place.
    mounted: bool,
}

impl Publication {
    /// Takes back what was made, best effort: the publication has already failed.
    fn undo(self, target: &Path) {
        if self.mounted
            && let Err(err) = mount::unmount_if_mounted(target)
        {
            tracing::warn!(target = %target.display(), %err, "cannot unmount a failed publication");
        }
        if let Some(device) = &self.device
            && let Err(err) = loopdev::detach(device)
        {
            tracing::warn!(device = %device.display(), %err, "cannot detach a failed publication's loop device");
        }
        if self.target {
            let removed = if target.is_dir() {
                fs::remove_dir(target)
            } else {
                fs::remove_file(target)
            };
            if let Err(err) = removed {
                tracing::warn!(target = %target.display(), %err, "cannot remove a failed publication's target");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(tmp: &Path) -> HostPathStore {
        let pools = vec![Pool {
            name: "default".into(),
            path: tmp.join("pool"),
        }];
        HostPathStore::open(pools, tmp.join("state")).unwrap()
    }

    fn req(name: &str, size: u64) -> CreateVolume {
        CreateVolume {
            name: name.into(),
            required_bytes: size,
            limit_bytes: 0,
            pool: None,
            mode: VolumeMode::Filesystem,
            source: None,
            ephemeral: false,
        }
    }

    fn in_pool(name: &str, pool: &str) -> CreateVolume {
        CreateVolume {
            pool: Some(pool.into()),
            ..req(name, MIB)
        }
    }

    #[test]
    fn pools_added_at_runtime_serve_volumes_and_survive_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path());
        let fast = Pool {
            name: "fast".into(),
            path: tmp.path().join("fast"),
        };
        assert!(matches!(
            store.create_volume(&in_pool("pvc-a", "fast")),
            Err(Error::InvalidArgument(_))
        ));
        assert!(store.add_pool(fast.clone()).unwrap());
        assert!(
            !store.add_pool(fast.clone()).unwrap(),
            "adding again is a no-op"
        );
        let record = store.create_volume(&in_pool("pvc-a", "fast")).unwrap();
        let image = store.volume_image(&record).unwrap();
        assert!(image.starts_with(tmp.path().join("fast/csi")));
        assert!(store.available_bytes(Some("fast")).unwrap() > 0);
        drop(store);
        let store = self::store(tmp.path());
        assert_eq!(store.pools().len(), 2, "the added pool is reopened");
        assert_eq!(store.volume_condition(&record), None);
        // A pool's directory cannot be another pool's, nor a configured pool moved.
        let clash = Pool {
            name: "other".into(),
            path: tmp.path().join("fast"),
        };
        assert!(store.add_pool(clash).is_err());
        let moved = Pool {
            name: "default".into(),
            path: tmp.path().join("elsewhere"),
        };
        assert!(store.add_pool(moved).is_err());
        // An added pool that holds volumes does not move either.
        let fast_moved = Pool {
            name: "fast".into(),
            path: tmp.path().join("fast2"),
        };
        assert!(matches!(
            store.add_pool(fast_moved),
            Err(Error::FailedPrecondition(_))
        ));
    }

    #[test]
    fn a_removed_pool_keeps_its_volumes_until_they_are_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path());
        let fast = Pool {
            name: "fast".into(),
            path: tmp.path().join("fast"),
        };
        store.add_pool(fast.clone()).unwrap();
        let record = store.create_volume(&in_pool("pvc-a", "fast")).unwrap();
        let image = store.volume_image(&record).unwrap();
        assert_eq!(
            store.remove_pool("fast").unwrap(),
            PoolRemoval::Retained {
                volumes: 1,
                snapshots: 0
            }
        );
        assert!(image.exists(), "nothing on disk is removed");
        assert!(matches!(
            store.create_volume(&in_pool("pvc-b", "fast")),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(store.available_bytes(Some("fast")).unwrap(), 0);
        // Still retired after a restart, and its volume still served.
        drop(store);
        let store = self::store(tmp.path());
        assert!(store.pool_entries()[1].retired);
        assert_eq!(store.volume_condition(&record), None);
        // Adding it back puts it in service again.
        assert!(store.add_pool(fast).unwrap());
        store.create_volume(&in_pool("pvc-b", "fast")).unwrap();
        store.remove_pool("fast").unwrap();
        store.delete_volume("pvc-a").unwrap();
        assert_eq!(store.pools().len(), 2, "pvc-b is still there");
        store.delete_volume("pvc-b").unwrap();
        assert_eq!(store.pools().len(), 1, "forgotten once emptied");
        assert_eq!(store.remove_pool("fast").unwrap(), PoolRemoval::Absent);
        assert!(
            store.remove_pool("default").is_err(),
            "configured pools stay"
        );
        drop(store);
        assert_eq!(self::store(tmp.path()).pools().len(), 1);
    }

    #[test]
    fn an_empty_pool_is_removed_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(tmp.path());
        let fast = Pool {
            name: "fast".into(),
            path: tmp.path().join("fast"),
        };
        store.add_pool(fast).unwrap();
        assert_eq!(store.remove_pool("fast").unwrap(), PoolRemoval::Removed);
        assert_eq!(store.pools().len(), 1);
    }

    #[test]
    fn ids_are_path_safe() {
        assert_eq!(id_for_name("pvc-1234"), "pvc-1234");
        let odd = id_for_name("a/b c");
        assert!(odd.starts_with("h-") && !odd.contains('/'));
        assert_ne!(id_for_name("h-x"), "h-x");
        assert_ne!(id_for_name("../x"), "../x");
    }

    #[test]
    fn sizes_are_rounded_within_limits() {
        assert_eq!(choose_size(1, 0, 0).unwrap(), MIB);
        assert_eq!(choose_size(0, 0, 0).unwrap(), DEFAULT_VOLUME_SIZE);
        assert_eq!(choose_size(5000, 8192, 0).unwrap(), 8192);
        assert!(matches!(
            choose_size(10, 5, 0),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            choose_size(5000, 5001, 0),
            Err(Error::OutOfRange(_))
        ));
    }

    #[test]
    fn create_is_idempotent_and_records_survive_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let v = s.create_volume(&req("pvc-a", 3 * MIB)).unwrap();
        assert_eq!(v.size, 3 * MIB);
        assert_eq!(s.create_volume(&req("pvc-a", 3 * MIB)).unwrap(), v);
        assert!(matches!(
            s.create_volume(&req("pvc-a", 5 * MIB)),
            Err(Error::AlreadyExists(_))
        ));
        let image = s.volume_image(&v).unwrap();
        assert_eq!(
            fs::metadata(&image).unwrap().len(),
            image_len(v.mode, 3 * MIB)
        );
        drop(s);
        let s = store(tmp.path());
        assert_eq!(s.volume("pvc-a").unwrap(), v);
        s.delete_volume("pvc-a").unwrap();
        s.delete_volume("pvc-a").unwrap();
        assert!(!image.exists());
    }

    #[test]
    fn records_of_one_file_each_move_into_the_journal() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let v = s.create_volume(&req("pvc-old", MIB)).unwrap();
        drop(s);
        // As an earlier version kept it: one file per record, no journal.
        fs::remove_dir_all(tmp.path().join("state/journal")).unwrap();
        let old = RecordDir::open(tmp.path().join("state/volumes")).unwrap();
        old.save(&v.id, &v).unwrap();
        let s = store(tmp.path());
        assert_eq!(s.volume("pvc-old").unwrap(), v);
        assert!(!tmp.path().join("state/volumes").exists());
        drop(s);
        assert_eq!(store(tmp.path()).volume("pvc-old").unwrap(), v);
    }

    #[test]
    fn an_empty_image_a_crash_lost_is_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let v = s.create_volume(&req("pvc-lost", 2 * MIB)).unwrap();
        let image = s.volume_image(&v).unwrap();
        drop(s);
        fs::remove_dir_all(image.parent().unwrap()).unwrap();
        let s = store(tmp.path());
        assert_eq!(
            fs::metadata(&image).unwrap().len(),
            image_len(v.mode, 2 * MIB)
        );
        assert_eq!(s.volume_condition(&v), None);
    }

    #[test]
    fn concurrent_creates_and_deletes_of_different_volumes_all_land() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        std::thread::scope(|scope| {
            for t in 0..8 {
                let s = &s;
                scope.spawn(move || {
                    for i in 0..20 {
                        let name = format!("pvc-{t}-{i}");
                        s.create_volume(&req(&name, MIB)).unwrap();
                        if i % 2 == 0 {
                            s.delete_volume(&name).unwrap();
                        }
                    }
                });
            }
        });
        assert_eq!(s.volumes().len(), 80);
        let promised = s.lock().promises.promised("default");
        assert_eq!(promised, 80 * MIB, "the running total matches the volumes");
        drop(s);
        assert_eq!(store(tmp.path()).volumes().len(), 80);
    }

    #[test]
    fn orphans_are_removed_at_open() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        s.create_volume(&req("pvc-kept", MIB)).unwrap();
        drop(s);
        let orphan = tmp.path().join("pool/csi/pvc-orphan");
        fs::create_dir_all(&orphan).unwrap();
        fs::write(orphan.join(IMAGE_NAME), b"x").unwrap();
        let foreign = tmp.path().join("pool/csi/someone-elses");
        fs::create_dir_all(&foreign).unwrap();
        fs::write(foreign.join("disk.img"), b"x").unwrap();
        fs::write(tmp.path().join("pool/csi-snapshots/snap-orphan.img"), b"x").unwrap();
        let s = store(tmp.path());
        assert!(!orphan.exists());
        assert!(
            foreign.exists(),
            "content the store did not make is left alone"
        );
        assert!(
            !tmp.path()
                .join("pool/csi-snapshots/snap-orphan.img")
                .exists()
        );
        assert!(s.volume("pvc-kept").is_ok());
    }

    #[test]
    fn capacity_counts_promised_space() {
        // A pool of its own size, which neither the machine's free disk nor other tests change.
        let fs = ferrovirt_tests::tmpfs::Tmpfs::new("capacity-promised", 8 << 30);
        let s = store(fs.path());
        let before = s.available_bytes(None).unwrap();
        let size = 3 << 30;
        s.create_volume(&req("pvc-big", size)).unwrap();
        let after = s.available_bytes(None).unwrap();
        // The sparse image occupies nothing yet, but its size is promised (the volume's state
        // record takes a page or two besides).
        let drop = before - after;
        assert!(drop >= size && drop < size + MIB, "{before} -> {after}");
        let too_big = req("pvc-huge", after + (1 << 40));
        assert!(matches!(
            s.create_volume(&too_big),
            Err(Error::ResourceExhausted { .. })
        ));
        assert!(matches!(
            s.create_volume(&CreateVolume {
                pool: Some("nope".into()),
                ..req("pvc-x", MIB)
            }),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn snapshot_restore_and_clone_are_identical() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let v = s.create_volume(&req("pvc-src", 8 * MIB)).unwrap();
        let image = s.volume_image(&v).unwrap();
        let pattern: Vec<u8> = (0..MIB as usize).map(|i| (i * 7 % 251) as u8).collect();
        {
            use std::os::unix::fs::FileExt;
            let f = OpenOptions::new().write(true).open(&image).unwrap();
            f.write_all_at(&pattern, 2 * MIB).unwrap();
        }
        let (snap, _) = s
            .create_snapshot(&CreateSnapshot {
                name: "snap-1".into(),
                source_volume_id: v.id.clone(),
            })
            .unwrap();
        assert_eq!(snap.size, 8 * MIB);
        assert!(matches!(
            s.create_snapshot(&CreateSnapshot {
                name: "snap-1".into(),
                source_volume_id: "other".into()
            }),
            Err(Error::AlreadyExists(_))
        ));
        let restored = s
            .create_volume(&CreateVolume {
                source: Some(VolumeSource::Snapshot(snap.id.clone())),
                ..req("pvc-restored", 8 * MIB)
            })
            .unwrap();
        let cloned = s
            .create_volume(&CreateVolume {
                source: Some(VolumeSource::Volume(v.id.clone())),
                ..req("pvc-clone", 16 * MIB)
            })
            .unwrap();
        let original = fs::read(&image).unwrap();
        assert_eq!(
            fs::read(s.volume_image(&restored).unwrap()).unwrap(),
            original
        );
        let clone_bytes = fs::read(s.volume_image(&cloned).unwrap()).unwrap();
        assert_eq!(clone_bytes.len() as u64, image_len(cloned.mode, 16 * MIB));
        assert_eq!(&clone_bytes[..original.len()], &original[..]);
        assert!(cloned.grow_fs);
        // A restore smaller than the snapshot is out of range; a missing source is not found.
        assert!(matches!(
            s.create_volume(&CreateVolume {
                source: Some(VolumeSource::Snapshot(snap.id.clone())),
                limit_bytes: 4 * MIB,
                ..req("pvc-small", 4 * MIB)
            }),
            Err(Error::OutOfRange(_))
        ));
        assert!(matches!(
            s.create_volume(&CreateVolume {
                source: Some(VolumeSource::Snapshot("missing".into())),
                ..req("pvc-y", MIB)
            }),
            Err(Error::NotFound(_))
        ));
        s.delete_snapshot(&snap.id).unwrap();
        s.delete_snapshot(&snap.id).unwrap();
    }

    #[test]
    fn expansion_grows_and_never_shrinks() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let v = s.create_volume(&req("pvc-e", 4 * MIB)).unwrap();
        assert_eq!(s.expand_volume(&v.id, 2 * MIB, 0).unwrap().0, 4 * MIB);
        let (size, node) = s.expand_volume(&v.id, 10 * MIB, 0).unwrap();
        assert_eq!(size, 10 * MIB);
        assert!(node);
        let image = s.volume_image(&v).unwrap();
        assert_eq!(
            fs::metadata(image).unwrap().len(),
            image_len(v.mode, 10 * MIB)
        );
        assert!(matches!(
            s.expand_volume("missing", MIB, 0),
            Err(Error::NotFound(_))
        ));
    }
}
