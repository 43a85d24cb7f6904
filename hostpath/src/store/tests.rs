//! Tests of the store as a whole: pools, volumes, snapshots and their records across reopens.

use std::fs::{self, OpenOptions};

use super::images::image_len;
use super::volumes::choose_size;
use super::*;
use crate::error::Error;
use crate::persist::RecordDir;

fn store(tmp: &Path) -> HostPathStore {
    let pools = vec![Pool {
        name: "default".into(),
        path: tmp.join("pool"),
    }];
    HostPathStore::open(pools, tmp.join("state")).unwrap()
}

fn req(name: &str, size: u64) -> CreateVolume {
    CreateVolume {
        name: name.into(),
        required_bytes: size,
        limit_bytes: 0,
        pool: None,
        mode: VolumeMode::Filesystem,
        source: None,
        ephemeral: false,
    }
}

fn in_pool(name: &str, pool: &str) -> CreateVolume {
    CreateVolume {
        pool: Some(pool.into()),
        ..req(name, MIB)
    }
}

#[test]
fn pools_added_at_runtime_serve_volumes_and_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store(tmp.path());
    let fast = Pool {
        name: "fast".into(),
        path: tmp.path().join("fast"),
    };
    assert!(matches!(
        store.create_volume(&in_pool("pvc-a", "fast")),
        Err(Error::InvalidArgument(_))
    ));
    assert!(store.add_pool(fast.clone()).unwrap());
    assert!(
        !store.add_pool(fast.clone()).unwrap(),
        "adding again is a no-op"
    );
    let record = store.create_volume(&in_pool("pvc-a", "fast")).unwrap();
    let image = store.volume_image(&record).unwrap();
    assert!(image.starts_with(tmp.path().join("fast/csi")));
    assert!(store.available_bytes(Some("fast")).unwrap() > 0);
    drop(store);
    let store = self::store(tmp.path());
    assert_eq!(store.pools().len(), 2, "the added pool is reopened");
    assert_eq!(store.volume_condition(&record), None);
    // A pool's directory cannot be another pool's, nor a configured pool moved.
    let clash = Pool {
        name: "other".into(),
        path: tmp.path().join("fast"),
    };
    assert!(store.add_pool(clash).is_err());
    let moved = Pool {
        name: "default".into(),
        path: tmp.path().join("elsewhere"),
    };
    assert!(store.add_pool(moved).is_err());
    // An added pool that holds volumes does not move either.
    let fast_moved = Pool {
        name: "fast".into(),
        path: tmp.path().join("fast2"),
    };
    assert!(matches!(
        store.add_pool(fast_moved),
        Err(Error::FailedPrecondition(_))
    ));
}

#[test]
fn a_removed_pool_keeps_its_volumes_until_they_are_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store(tmp.path());
    let fast = Pool {
        name: "fast".into(),
        path: tmp.path().join("fast"),
    };
    store.add_pool(fast.clone()).unwrap();
    let record = store.create_volume(&in_pool("pvc-a", "fast")).unwrap();
    let image = store.volume_image(&record).unwrap();
    assert_eq!(
        store.remove_pool("fast").unwrap(),
        PoolRemoval::Retained {
            volumes: 1,
            snapshots: 0
        }
    );
    assert!(image.exists(), "nothing on disk is removed");
    assert!(matches!(
        store.create_volume(&in_pool("pvc-b", "fast")),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(store.available_bytes(Some("fast")).unwrap(), 0);
    // Still retired after a restart, and its volume still served.
    drop(store);
    let store = self::store(tmp.path());
    assert!(store.pool_entries()[1].retired);
    assert_eq!(store.volume_condition(&record), None);
    // Adding it back puts it in service again.
    assert!(store.add_pool(fast).unwrap());
    store.create_volume(&in_pool("pvc-b", "fast")).unwrap();
    store.remove_pool("fast").unwrap();
    store.delete_volume("pvc-a").unwrap();
    assert_eq!(store.pools().len(), 2, "pvc-b is still there");
    store.delete_volume("pvc-b").unwrap();
    assert_eq!(store.pools().len(), 1, "forgotten once emptied");
    assert_eq!(store.remove_pool("fast").unwrap(), PoolRemoval::Absent);
    assert!(
        store.remove_pool("default").is_err(),
        "configured pools stay"
    );
    drop(store);
    assert_eq!(self::store(tmp.path()).pools().len(), 1);
}

#[test]
fn an_empty_pool_is_removed_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store(tmp.path());
    let fast = Pool {
        name: "fast".into(),
        path: tmp.path().join("fast"),
    };
    store.add_pool(fast).unwrap();
    assert_eq!(store.remove_pool("fast").unwrap(), PoolRemoval::Removed);
    assert_eq!(store.pools().len(), 1);
}

