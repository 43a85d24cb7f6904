//! What the hostpath driver promises beyond the CSI calls themselves: a volume cannot hold more
//! than its size; restores and clones are byte-identical; a block volume is written through its
//! loop device; a kill -9 of the driver followed by a restart loses nothing.

use crate::{common, require_mounts};

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ferrovirt_csi_driver::proto::controller_client::ControllerClient;
use ferrovirt_csi_driver::proto::node_client::NodeClient;
use ferrovirt_csi_driver::proto::*;
use ferrovirt_csi_driver::{DriverConfig, serve};
use ferrovirt_hostpath::{HostPathStore, Pool};

/// Deterministic pseudo-random bytes (xorshift), different per seed.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn image_of(d: &TestDriver, id: &str) -> PathBuf {
    d.path("pool/csi").join(id).join("volume.img")
}

#[tokio::test]
async fn filesystem_volume_cannot_hold_more_than_its_size() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-capacity", 16 * MIB, mount_cap()).await;
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    // Try to write 64 MiB into a 16 MiB volume on a pool with gigabytes free.
    let chunk = vec![0x5au8; 1 << 20];
    let mut written = 0u64;
    let mut file = std::fs::File::create(target.join("fill")).unwrap();
    let err = loop {
        use std::io::Write;
        match file.write_all(&chunk) {
            Ok(()) => written += chunk.len() as u64,
            Err(err) => break err,
        }
        if written >= 64 << 20 {
            panic!("wrote {written} bytes into a 16 MiB volume");
        }
        if let Err(err) = file.sync_data() {
            break err;
        }
    };
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::NOSPC.raw_os_error())
    );
    // All of the capacity is usable (the filesystem's metadata is on top of it), and little
    // more.
    let image_len = ferrovirt_hostpath::filesystem::image_len(16 << 20);
    assert!(written >= 16 << 20, "only {written} bytes fit");
    assert!(written < image_len, "{written}");
    drop(file);
    // The pool's image never grows past the volume's size and its filesystem's metadata.
    assert_eq!(
        std::fs::metadata(image_of(&d, &id)).unwrap().len(),
        image_len
    );
    d.unpublish_and_unstage(&id).await;
}

fn from_snapshot(snapshot_id: &str) -> Option<VolumeContentSource> {
    Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot_id.into(),
            },
        )),
    })
}

fn from_volume(volume_id: &str) -> Option<VolumeContentSource> {
    Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Volume(
            volume_content_source::VolumeSource {
                volume_id: volume_id.into(),
            },
        )),
    })
}

