//! Mounts: the mount table from /proc/self/mountinfo, bind mounts (read-only honoured), ext4
//! mounts of loop devices, and unmounts.

use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, UnmountFlags};

use crate::error::{Error, IoContext, Result};

/// One line of the mount table.
#[derive(Debug, Clone)]
pub struct MountEntry {
    /// Where it is mounted.
    pub target: PathBuf,
    /// The source device (for example /dev/loop3) or the filesystem's name for it.
    pub source: String,
    /// The root of the mount inside its filesystem (for a bind mount of a file, its path).
    pub root: PathBuf,
    /// Mounted read-only.
    pub read_only: bool,
}

fn unescape(field: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let code = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(code as u8);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The current mount table.
pub fn mount_table() -> Result<Vec<MountEntry>> {
    let path = Path::new("/proc/self/mountinfo");
    let text = std::fs::read_to_string(path).at("read", path)?;
    let mut entries = Vec::new();
    for line in text.lines() {
        // id parent major:minor root target options [optional...] - fstype source superoptions
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if fields.len() < 6 || dash + 2 >= fields.len() {
            continue;
        }
        entries.push(MountEntry {
            root: PathBuf::from(unescape(fields[3])),
            target: PathBuf::from(unescape(fields[4])),
            read_only: fields[5].split(',').any(|o| o == "ro"),
            source: unescape(fields[dash + 2]),
        });
    }
    Ok(entries)
}

/// The topmost mount at exactly `target`, if any.
pub fn mount_at(target: &Path) -> Result<Option<MountEntry>> {
    let target = std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
    Ok(mount_table()?
        .into_iter()
        .rev()
        .find(|m| m.target == target))
}

/// Bind-mounts `source` (a directory or a device node) at `target`, read-only if asked.
pub fn bind(source: &Path, target: &Path, read_only: bool) -> Result<()> {
    rustix::mount::mount_bind(source, target).at("bind mount onto", target)?;
    if read_only {
        let flags = MountFlags::BIND | MountFlags::RDONLY;
        if let Err(err) = rustix::mount::mount_remount(target, flags, "") {
            let _ = rustix::mount::unmount(target, UnmountFlags::empty());
            return Err(err).at("remount read-only", target);
        }
    }
    Ok(())
}

/// Mounts the ext4 filesystem on `device` at `target`, with the given mount options.
pub fn mount_ext4(device: &Path, target: &Path, options: &[String], read_only: bool) -> Result<()> {
    let mut flags = MountFlags::empty();
    let mut data = Vec::new();
    for option in options {
        match option.as_str() {
            "ro" => flags |= MountFlags::RDONLY,
            "noatime" => flags |= MountFlags::NOATIME,
            "nodev" => flags |= MountFlags::NODEV,
            "nosuid" => flags |= MountFlags::NOSUID,
            "noexec" => flags |= MountFlags::NOEXEC,
            "rw" | "defaults" => {}
            other => data.push(other.to_string()),
        }
    }
    if read_only {
        flags |= MountFlags::RDONLY;
    }
    let data = std::ffi::CString::new(data.join(","))
        .map_err(|_| Error::InvalidArgument("mount option contains a NUL byte".into()))?;
    rustix::mount::mount(device, target, "ext4", flags, Some(data.as_c_str()))
        .at("mount ext4 onto", target)
}

/// Unmounts `target` if something is mounted there; returns whether it unmounted.
pub fn unmount_if_mounted(target: &Path) -> Result<bool> {
    if mount_at(target)?.is_none() {
        return Ok(false);
    }
    // EBUSY can be transient: any process forked at that moment (this driver starting losetup,
    // a test harness starting a child) holds a copy of open descriptors inside the mount until
    // it execs. Retry for up to two seconds before reporting it.
    let mut attempt = 0;
    loop {
        match rustix::mount::unmount(target, UnmountFlags::empty()) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::BUSY) if attempt < 40 => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(errno) => return Err(errno).at("unmount", target),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mountinfo_fields() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
    }

    #[test]
    fn root_is_mounted() {
        assert!(mount_at(Path::new("/")).unwrap().is_some());
    }
}
