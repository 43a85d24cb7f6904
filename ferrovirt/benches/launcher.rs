//! The launcher's cost, side by side with the same QEMU started by hand, in one run:
//! start to QEMU running, to the first serial byte and to the login prompt of the fast
//! test guest (TCG here), and the launcher's resident memory beside QEMU's.
//!
//! `FV_BENCH_ROUNDS=5 cargo bench -p ferrovirt --bench launcher`
//!
//! "By hand" is the command line the launcher builds, minus `-S` and with the serial port
//! on stdout: QEMU as a user would type it, with no launcher around it.

#[allow(dead_code)]
mod common;

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{best_median, loadavg, rounds, workspace_root};

const VMI: &str = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: bench
spec:
  terminationGracePeriodSeconds: 30
  domain:
    resources:
      requests:
        memory: 256Mi
    devices:
      disks:
      - name: root
        disk: {bus: virtio}
  volumes:
  - name: root
    persistentVolumeClaim:
      claimName: root
";

/// When each milestone was seen, from the spawn.
#[derive(Default, Clone, Copy)]
struct Milestones {
    running: Option<Duration>,
    first_byte: Option<Duration>,
    login: Option<Duration>,
}

struct Round {
    times: Milestones,
    launcher_rss_kib: Option<u64>,
    qemu_rss_kib: u64,
}

fn main() {
    let rounds = rounds();
    let root = workspace_root();
    let status = Command::new("bash")
        .arg(root.join("fixtures/guests.sh"))
        .arg(root.join("target/guests"))
        .arg("fast")
        .status()
        .expect("fixtures/guests.sh");
    assert!(status.success());
    let disk = root.join("target/guests/fast/disk.img");
    let scratch = tempfile::Builder::new()
        .prefix("bench-launcher-")
        .tempdir_in(root.join("target"))
        .expect("scratch");
    let claim = scratch.path().join("claim");
    std::fs::create_dir_all(&claim).expect("claim");
    let manifest = scratch.path().join("vmi.yaml");
    std::fs::write(&manifest, VMI).expect("manifest");
    let hand_argv = hand_argv(&manifest, &claim, scratch.path());
    let load_before = loadavg();
    let mut ours = Vec::new();
    let mut hand = Vec::new();
    for round in 0..rounds {
        fresh_disk(&disk, &claim);
        ours.push(run_launcher(&manifest, &claim, scratch.path()));
        fresh_disk(&disk, &claim);
        hand.push(run_by_hand(&hand_argv));
        eprintln!("round {} of {rounds} done", round + 1);
    }
    println!(
        "launcher vs QEMU by hand, fast guest under TCG, {rounds} rounds (load {load_before} -> {})",
        loadavg()
    );
    println!(
        "{:<22} {:>14} {:>14} {:>12}",
        "milestone (median)", "launcher s", "by hand s", "added ms"
    );
    for (name, pick) in [
        (
            "QEMU running",
            (|m: &Milestones| m.running) as fn(&Milestones) -> Option<Duration>,
        ),
        ("first serial byte", |m: &Milestones| m.first_byte),
        ("login prompt", |m: &Milestones| m.login),
    ] {
        let a: Vec<f64> = ours
            .iter()
            .filter_map(|r| pick(&r.times))
            .map(|d| d.as_secs_f64())
            .collect();
        let b: Vec<f64> = hand
            .iter()
            .filter_map(|r| pick(&r.times))
            .map(|d| d.as_secs_f64())
            .collect();
        let (_, ma) = best_median(&a);
        let (_, mb) = best_median(&b);
        println!(
            "{name:<22} {ma:>14.3} {mb:>14.3} {:>12.1}",
            (ma - mb) * 1000.0
        );
    }
    let launcher_rss: Vec<f64> = ours
        .iter()
        .filter_map(|r| r.launcher_rss_kib)
        .map(|k| k as f64 / 1024.0)
        .collect();
    let qemu_rss: Vec<f64> = ours
        .iter()
        .map(|r| r.qemu_rss_kib as f64 / 1024.0)
        .collect();
    let hand_rss: Vec<f64> = hand
        .iter()
        .map(|r| r.qemu_rss_kib as f64 / 1024.0)
        .collect();
    println!(
        "RSS at the login prompt (median MiB): launcher {:.1}, its QEMU {:.1}, QEMU by hand {:.1}",
        best_median(&launcher_rss).1,
        best_median(&qemu_rss).1,
        best_median(&hand_rss).1
    );
}

fn fresh_disk(image: &Path, claim: &Path) {
    let status = Command::new("cp")
        .arg("--sparse=always")
        .arg(image)
        .arg(claim.join("disk.img"))
        .status()
        .expect("cp");
    assert!(status.success());
}

