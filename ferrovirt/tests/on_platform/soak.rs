//! The soak test (long; `#[ignore]`d, run by `scripts/test-long`): waves of imports and
//! uploads on `ferrovirt up`, `FV_SOAK_PARALLEL` (100) DataVolumes at a time, half imported
//! over HTTP and half uploaded with `ferrovirt image-upload`, until `FV_SOAK_SECS` (600) have
//! passed. Each wave must succeed with the right contents and be deleted again; the RSS of
//! the platform's processes is sampled throughout and must stay bounded across waves, and
//! at the end no mount, loop device or process of the platform may be left.

use crate::platform;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferrovirt_tests::{HttpServer, HttpServerOptions, fixture};
use platform::{Platform, http_datavolume, phase_of};

const IMAGE: &str = "v3.qcow2";
const WAVE_LIMIT: Duration = Duration::from_secs(900);

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The process ids in the tree under `root` (itself included).
fn process_tree(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The fields after the command's closing parenthesis: state, ppid, ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parents.push((pid, ppid));
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    tree
}

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Loop devices whose backing file is under `dir`.
fn loop_devices_under(dir: &std::path::Path) -> Vec<String> {
    let out = Command::new("losetup")
        .args(["-a"])
        .output()
        .expect("losetup");
    let dir = dir.to_string_lossy().into_owned();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&dir))
        .map(str::to_string)
        .collect()
}

fn image_upload(platform: &Platform, name: &str) -> std::process::Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferrovirt"));
    command
        .args(["image-upload", "dv", name, "--size", "64Mi", "--image-path"])
        .arg(fixture(IMAGE))
        .args(["--wait-secs", "900"])
        .env("KUBECONFIG", platform.kubeconfig())
        .env("HOME", platform.data_dir())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for proxy in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        command.env_remove(proxy);
    }
    command.spawn().expect("running ferrovirt image-upload")
}

/// The phases of every DataVolume.
fn phases(platform: &Platform) -> Vec<(String, String)> {
    platform
        .json(&["get", "datavolumes"])
        .and_then(|list| list["items"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|dv| {
            (
                dv["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                phase_of(dv).to_string(),
            )
        })
        .collect()
}

#[test]
#[ignore = "long: run with scripts/test-long (FV_SOAK_SECS, FV_SOAK_PARALLEL)"]
fn soak_imports_and_uploads_with_bounded_memory_and_no_leaks() {
    let duration = Duration::from_secs(env_or("FV_SOAK_SECS", 600));
    let parallel = env_or("FV_SOAK_PARALLEL", 100) as usize;
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("soak");
    let root = platform.pid();
    let mounts_before = platform.mounts().len();

    // RSS sampler: the platform's whole process tree (pods included) and its main process.
    let stop = Arc::new(AtomicBool::new(false));
    let peak_tree = Arc::new(AtomicU64::new(0));
    let main_rss = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let sampler = {
        let (stop, peak_tree, main_rss) = (stop.clone(), peak_tree.clone(), main_rss.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let tree: u64 = process_tree(root).into_iter().map(rss).sum();
                peak_tree.fetch_max(tree, Ordering::Relaxed);
                main_rss.lock().unwrap().push(rss(root));
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };

    let started = Instant::now();
    let mut wave = 0;
    let mut settled_rss = Vec::new();
    let mut settled_processes = Vec::new();
    let mut wave_times = Vec::new();
    while wave == 0 || started.elapsed() < duration {
        let wave_started = Instant::now();
        let uploads: Vec<String> = (0..parallel / 2).map(|i| format!("up{wave}-{i}")).collect();
        let imports: Vec<String> = (0..parallel - parallel / 2)
            .map(|i| format!("im{wave}-{i}"))
            .collect();
        let yaml: Vec<String> = imports
            .iter()
            .map(|name| http_datavolume(name, &server.url(IMAGE), "64Mi", ""))
            .collect();
        platform.apply(&yaml.join("---\n"));
        let clients: Vec<_> = uploads
            .iter()
            .map(|name| (name.clone(), image_upload(&platform, name)))
            .collect();
        for (name, client) in clients {
            let out = client.wait_with_output().expect("image-upload");
            assert!(
                out.status.success(),
                "wave {wave}: image-upload {name} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let deadline = Instant::now() + WAVE_LIMIT;
        loop {
            let all = phases(&platform);
            let failed: Vec<_> = all.iter().filter(|(_, p)| p == "Failed").collect();
            assert!(failed.is_empty(), "wave {wave}: {failed:?}");
            if all.len() == parallel && all.iter().all(|(_, p)| p == "Succeeded") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "wave {wave} did not finish: {all:?}"
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        // A sample of each kind holds the image.
        for name in [&imports[0], &uploads[0], imports.last().unwrap()] {
            platform.assert_volume_holds("default", name, IMAGE);
        }
        platform.ok(&["delete", "datavolumes", "--all", "--wait=true"]);
        let deadline = Instant::now() + WAVE_LIMIT;
        while platform
            .json(&["get", "pv"])
            .and_then(|l| l["items"].as_array().map(Vec::len))
            .unwrap_or(1)
            > 0
        {
            assert!(
                Instant::now() < deadline,
                "wave {wave}: volumes not released"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let took = wave_started.elapsed();
        wave_times.push(took);
        std::thread::sleep(Duration::from_secs(3));
        settled_rss.push(rss(root));
        settled_processes.push(process_tree(root).len());
        eprintln!(
            "wave {wave}: {parallel} DataVolumes in {took:.1?}; up's RSS {} MiB, {} processes, peak tree RSS so far {} MiB",
            settled_rss.last().unwrap() >> 20,
            settled_processes.last().unwrap(),
            peak_tree.load(Ordering::Relaxed) >> 20
        );
        wave += 1;
    }
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();

    // No leaks: mounts, loop devices and processes are back to where they were.
    assert_eq!(
        platform.mounts().len(),
        mounts_before,
        "mounts left: {:?}",
        platform.mounts()
    );
    let loops = loop_devices_under(platform.data_dir());
    assert!(loops.is_empty(), "loop devices left: {loops:?}");
    let processes: BTreeSet<usize> = settled_processes.iter().copied().collect();
    assert_eq!(
        processes.len(),
        1,
        "the platform's process count changed between waves: {settled_processes:?}"
    );
    // Bounded memory: the control plane settles after each wave at about the same RSS.
    let first = settled_rss[0];
    let last = *settled_rss.last().unwrap();
    let max_main = main_rss.lock().unwrap().iter().copied().max().unwrap_or(0);
    eprintln!(
        "soak: {wave} waves of {parallel} in {:.0?} (waves {wave_times:.0?}); up's RSS settled {} -> {} MiB, peak {} MiB; tree peak {} MiB",
        started.elapsed(),
        first >> 20,
        last >> 20,
        max_main >> 20,
        peak_tree.load(Ordering::Relaxed) >> 20
    );
    assert!(
        last <= first + first / 2 + (32 << 20),
        "up's RSS grew from {} to {} MiB over {wave} waves",
        first >> 20,
        last >> 20
    );
}
