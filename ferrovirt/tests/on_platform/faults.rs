//! Faults on the whole machine: the importer process killed at random points, a storage pool
//! on a filesystem that fills up, and `ferrovirt up` killed -9 in the middle of a clone and
//! of a burst of API writes. Every random choice comes from a seed that is printed (set
//! `FV_FAULT_SEED` to replay a failure).

use crate::platform;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferrovirt_tests::loopfs::LoopFilesystem;
use ferrovirt_tests::{HttpServer, HttpServerOptions, TempDir, fixture, noise, reference_sha256};
use platform::{Platform, condition, http_datavolume, other_storage_class, phase_of};

const LIMIT: Duration = Duration::from_secs(120);

/// A small, seedable generator (splitmix64): the tests' random points, reproducible.
struct Rng(u64);

impl Rng {
    /// Seeded from `FV_FAULT_SEED`, else from the clock; the seed is printed.
    fn from_env(test: &str) -> Rng {
        let seed = std::env::var("FV_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("{test}: seed {seed} (FV_FAULT_SEED={seed} replays it)");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A duration in `[low, high)`.
    fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let span = (high - low).as_millis().max(1) as u64;
        low + Duration::from_millis(self.next() % span)
    }
}

fn sha256(path: &Path) -> String {
    ferrovirt_tests::sha256_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Bytes a file occupies on disk (its data so far, holes excluded).
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

fn import_command(url: &str, target: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferrovirt"));
    command
        .arg("import")
        .arg(url)
        .arg(target)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// `ferrovirt import` of `image` (served slowly, so an import takes ~3 s) killed with SIGKILL
/// at random points, four times, over a target that already holds another image; then run to
/// its end. After every kill the target is still the old image, untouched (the new one is
/// staged beside it); at the end it is byte-identical to `qemu-img convert` of `image`.
fn kill_import_at_random_points(image: &str, rng: &mut Rng) {
    let size = std::fs::metadata(fixture(image)).unwrap().len();
    let server = HttpServer::start(HttpServerOptions {
        rate: Some(size / 3),
        ..Default::default()
    });
    let dir = TempDir::new("kill-import");
    let target = dir.join("disk.img");
    let staging = dir.join(".disk.img.importing");
    let old = "raw.img.zst";
    let status = import_command(&fixture(old).to_string_lossy(), &target)
        .status()
        .unwrap();
    assert!(status.success());
    let old_digest = sha256(&target);
    assert_eq!(old_digest, reference_sha256(old));
    for round in 0..4 {
        let delay = rng.between(Duration::from_millis(50), Duration::from_millis(3500));
        let mut child = import_command(&server.url(image), &target).spawn().unwrap();
        std::thread::sleep(delay);
        let finished = child.try_wait().unwrap();
        let staged = allocated(&staging);
        let _ = child.kill();
        let _ = child.wait();
        eprintln!(
            "{image} round {round}: killed after {delay:?}, {staged} bytes staged{}",
            if finished.is_some() {
                " (it had finished)"
            } else {
                ""
            }
        );
        if let Some(status) = finished {
            // Quicker than the kill: then it must have completed correctly.
            assert!(status.success(), "{image}: the import failed by itself");
            assert_eq!(sha256(&target), reference_sha256(image), "{image}");
            std::fs::copy(fixture(old), dir.join("old.zst")).unwrap();
            let status = import_command(&dir.join("old.zst").to_string_lossy(), &target)
                .status()
                .unwrap();
            assert!(status.success());
        } else {
            assert_eq!(
                sha256(&target),
                old_digest,
                "{image}: a killed import touched the target"
            );
        }
    }
    let status = import_command(&server.url(image), &target)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "{image}: the import after the kills failed"
    );
    assert_eq!(
        sha256(&target),
        reference_sha256(image),
        "{image}: differs from qemu-img convert"
    );
    assert!(!staging.exists(), "the staging file is gone");
}

#[test]
fn an_import_killed_at_random_points_ends_byte_identical_to_qemu_img() {
    let mut rng = Rng::from_env("kill-import");
    for image in ["v3.qcow2", "v3.qcow2.xz", "zstd.qcow2.gz"] {
        kill_import_at_random_points(image, &mut rng);
    }
}

/// A fixture of `mib` MiB of noise, zstd-compressed (so its size is unknown until its end),
/// written once into the fixture directory the test HTTP server serves; its name.
fn noise_fixture(mib: usize) -> String {
    let name = format!("faults-noise-{mib}m.raw.zst");
    let path = fixture(&name);
    if !path.exists() {
        let partial = fixture(&format!("{name}.{}", std::process::id()));
        let data = noise(mib << 20, 0x5eed + mib as u64);
        std::fs::write(&partial, zstd::encode_all(&data[..], 1).unwrap()).unwrap();
        std::fs::rename(&partial, &path).unwrap();
    }
    name
}

#[test]
fn a_datavolume_on_a_full_pool_never_succeeds_and_says_why() {
    let image = noise_fixture(40);
    let size = std::fs::metadata(fixture(&image)).unwrap().len();
    // The import takes ~8 s: time to fill the pool under it once its volume exists.
    let server = HttpServer::start(HttpServerOptions {
        rate: Some(size / 8),
        ..Default::default()
    });
    let mut pool = None;
    let platform = Platform::start_prepared("full-pool", &[], |dir| {
        pool = Some(LoopFilesystem::new_at(
            "full-pool-fs",
            &dir.join("pools/local"),
            96,
        ));
    });
    let pool = pool.expect("the pool's filesystem");
    platform.apply(&http_datavolume("big", &server.url(&image), "64Mi", ""));
    // Someone else fills the pool once the volume is made (its image is sparse).
    let deadline = Instant::now() + LIMIT;
    while platform
        .json(&["get", "pvc", "big"])
        .is_none_or(|pvc| pvc["spec"]["volumeName"].as_str().is_none())
    {
        assert!(Instant::now() < deadline, "the PVC was never bound");
        std::thread::sleep(Duration::from_millis(100));
    }
    let filler = pool.path().join("filler");
    let free = pool.available();
    let status = Command::new("fallocate")
        .args(["-l", &(free.saturating_sub(1 << 20)).to_string()])
        .arg(&filler)
        .status()
        .unwrap();
    assert!(status.success(), "fallocate");
    // The import runs into the full pool: the DataVolume never succeeds and its
    // conditions say the disk is full.
    let dv = platform.wait_dv("default", "big", LIMIT, |dv| {
        assert_ne!(
            phase_of(dv),
            "Succeeded",
            "an import onto a full pool: {dv}"
        );
        ["Running", "Ready"].iter().any(|c| {
            condition(dv, c).is_some_and(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("No space left on device"))
            })
        })
    });
    eprintln!("{}", serde_json::to_string_pretty(&dv["status"]).unwrap());
    // And it stays so for a while (retries included).
    std::thread::sleep(Duration::from_secs(5));
    let dv = platform
        .json(&["get", "datavolume", "big"])
        .expect("the DataVolume");
    assert_ne!(phase_of(&dv), "Succeeded", "{dv}");
    // The data directory goes once its pool is unmounted.
    let data_dir = platform.data_dir().to_path_buf();
    drop(platform);
    drop(pool);
    let _ = std::fs::remove_dir_all(data_dir);
}

