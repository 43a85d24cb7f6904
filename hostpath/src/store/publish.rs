//! Publishing a staged volume at a target (a bind mount, or a loop device of its own for a
//! read-only block publication) and taking it back, leaving nothing behind on failure.

use std::fs;
use std::path::{Path, PathBuf};

use super::{AccessType, HostPathStore, VolumeMode, VolumeRecord};
use crate::error::{Error, IoContext, Result};
use crate::{loopdev, mount};

impl HostPathStore {
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
    pub(super) fn mount_publication(
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
}

/// What a publication in progress has made, to undo if it fails.
#[derive(Default)]
pub(super) struct Publication {
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
