//! The records of every volume and snapshot, kept in the store's [`Journal`](crate::journal::Journal):
//! the changes it logs, how one is applied, and the record files of earlier versions.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::images::absent_is_ok;
use super::{HostPathStore, Inner, SnapshotRecord, VolumeRecord};
use crate::error::{IoContext, Result};
use crate::persist::{RecordDir, sync_dir};

/// The journal's log is folded into its snapshot once it has this many lines (or twice as many
/// as there are records, whichever is more).
pub(super) const COMPACT_AFTER_LINES: u64 = 4096;

/// Every record, as the journal's snapshot holds them.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct Records {
    pub(super) volumes: BTreeMap<String, VolumeRecord>,
    pub(super) snapshots: BTreeMap<String, SnapshotRecord>,
}

/// One change of the records, as the journal logs it.
#[derive(Serialize, Deserialize)]
pub(super) enum Change {
    PutVolume(VolumeRecord),
    RemoveVolume(String),
    PutSnapshot(SnapshotRecord),
    RemoveSnapshot(String),
}

impl Records {
    pub(super) fn apply(&mut self, change: Change) {
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

    pub(super) fn len(&self) -> u64 {
        (self.volumes.len() + self.snapshots.len()) as u64
    }
}

impl HostPathStore {
    /// Adds the records an earlier version kept one file each (`volumes/`, `snapshots/`);
    /// returns whether there were any.
    pub(super) fn load_record_files(state_dir: &Path, records: &mut Records) -> Result<bool> {
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
    pub(super) fn remove_record_files(state_dir: &Path) -> Result<()> {
        for dir in [state_dir.join("volumes"), state_dir.join("snapshots")] {
            absent_is_ok(fs::remove_dir_all(&dir)).at("remove", &dir)?;
        }
        sync_dir(state_dir)
    }

    /// Records `change` (applied to the in-memory state by `apply`, under the same lock, so the
    /// log's order is the state's) and returns once it is durable.
    pub(super) fn record(&self, change: Change, apply: impl FnOnce(&mut Inner)) -> Result<()> {
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
    pub(super) fn settled(&self) -> Result<()> {
        self.journal.commit(self.journal.written())
    }

    /// Saves a changed volume record.
    pub(super) fn put_volume(&self, record: VolumeRecord) -> Result<()> {
        self.record(Change::PutVolume(record), |_| {})
    }
}
