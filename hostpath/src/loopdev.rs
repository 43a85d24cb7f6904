//! Loop devices for volume images, through util-linux's `losetup`: attach (reusing an existing
//! attachment of the same file), refresh the size after a resize, detach; and found through
//! sysfs.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, IoContext, Result};

fn losetup(args: &[&std::ffi::OsStr]) -> Result<String> {
    let output = Command::new("losetup")
        .args(args)
        .output()
        .map_err(|err| Error::Command {
            program: "losetup".into(),
            detail: err.to_string(),
        })?;
    if !output.status.success() {
        return Err(Error::Command {
            program: "losetup".into(),
            detail: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The loop devices currently backed by `image`, read from sysfs: no process is started, as
/// this runs on every delete. Compared as `losetup -j` compares, by device and inode, so a
/// device attached through another path to the same file is found too.
pub fn find(image: &Path) -> Result<Vec<PathBuf>> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let file_id = |path: &Path| std::fs::metadata(path).map(|m| (m.dev(), m.ino()));
    let Ok(wanted) = file_id(image) else {
        // No such file: nothing can be backed by it under this name.
        return Ok(Vec::new());
    };
    let sys = Path::new("/sys/block");
    let mut devices = Vec::new();
    for entry in std::fs::read_dir(sys).at("read directory", sys)?.flatten() {
        let name = entry.file_name();
        if !name.as_bytes().starts_with(b"loop") {
            continue;
        }
        // Present only while the device is attached: the path of its file, as given.
        let Ok(backing) = std::fs::read(entry.path().join("loop/backing_file")) else {
            continue;
        };
        let backing = backing.strip_suffix(b"\n").unwrap_or(&backing);
        let backing = Path::new(std::ffi::OsStr::from_bytes(backing));
        if file_id(backing).is_ok_and(|id| id == wanted) {
            devices.push(Path::new("/dev").join(&name));
        }
    }
    devices.sort();
    Ok(devices)
}

/// Attaches `image` to a writable loop device, or returns the writable device it is already
/// attached to (never a read-only publication's own device).
pub fn attach(image: &Path) -> Result<PathBuf> {
    if let Some(dev) = find(image)?.into_iter().find(|dev| !is_read_only(dev)) {
        return Ok(dev);
    }
    let out = losetup(&["--find".as_ref(), "--show".as_ref(), image.as_os_str()])?;
    let dev = out.trim();
    if dev.is_empty() {
        return Err(Error::Command {
            program: "losetup".into(),
            detail: format!("no device printed for {}", image.display()),
        });
    }
    Ok(PathBuf::from(dev))
}

/// Makes the loop device see the backing file's current size.
pub fn refresh_size(device: &Path) -> Result<()> {
    losetup(&["--set-capacity".as_ref(), device.as_os_str()]).map(|_| ())
}

/// Detaches every loop device backed by `image`, and waits (up to two seconds) until they are
/// gone: a device that something else has open at that moment (udev, any `losetup` scanning
/// devices) is only marked to detach on last close, and must not be reused meanwhile.
pub fn detach_all(image: &Path) -> Result<()> {
    let devices = find(image)?;
    if devices.is_empty() {
        return Ok(());
    }
    for dev in &devices {
        losetup(&["--detach".as_ref(), dev.as_os_str()])?;
    }
    for _ in 0..40 {
        if find(image)?.is_empty() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    tracing::warn!(image = %image.display(), "loop device still attached after detach");
    Ok(())
}

/// Attaches `image` to a new read-only loop device. A read-only bind mount does not stop writes
/// to a device node (the mount's flag covers the filesystem, not the device behind the node),
/// so a read-only block publication needs a device that is itself read-only.
pub fn attach_read_only(image: &Path) -> Result<PathBuf> {
    let out = losetup(&[
        "--find".as_ref(),
        "--show".as_ref(),
        "--read-only".as_ref(),
        image.as_os_str(),
    ])?;
    Ok(PathBuf::from(out.trim()))
}

/// Whether the loop device is read-only.
pub fn is_read_only(device: &Path) -> bool {
    let Some(name) = device.file_name() else {
        return false;
    };
    let ro = Path::new("/sys/block").join(name).join("ro");
    std::fs::read_to_string(ro).is_ok_and(|v| v.trim() == "1")
}

/// Detaches one loop device.
pub fn detach(device: &Path) -> Result<()> {
    losetup(&["--detach".as_ref(), device.as_os_str()]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As root, with util-linux's losetup (the driver's own requirements).
    #[test]
    fn a_device_attached_through_another_name_of_the_file_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let image = tmp.path().join("volume.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let other_name = tmp.path().join("other.img");
        std::fs::hard_link(&image, &other_name).unwrap();
        let device = attach(&other_name).unwrap();
        let found = find(&image);
        let detached = detach(&device);
        assert_eq!(found.unwrap(), vec![device]);
        detached.unwrap();
    }
}
