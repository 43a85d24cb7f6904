//! CSI driver benchmark: CreateVolume / DeleteVolume latency over 1000 volumes and the
//! throughput of 8 clients doing create/delete pairs, side by side with the reference driver
//! (kubernetes-csi's csi-driver-host-path, when `CSI_REFERENCE_DRIVER` names its
//! `hostpathplugin` binary; docs/csi.md says how to build it); then the time to snapshot,
//! restore and clone a 1 GiB volume full of data, with a sparse copy (the pool on the machine's
//! filesystem, ext4 here) and with reflink (a pool on an XFS filesystem made with
//! `mkfs.xfs -m reflink=1` on a loop device, when mkfs.xfs is installed). Every call goes over
//! gRPC on the driver's unix socket, as the sidecars make it.
//!
//! Run with `cargo bench --bench csi` as root.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrovirt_csi_driver::client::connect_unix;
use ferrovirt_csi_driver::proto::controller_client::ControllerClient;
use ferrovirt_csi_driver::proto::*;
use ferrovirt_csi_driver::{DriverConfig, serve};
use ferrovirt_hostpath::{HostPathStore, Pool};

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

fn mount_cap() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(volume_capability::AccessMode {
            mode: volume_capability::access_mode::Mode::SingleNodeWriter as i32,
        }),
    }
}

fn create_request(name: &str, bytes: i64) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_cap()],
        ..Default::default()
    }
}

type Client = ControllerClient<tonic::transport::Channel>;

/// A driver serving on a socket in `dir` over one pool at `pool`.
async fn start(dir: &Path, pool: &Path) -> Client {
    connect(&serve_ferrovirt(dir, pool)).await
}

/// Starts this project's driver on a socket in `dir`, over one pool at `pool`.
fn serve_ferrovirt(dir: &Path, pool: &Path) -> PathBuf {
    let store = HostPathStore::open(
        vec![Pool {
            name: "bench".into(),
            path: pool.to_path_buf(),
        }],
        dir.join("state"),
    )
    .expect("open store");
    let socket = dir.join("csi.sock");
    let for_task = socket.clone();
    tokio::spawn(async move {
        serve(
            Arc::new(store),
            DriverConfig::new("bench-node"),
            &for_task,
            std::future::pending(),
        )
        .await
        .expect("serve");
    });
    socket
}

/// The reference driver, running until dropped.
struct Reference {
    child: std::process::Child,
    socket: PathBuf,
}

