//! Putting right at open what an interrupted operation or a power cut left behind: images
//! without a record are removed, empty images a record still names are made again.

use std::fs;

use super::images::{create_sparse_image, image_len};
use super::{HostPathStore, IMAGE_NAME};
use crate::error::{IoContext, Result};

impl HostPathStore {
    /// Makes again the image of an empty volume whose record survived a power cut that its
    /// image did not (new empty images are not fsynced: they hold nothing to lose).
    pub(super) fn restore_lost_images(&self) -> Result<()> {
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

    /// Removes images that have no record: left by a create or delete that was interrupted.
    /// Only what this store makes is touched (a directory holding just `volume.img`, a
    /// snapshot `.img`), never other content of the pool.
    pub(super) fn remove_orphans(&self) -> Result<()> {
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
}