#[test]
fn a_clone_interrupted_by_kill_9_of_the_control_plane_completes_with_the_source() {
    let mut rng = Rng::from_env("kill-clone");
    // 256 MiB of noise: a clone has real data to copy (seconds of it), so the kills land
    // inside it.
    let image = noise_fixture(256);
    let server = HttpServer::start(HttpServerOptions::default());
    let mut platform = Platform::start("kill-clone");
    platform.apply(&other_storage_class(&platform));
    platform.apply(&http_datavolume("golden", &server.url(&image), "320Mi", ""));
    platform.wait_phase("default", "golden", "Succeeded", LIMIT);
    let source = TempDir::new("kill-clone-source");
    platform.extract_disk("default", "golden", &source.join("disk.img"));
    let source_digest = sha256(&source.join("disk.img"));
    // Two clones: a CSI clone (same class) and a host-assisted one (a source pod streams the
    // volume to an upload server); the control plane is killed at a random point of both,
    // twice, and comes back on another pod network each time.
    platform.apply(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: csi-copy
spec:
  source:
    pvc:
      namespace: default
      name: golden
  storage: {}
---
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: host-copy
spec:
  source:
    pvc:
      namespace: default
      name: golden
  storage:
    storageClassName: hostpath-copy
"#,
    );
    let mut killed_mid_clone = false;
    for round in 0..2 {
        let delay = rng.between(Duration::from_millis(20), Duration::from_millis(1200));
        std::thread::sleep(delay);
        let phases = |platform: &Platform| -> Vec<String> {
            ["csi-copy", "host-copy"]
                .iter()
                .map(|name| {
                    platform
                        .json(&["get", "datavolume", name])
                        .map(|dv| phase_of(&dv).to_string())
                        .unwrap_or_default()
                })
                .collect()
        };
        let before = phases(&platform);
        platform.kill();
        // Another platform takes this one's pod network meanwhile: the upload server comes
        // back at a new address, which its source pod must follow.
        platform.restart_elsewhere();
        let after = phases(&platform);
        killed_mid_clone |= before.iter().chain(&after).any(|p| p != "Succeeded");
        eprintln!(
            "round {round}: killed after {delay:?}; the clones were {before:?}, after the restart {after:?}"
        );
    }
    assert!(
        killed_mid_clone,
        "both clones had finished before the first kill: nothing was tested"
    );
    for clone in ["csi-copy", "host-copy"] {
        let dv = platform.wait_phase("default", clone, "Succeeded", LIMIT);
        assert_eq!(dv["status"]["progress"], "100.0%", "{dv}");
        let copy = source.join(&format!("{clone}.img"));
        platform.extract_disk("default", clone, &copy);
        assert_eq!(
            sha256(&copy),
            source_digest,
            "{clone} differs from its source"
        );
    }
    platform.extract_disk("default", "golden", &source.join("again.img"));
    assert_eq!(
        sha256(&source.join("again.img")),
        source_digest,
        "the source changed"
    );
    // Nothing a worker pod had published stays mounted, not even what a pod that ended just
    // before a kill left behind.
    let pods = standalone::node_agent::state_dir(platform.data_dir()).join("pods");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = mounts_under(&pods);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "still mounted: {left:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The mount points under `dir` (from this process's mountinfo, which the platform shares).
fn mounts_under(dir: &Path) -> Vec<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let prefix = format!("{}/", dir.display());
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| point.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_acknowledged_before_kill_9_of_the_api_server_survive_it() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ListParams, PostParams};

    let mut rng = Rng::from_env("kill-writes");
    let mut platform = tokio::task::spawn_blocking(|| Platform::start("kill-writes"))
        .await
        .unwrap();
    let client = |kubeconfig: &Path| {
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        async move {
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .unwrap();
            kube::Client::try_from(config).unwrap()
        }
    };
    let api: Api<ConfigMap> = Api::namespaced(client(&platform.kubeconfig()).await, "default");
    // Writers create ConfigMaps as fast as the server takes them, and note each 201.
    let killed = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut writers = Vec::new();
    for writer in 0..24 {
        let api = api.clone();
        let killed = killed.clone();
        writers.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut failures = 0u32;
            for i in 0u32.. {
                let name = format!("w{writer}-{i}");
                let map: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name},
                    "data": {"writer": writer.to_string(), "i": i.to_string()},
                }))
                .unwrap();
                match api.create(&PostParams::default(), &map).await {
                    Ok(_) => acknowledged.push(name),
                    Err(_) if killed.load(Ordering::Relaxed) => break,
                    Err(e) => {
                        failures += 1;
                        assert!(failures < 20, "writes fail before the kill: {e}");
                    }
                }
            }
            acknowledged
        }));
    }
    let delay = rng.between(Duration::from_millis(1500), Duration::from_millis(4000));
    tokio::time::sleep(delay).await;
    let before_kill = started.elapsed();
    killed.store(true, Ordering::Relaxed);
    platform.kill();
    let mut acknowledged = Vec::new();
    for writer in writers {
        acknowledged.extend(writer.await.unwrap());
    }
    eprintln!(
        "killed after {delay:?}: {} creates acknowledged ({:.0}/s)",
        acknowledged.len(),
        acknowledged.len() as f64 / before_kill.as_secs_f64()
    );
    assert!(acknowledged.len() > 100, "too few writes to mean anything");
    let mut platform = tokio::task::spawn_blocking(move || {
        platform.restart();
        platform
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&platform.kubeconfig()).await, "default");
    let stored: std::collections::HashSet<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|name| !stored.contains(*name))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged creates lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    tokio::task::spawn_blocking(move || platform.stop())
        .await
        .unwrap();
}