#[test]
fn ids_are_path_safe() {
    assert_eq!(id_for_name("pvc-1234"), "pvc-1234");
    let odd = id_for_name("a/b c");
    assert!(odd.starts_with("h-") && !odd.contains('/'));
    assert_ne!(id_for_name("h-x"), "h-x");
    assert_ne!(id_for_name("../x"), "../x");
}

#[test]
fn sizes_are_rounded_within_limits() {
    assert_eq!(choose_size(1, 0, 0).unwrap(), MIB);
    assert_eq!(choose_size(0, 0, 0).unwrap(), DEFAULT_VOLUME_SIZE);
    assert_eq!(choose_size(5000, 8192, 0).unwrap(), 8192);
    assert!(matches!(
        choose_size(10, 5, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        choose_size(5000, 5001, 0),
        Err(Error::OutOfRange(_))
    ));
}

#[test]
fn create_is_idempotent_and_records_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let v = s.create_volume(&req("pvc-a", 3 * MIB)).unwrap();
    assert_eq!(v.size, 3 * MIB);
    assert_eq!(s.create_volume(&req("pvc-a", 3 * MIB)).unwrap(), v);
    assert!(matches!(
        s.create_volume(&req("pvc-a", 5 * MIB)),
        Err(Error::AlreadyExists(_))
    ));
    let image = s.volume_image(&v).unwrap();
    assert_eq!(
        fs::metadata(&image).unwrap().len(),
        image_len(v.mode, 3 * MIB)
    );
    drop(s);
    let s = store(tmp.path());
    assert_eq!(s.volume("pvc-a").unwrap(), v);
    s.delete_volume("pvc-a").unwrap();
    s.delete_volume("pvc-a").unwrap();
    assert!(!image.exists());
}

#[test]
fn records_of_one_file_each_move_into_the_journal() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let v = s.create_volume(&req("pvc-old", MIB)).unwrap();
    drop(s);
    // As an earlier version kept it: one file per record, no journal.
    fs::remove_dir_all(tmp.path().join("state/journal")).unwrap();
    let old = RecordDir::open(tmp.path().join("state/volumes")).unwrap();
    old.save(&v.id, &v).unwrap();
    let s = store(tmp.path());
    assert_eq!(s.volume("pvc-old").unwrap(), v);
    assert!(!tmp.path().join("state/volumes").exists());
    drop(s);
    assert_eq!(store(tmp.path()).volume("pvc-old").unwrap(), v);
}

#[test]
fn an_empty_image_a_crash_lost_is_made_again() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let v = s.create_volume(&req("pvc-lost", 2 * MIB)).unwrap();
    let image = s.volume_image(&v).unwrap();
    drop(s);
    fs::remove_dir_all(image.parent().unwrap()).unwrap();
    let s = store(tmp.path());
    assert_eq!(
        fs::metadata(&image).unwrap().len(),
        image_len(v.mode, 2 * MIB)
    );
    assert_eq!(s.volume_condition(&v), None);
}

