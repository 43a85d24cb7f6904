//! A tmpfs of a fixed size, mounted for one test (as root) and unmounted when the guard is
//! dropped: a filesystem whose free space nothing else changes, whatever the machine's disk
//! holds or other tests write meanwhile. Sparse files in it cost no memory.

use std::path::Path;
use std::process::Command;

use crate::TempDir;

/// A mounted tmpfs; unmounted on drop, before its directory is removed.
pub struct Tmpfs {
    dir: TempDir,
    mounted: bool,
}

impl Tmpfs {
    /// A tmpfs of `bytes` mounted at a new directory.
    pub fn new(label: &str, bytes: u64) -> Self {
        let mut fs = Tmpfs {
            dir: TempDir::new(label),
            mounted: false,
        };
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(fs.dir.path())
            .status()
            .expect("running mount");
        assert!(status.success(), "mounting a tmpfs (tests run as root)");
        fs.mounted = true;
        fs
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if !self.mounted {
            return;
        }
        let unmounted = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Still busy (a process of a failed test): detach it lazily.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}
