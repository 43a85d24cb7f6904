//! The hostpath store: every pool, volume and snapshot of this node, the operations on them, and
//! their persisted records.
//!
//! Ordering rules that make a kill -9 harmless: data first, record second on creation (an image
//! without a record is an orphan, removed at the next start, and the CO's retry makes it again);
//! record first, data second on deletion. Records live in a [`Journal`]: one shared fsync per
//! change. An operation holds the ids it works on for its whole duration ([`IdLocks`]) and the
//! in-memory state only for its bookkeeping, so calls on different volumes run side by side.
//!
//! ```text
//!   mod.rs      the store, its state and lock order, and the values its methods take
//!   records     the journalled records of volumes and snapshots, and how a change lands
//!   capacity    what each pool can still give: free space less what volumes may grow into
//!   pools       serving, adding and retiring pools
//!   images      where images live in a pool, and making and sizing them
//!   recovery    what an interrupted operation left behind, put right at open
//!   volumes     creating, expanding and deleting volumes
//!   snapshots   creating and deleting snapshots
//!   stage       the node side: staging, node expansion, usage
//!   publish     publishing a staged volume at a target, and taking it back
//! ```

mod capacity;
mod images;
mod pools;
mod publish;
mod records;
mod recovery;
mod snapshots;
mod stage;
mod volumes;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::journal::Journal;
use crate::oplock::IdLocks;
use crate::pool::{Pool, PoolSet};

use capacity::Promises;
use pools::create_pool_dirs;
use records::Records;

/// Size given to a volume whose request names none.
pub const DEFAULT_VOLUME_SIZE: u64 = 1 << 30;

const MIB: u64 = 1 << 20;

const IMAGE_NAME: &str = "volume.img";

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

    /// Where the store keeps its records (and ephemeral volumes' staging directories).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }
}

#[cfg(test)]
mod tests;
