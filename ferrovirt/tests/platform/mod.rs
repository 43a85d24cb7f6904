//! The single-machine platform for end-to-end tests: `ferrovirt up --foreground` on a data
//! directory of its own (API server on a free port, controllers, CSI driver, provisioner,
//! node agent), driven with the real `kubectl`, and the contents of the volumes it made.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ferrovirt_tests::kubectl::Kubectl;
use ferrovirt_tests::{TempDir, reference_sha256, reference_size};
use serde_json::Value;

const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `ferrovirt up`; stopped (SIGTERM, then SIGKILL) on drop.
pub struct Platform {
    child: Child,
    dir: TempDir,
    /// More arguments of `ferrovirt up`, kept for restarts.
    args: Vec<String>,
    /// Pod networks this platform had, held by the test from [`Self::restart_elsewhere`] on.
    taken_networks: Vec<std::fs::File>,
}

impl Platform {
    pub fn start(label: &str) -> Platform {
        Self::start_with(label, &[])
    }

    /// `ferrovirt up` with more arguments.
    pub fn start_with(label: &str, args: &[&str]) -> Platform {
        Self::start_prepared(label, args, |_| {})
    }

    /// `ferrovirt up` on a data directory that `prepare` got to set up first (a pool on a
    /// filesystem of its own, say).
    pub fn start_prepared(label: &str, args: &[&str], prepare: impl FnOnce(&Path)) -> Platform {
        let dir = TempDir::new(label);
        prepare(dir.path());
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let child = spawn_up(&dir, &args);
        let mut platform = Platform {
            child,
            dir,
            args,
            taken_networks: Vec::new(),
        };
        platform.wait_started();
        platform
    }

    /// Stops the control plane as `ferrovirt down` does and starts it again on the same
    /// data directory.
    pub fn stop_and_restart(&mut self) {
        self.stop();
        self.child = spawn_up(&self.dir, &self.args);
        self.wait_started();
    }

    /// Kills the control plane with SIGKILL (its pods die with it) and starts it again on
    /// the same data directory.
    pub fn kill_and_restart(&mut self) {
        self.kill();
        self.restart();
    }

    /// Kills the control plane with SIGKILL (its pods die with it).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the control plane again on the same data directory after [`Self::kill`].
    pub fn restart(&mut self) {
        let _ = std::fs::remove_file(self.dir.join("ferrovirt.pid"));
        self.child = spawn_up(&self.dir, &self.args);
        self.wait_started();
    }

    /// [`Self::restart`] while another platform holds the pod network this one had, as a
    /// platform started meanwhile may: every pod comes back at a new address. The network
    /// stays held until the platform is dropped, so no later restart returns to it.
    pub fn restart_elsewhere(&mut self) {
        let state_dir = standalone::node_agent::state_dir(self.dir.path());
        let block = standalone::pod_network::recorded_block(&state_dir)
            .expect("the platform recorded its pod network");
        let lock = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(standalone::pod_network::lock_path(block))
            .expect("open the pod network's lock");
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .expect("take the pod network");
        self.taken_networks.push(lock);
        self.restart();
        let moved = standalone::pod_network::recorded_block(&state_dir);
        assert_ne!(
            moved,
            Some(block),
            "the platform came back on a network held elsewhere"
        );
    }

