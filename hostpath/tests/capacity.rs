//! A pool filled with volumes until the store refuses one holds no more image bytes (the images'
//! apparent length, what their volumes can come to occupy) than its filesystem has: a
//! filesystem volume's image is longer than the volume's size, and that length is what the
//! pool reserves. Run on a tmpfs and on an ext4 filesystem on a loop device.

use std::fs;
use std::path::Path;
use std::process::Command;

use ferrovirt_hostpath::{CreateVolume, Error, HostPathStore, Pool, VolumeMode};
use ferrovirt_tests::tmpfs::Tmpfs;

const MIB: u64 = 1 << 20;

fn request(name: &str, size: u64, mode: VolumeMode) -> CreateVolume {
    CreateVolume {
        name: name.into(),
        required_bytes: size,
        limit_bytes: 0,
        pool: None,
        mode,
        source: None,
        ephemeral: false,
    }
}

fn open_store(pool: &Path, state: &Path) -> HostPathStore {
    let pools = vec![Pool {
        name: "default".into(),
        path: pool.to_path_buf(),
    }];
    HostPathStore::open(pools, state).expect("opening the store")
}

/// The bytes the filesystem holding `path` has in all.
fn filesystem_size(path: &Path) -> u64 {
    let vfs = rustix::fs::statvfs(path).expect("statvfs of the pool");
    vfs.f_blocks * vfs.f_frsize
}

/// The apparent length of every file under `dir`.
fn apparent_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in fs::read_dir(dir).expect("reading the pool") {
        let entry = entry.expect("a pool entry");
        let meta = entry.metadata().expect("a pool entry's metadata");
        total += if meta.is_dir() {
            apparent_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Creates volumes of `size` and `mode` named `<prefix>-<n>` until the store refuses one;
/// returns how many it made.
fn create_until_refused(store: &HostPathStore, prefix: &str, size: u64, mode: VolumeMode) -> u32 {
    for made in 0.. {
        match store.create_volume(&request(&format!("{prefix}-{made}"), size, mode)) {
            Ok(_) => {}
            Err(Error::ResourceExhausted { .. }) => return made,
            Err(err) => panic!("creating {prefix}-{made}: {err}"),
        }
    }
    unreachable!("the pool never runs out")
}

/// Fills the pool at `pool` every way the store lets a volume take space (filesystem volumes,
/// block volumes, expansion, the largest volume the pool reports room for) and checks that the
/// images never promise more than the filesystem has.
fn fill_and_check(pool: &Path) {
    let state = tempfile::tempdir().expect("a state directory");
    let store = open_store(pool, state.path());
    let fs_size = filesystem_size(pool);

    let filesystems = create_until_refused(&store, "fs", 64 * MIB, VolumeMode::Filesystem);
    assert!(
        filesystems > 1,
        "a pool of {fs_size} bytes took {filesystems}"
    );
    let images = apparent_bytes(pool);
    assert!(images <= fs_size, "{images} image bytes on {fs_size}");

    // Space freed by a delete, taken back by growing another volume step by step.
    let freed = store.volumes()[0].id.clone();
    store.delete_volume(&freed).expect("deleting a volume");
    let grown = store.volumes()[0].clone();
    let mut size = grown.size;
    loop {
        match store.expand_volume(&grown.id, size + 8 * MIB, 0) {
            Ok((now, _)) => size = now,
            Err(Error::ResourceExhausted { .. }) => break,
            Err(err) => panic!("expanding {}: {err}", grown.id),
        }
    }
    assert!(size > grown.size, "the freed space let the volume grow");

    // The largest volume the pool says it can still make is made, and fills it.
    let available = store.available_bytes(None).expect("the pool's free bytes");
    let largest = VolumeMode::Filesystem.largest_size_within(available);
    if largest > 0 {
        store
            .create_volume(&request("largest", largest, VolumeMode::Filesystem))
            .expect("a volume of the size the pool reports room for");
    }
    assert!(matches!(
        store.create_volume(&request("one-more", MIB, VolumeMode::Filesystem)),
        Err(Error::ResourceExhausted { .. })
    ));

    // Block volumes' images are exactly their size: whatever is left goes to them.
    create_until_refused(&store, "block", MIB, VolumeMode::Block);

    let images = apparent_bytes(pool);
    assert!(
        images <= fs_size,
        "{images} image bytes promised on a filesystem of {fs_size}"
    );
    let left = store.available_bytes(None).expect("the pool's free bytes");
    assert!(left < MIB, "{left} bytes left after the pool refused 1 MiB");
    assert!(images > fs_size / 2, "{images} image bytes on {fs_size}");
}

#[test]
fn a_full_tmpfs_pool_promises_no_more_than_it_has() {
    let fs = Tmpfs::new("capacity-full", 600 * MIB);
    fill_and_check(&fs.path().join("pool"));
}

/// An ext4 filesystem on a loop device, mounted in a temporary directory.
struct Ext4 {
    dir: tempfile::TempDir,
}

impl Ext4 {
    fn mount(bytes: u64) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let image = dir.path().join("ext4.img");
        fs::File::create(&image)
            .and_then(|f| f.set_len(bytes))
            .expect("an image for the filesystem");
        let made = Command::new("mkfs.ext4")
            .arg("-q")
            .arg(&image)
            .status()
            .is_ok_and(|s| s.success());
        assert!(made, "mkfs.ext4 {}", image.display());
        fs::create_dir(dir.path().join("mnt")).expect("a mount point");
        let mounted = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(dir.path().join("mnt"))
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            mounted,
            "mounting ext4 on a loop device (tests run as root)"
        );
        Ext4 { dir }
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        // The loop device goes with the mount (mount -o loop sets autoclear).
        let _ = Command::new("umount").arg(self.path()).status();
    }
}

#[test]
fn a_full_ext4_pool_promises_no_more_than_it_has() {
    let fs = Ext4::mount(400 * MIB);
    fill_and_check(&fs.path().join("pool"));
}