impl Reference {
    fn start(binary: &str, dir: &Path) -> Self {
        let socket = dir.join("reference.sock");
        let child = Command::new(binary)
            .arg(format!("--endpoint=unix://{}", socket.display()))
            .args([
                "--nodeid=bench-node",
                "--drivername=hostpath.csi.k8s.io",
                "--v=0",
            ])
            .arg(format!(
                "--statedir={}",
                dir.join("reference-state").display()
            ))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("starting the reference driver {binary}: {err}"));
        Self { child, socket }
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of the driver at `socket`, waiting for it to listen.
async fn connect(socket: &Path) -> Client {
    for _ in 0..250 {
        if let Ok(channel) = connect_unix(socket.to_path_buf()).await {
            return ControllerClient::new(channel);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no driver listens at {}", socket.display());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// What one driver did: latencies of creates and deletes one at a time, and pairs per second
/// with 8 clients at once.
struct Figures {
    create: (Duration, Duration),
    delete: (Duration, Duration),
    ops_per_sec: f64,
}

async fn create_volume(client: &mut Client, name: &str) -> String {
    client
        .create_volume(create_request(name, 16 * MIB))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id
}

async fn delete_volume(client: &mut Client, volume_id: String) {
    client
        .delete_volume(DeleteVolumeRequest {
            volume_id,
            ..Default::default()
        })
        .await
        .expect("delete");
}

const COUNT: usize = 1000;
const CLIENTS: usize = 8;
const PAIRS_PER_CLIENT: usize = 250;

async fn measure(socket: &Path) -> Figures {
    let mut client = connect(socket).await;
    let mut creates = Vec::with_capacity(COUNT);
    let mut ids = Vec::with_capacity(COUNT);
    for i in 0..COUNT {
        let start = Instant::now();
        ids.push(create_volume(&mut client, &format!("pvc-bench-{i:04}")).await);
        creates.push(start.elapsed());
    }
    let mut deletes = Vec::with_capacity(COUNT);
    for id in ids {
        let start = Instant::now();
        delete_volume(&mut client, id).await;
        deletes.push(start.elapsed());
    }
    creates.sort();
    deletes.sort();
    // Each client on a connection of its own, as separate sidecars would be.
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(connect(socket).await);
    }
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, mut client)| {
            tokio::spawn(async move {
                for i in 0..PAIRS_PER_CLIENT {
                    let id = create_volume(&mut client, &format!("pvc-par-{c}-{i:04}")).await;
                    delete_volume(&mut client, id).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client task");
    }
    let ops = (2 * CLIENTS * PAIRS_PER_CLIENT) as f64;
    Figures {
        create: (percentile(&creates, 0.5), percentile(&creates, 0.99)),
        delete: (percentile(&deletes, 0.5), percentile(&deletes, 0.99)),
        ops_per_sec: ops / start.elapsed().as_secs_f64(),
    }
}

fn print_figures(label: &str, f: &Figures) {
    println!(
        "{label:<12} create p50 {:>9} p99 {:>9} | delete p50 {:>9} p99 {:>9} | {CLIENTS} clients {:>6.0} ops/s",
        ms(f.create.0),
        ms(f.create.1),
        ms(f.delete.0),
        ms(f.delete.1),
        f.ops_per_sec
    );
}

/// Latency and throughput of this driver, and of the reference when there is one.
async fn create_delete(dir: &Path) {
    println!(
        "CreateVolume/DeleteVolume of {COUNT} volumes (16 MiB) one at a time, then {CLIENTS} \
         clients doing {PAIRS_PER_CLIENT} create/delete pairs each:"
    );
    let ours = measure(&serve_ferrovirt(dir, &dir.join("pool"))).await;
    print_figures("ferrovirt", &ours);
    let Ok(binary) = std::env::var("CSI_REFERENCE_DRIVER") else {
        println!(
            "reference    not run: set CSI_REFERENCE_DRIVER to csi-driver-host-path's hostpathplugin"
        );
        return;
    };
    let reference = Reference::start(&binary, dir);
    let theirs = measure(&reference.socket).await;
    print_figures("reference", &theirs);
    let ratio = |ours: Duration, theirs: Duration| ours.as_secs_f64() / theirs.as_secs_f64();
    println!(
        "ferrovirt/reference: create p50 {:.2}x p99 {:.2}x, delete p50 {:.2}x p99 {:.2}x (lower is faster), throughput {:.2}x (higher is faster)",
        ratio(ours.create.0, theirs.create.0),
        ratio(ours.create.1, theirs.create.1),
        ratio(ours.delete.0, theirs.delete.0),
        ratio(ours.delete.1, theirs.delete.1),
        ours.ops_per_sec / theirs.ops_per_sec
    );
}

/// Fills a volume's image with 1 GiB of non-zero data (no holes to skip).
fn fill(image: &Path) {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(image)
        .expect("open image");
    let mut chunk = vec![0u8; 8 << 20];
    for (i, byte) in chunk.iter_mut().enumerate() {
        *byte = (i % 251) as u8 | 1;
    }
    for offset in (0..GIB as u64).step_by(chunk.len()) {
        chunk[0] = (offset >> 23) as u8 | 1;
        file.write_all_at(&chunk, offset).expect("write");
    }
    file.sync_all().expect("fsync");
}

fn drop_caches() -> bool {
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

async fn snapshot_and_clone(label: &str, pool: &Path) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut client = start(dir.path(), pool).await;
    let id = client
        .create_volume(create_request("pvc-1gib", GIB))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id;
    fill(&pool.join("csi").join(&id).join("volume.img"));
    let cold = drop_caches();
    let start = Instant::now();
    let snapshot = client
        .create_snapshot(CreateSnapshotRequest {
            name: "snap-1gib".into(),
            source_volume_id: id.clone(),
            ..Default::default()
        })
        .await
        .expect("snapshot")
        .into_inner()
        .snapshot
        .expect("snapshot");
    let snap_time = start.elapsed();
    drop_caches();
    let mut restore = create_request("pvc-restore", GIB);
    restore.volume_content_source = Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot.snapshot_id,
            },
        )),
    });
    let start = Instant::now();
    client.create_volume(restore).await.expect("restore");
    let restore_time = start.elapsed();
    drop_caches();
    let mut clone = create_request("pvc-clone", GIB);
    clone.volume_content_source = Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Volume(
            volume_content_source::VolumeSource { volume_id: id },
        )),
    });
    let start = Instant::now();
    client.create_volume(clone).await.expect("clone");
    let clone_time = start.elapsed();
    println!(
        "{label:<34} snapshot {:>10}  restore {:>10}  clone {:>10}{}",
        ms(snap_time),
        ms(restore_time),
        ms(clone_time),
        if cold {
            "  (page cache dropped before each)"
        } else {
            "  (warm page cache)"
        }
    );
}

