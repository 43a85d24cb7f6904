//! The node side of a volume: staging it (loop device, ext4 made and mounted), unstaging it,
//! growing it on the node, and its usage.

use std::fs;
use std::path::Path;

use super::{AccessType, HostPathStore, VolumeMode, VolumeRecord, VolumeStats};
use crate::error::{Error, IoContext, Result};
use crate::{filesystem, loopdev, mount};

impl HostPathStore {
    pub(super) fn check_access(record: &VolumeRecord, access: &AccessType) -> Result<()> {
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
