//! Snapshots: a copy of a volume's image (reflink where the filesystem has it), created,
//! deleted and read back.

use std::fs;

use super::images::absent_is_ok;
use super::records::Change;
use super::{CreateSnapshot, HostPathStore, SnapshotRecord, id_for_name, now};
use crate::copy::{CopyMethod, copy_image};
use crate::error::{Error, IoContext, Result};
use crate::persist::sync_dir;

impl HostPathStore {
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
}
