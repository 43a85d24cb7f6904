//! Volumes: creating one (empty or filled from a snapshot or another volume), expanding
//! and deleting it, and reading the records back.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use super::images::{absent_is_ok, create_sparse_image, image_len, occupied_bytes};
use super::records::Change;
use super::{
    CreateVolume, DEFAULT_VOLUME_SIZE, HostPathStore, IMAGE_NAME, Inner, MIB, VolumeMode,
    VolumeRecord, VolumeSource, id_for_name, now,
};
use crate::copy::copy_image;
use crate::error::{Error, IoContext, Result};
use crate::loopdev;
use crate::persist::sync_dir;
use crate::pool::Pool;

/// The size to give a volume: the request rounded up to whole MiB (4 KiB when the limit does
/// not allow that), within `[required, limit]`.
pub(super) fn choose_size(required: u64, limit: u64, minimum: u64) -> Result<u64> {
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
        // What was set aside in the pool: the whole image, which a filesystem volume's
        // metadata makes longer than its size.
        let len = image_len(req.mode, size);
        let made = self.make_image(&pool, &id, len, source_image.as_deref());
        let occupied = match made {
            Ok(occupied) => occupied,
            Err(err) => {
                self.lock().promises.unreserve(&pool.name, len);
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
            inner.promises.unreserve(&pool.name, len);
            let promise = len.saturating_sub(occupied);
            inner.promises.set(&pool.name, &id, Some(promise));
        });
        if let Err(err) = recorded {
            // Not logged (a full or failing state disk): the image is an orphan.
            let mut inner = self.lock();
            if !inner.records.volumes.contains_key(&id) {
                inner.promises.unreserve(&pool.name, len);
                let _ = fs::remove_dir_all(Self::volume_dir(&pool, &id));
            }
            return Err(err);
        }
        Ok(record)
    }

    /// Decides what a create makes: nothing (a compatible volume of that name exists), or a
    /// volume of a size, filled from a source image, whose image's length is set aside in the
    /// pool.
    pub(super) fn plan_volume(
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
        self.reserve(inner, pool, image_len(req.mode, size))?;
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
    pub(super) fn make_image(
        &self,
        pool: &Pool,
        id: &str,
        len: u64,
        source: Option<&Path>,
    ) -> Result<u64> {
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
        // The image grows by more than the size where a filesystem's metadata grows with it.
        let growth =
            image_len(record.mode, size).saturating_sub(image_len(record.mode, record.size));
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
}

/// What a create makes.
pub(super) enum PlannedVolume {
    Exists(Box<VolumeRecord>),
    New {
        source_image: Option<PathBuf>,
        size: u64,
        source_size: u64,
    },
}