#[tokio::test]
async fn restore_and_clone_are_byte_identical() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-origin", 48 * MIB, mount_cap()).await;
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    let data = pattern(20 << 20, 42);
    std::fs::write(target.join("data.bin"), &data).unwrap();
    std::fs::create_dir(target.join("dir")).unwrap();
    std::fs::write(target.join("dir/small.txt"), b"small file").unwrap();
    // Snapshot while published (the driver syncs the filesystem first), then unpublish so the
    // image is quiescent for the comparison.
    let snapshot = d
        .controller
        .create_snapshot(CreateSnapshotRequest {
            name: "snap-origin".into(),
            source_volume_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    d.unpublish_and_unstage(&id).await;
    // Written after the snapshot: must not appear in the restore.
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    std::fs::write(target.join("after-snapshot"), b"later").unwrap();
    d.unpublish_and_unstage(&id).await;

    let mut restore = create_request("pvc-restored", 48 * MIB, mount_cap());
    restore.volume_content_source = from_snapshot(&snapshot.snapshot_id);
    let restored = d
        .controller
        .create_volume(restore)
        .await
        .unwrap()
        .into_inner();
    let restored = restored.volume.unwrap();
    assert_eq!(
        restored.content_source,
        from_snapshot(&snapshot.snapshot_id)
    );
    let mut clone = create_request("pvc-cloned", 48 * MIB, mount_cap());
    clone.volume_content_source = from_volume(&id);
    let cloned = d
        .controller
        .create_volume(clone)
        .await
        .unwrap()
        .into_inner();
    let cloned = cloned.volume.unwrap();

    let snapshot_image = d
        .path("pool/csi-snapshots")
        .join(format!("{}.img", snapshot.snapshot_id));
    let snapshot_bytes = std::fs::read(&snapshot_image).unwrap();
    assert_eq!(
        std::fs::read(image_of(&d, &restored.volume_id)).unwrap(),
        snapshot_bytes
    );
    assert_eq!(
        std::fs::read(image_of(&d, &cloned.volume_id)).unwrap(),
        std::fs::read(image_of(&d, &id)).unwrap()
    );
    // And through the filesystem: the restore has the data, not what came after.
    let target = d
        .stage_and_publish(&restored.volume_id, mount_cap(), true)
        .await;
    assert_eq!(std::fs::read(target.join("data.bin")).unwrap(), data);
    assert_eq!(
        std::fs::read(target.join("dir/small.txt")).unwrap(),
        b"small file"
    );
    assert!(!target.join("after-snapshot").exists());
    d.unpublish_and_unstage(&restored.volume_id).await;
    let target = d
        .stage_and_publish(&cloned.volume_id, mount_cap(), false)
        .await;
    assert_eq!(std::fs::read(target.join("data.bin")).unwrap(), data);
    assert_eq!(
        std::fs::read(target.join("after-snapshot")).unwrap(),
        b"later"
    );
    d.unpublish_and_unstage(&cloned.volume_id).await;

    // A restore into a bigger volume gets a filesystem grown to the new size.
    let mut bigger = create_request("pvc-restored-bigger", 128 * MIB, mount_cap());
    bigger.volume_content_source = from_snapshot(&snapshot.snapshot_id);
    let bigger = d
        .controller
        .create_volume(bigger)
        .await
        .unwrap()
        .into_inner();
    let bigger_id = bigger.volume.unwrap().volume_id;
    let target = d.stage_and_publish(&bigger_id, mount_cap(), false).await;
    let vfs = rustix::fs::statvfs(&target).unwrap();
    assert!(vfs.f_blocks * vfs.f_frsize > 100 << 20);
    assert_eq!(std::fs::read(target.join("data.bin")).unwrap(), data);
    d.unpublish_and_unstage(&bigger_id).await;
}

#[tokio::test]
async fn block_volume_is_written_through_its_loop_device() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-block", 8 * MIB, block_cap()).await;
    let target = d.stage_and_publish(&id, block_cap(), false).await;
    // The target is the loop device itself, bind-mounted onto a file.
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::metadata(&target)
            .unwrap()
            .file_type()
            .is_block_device()
    );
    let data = pattern(3 << 20, 7);
    {
        let device = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&target)
            .unwrap();
        device.write_all_at(&data, 1 << 20).unwrap();
        device.sync_all().unwrap();
        // The device ends where the volume ends.
        let err = device.write_all_at(b"past the end", 8 << 20).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(rustix::io::Errno::NOSPC.raw_os_error())
        );
        let mut back = vec![0u8; data.len()];
        device.read_exact_at(&mut back, 1 << 20).unwrap();
        assert_eq!(back, data);
    }
    d.unpublish_and_unstage(&id).await;
    // The bytes are in the volume's image, at the same offsets.
    let image = std::fs::read(image_of(&d, &id)).unwrap();
    assert_eq!(image.len(), 8 << 20);
    assert_eq!(&image[1 << 20..(1 << 20) + data.len()], &data[..]);
    assert!(image[..1 << 20].iter().all(|b| *b == 0));
    // A read-only block publish refuses writes.
    let target = d.stage_and_publish(&id, block_cap(), true).await;
    // (The kernel lets a read-only device be opened for writing and refuses the write.)
    let device = std::fs::OpenOptions::new()
        .write(true)
        .open(&target)
        .unwrap();
    let err = device.write_all_at(&[1u8; 4096], 0).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::PERM.raw_os_error())
    );
    drop(device);
    d.unpublish_and_unstage(&id).await;
    assert!(
        ferrovirt_hostpath::loopdev::find(&image_of(&d, &id))
            .unwrap()
            .is_empty(),
        "the read-only device is detached with its publication"
    );
    // Expanding a block volume grows the device.
    d.controller
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: 16 * MIB,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let target = d.stage_and_publish(&id, block_cap(), false).await;
    let device = std::fs::File::open(&target).unwrap();
    let size = rustix::fs::seek(&device, rustix::fs::SeekFrom::End(0)).unwrap();
    assert_eq!(size, 16 << 20);
    drop(device);
    d.unpublish_and_unstage(&id).await;
}

