//! A small ext4 filesystem on a loop device, mounted for one test (as root) and taken down
//! again when the guard is dropped, also when the test fails: a full disk on demand.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::TempDir;

/// A mounted loop-device filesystem; unmounted and detached on drop.
pub struct LoopFilesystem {
    device: String,
    mount_point: PathBuf,
    _dir: TempDir,
}

fn run(command: &mut Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("running {command:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl LoopFilesystem {
    /// A `mib` MiB ext4 filesystem mounted at a new directory.
    pub fn new(label: &str, mib: u64) -> Self {
        let dir = TempDir::new(label);
        Self::mount_at(dir, None, mib)
    }

    /// The same, mounted at `mount_point` (created if missing), e.g. a platform's pool
    /// directory before the platform starts.
    pub fn new_at(label: &str, mount_point: &Path, mib: u64) -> Self {
        Self::mount_at(TempDir::new(label), Some(mount_point.to_path_buf()), mib)
    }

    fn mount_at(dir: TempDir, mount_point: Option<PathBuf>, mib: u64) -> Self {
        let image = dir.join("fs.img");
        let file = std::fs::File::create(&image).expect("creating the filesystem image");
        file.set_len(mib << 20)
            .expect("sizing the filesystem image");
        drop(file);
        let device = run(Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image))
        .expect("attaching a loop device (tests run as root)");
        // From here on the guard owns the device: a failure below detaches it.
        let mount_point = mount_point.unwrap_or_else(|| dir.join("mnt"));
        let mut fs = LoopFilesystem {
            device,
            mount_point: PathBuf::new(),
            _dir: dir,
        };
        run(Command::new("mkfs.ext4").args(["-q", "-F", "-m", "0", &fs.device]))
            .expect("mkfs.ext4");
        std::fs::create_dir_all(&mount_point).expect("the mount point");
        run(Command::new("mount").arg(&fs.device).arg(&mount_point)).expect("mount");
        fs.mount_point = mount_point;
        fs
    }

    pub fn path(&self) -> &Path {
        &self.mount_point
    }

    pub fn device(&self) -> &str {
        &self.device
    }

    /// Bytes free for an unprivileged writer.
    pub fn available(&self) -> u64 {
        let out = run(Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.mount_point))
        .expect("df");
        out.lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .expect("df's answer")
    }
}

impl Drop for LoopFilesystem {
    fn drop(&mut self) {
        if !self.mount_point.as_os_str().is_empty()
            && run(Command::new("umount").arg(&self.mount_point)).is_err()
        {
            // Still busy (a process of a failed test): detach it lazily.
            let _ = run(Command::new("umount").arg("-l").arg(&self.mount_point));
        }
        let _ = run(Command::new("losetup").args(["-d", &self.device]));
    }
}