/// An XFS filesystem with reflink on a sparse file through a loop device, mounted at a temporary
/// directory; unmounted and detached when dropped.
struct XfsPool {
    _dir: tempfile::TempDir,
    mountpoint: PathBuf,
    device: String,
}

impl XfsPool {
    fn make() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("xfs.img");
        let file = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        file.set_len(6 * GIB as u64).map_err(|e| e.to_string())?;
        let run = |program: &str, args: &[&str]| -> Result<String, String> {
            let out = Command::new(program)
                .args(args)
                .output()
                .map_err(|e| format!("{program}: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{program}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        let image_str = image.to_str().ok_or("path")?;
        run("mkfs.xfs", &["-q", "-m", "reflink=1", image_str])?;
        let device = run("losetup", &["--find", "--show", image_str])?;
        let mountpoint = dir.path().join("mnt");
        std::fs::create_dir(&mountpoint).map_err(|e| e.to_string())?;
        if let Err(err) = run("mount", &[&device, mountpoint.to_str().ok_or("path")?]) {
            let _ = run("losetup", &["--detach", &device]);
            return Err(err);
        }
        Ok(Self {
            _dir: dir,
            mountpoint,
            device,
        })
    }
}

impl Drop for XfsPool {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mountpoint).status();
        let _ = Command::new("losetup")
            .args(["--detach", &self.device])
            .status();
    }
}

fn filesystem_of(path: &Path) -> String {
    Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(path)
        .output()
        .map(|o| match String::from_utf8_lossy(&o.stdout).trim() {
            // stat names ext4 by its superblock magic, which ext2/3/4 share.
            "ext2/ext3" => "ext4".to_string(),
            other => other.to_string(),
        })
        .unwrap_or_else(|_| "?".into())
}

#[tokio::main]
async fn main() {
    println!("ferrovirt CSI driver benchmark (gRPC over a unix socket)");
    let dir = tempfile::tempdir().expect("temporary directory");
    create_delete(dir.path()).await;

    let copy_dir = tempfile::tempdir().expect("temporary directory");
    let copy_pool = copy_dir.path().join("pool");
    std::fs::create_dir_all(&copy_pool).expect("pool");
    let label = format!("1 GiB, sparse copy ({}):", filesystem_of(&copy_pool));
    snapshot_and_clone(&label, &copy_pool).await;

    match XfsPool::make() {
        Ok(xfs) => {
            let pool = xfs.mountpoint.join("pool");
            snapshot_and_clone("1 GiB, reflink (XFS on loop):", &pool).await;
        }
        Err(reason) => println!("1 GiB, reflink: unavailable here ({reason})"),
    }
}