/// The launcher's own command line for the bench VMI, made runnable by hand.
fn hand_argv(manifest: &Path, claim: &Path, scratch: &Path) -> Vec<String> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let run_dir = scratch.join("hand");
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let text = std::fs::read_to_string(manifest).expect("manifest");
    let mut vmi: api::kubevirt::VirtualMachineInstance =
        serde_saphyr::from_str(&text).expect("VMI");
    vmi.metadata.namespace = Some("default".into());
    let cluster = api::kubevirt::cluster_config::ClusterConfig::default();
    api::kubevirt::default::default_instance_spec(&mut vmi.spec, &cluster);
    let settings = virt::launcher::node_facts::NodeSettings {
        qemu_binary: PathBuf::from("qemu-system-x86_64"),
        allow_emulation: true,
        node_cache: scratch.join("cache"),
        insecure_registries: vec![],
        run_dir: run_dir.clone(),
        nvram_dir: scratch.join("nvram"),
        volume_paths: [("root".to_owned(), claim.to_path_buf())].into(),
        pod_layout: None,
        pod_ip: "127.0.0.1".parse().expect("ip"),
        bridges: Default::default(),
        pod_bridges: Default::default(),
    };
    let facts = runtime
        .block_on(virt::launcher::node_facts::gather(&vmi, &settings))
        .expect("facts");
    let domain = virt::domain::build(&vmi, &facts).expect("domain");
    let serial = domain.sockets.serial.clone().expect("a serial port");
    let serial_chardev = format!(
        "socket,id=serial0,path={},server=on,wait=off",
        serial.display()
    );
    domain
        .argv
        .into_iter()
        .filter(|a| a != "-S")
        .map(|a| {
            if a == serial_chardev {
                "stdio,id=serial0".to_owned()
            } else {
                a
            }
        })
        .collect()
}

fn run_launcher(manifest: &Path, claim: &Path, scratch: &Path) -> Round {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args(["vmi", "run"])
        .arg(manifest)
        .arg(format!("--volume=root={}", claim.display()))
        .arg("--state-dir")
        .arg(scratch.join("state"))
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferrovirt vmi run");
    let times = Arc::new(Mutex::new(Milestones::default()));
    let serial = child.stdout.take().expect("stdout");
    watch(serial, start, times.clone(), "login:", true, |m| {
        &mut m.login
    });
    let log = child.stderr.take().expect("stderr");
    watch(log, start, times.clone(), "domain running", false, |m| {
        &mut m.running
    });
    wait_login(&times, &mut child);
    let launcher_rss_kib = rss_kib(child.id());
    let qemu_pid = children(child.id())
        .into_iter()
        .next()
        .expect("QEMU is the launcher's child");
    let qemu_rss_kib = rss_kib(qemu_pid).unwrap_or(0);
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let _ = child.wait();
    let times = *times.lock().expect("lock");
    Round {
        times,
        launcher_rss_kib,
        qemu_rss_kib,
    }
}

fn run_by_hand(argv: &[String]) -> Round {
    let qmp = argv
        .iter()
        .find_map(|a| a.strip_prefix("socket,id=qmp,path="))
        .and_then(|rest| rest.split(',').next())
        .map(PathBuf::from)
        .expect("the QMP socket");
    let _ = std::fs::remove_file(&qmp);
    let start = Instant::now();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("QEMU");
    let times = Arc::new(Mutex::new(Milestones::default()));
    let serial = child.stdout.take().expect("stdout");
    watch(serial, start, times.clone(), "login:", true, |m| {
        &mut m.login
    });
    // Without -S, QEMU runs as soon as QMP answers.
    while UnixStream::connect(&qmp).is_err() {
        std::thread::sleep(Duration::from_millis(1));
    }
    times.lock().expect("lock").running = Some(start.elapsed());
    wait_login(&times, &mut child);
    let qemu_rss_kib = rss_kib(child.id()).unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    let times = *times.lock().expect("lock");
    Round {
        times,
        launcher_rss_kib: None,
        qemu_rss_kib,
    }
}

/// Records the first byte of `pipe` (with `first_byte`) and when `needle` first shows in
/// it, through `seen`.
fn watch(
    mut pipe: impl Read + Send + 'static,
    start: Instant,
    times: Arc<Mutex<Milestones>>,
    needle: &'static str,
    first_byte: bool,
    seen: fn(&mut Milestones) -> &mut Option<Duration>,
) {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut t = times.lock().expect("lock");
            if first_byte {
                t.first_byte.get_or_insert(start.elapsed());
            }
            text.extend_from_slice(&buf[..n]);
            let slot = seen(&mut t);
            if slot.is_none() && String::from_utf8_lossy(&text).contains(needle) {
                *slot = Some(start.elapsed());
            }
        }
    });
}

fn wait_login(times: &Arc<Mutex<Milestones>>, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while times.lock().expect("lock").login.is_none() {
        assert!(Instant::now() < deadline, "no login prompt within 180 s");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the guest's process exited"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}