#[tokio::test]
async fn graceful_restart_keeps_volumes_snapshots_and_publications() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-restart", 16 * MIB, mount_cap()).await;
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    std::fs::write(target.join("f"), b"kept").unwrap();
    d.controller
        .create_snapshot(CreateSnapshotRequest {
            name: "snap-restart".into(),
            source_volume_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let dir = d.stop().await;
    let mut d = TestDriver::start_in(dir).await;
    let got = d
        .controller
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        got.status.unwrap().published_node_ids,
        vec![NODE_ID.to_string()]
    );
    assert_eq!(std::fs::read(target.join("f")).unwrap(), b"kept");
    d.unpublish_and_unstage(&id).await;
    let snaps = d
        .controller
        .list_snapshots(ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(snaps.entries.len(), 1);
}

// ---------------------------------------------------------------- kill -9

const CHILD_DIR_ENV: &str = "FERROVIRT_CSI_TEST_DRIVER_DIR";

/// Not a test: the driver process that `kill9_then_restart_loses_nothing` starts (by running
/// this test binary again with only this function) and kills.
#[test]
#[ignore = "the driver process of kill9_then_restart_loses_nothing; runs only when it starts it"]
fn driver_process() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let pools = vec![
            Pool {
                name: "default".into(),
                path: dir.join("pool"),
            },
            Pool {
                name: "second".into(),
                path: dir.join("pool2"),
            },
        ];
        let store = Arc::new(HostPathStore::open(pools, dir.join("state")).unwrap());
        serve(
            store,
            DriverConfig::new(NODE_ID),
            &dir.join("csi.sock"),
            std::future::pending(),
        )
        .await
        .unwrap();
    });
}

/// The driver as a separate process, killed with SIGKILL when dropped.
struct DriverProcess(Child);

