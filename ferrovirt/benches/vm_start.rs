//! VM start on the platform, side by side with the same guest's QEMU started by hand, in
//! one run: a VirtualMachine created (its disk already imported: a CSI clone of one import,
//! made before the clock starts) to its VMI Running and to the guest's first serial byte,
//! one VM at a time and N at once; the same VM sized by a cluster instancetype and shaped by
//! a preference instead of written out, one at a time, beside it; and each launcher's
//! resident memory beside its QEMU's.
//!
//! `FV_BENCH_VMS=20 FV_BENCH_CONCURRENT=10 FV_BENCH_SIZED=20 cargo bench -p ferrovirt --bench vm_start`

#[allow(dead_code)]
mod common;
#[path = "../tests/platform/mod.rs"]
mod platform;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{loadavg, workspace_root};
use ferrovirt_tests::{HttpServer, HttpServerOptions, fast_guest_qcow2};
use platform::Platform;

const LIMIT: Duration = Duration::from_secs(300);

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn vm(name: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 5
      domain:
        resources:
          requests:
            memory: 256Mi
        devices:
          disks:
          - name: root
            disk: {{bus: virtio}}
      volumes:
      - name: root
        persistentVolumeClaim:
          claimName: {name}
"
    )
}

/// The instancetype and preference that make [`vm_sized`] the VM [`vm`] writes out.
const SIZES: &str = "apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: bench.small
spec:
  cpu: {guest: 1}
  memory: {guest: 256Mi}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: bench.linux
spec:
  devices: {preferredDiskBus: virtio}
  preferredTerminationGracePeriodSeconds: 5
";

/// [`vm`] with its size and disk bus from an instancetype and a preference.
fn vm_sized(name: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  instancetype: {{name: bench.small}}
  preference: {{name: bench.linux}}
  template:
    spec:
      domain:
        devices: {{}}
      volumes:
      - name: root
        persistentVolumeClaim:
          claimName: {name}
"
    )
}

/// When a VM's milestones were seen, from its creation.
#[derive(Default, Clone, Copy, Debug)]
struct Start {
    running: Option<Duration>,
    first_byte: Option<Duration>,
}