#[test]
fn concurrent_creates_and_deletes_of_different_volumes_all_land() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    std::thread::scope(|scope| {
        for t in 0..8 {
            let s = &s;
            scope.spawn(move || {
                for i in 0..20 {
                    let name = format!("pvc-{t}-{i}");
                    s.create_volume(&req(&name, MIB)).unwrap();
                    if i % 2 == 0 {
                        s.delete_volume(&name).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(s.volumes().len(), 80);
    let promised = s.lock().promises.promised("default");
    let image = image_len(VolumeMode::Filesystem, MIB);
    assert_eq!(
        promised,
        80 * image,
        "the running total matches the volumes"
    );
    drop(s);
    assert_eq!(store(tmp.path()).volumes().len(), 80);
}

#[test]
fn orphans_are_removed_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    s.create_volume(&req("pvc-kept", MIB)).unwrap();
    drop(s);
    let orphan = tmp.path().join("pool/csi/pvc-orphan");
    fs::create_dir_all(&orphan).unwrap();
    fs::write(orphan.join(IMAGE_NAME), b"x").unwrap();
    let foreign = tmp.path().join("pool/csi/someone-elses");
    fs::create_dir_all(&foreign).unwrap();
    fs::write(foreign.join("disk.img"), b"x").unwrap();
    fs::write(tmp.path().join("pool/csi-snapshots/snap-orphan.img"), b"x").unwrap();
    let s = store(tmp.path());
    assert!(!orphan.exists());
    assert!(
        foreign.exists(),
        "content the store did not make is left alone"
    );
    assert!(
        !tmp.path()
            .join("pool/csi-snapshots/snap-orphan.img")
            .exists()
    );
    assert!(s.volume("pvc-kept").is_ok());
}

#[test]
fn capacity_counts_promised_space() {
    // A pool of its own size, which neither the machine's free disk nor other tests change.
    let fs = ferrovirt_tests::tmpfs::Tmpfs::new("capacity-promised", 8 << 30);
    let s = store(fs.path());
    let before = s.available_bytes(None).unwrap();
    let size = 3 << 30;
    s.create_volume(&req("pvc-big", size)).unwrap();
    let after = s.available_bytes(None).unwrap();
    // The sparse image occupies nothing yet, but its whole length (the volume's size and its
    // filesystem's metadata) is promised (the volume's state record takes a page or two
    // besides).
    let image = image_len(VolumeMode::Filesystem, size);
    assert!(image > size);
    let drop = before - after;
    assert!(drop >= image && drop < image + MIB, "{before} -> {after}");
    let too_big = req("pvc-huge", after + (1 << 40));
    assert!(matches!(
        s.create_volume(&too_big),
        Err(Error::ResourceExhausted { .. })
    ));
    assert!(matches!(
        s.create_volume(&CreateVolume {
            pool: Some("nope".into()),
            ..req("pvc-x", MIB)
        }),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn snapshot_restore_and_clone_are_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let v = s.create_volume(&req("pvc-src", 8 * MIB)).unwrap();
    let image = s.volume_image(&v).unwrap();
    let pattern: Vec<u8> = (0..MIB as usize).map(|i| (i * 7 % 251) as u8).collect();
    {
        use std::os::unix::fs::FileExt;
        let f = OpenOptions::new().write(true).open(&image).unwrap();
        f.write_all_at(&pattern, 2 * MIB).unwrap();
    }
    let (snap, _) = s
        .create_snapshot(&CreateSnapshot {
            name: "snap-1".into(),
            source_volume_id: v.id.clone(),
        })
        .unwrap();
    assert_eq!(snap.size, 8 * MIB);
    assert!(matches!(
        s.create_snapshot(&CreateSnapshot {
            name: "snap-1".into(),
            source_volume_id: "other".into()
        }),
        Err(Error::AlreadyExists(_))
    ));
    let restored = s
        .create_volume(&CreateVolume {
            source: Some(VolumeSource::Snapshot(snap.id.clone())),
            ..req("pvc-restored", 8 * MIB)
        })
        .unwrap();
    let cloned = s
        .create_volume(&CreateVolume {
            source: Some(VolumeSource::Volume(v.id.clone())),
            ..req("pvc-clone", 16 * MIB)
        })
        .unwrap();
    let original = fs::read(&image).unwrap();
    assert_eq!(
        fs::read(s.volume_image(&restored).unwrap()).unwrap(),
        original
    );
    let clone_bytes = fs::read(s.volume_image(&cloned).unwrap()).unwrap();
    assert_eq!(clone_bytes.len() as u64, image_len(cloned.mode, 16 * MIB));
    assert_eq!(&clone_bytes[..original.len()], &original[..]);
    assert!(cloned.grow_fs);
    // A restore smaller than the snapshot is out of range; a missing source is not found.
    assert!(matches!(
        s.create_volume(&CreateVolume {
            source: Some(VolumeSource::Snapshot(snap.id.clone())),
            limit_bytes: 4 * MIB,
            ..req("pvc-small", 4 * MIB)
        }),
        Err(Error::OutOfRange(_))
    ));
    assert!(matches!(
        s.create_volume(&CreateVolume {
            source: Some(VolumeSource::Snapshot("missing".into())),
            ..req("pvc-y", MIB)
        }),
        Err(Error::NotFound(_))
    ));
    s.delete_snapshot(&snap.id).unwrap();
    s.delete_snapshot(&snap.id).unwrap();
}

#[test]
fn expansion_grows_and_never_shrinks() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let v = s.create_volume(&req("pvc-e", 4 * MIB)).unwrap();
    assert_eq!(s.expand_volume(&v.id, 2 * MIB, 0).unwrap().0, 4 * MIB);
    let (size, node) = s.expand_volume(&v.id, 10 * MIB, 0).unwrap();
    assert_eq!(size, 10 * MIB);
    assert!(node);
    let image = s.volume_image(&v).unwrap();
    assert_eq!(
        fs::metadata(image).unwrap().len(),
        image_len(v.mode, 10 * MIB)
    );
    assert!(matches!(
        s.expand_volume("missing", MIB, 0),
        Err(Error::NotFound(_))
    ));
}
