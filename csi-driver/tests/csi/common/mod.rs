//! The harness of the CSI driver tests: a real driver serving gRPC on a unix socket in a
//! temporary directory, clients for the three services, and a guard that unmounts and detaches
//! whatever a test left behind, even when it fails.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrovirt_csi_driver::proto::controller_client::ControllerClient;
use ferrovirt_csi_driver::proto::identity_client::IdentityClient;
use ferrovirt_csi_driver::proto::node_client::NodeClient;
use ferrovirt_csi_driver::proto::*;
use ferrovirt_csi_driver::{DriverConfig, client::connect_unix, serve};
use ferrovirt_hostpath::{HostPathStore, Pool};
use tonic::transport::Channel;

pub const MIB: i64 = 1 << 20;
pub const NODE_ID: &str = "node-a";

/// A driver under test and its clients.
pub struct TestDriver {
    pub dir: tempfile::TempDir,
    pub identity: IdentityClient<Channel>,
    pub controller: ControllerClient<Channel>,
    pub node: NodeClient<Channel>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestDriver {
    /// Starts a driver with one pool, `default`, in a fresh temporary directory.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        Self::start_in(dir).await
    }

    /// Starts a driver whose pool, state and socket live in `dir`.
    pub async fn start_in(dir: tempfile::TempDir) -> Self {
        let pool = dir.path().join("pool");
        Self::start_with_pool(dir, pool).await
    }

    /// Starts a driver whose state and socket live in `dir` and whose pool `default` is at
    /// `pool` (a filesystem of the test's own, say).
    pub async fn start_with_pool(dir: tempfile::TempDir, pool: PathBuf) -> Self {
        let pools = vec![
            Pool {
                name: "default".into(),
                path: pool,
            },
            Pool {
                name: "second".into(),
                path: dir.path().join("pool2"),
            },
        ];
        let store = Arc::new(HostPathStore::open(pools, dir.path().join("state")).expect("store"));
        let socket = dir.path().join("csi.sock");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let socket_for_task = socket.clone();
        let task = tokio::spawn(async move {
            serve(store, DriverConfig::new(NODE_ID), &socket_for_task, async {
                let _ = rx.await;
            })
            .await
            .expect("serve");
        });
        let channel = connect(&socket).await;
        Self {
            identity: IdentityClient::new(channel.clone()),
            controller: ControllerClient::new(channel.clone()),
            node: NodeClient::new(channel),
            dir,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Stops the server and returns its directory, for a restart.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let dir = tempfile::tempdir().expect("temporary directory");
        std::mem::replace(&mut self.dir, dir)
    }
}

impl Drop for TestDriver {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        cleanup(self.dir.path());
    }
}

