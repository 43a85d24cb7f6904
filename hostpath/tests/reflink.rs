//! Snapshots and clones on a filesystem that shares extents (XFS made with reflink on a loop
//! device) are reflinks; on one that does not (the test machine's ext4 or tmpfs), sparse copies.
//! Both give byte-identical images.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferrovirt_hostpath::{
    CopyMethod, CreateSnapshot, CreateVolume, HostPathStore, Pool, VolumeMode, VolumeSource,
};

const MIB: u64 = 1 << 20;

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program} is not available: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// An XFS filesystem with reflink, on a loop device, mounted in a temporary directory.
struct Xfs {
    dir: tempfile::TempDir,
    device: String,
}

impl Xfs {
    fn make() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("xfs.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(512 * MIB))
            .map_err(|e| e.to_string())?;
        let image = image.to_str().ok_or("non-UTF-8 path")?.to_string();
        run("mkfs.xfs", &["-q", "-m", "reflink=1", &image])?;
        let device = run("losetup", &["--find", "--show", &image])?;
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
        let xfs = Self { dir, device };
        run(
            "mount",
            &[&xfs.device, mnt.to_str().ok_or("non-UTF-8 path")?],
        )?;
        Ok(xfs)
    }

    fn mountpoint(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.mountpoint()).status();
        let _ = Command::new("losetup")
            .args(["--detach", &self.device])
            .status();
    }
}

fn snapshot_clone_roundtrip(pool_dir: &Path, state_dir: &Path) -> (CopyMethod, CopyMethod) {
    let store = HostPathStore::open(
        vec![Pool {
            name: "p".into(),
            path: pool_dir.to_path_buf(),
        }],
        state_dir,
    )
    .unwrap();
    let volume = store
        .create_volume(&CreateVolume {
            name: "pvc-src".into(),
            required_bytes: 64 * MIB,
            limit_bytes: 0,
            pool: None,
            mode: VolumeMode::Block,
            source: None,
            ephemeral: false,
        })
        .unwrap();
    let image = store.volume_image(&volume).unwrap();
    let data: Vec<u8> = (0..8 * MIB as usize).map(|i| (i % 253) as u8).collect();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&image)
        .unwrap();
    file.write_all_at(&data, 16 * MIB).unwrap();
    file.sync_all().unwrap();
    let (snapshot, snap_method) = store
        .create_snapshot(&CreateSnapshot {
            name: "snap".into(),
            source_volume_id: volume.id.clone(),
        })
        .unwrap();
    let restored = store
        .create_volume(&CreateVolume {
            name: "pvc-restored".into(),
            required_bytes: 64 * MIB,
            limit_bytes: 0,
            pool: None,
            mode: VolumeMode::Block,
            source: Some(VolumeSource::Snapshot(snapshot.id)),
            ephemeral: false,
        })
        .unwrap();
    let original = std::fs::read(&image).unwrap();
    assert_eq!(
        std::fs::read(store.volume_image(&restored).unwrap()).unwrap(),
        original
    );
    // The copy method of a restore is the same as the snapshot's, on the same filesystem.
    let copy_dir = tempfile::tempdir_in(pool_dir).unwrap();
    let method = ferrovirt_hostpath::copy::copy_image(&image, &copy_dir.path().join("x")).unwrap();
    (snap_method.expect("a new snapshot is copied"), method)
}

#[test]
fn reflink_on_xfs_sparse_copy_elsewhere() {
    let plain = tempfile::tempdir().unwrap();
    let (snap, restore) =
        snapshot_clone_roundtrip(&plain.path().join("pool"), &plain.path().join("state"));
    let fs_type =
        run("stat", &["-f", "-c", "%T", plain.path().to_str().unwrap()]).unwrap_or_default();
    if fs_type != "xfs" && fs_type != "btrfs" {
        assert_eq!(
            (snap, restore),
            (CopyMethod::SparseCopy, CopyMethod::SparseCopy)
        );
    }
    // No silent skip: scripts/test installs xfsprogs, and the test runs as root.
    let xfs = Xfs::make().unwrap_or_else(|reason| {
        panic!("the reflink half needs an XFS loop mount (xfsprogs, losetup, root): {reason}")
    });
    let (snap, restore) = snapshot_clone_roundtrip(
        &xfs.mountpoint().join("pool"),
        &xfs.mountpoint().join("state"),
    );
    assert_eq!((snap, restore), (CopyMethod::Reflink, CopyMethod::Reflink));
}