    /// The process id of `ferrovirt up`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_started(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if self.dir.join("ferrovirt.pid").exists() && self.kubeconfig().exists() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("ferrovirt up exited ({status}):\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "ferrovirt up did not start in {START_TIMEOUT:?}:\n{}",
            self.log()
        );
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The control plane's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("up.log")).unwrap_or_default()
    }

    /// kubectl against this platform, with a discovery cache of its own.
    pub fn kubectl_client(&self) -> Kubectl {
        Kubectl::new(self.kubeconfig()).with_cache_dir(self.dir.join("kubectl-cache"))
    }

    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        self.kubectl_client().command(args)
    }

    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.kubectl_client().run(args, stdin)
    }

    /// Runs kubectl and returns its stdout; panics with its stderr if it failed.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_stdin(args, None)
    }

    pub fn ok_stdin(&self, args: &[&str], stdin: Option<&str>) -> String {
        self.kubectl_client().ok(args, stdin)
    }

    pub fn apply(&self, yaml: &str) {
        self.ok_stdin(&["apply", "-f", "-"], Some(yaml));
    }

    /// Merge-patches CDIConfig `config` with `patch`, as a user edits it.
    pub fn patch_cdi_config(&self, patch: &str) {
        self.ok(&[
            "patch",
            "cdiconfig",
            "config",
            "--type",
            "merge",
            "-p",
            patch,
        ]);
    }

    pub fn json(&self, args: &[&str]) -> Option<Value> {
        self.kubectl_client().json(args)
    }

    /// Polls `kubectl ARGS -o json` (ARGS starting with `get`) until `done` holds for the
    /// object, returning it; panics with `what`, the last object seen and the platform's log
    /// after `limit`.
    pub fn wait_json(
        &self,
        args: &[&str],
        limit: Duration,
        what: &str,
        mut done: impl FnMut(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        let mut last = Value::Null;
        while Instant::now() < deadline {
            if let Some(object) = self.json(args) {
                if done(&object) {
                    return object;
                }
                last = object;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "{what} within {limit:?} ({args:?}); last seen:\n{last:#}\nlog:\n{}",
            self.log()
        );
    }

    /// Polls the DataVolume until `done` holds for it, returning it; panics with the
    /// DataVolume and the platform's log after `limit`.
    pub fn wait_dv(
        &self,
        namespace: &str,
        name: &str,
        limit: Duration,
        mut done: impl FnMut(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        let mut last = Value::Null;
        while Instant::now() < deadline {
            if let Some(dv) = self.json(&["get", "-n", namespace, "datavolume", name]) {
                if done(&dv) {
                    return dv;
                }
                last = dv;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "DataVolume {namespace}/{name} did not reach the expected state in {limit:?}:\n{}\n--- pods:\n{}\n--- log:\n{}",
            serde_json::to_string_pretty(&last).unwrap_or_default(),
            self.kubectl_text(&["get", "pods", "-A", "-o", "yaml"]),
            self.log()
        );
    }

    fn kubectl_text(&self, args: &[&str]) -> String {
        let out = self.kubectl(args, None);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits for the DataVolume's phase to be `phase`.
    pub fn wait_phase(&self, namespace: &str, name: &str, phase: &str, limit: Duration) -> Value {
        self.wait_dv(namespace, name, limit, |dv| phase_of(dv) == phase)
    }

    /// The image file of the volume bound to a PVC, in the CSI driver's pool.
    pub fn volume_image(&self, namespace: &str, pvc: &str) -> PathBuf {
        let claim = self
            .json(&["get", "-n", namespace, "pvc", pvc])
            .expect("the PVC exists");
        let pv = claim["spec"]["volumeName"]
            .as_str()
            .expect("the PVC is bound");
        let volume = self.json(&["get", "pv", pv]).expect("the PV exists");
        let handle = volume["spec"]["csi"]["volumeHandle"]
            .as_str()
            .expect("a CSI volume");
        self.data_dir()
            .join("pools/local/csi")
            .join(handle)
            .join("volume.img")
    }

    /// The filesystem volume of `namespace/pvc` holds `image` converted to raw (the fixture's
    /// reference digest), then zeros to its end.
    pub fn assert_volume_holds(&self, namespace: &str, pvc: &str, image: &str) {
        let scratch = TempDir::new("dv-contents");
        let disk = scratch.join("disk.img");
        self.extract_disk(namespace, pvc, &disk);
        let (digest, zero_tail) = digest_prefix(&disk, reference_size(image));
        assert_eq!(
            digest,
            reference_sha256(image),
            "contents of {namespace}/{pvc}"
        );
        assert!(
            zero_tail,
            "{namespace}/{pvc} has data after the image's end"
        );
    }

    /// Waits until DataImportCron `name` (in `default`) satisfies `done`; on timeout, panics
    /// with the cron, the DataVolumes' statuses and the platform's log.
    pub fn wait_cron(&self, name: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + limit;
        let mut last = Value::Null;
        while Instant::now() < deadline {
            if let Some(cron) = self.json(&["get", "dataimportcron", name]) {
                if done(&cron) {
                    return cron;
                }
                last = cron;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let imports = self.json(&["get", "datavolumes"]).unwrap_or_default();
        let statuses: Vec<&Value> = imports["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|dv| &dv["status"])
            .collect();
        panic!(
            "DataImportCron {name}: {last}\nits imports: {statuses:?}\n{}",
            self.log()
        );
    }

    /// Copies `/disk.img` out of a filesystem volume (an ext4 image) into `out`, with
    /// debugfs, without mounting it.
    pub fn extract_disk(&self, namespace: &str, pvc: &str, out: &Path) {
        let image = self.volume_image(namespace, pvc);
        let status = Command::new("debugfs")
            .arg("-R")
            .arg(format!("dump /disk.img {}", out.display()))
            .arg(&image)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("running debugfs");
        assert!(
            status.success(),
            "debugfs could not read {}",
            image.display()
        );
        assert!(out.exists(), "no disk.img in {}", image.display());
    }
}

impl Platform {
    /// Stops the control plane as `ferrovirt down` does (SIGTERM, then SIGKILL after 30 s).
    pub fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return; // Stopped already; its pid may be another process's now.
        }
        let pid = self.child.id() as i32;
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The mount points under the data directory (volumes still published to pods).
    pub fn mounts(&self) -> Vec<String> {
        let dir = self.dir.path().to_string_lossy().into_owned();
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .filter(|point| point.starts_with(&dir))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Platform {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `ferrovirt up --foreground` on `dir`, logging to `dir/up.log` (appended across restarts).
fn spawn_up(dir: &TempDir, args: &[String]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("up.log"))
        .expect("opening the log");
    Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args([
            "up",
            "--foreground",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path())
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("starting ferrovirt up")
}

pub fn phase_of(dv: &Value) -> &str {
    dv["status"]["phase"].as_str().unwrap_or_default()
}

/// The condition of `type_` on an object's status.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The sha256 of the first `len` bytes of `path`, and whether every byte after them is zero.
pub fn digest_prefix(path: &Path, len: u64) -> (String, bool) {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = std::fs::File::open(path).expect("opening the disk");
    let mut hasher = Sha256::new();
    let mut left = len;
    let mut buf = vec![0u8; 1 << 20];
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = file.read(&mut buf[..want]).expect("reading the disk");
        assert!(n > 0, "{} is shorter than {len} bytes", path.display());
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    let mut zero_tail = true;
    loop {
        let n = file.read(&mut buf).expect("reading the disk");
        if n == 0 {
            break;
        }
        zero_tail &= buf[..n].iter().all(|b| *b == 0);
    }
    (hex::encode(hasher.finalize()), zero_tail)
}

/// A DataVolume importing `url` into a claim of `size`; `extra` is YAML added after the URL
/// (more fields of the http source).
pub fn http_datavolume(name: &str, url: &str, size: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: {name}
spec:
  source:
    http:
      url: "{url}"{extra}
  storage:
    resources:
      requests:
        storage: {size}
"#
    )
}

/// A second StorageClass of the same driver: a clone into it cannot be a CSI clone.
pub fn other_storage_class(platform: &Platform) -> String {
    let default = platform
        .json(&["get", "storageclass", "hostpath-csi"])
        .expect("the default StorageClass");
    let provisioner = default["provisioner"].as_str().expect("a provisioner");
    format!(
        r#"apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: hostpath-copy
provisioner: {provisioner}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
"#
    )
}