/// Connects to a socket, waiting up to 10 s for the server to appear.
pub async fn connect(socket: &Path) -> Channel {
    for _ in 0..200 {
        if socket.exists()
            && let Ok(channel) = connect_unix(socket.to_path_buf()).await
        {
            return channel;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("driver did not come up on {}", socket.display());
}

/// Unmounts everything mounted under `root` (deepest first) and detaches loop devices of the
/// images under it.
pub fn cleanup(root: &Path) {
    let Ok(table) = ferrovirt_hostpath::mount::mount_table() else {
        return;
    };
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut targets: Vec<PathBuf> = table
        .into_iter()
        .map(|m| m.target)
        .filter(|t| t.starts_with(&root))
        .collect();
    targets.sort_by_key(|t| std::cmp::Reverse(t.components().count()));
    for target in targets {
        let _ = rustix::mount::unmount(&target, rustix::mount::UnmountFlags::DETACH);
    }
    for pool in ["pool", "pool2"] {
        if let Ok(entries) = std::fs::read_dir(root.join(pool).join("csi")) {
            for entry in entries.flatten() {
                let _ = ferrovirt_hostpath::loopdev::detach_all(&entry.path().join("volume.img"));
            }
        }
    }
}

/// Whether this process may mount (root in a namespace that allows it); the reason if not.
pub fn mounts_unavailable() -> Option<String> {
    let dir = tempfile::tempdir().ok()?;
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).ok()?;
    std::fs::create_dir(&b).ok()?;
    match rustix::mount::mount_bind(&a, &b) {
        Ok(()) => {
            let _ = rustix::mount::unmount(&b, rustix::mount::UnmountFlags::empty());
        }
        Err(err) => return Some(format!("bind mounts are not permitted here: {err}")),
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/loop-control: loop devices are unavailable".into());
    }
    None
}

/// Whether this process has CAP_SYS_RESOURCE (needed to grow a mounted ext4).
pub fn has_cap_sys_resource() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

/// Skips the calling test (returning early) when mounts are not permitted, saying why.
#[macro_export]
macro_rules! require_mounts {
    () => {
        if let Some(reason) = common::mounts_unavailable() {
            eprintln!("SKIPPED: {reason}");
            return;
        }
    };
}

pub fn mount_cap() -> VolumeCapability {
    cap_with(
        volume_capability::AccessType::Mount(volume_capability::MountVolume::default()),
        volume_capability::access_mode::Mode::SingleNodeWriter,
    )
}

pub fn block_cap() -> VolumeCapability {
    cap_with(
        volume_capability::AccessType::Block(volume_capability::BlockVolume {}),
        volume_capability::access_mode::Mode::SingleNodeWriter,
    )
}

pub fn cap_with(
    access: volume_capability::AccessType,
    mode: volume_capability::access_mode::Mode,
) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(access),
        access_mode: Some(volume_capability::AccessMode { mode: mode as i32 }),
    }
}

pub fn create_request(name: &str, bytes: i64, cap: VolumeCapability) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap],
        ..Default::default()
    }
}

impl TestDriver {
    /// Creates a volume and returns its id.
    pub async fn create(&mut self, name: &str, bytes: i64, cap: VolumeCapability) -> String {
        self.controller
            .create_volume(create_request(name, bytes, cap))
            .await
            .expect("create volume")
            .into_inner()
            .volume
            .expect("volume")
            .volume_id
    }

    /// Stages and publishes a volume at `<dir>/staging/<id>` and `<dir>/target/<id>`; returns the
    /// target path.
    pub async fn stage_and_publish(
        &mut self,
        id: &str,
        cap: VolumeCapability,
        read_only: bool,
    ) -> PathBuf {
        let staging = self.path("staging").join(id);
        let target = self.path("target").join(id);
        std::fs::create_dir_all(&staging).expect("staging dir");
        self.node
            .node_stage_volume(NodeStageVolumeRequest {
                volume_id: id.into(),
                staging_target_path: staging.display().to_string(),
                volume_capability: Some(cap.clone()),
                ..Default::default()
            })
            .await
            .expect("stage");
        self.node
            .node_publish_volume(NodePublishVolumeRequest {
                volume_id: id.into(),
                staging_target_path: staging.display().to_string(),
                target_path: target.display().to_string(),
                volume_capability: Some(cap),
                readonly: read_only,
                ..Default::default()
            })
            .await
            .expect("publish");
        target
    }

    /// Unpublishes and unstages what `stage_and_publish` did.
    pub async fn unpublish_and_unstage(&mut self, id: &str) {
        let staging = self.path("staging").join(id);
        let target = self.path("target").join(id);
        self.node
            .node_unpublish_volume(NodeUnpublishVolumeRequest {
                volume_id: id.into(),
                target_path: target.display().to_string(),
            })
            .await
            .expect("unpublish");
        self.node
            .node_unstage_volume(NodeUnstageVolumeRequest {
                volume_id: id.into(),
                staging_target_path: staging.display().to_string(),
            })
            .await
            .expect("unstage");
    }
}

/// The gRPC code of a failed call.
pub fn code<T: std::fmt::Debug>(result: Result<T, tonic::Status>) -> tonic::Code {
    match result {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(status) => status.code(),
    }
}