impl DriverProcess {
    fn start(dir: &Path) -> Self {
        let _ = std::fs::remove_file(dir.join("csi.sock"));
        // The test's name as libtest knows it: its module path without the crate's name.
        let test = match module_path!().split_once("::") {
            Some((_crate, module)) => format!("{module}::driver_process"),
            None => "driver_process".to_owned(),
        };
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &test, "--ignored", "--nocapture"])
            .env(CHILD_DIR_ENV, dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn kill9(mut self) {
        // Child::kill sends SIGKILL.
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for DriverProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn kill9_then_restart_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let mut acknowledged_volumes: Vec<(String, i64)> = Vec::new();
    let mut acknowledged_snapshots: Vec<String> = Vec::new();
    let mut all_requests: Vec<CreateVolumeRequest> = Vec::new();
    let mounts = mounts_unavailable().is_none();
    let mut published: Option<(String, PathBuf, PathBuf)> = None;

    for (round, delay_ms) in [5u64, 25, 60].into_iter().enumerate() {
        let driver = DriverProcess::start(dir.path());
        let channel = connect(&socket).await;
        let mut controller = ControllerClient::new(channel.clone());
        let mut node = NodeClient::new(channel.clone());
        if round == 0 && mounts {
            // One volume staged and published before the first kill.
            let req = create_request("pvc-published", 16 * MIB, mount_cap());
            all_requests.push(req.clone());
            let vol = controller.create_volume(req).await.unwrap().into_inner();
            let id = vol.volume.unwrap().volume_id;
            acknowledged_volumes.push((id.clone(), 16 * MIB));
            let staging = dir.path().join("staging");
            let target = dir.path().join("target");
            node.node_stage_volume(NodeStageVolumeRequest {
                volume_id: id.clone(),
                staging_target_path: staging.display().to_string(),
                volume_capability: Some(mount_cap()),
                ..Default::default()
            })
            .await
            .unwrap();
            node.node_publish_volume(NodePublishVolumeRequest {
                volume_id: id.clone(),
                staging_target_path: staging.display().to_string(),
                target_path: target.display().to_string(),
                volume_capability: Some(mount_cap()),
                ..Default::default()
            })
            .await
            .unwrap();
            std::fs::write(target.join("before-kill"), b"durable").unwrap();
            rustix::fs::syncfs(std::fs::File::open(&target).unwrap()).unwrap();
            published = Some((id, staging, target));
        }
        // Everything acknowledged so far must still be there after each restart.
        for (id, size) in &acknowledged_volumes {
            let got = controller
                .controller_get_volume(ControllerGetVolumeRequest {
                    volume_id: id.clone(),
                })
                .await
                .unwrap_or_else(|e| panic!("round {round}: volume {id} lost: {e}"))
                .into_inner();
            assert_eq!(got.volume.unwrap().capacity_bytes, *size);
        }
        for id in &acknowledged_snapshots {
            controller
                .get_snapshot(GetSnapshotRequest {
                    snapshot_id: id.clone(),
                    ..Default::default()
                })
                .await
                .unwrap_or_else(|e| panic!("round {round}: snapshot {id} lost: {e}"));
        }
        // A burst of creates, clones and snapshots, killed part-way through.
        let mut tasks = Vec::new();
        for i in 0..24 {
            let mut req = create_request(
                &format!("pvc-r{round}-{i}"),
                (1 + i as i64 % 4) * MIB,
                mount_cap(),
            );
            if i % 6 == 5
                && let Some((id, _)) = acknowledged_volumes.first()
            {
                req.volume_content_source = from_volume(id);
                req.capacity_range = Some(CapacityRange {
                    required_bytes: 16 * MIB,
                    limit_bytes: 0,
                });
            }
            all_requests.push(req.clone());
            let mut client = controller.clone();
            tasks.push(tokio::spawn(async move {
                let size = req.capacity_range.as_ref().unwrap().required_bytes;
                client
                    .create_volume(req)
                    .await
                    .map(|r| (r.into_inner().volume.unwrap().volume_id, size))
            }));
        }
        let mut snapshot_tasks = Vec::new();
        for (i, (id, _)) in acknowledged_volumes.iter().take(4).enumerate() {
            let mut client = controller.clone();
            let req = CreateSnapshotRequest {
                name: format!("snap-r{round}-{i}"),
                source_volume_id: id.clone(),
                ..Default::default()
            };
            snapshot_tasks.push(tokio::spawn(async move {
                client
                    .create_snapshot(req)
                    .await
                    .map(|r| r.into_inner().snapshot.unwrap().snapshot_id)
            }));
        }
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        driver.kill9();
        for task in tasks {
            if let Ok(ack) = task.await.unwrap() {
                acknowledged_volumes.push(ack);
            }
        }
        for task in snapshot_tasks {
            if let Ok(id) = task.await.unwrap() {
                acknowledged_snapshots.push(id);
            }
        }
    }

    // Final restart: everything acknowledged is there, every request retried succeeds
    // idempotently, and nothing is left over.
    let _driver = DriverProcess::start(dir.path());
    let channel = connect(&socket).await;
    let mut controller = ControllerClient::new(channel.clone());
    let mut node = NodeClient::new(channel);
    for (id, size) in &acknowledged_volumes {
        let got = controller
            .controller_get_volume(ControllerGetVolumeRequest {
                volume_id: id.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("volume {id} lost: {e}"))
            .into_inner();
        assert_eq!(got.volume.unwrap().capacity_bytes, *size);
    }
    for id in &acknowledged_snapshots {
        controller
            .get_snapshot(GetSnapshotRequest {
                snapshot_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("snapshot {id} lost: {e}"));
    }
    for req in &all_requests {
        controller
            .create_volume(req.clone())
            .await
            .unwrap_or_else(|e| panic!("retry of {} failed: {e}", req.name));
    }
    let listed = controller
        .list_volumes(ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.entries.len(), all_requests.len());
    let mut on_disk: Vec<String> = std::fs::read_dir(dir.path().join("pool/csi"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut listed_ids: Vec<String> = listed
        .entries
        .iter()
        .map(|e| e.volume.as_ref().unwrap().volume_id.clone())
        .collect();
    on_disk.sort();
    listed_ids.sort();
    assert_eq!(
        on_disk, listed_ids,
        "an image without a record, or a record without an image"
    );
    let listed_snaps = controller
        .list_snapshots(ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let snap_files = std::fs::read_dir(dir.path().join("pool/csi-snapshots"))
        .unwrap()
        .count();
    assert_eq!(snap_files, listed_snaps.entries.len());
    // The publication made before the first kill is still known and can be undone.
    if let Some((id, staging, target)) = published {
        assert_eq!(
            std::fs::read(target.join("before-kill")).unwrap(),
            b"durable"
        );
        node.node_unpublish_volume(NodeUnpublishVolumeRequest {
            volume_id: id.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .unwrap();
        node.node_unstage_volume(NodeUnstageVolumeRequest {
            volume_id: id,
            staging_target_path: staging.display().to_string(),
        })
        .await
        .unwrap();
    }
    cleanup(dir.path());
}