/// Creates the VMs named, all at once, and times each to Running and to its first serial
/// byte (the launcher's serial log growing); then measures RSS and deletes them.
fn start_vms(
    platform: &Platform,
    names: &[String],
    manifest: fn(&str) -> String,
) -> (Vec<Start>, Vec<(u64, u64)>) {
    let manifests: Vec<String> = names.iter().map(|n| manifest(n)).collect();
    let created = Instant::now();
    platform.apply(&manifests.join("---\n"));
    let mut starts = vec![Start::default(); names.len()];
    let mut logs: Vec<Option<PathBuf>> = vec![None; names.len()];
    let deadline = created + LIMIT;
    while starts
        .iter()
        .any(|s| s.running.is_none() || s.first_byte.is_none())
    {
        assert!(Instant::now() < deadline, "VMs did not start: {starts:?}");
        let vmis = platform.json(&["get", "vmi"]).expect("VMIs");
        let pods = platform.json(&["get", "pods"]).expect("pods");
        for (i, name) in names.iter().enumerate() {
            let vmi = vmis["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["metadata"]["name"] == name.as_str());
            if starts[i].running.is_none() && vmi.is_some_and(|v| v["status"]["phase"] == "Running")
            {
                starts[i].running = Some(created.elapsed());
            }
            if logs[i].is_none()
                && let Some(uid) = vmi.and_then(|v| v["metadata"]["uid"].as_str())
            {
                logs[i] = pods["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["metadata"]["labels"]["kubevirt.io/created-by"] == uid)
                    .and_then(|p| p["metadata"]["uid"].as_str())
                    .map(|pod| serial_log(platform.data_dir(), pod));
            }
        }
        // The serial logs are polled more often than the API.
        for _ in 0..10 {
            for (i, log) in logs.iter().enumerate() {
                if starts[i].first_byte.is_none()
                    && log
                        .as_ref()
                        .and_then(|l| std::fs::metadata(l).ok())
                        .is_some_and(|m| m.len() > 0)
                {
                    starts[i].first_byte = Some(created.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let rss = launchers_rss(platform.data_dir());
    platform.ok(&["delete", "vm", "--all", "--wait=true"]);
    (starts, rss)
}

fn serial_log(data_dir: &Path, pod_uid: &str) -> PathBuf {
    data_dir
        .join("node/pods")
        .join(pod_uid)
        .join("root/var/run/kubevirt-private/launcher/virt-serial0-log")
}

/// (launcher RSS KiB, QEMU RSS KiB) of every launcher and every QEMU of this platform
/// (QEMU runs under the launcher's reaper, so it is found by its command line).
fn launchers_rss(data_dir: &Path) -> Vec<(u64, u64)> {
    let data = data_dir.display().to_string();
    let mut launchers = Vec::new();
    let mut qemus = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if !cmdline.contains(&data) {
            continue;
        }
        if cmdline.starts_with("qemu-system") || cmdline.contains("/qemu-system") {
            qemus.extend(rss_kib(&pid));
        } else if cmdline.contains("virt-launcher") {
            launchers.extend(rss_kib(&pid));
        }
    }
    launchers.sort_unstable();
    qemus.sort_unstable();
    launchers.into_iter().zip(qemus).collect()
}

fn rss_kib(pid: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The same guest's QEMU by hand (the platform's disk under an overlay, serial on stdout):
/// spawn to its first serial byte.
fn by_hand(base: &Path, scratch: &Path) -> Duration {
    use std::io::Read;
    let overlay = scratch.join("hand.qcow2");
    let _ = std::fs::remove_file(&overlay);
    let status = Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
        .arg(base)
        .arg(&overlay)
        .status()
        .expect("qemu-img");
    assert!(status.success());
    let started = Instant::now();
    let mut child = Command::new("qemu-system-x86_64")
        .args([
            "-machine",
            "q35,accel=tcg",
            "-cpu",
            "max",
            "-m",
            "256",
            "-nodefaults",
        ])
        .args(["-display", "none", "-serial", "stdio", "-drive"])
        .arg(format!("file={},if=virtio,format=qcow2", overlay.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .expect("qemu-system-x86_64");
    let mut byte = [0u8; 1];
    let _ = child.stdout.as_mut().expect("stdout").read(&mut byte);
    let elapsed = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    elapsed
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank]
}

fn report(label: &str, starts: &[Start], hand: &[f64]) {
    let running: Vec<f64> = starts
        .iter()
        .filter_map(|s| s.running)
        .map(|d| d.as_secs_f64())
        .collect();
    let first: Vec<f64> = starts
        .iter()
        .filter_map(|s| s.first_byte)
        .map(|d| d.as_secs_f64())
        .collect();
    let hand_p50 = percentile(hand, 50.0);
    println!(
        "{label:<28} VMI Running p50 {:.3} s p95 {:.3} s | first serial byte p50 {:.3} s p95 {:.3} s | QEMU by hand p50 {hand_p50:.3} s | ratio (first byte p50) {:.1}x",
        percentile(&running, 50.0),
        percentile(&running, 95.0),
        percentile(&first, 50.0),
        percentile(&first, 95.0),
        percentile(&first, 50.0) / hand_p50,
    );
}

fn main() {
    let root = workspace_root();
    let sequential = env_count("FV_BENCH_VMS", 20);
    let concurrent = env_count("FV_BENCH_CONCURRENT", 10);
    let sized = env_count("FV_BENCH_SIZED", 20);
    let status = Command::new("bash")
        .arg(root.join("fixtures/guests.sh"))
        .arg(root.join("target/guests"))
        .arg("fast")
        .status()
        .expect("fixtures/guests.sh");
    assert!(status.success());
    let disk = root.join("target/guests/fast/disk.img");
    let platform = Platform::start("bench-vm");
    // The shared disk: the guest's image imported once into the claim `base`.
    let server = HttpServer::start(HttpServerOptions::default());
    platform.apply(&format!(
        "apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: base
spec:
  source:
    http:
      url: {}
  storage:
    resources:
      requests:
        storage: 128Mi
",
        server.url(fast_guest_qcow2())
    ));
    let deadline = Instant::now() + LIMIT;
    while platform
        .json(&["get", "dv", "base"])
        .is_none_or(|dv| dv["status"]["phase"] != "Succeeded")
    {
        assert!(Instant::now() < deadline, "the base disk was not imported");
        std::thread::sleep(Duration::from_millis(200));
    }
    let sequential_names: Vec<String> = (0..sequential).map(|i| format!("seq{i}")).collect();
    let concurrent_names: Vec<String> = (0..concurrent).map(|i| format!("par{i}")).collect();
    let sized_names: Vec<String> = (0..sized).map(|i| format!("sized{i}")).collect();
    platform.apply(SIZES);
    let clones: Vec<String> = sequential_names
        .iter()
        .chain(&concurrent_names)
        .chain(&sized_names)
        .map(|name| {
            format!(
                "apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: {name}
spec:
  source:
    pvc: {{namespace: default, name: base}}
  storage:
    resources:
      requests:
        storage: 128Mi
"
            )
        })
        .collect();
    platform.apply(&clones.join("---\n"));
    let deadline = Instant::now() + LIMIT;
    loop {
        let dvs = platform.json(&["get", "dv"]).expect("DataVolumes");
        let done = dvs["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["status"]["phase"] == "Succeeded")
            .count();
        if done == clones.len() + 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the clones were not made");
        std::thread::sleep(Duration::from_millis(500));
    }
    let load_before = loadavg();
    let hand: Vec<f64> = (0..5)
        .map(|_| by_hand(&disk, platform.data_dir()).as_secs_f64())
        .collect();
    let mut one_at_a_time = Vec::new();
    let mut rss = Vec::new();
    let mut by_instancetype = Vec::new();
    // Written out and sized alternate, so that load drifts alike on both.
    for i in 0..sequential.max(sized) {
        if let Some(name) = sequential_names.get(i) {
            let (starts, sizes) = start_vms(&platform, std::slice::from_ref(name), vm);
            one_at_a_time.extend(starts);
            rss.extend(sizes);
        }
        if let Some(name) = sized_names.get(i) {
            let (starts, _) = start_vms(&platform, std::slice::from_ref(name), vm_sized);
            by_instancetype.extend(starts);
        }
    }
    let (at_once, sizes) = start_vms(&platform, &concurrent_names, vm);
    rss.extend(sizes);
    println!(
        "VM create to VMI Running and first serial byte, fast guest under TCG (load {load_before} -> {})",
        loadavg()
    );
    report(
        &format!("{sequential} VMs one at a time"),
        &one_at_a_time,
        &hand,
    );
    report(&format!("{concurrent} VMs at once"), &at_once, &hand);
    report(
        &format!("{sized} VMs by instancetype"),
        &by_instancetype,
        &hand,
    );
    let running = |starts: &[Start]| {
        let values: Vec<f64> = starts
            .iter()
            .filter_map(|s| s.running)
            .map(|d| d.as_secs_f64())
            .collect();
        percentile(&values, 50.0)
    };
    println!(
        "instancetype and preference vs written out: VMI Running p50 {:.3} s vs {:.3} s, ratio {:.2}x",
        running(&by_instancetype),
        running(&one_at_a_time),
        running(&by_instancetype) / running(&one_at_a_time)
    );
    let launcher: Vec<f64> = rss.iter().map(|(l, _)| *l as f64 / 1024.0).collect();
    let qemu: Vec<f64> = rss.iter().map(|(_, q)| *q as f64 / 1024.0).collect();
    println!(
        "per VM: launcher RSS p50 {:.1} MiB (max {:.1}), its QEMU p50 {:.1} MiB; KubeVirt budgets ~250 MiB of virt-launcher overhead per VM",
        percentile(&launcher, 50.0),
        launcher.iter().cloned().fold(0.0, f64::max),
        percentile(&qemu, 50.0)
    );
}
