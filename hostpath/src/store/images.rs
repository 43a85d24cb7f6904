//! The image files: where a volume's and a snapshot's image live in their pool, making an
//! empty one, and what one occupies and how long it is.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{HostPathStore, IMAGE_NAME, MIB, SnapshotRecord, VolumeMode, VolumeRecord};
use crate::error::{Error, IoContext, Result};
use crate::filesystem;
use crate::pool::Pool;

impl HostPathStore {
    pub(super) fn volume_dir(pool: &Pool, id: &str) -> PathBuf {
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

    pub(super) fn snapshot_image(&self, record: &SnapshotRecord) -> Result<PathBuf> {
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
}

/// Makes an empty (sparse) image of `len` bytes.
pub(super) fn create_sparse_image(image: &Path, len: u64) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o660)
        .open(image)
        .at("create", image)?;
    file.set_len(len).at("resize", image)
}

/// The bytes an image occupies on disk (0 when it is missing).
pub(super) fn occupied_bytes(image: &Path) -> u64 {
    fs::metadata(image).map_or(0, |m| m.blocks() * 512)
}

/// Removal is idempotent: something already gone is removed.
pub(super) fn absent_is_ok(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The length of a volume's image for `size` bytes of capacity: a filesystem volume's image
/// also holds the filesystem's own metadata.
pub(super) fn image_len(mode: VolumeMode, size: u64) -> u64 {
    match mode {
        VolumeMode::Filesystem => filesystem::image_len(size),
        VolumeMode::Block => size,
    }
}

impl VolumeMode {
    /// The largest size, in whole MiB, of a volume of this mode whose image takes at most
    /// `image_bytes`: what a pool that can give `image_bytes` can still make.
    pub fn largest_size_within(self, image_bytes: u64) -> u64 {
        let size = match self {
            VolumeMode::Filesystem => filesystem::capacity_within(image_bytes),
            VolumeMode::Block => image_bytes,
        };
        size / MIB * MIB
    }
}
