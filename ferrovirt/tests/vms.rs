//! VMs end to end on one machine: `ferrovirt up`, upstream-shaped VirtualMachine and
//! VirtualMachineInstance YAML applied with kubectl, the fast test guest's disk imported by
//! a DataVolume from a real HTTP server on loopback, QEMU under TCG, and the virtctl verbs
//! of the `ferrovirt` binary (start, stop, restart, pause, console) against the
//! subresource API the embedded server aggregates.

#[path = "vms/access_credentials.rs"]
mod access_credentials;
#[path = "vms/instancetypes.rs"]
mod instancetypes;
mod platform;
#[path = "vms/tekton_tasks.rs"]
mod tekton_tasks;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrovirt_tests::registry::{
    ImageSpec, LayerCompression, LayerSpec, OciLayout, RegistryServer, RegistryServerOptions,
};
use ferrovirt_tests::{HttpServer, HttpServerOptions, debian_guest_qcow2, fast_guest_qcow2, guest};
use platform::{Platform, condition};
use serde_json::Value;

/// How long a guest may take to boot. A disk boot under TCG loads the kernel through
/// SeaBIOS and SYSLINUX, which on two cores shared with the rest of the suite has been seen
/// to print nothing past SYSLINUX's banner for over 180 s.
const BOOT: Duration = Duration::from_secs(360);
/// The tests that boot guests run one at a time: TCG guests on 2 cores.
static BOOTING: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    BOOTING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asserts that `kubectl get KIND NAME` finds nothing (NotFound, not any other failure).
fn assert_gone(platform: &Platform, kind: &str, name: &str) {
    let out = platform.kubectl(&["get", kind, name], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("NotFound"),
        "{kind} {name} is still there: {}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
}
const STOP: Duration = Duration::from_secs(60);

fn vm_yaml(name: &str, strategy: &str, url: &str) -> String {
    format!(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  dataVolumeTemplates:
  - metadata:
      name: {name}-root
    spec:
      source:
        http:
          url: "{url}"
      storage:
        resources:
          requests:
            storage: 128Mi
  template:
    metadata:
      labels:
        app: {name}
    spec:
      terminationGracePeriodSeconds: 20
      domain:
        resources:
          requests:
            memory: 256Mi
        devices:
          disks:
          - name: root
            disk:
              bus: virtio
      volumes:
      - name: root
        dataVolume:
          name: {name}-root
"#
    )
}

fn ferrovirt(platform: &Platform) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferrovirt"));
    command.env("KUBECONFIG", platform.kubeconfig());
    command
}

/// Runs a `ferrovirt` verb; its stdout, or its stderr as the error.
fn verb(platform: &Platform, args: &[&str]) -> Result<String, String> {
    let out = ferrovirt(platform).args(args).output().expect("ferrovirt");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn printable(vm: &Value) -> &str {
    vm["status"]["printableStatus"].as_str().unwrap_or("")
}

fn vmi_phase(vmi: &Value) -> &str {
    vmi["status"]["phase"].as_str().unwrap_or("")
}

/// `ferrovirt console NAME`, its output collected.
struct Console {
    child: Child,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Console {
    fn open(platform: &Platform, name: &str) -> Console {
        let mut child = ferrovirt(platform)
            .args(["console", name, "--timeout", "30"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ferrovirt console");
        let seen = Arc::new(Mutex::new(Vec::new()));
        // Its errors go with what it showed, so that a failed attach says why.
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        for mut output in [Box::new(stdout) as Box<dyn Read + Send>, Box::new(stderr)] {
            let sink = seen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = output.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().expect("lock").extend_from_slice(&buf[..n]);
                }
            });
        }
        Console { child, seen }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().expect("lock")).into_owned()
    }

    fn send(&mut self, text: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(text.as_bytes()).expect("write");
        stdin.flush().expect("flush");
    }

    /// Waits until `needle` shows, pressing Enter now and then (a console attached after
    /// the prompt was printed shows it again).
    fn wait_for(&mut self, needle: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut poke = Instant::now();
        while !self.text().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "{needle:?} not on the console within {limit:?}; it shows:\n{}",
                self.text()
            );
            if poke.elapsed() > Duration::from_secs(3) {
                self.send("\n");
                poke = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Logs in as root (no password) and runs `command`, waiting for `expect`.
    fn run(&mut self, command: &str, expect: &str) {
        self.wait_for("login:", BOOT);
        self.send("root\n");
        self.wait_for("# ", Duration::from_secs(30));
        self.send(&format!("{command}\n"));
        self.wait_for(expect, Duration::from_secs(30));
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        // Ctrl+] leaves; kill in case it did not.
        if let Some(stdin) = self.child.stdin.as_mut() {
            let _ = stdin.write_all(&[0x1d]);
        }
        std::thread::sleep(Duration::from_millis(200));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn qemu_processes_of(platform: &Platform) -> usize {
    let data = platform.data_dir().display().to_string();
    let out = Command::new("pgrep")
        .args(["-f", "qemu-system"])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|pid| {
            std::fs::read(format!("/proc/{}/cmdline", pid.trim()))
                .map(|c| String::from_utf8_lossy(&c).contains(&data))
                .unwrap_or(false)
        })
        .count()
}

#[test]
fn a_vmi_on_a_data_volume_runs_pauses_and_stops_on_delete() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("vmi-dv");
    let url = server.url(fast_guest_qcow2());
    platform.apply(&format!(
        r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: disk
spec:
  source:
    http:
      url: "{url}"
  storage:
    resources:
      requests:
        storage: 128Mi
---
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: fast
  labels:
    app: fast
spec:
  domain:
    resources:
      requests:
        memory: 256Mi
    devices:
      disks:
      - name: root
        disk:
          bus: virtio
  volumes:
  - name: root
    dataVolume:
      name: disk
"#
    ));
    let vmi = platform.wait_json(
        &["get", "vmi", "fast"],
        BOOT,
        "the VMI is not Running",
        |v| vmi_phase(v) == "Running",
    );
    assert_eq!(
        condition(&vmi, "Ready").expect("Ready")["status"],
        "True",
        "{vmi:#}"
    );
    assert_eq!(
        condition(&vmi, "LiveMigratable").expect("LiveMigratable")["reason"],
        "DisksNotLiveMigratable"
    );
    assert_eq!(
        vmi["metadata"]["finalizers"][0],
        "foregroundDeleteVirtualMachine"
    );
    let node = vmi["status"]["nodeName"]
        .as_str()
        .expect("a node")
        .to_owned();
    assert_eq!(
        vmi["metadata"]["labels"]["kubevirt.io/nodeName"],
        node.as_str()
    );
    let phases: Vec<&str> = vmi["status"]["phaseTransitionTimestamps"]
        .as_array()
        .expect("phase transitions")
        .iter()
        .filter_map(|t| t["phase"].as_str())
        .collect();
    assert_eq!(
        &phases[..3],
        ["Pending", "Scheduling", "Scheduled"],
        "{vmi:#}"
    );
    // The launcher pod, in KubeVirt's shape.
    let uid = vmi["metadata"]["uid"].as_str().expect("uid");
    let pods = platform
        .json(&[
            "get",
            "pods",
            "-l",
            &format!("kubevirt.io/created-by={uid}"),
        ])
        .expect("pods");
    let pod = &pods["items"][0];
    assert_eq!(pod["metadata"]["labels"]["kubevirt.io"], "virt-launcher");
    assert_eq!(pod["metadata"]["labels"]["app"], "fast");
    assert_eq!(pod["spec"]["containers"][0]["name"], "compute");
    // The pod network as virt-api defaults it, reached at the pod's address (masquerade).
    assert_eq!(vmi["spec"]["networks"][0]["name"], "default");
    assert_eq!(
        vmi["status"]["interfaces"][0]["ipAddress"], pod["status"]["podIP"],
        "{vmi:#}"
    );
    assert_eq!(pod["spec"]["nodeName"], node.as_str());
    assert_eq!(
        pod["spec"]["containers"][0]["volumeMounts"][1]["mountPath"],
        "/var/run/kubevirt-private/vmi-disks/root"
    );

    let mut console = Console::open(&platform, "fast");
    console.wait_for("login:", BOOT);
    drop(console);

    assert_eq!(
        verb(&platform, &["pause", "vmi", "fast"]),
        Ok("VMI fast was scheduled to pause\n".into())
    );
    platform.wait_json(&["get", "vmi", "fast"], STOP, "no Paused condition", |v| {
        condition(v, "Paused").is_some_and(|c| c["reason"] == "PausedByUser")
    });
    let again = verb(&platform, &["pause", "vmi", "fast"]).expect_err("a second pause");
    assert!(again.contains("Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io \"fast\": VMI is already paused"), "{again}");
    verb(&platform, &["unpause", "vmi", "fast"]).expect("unpause");
    platform.wait_json(&["get", "vmi", "fast"], STOP, "still Paused", |v| {
        condition(v, "Paused").is_none()
    });
    let not_paused = verb(&platform, &["unpause", "vmi", "fast"]).expect_err("unpause twice");
    assert!(not_paused.contains("VMI is not paused"), "{not_paused}");
    let no_agent =
        verb(&platform, &["guestosinfo", "fast"]).expect_err("no agent in the fast guest");
    assert!(
        no_agent.contains("VMI does not have guest agent connected"),
        "{no_agent}"
    );
    let missing = verb(&platform, &["pause", "vmi", "nothing"]).expect_err("no such VMI");
    assert!(missing.contains("\"nothing\" not found"), "{missing}");

    // Deleting the VMI powers the guest off and takes the launcher with it.
    let started = Instant::now();
    platform.ok(&["delete", "vmi", "fast", "--timeout=60s"]);
    eprintln!("VMI deleted in {:?}", started.elapsed());
    assert_gone(&platform, "vmi", "fast");
    let pods = platform.ok(&["get", "pods", "-o", "name"]);
    assert!(!pods.contains("virt-launcher-fast"), "{pods}");
    assert_eq!(qemu_processes_of(&platform), 0, "QEMU outlived its VMI");
}

#[test]
fn a_vmi_with_a_missing_claim_waits_and_an_unsupported_field_fails_by_name() {
    let platform = Platform::start("vmi-bad");
    platform.apply(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: orphan
spec:
  domain:
    devices: {}
  volumes:
  - name: root
    persistentVolumeClaim:
      claimName: nowhere
"#,
    );
    let vmi = platform.wait_json(
        &["get", "vmi", "orphan"],
        STOP,
        "no FailedPvcNotFound",
        |v| condition(v, "Synchronized").is_some_and(|c| c["reason"] == "FailedPvcNotFound"),
    );
    assert_eq!(vmi_phase(&vmi), "Pending");
    assert_eq!(
        condition(&vmi, "Synchronized").expect("condition")["message"],
        "PVC default/nowhere does not exist, waiting for it to appear"
    );
    let pods = platform.ok(&["get", "pods", "-o", "name"]);
    assert!(
        pods.trim().is_empty(),
        "no launcher pod without its claim: {pods}"
    );
    // The console waits for a VMI that is not running yet, not for one that does not exist.
    let asked = Instant::now();
    let missing = verb(&platform, &["console", "nope", "--timeout", "30"]).expect_err("no VMI");
    assert!(missing.contains("\"nope\" not found"), "{missing}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    platform.ok(&["delete", "vmi", "orphan", "--timeout=30s"]);
}

#[test]
fn a_vm_imports_its_disk_boots_and_follows_stop_start_restart_and_delete() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("vm-life");
    platform.apply(&vm_yaml("web", "Always", &server.url(fast_guest_qcow2())));
    // Never Stopped while it comes up: Provisioning, Starting, then Running.
    let mut seen = Vec::new();
    let vm = platform.wait_json(&["get", "vm", "web"], BOOT, "the VM is not Running", |vm| {
        let status = printable(vm).to_owned();
        if !status.is_empty() && seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        status == "Running"
    });
    eprintln!("printable statuses: {seen:?}");
    assert!(!seen.iter().any(|s| s == "Stopped"), "{seen:?}");
    assert_eq!(vm["status"]["ready"], true, "{vm:#}");
    let dv = platform
        .json(&["get", "dv", "web-root"])
        .expect("the DataVolume");
    assert_eq!(
        dv["metadata"]["ownerReferences"][0]["kind"],
        "VirtualMachine"
    );
    assert_eq!(
        dv["metadata"]["labels"]["kubevirt.io/created-by"],
        vm["metadata"]["uid"]
    );
    let first = platform.json(&["get", "vmi", "web"]).expect("the VMI");
    assert_eq!(first["metadata"]["ownerReferences"][0]["name"], "web");

    // A write to the disk survives a stop and a start.
    let mut console = Console::open(&platform, "web");
    console.run(
        "echo FV-MARKER-1 | dd of=/dev/vda bs=512 seek=130000 conv=fsync && echo WROTE-\"OK\"",
        "WROTE-OK",
    );
    drop(console);
    let again = verb(&platform, &["start", "web"]).expect_err("start while running");
    assert!(again.contains("VM is already running"), "{again}");
    assert_eq!(
        verb(&platform, &["stop", "web"]),
        Ok("VM web was scheduled to stop\n".into())
    );
    platform.wait_json(&["get", "vm", "web"], STOP, "the VM is not Stopped", |vm| {
        printable(vm) == "Stopped"
    });
    assert_gone(&platform, "vmi", "web");
    assert_eq!(qemu_processes_of(&platform), 0, "QEMU outlived its VMI");
    let stopped = verb(&platform, &["stop", "web"]).expect_err("stop while stopped");
    assert!(stopped.contains("VM is not running"), "{stopped}");
    let halted = verb(&platform, &["pause", "vm", "web"]).expect_err("pause while stopped");
    assert!(
        halted.contains(
            "Error pausing VirtualMachineInstance web. VirtualMachine web is not set to run"
        ),
        "{halted}"
    );
    let missing = verb(&platform, &["pause", "vm", "nope"]).expect_err("pause of no VM");
    assert!(
        missing.contains("Error getting VirtualMachine nope"),
        "{missing}"
    );
    verb(&platform, &["start", "web"]).expect("start");
    platform.wait_json(&["get", "vm", "web"], BOOT, "not Running again", |vm| {
        printable(vm) == "Running"
    });
    let mut console = Console::open(&platform, "web");
    console.run(
        "dd if=/dev/vda bs=512 skip=130000 count=1 2>/dev/null | head -c 11; echo",
        "FV-MARKER-1",
    );
    drop(console);

    // restart: a new instance.
    let before = platform.json(&["get", "vmi", "web"]).expect("the VMI");
    verb(&platform, &["restart", "web"]).expect("restart");
    let after = platform.wait_json(&["get", "vmi", "web"], BOOT, "no new Running VMI", |vmi| {
        vmi["metadata"]["uid"] != before["metadata"]["uid"] && vmi_phase(vmi) == "Running"
    });
    assert_ne!(after["metadata"]["uid"], first["metadata"]["uid"]);

    // A dry run changes nothing; a guest that ignores the power button keeps a stop waiting
    // for its grace period (20 s) until a forced stop with none ends it at once.
    assert_eq!(
        verb(&platform, &["stop", "web", "--dry-run"]),
        Ok("VM web was scheduled to stop (dry run)\n".into())
    );
    let mut console = Console::open(&platform, "web");
    console.run("killall acpid && echo ACPI-\"OFF\"", "ACPI-OFF");
    drop(console);
    assert_eq!(
        vmi_phase(&platform.json(&["get", "vmi", "web"]).expect("the VMI")),
        "Running"
    );
    verb(&platform, &["stop", "web"]).expect("stop");
    std::thread::sleep(Duration::from_secs(2));
    let forced = Instant::now();
    verb(
        &platform,
        &["stop", "web", "--grace-period", "0", "--force"],
    )
    .expect("forced stop");
    platform.wait_json(&["get", "vm", "web"], STOP, "the VM is not Stopped", |vm| {
        printable(vm) == "Stopped"
    });
    assert!(
        forced.elapsed() < Duration::from_secs(12),
        "a forced stop took {:?}",
        forced.elapsed()
    );

    // Deleting the VM takes its instance and its DataVolume.
    platform.ok(&["delete", "vm", "web", "--timeout=90s"]);
    let deadline = Instant::now() + STOP;
    while platform.json(&["get", "dv", "web-root"]).is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_gone(&platform, "dv", "web-root");
    assert_gone(&platform, "vmi", "web");
    assert_eq!(qemu_processes_of(&platform), 0);
}

/// Kills the QEMU of the VMI `name` (in namespace `default`) with SIGKILL.
fn kill_qemu(platform: &Platform, name: &str) {
    let data = platform.data_dir().display().to_string();
    let out = Command::new("pgrep")
        .args(["-f", &format!("guest=default_{name}")])
        .output()
        .expect("pgrep");
    let mut killed = 0;
    for pid in String::from_utf8_lossy(&out.stdout).lines() {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&data) {
            let status = Command::new("kill").args(["-9", pid.trim()]).status();
            killed += usize::from(status.is_ok_and(|s| s.success()));
        }
    }
    assert_eq!(killed, 1, "one QEMU for {name}");
}

fn running_uid(platform: &Platform, name: &str) -> String {
    let vmi = platform.wait_json(&["get", "vmi", name], BOOT, "the VMI is not Running", |v| {
        vmi_phase(v) == "Running"
    });
    vmi["metadata"]["uid"].as_str().expect("uid").to_owned()
}

#[test]
fn run_strategies_decide_what_follows_an_instances_end() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("vm-strategies");
    let url = server.url(fast_guest_qcow2());
    for (name, strategy) in [
        ("rerun", "RerunOnFailure"),
        ("once", "Once"),
        ("always", "Always"),
    ] {
        platform.apply(&vm_yaml(name, strategy, &url));
    }
    let rerun = running_uid(&platform, "rerun");
    let once = running_uid(&platform, "once");
    let always = running_uid(&platform, "always");

    // A crash (QEMU killed): RerunOnFailure starts a new instance, Once does not.
    kill_qemu(&platform, "rerun");
    kill_qemu(&platform, "once");
    platform.wait_json(&["get", "vmi", "rerun"], BOOT, "no new rerun VMI", |v| {
        v["metadata"]["uid"].as_str().is_some_and(|u| u != rerun) && vmi_phase(v) == "Running"
    });
    let failed = platform.wait_json(&["get", "vmi", "once"], BOOT, "once did not fail", |v| {
        vmi_phase(v) == "Failed"
    });
    assert_eq!(failed["metadata"]["uid"], once.as_str());
    assert!(
        failed["status"]["reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("crashed"),
        "{failed:#}"
    );
    std::thread::sleep(Duration::from_secs(5));
    let still = platform
        .json(&["get", "vmi", "once"])
        .expect("the failed VMI stays");
    assert_eq!(
        still["metadata"]["uid"],
        once.as_str(),
        "Once never restarts"
    );
    let vm = platform.json(&["get", "vm", "once"]).expect("vm");
    assert_eq!(printable(&vm), "Stopped", "{vm:#}");

    // A guest power-off: Always starts a new instance.
    let mut console = Console::open(&platform, "always");
    console.run("poweroff -f", "reboot: Power down");
    drop(console);
    platform.wait_json(&["get", "vmi", "always"], BOOT, "no new always VMI", |v| {
        v["metadata"]["uid"].as_str().is_some_and(|u| u != always) && vmi_phase(v) == "Running"
    });
}

/// `ferrovirt port-forward --stdio TARGET PORT` with stdin kept open; what it printed once
/// `needle` shows (or the time runs out).
/// `ferrovirt ssh root@TARGET -i IDENTITY -c COMMAND`, asking nothing; its stdout. The test
/// fails with both streams when ssh does.
fn ssh_as_root(
    platform: &Platform,
    target: &str,
    identity: &std::path::Path,
    command: &str,
) -> String {
    let out = ferrovirt(platform)
        .args(["ssh", &format!("root@{target}"), "-i"])
        .arg(identity)
        .args([
            "--local-ssh-opts=-oStrictHostKeyChecking=no",
            "--local-ssh-opts=-oUserKnownHostsFile=/dev/null",
            "--local-ssh-opts=-oBatchMode=yes",
            "-c",
            command,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("ferrovirt ssh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ssh: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn forward_stdio(
    platform: &Platform,
    target: &str,
    port: &str,
    send: &[u8],
    needle: &str,
) -> String {
    let mut child = ferrovirt(platform)
        .args(["port-forward", "--stdio", target, port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferrovirt port-forward");
    child
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(send)
        .expect("write");
    let mut stdout = child.stdout.take().expect("stdout");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().expect("lock").extend_from_slice(&buf[..n]);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = || String::from_utf8_lossy(&seen.lock().expect("lock")).into_owned();
    while !text().contains(needle) && Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let output = child.wait_with_output().expect("port-forward's end");
    let out = text();
    assert!(
        out.contains(needle),
        "{needle:?} not forwarded; stdout:\n{out}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

#[test]
fn port_forward_and_ssh_reach_the_guest_and_the_vm_outlives_down_and_up() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let mut platform = Platform::start("vm-forward");
    // No ports listed on the masquerade interface: port-forward still reaches any port.
    platform.apply(&vm_yaml("fwd", "Always", &server.url(fast_guest_qcow2())));
    running_uid(&platform, "fwd");
    let key = ferrovirt_tests::TempDir::new("ssh-key");
    let identity = key.join("id");
    let keygen = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&identity)
        .status()
        .expect("ssh-keygen");
    assert!(keygen.success());
    let public = std::fs::read_to_string(key.join("id.pub")).expect("the public key");
    let mut console = Console::open(&platform, "fwd");
    console.run("httpd -p 8080 -h /www && echo HTTPD-\"UP\"", "HTTPD-UP");
    console.send(
        "echo FV-MARKER-2 | dd of=/dev/vda bs=512 seek=130001 conv=fsync && echo WROTE-\"OK\"\n",
    );
    console.wait_for("WROTE-OK", Duration::from_secs(30));
    console.send(&format!(
        "echo '{}' > /root/.ssh/authorized_keys && dropbear -R -p 22 && echo SSHD-\"UP\"\n",
        public.trim()
    ));
    console.wait_for("SSHD-UP", Duration::from_secs(30));
    drop(console);

    // stdin/stdout, to the VM and to its instance.
    let request = b"GET /index.html HTTP/1.0\r\n\r\n";
    for target in ["vm/fwd", "vmi/fwd/default"] {
        let answer = forward_stdio(&platform, target, "8080", request, "ferrovirt fastguest");
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    }

    // A local port: each connection is a tunnel of its own.
    let mut listening = ferrovirt(&platform)
        .args(["port-forward", "vmi/fwd", "0:8080"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferrovirt port-forward");
    let mut stderr = std::io::BufReader::new(listening.stderr.take().expect("stderr"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).expect("its first line");
    let local = line
        .strip_prefix("forwarding tcp ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    for _ in 0..2 {
        let mut tcp = std::net::TcpStream::connect(&local).expect("the forwarded port");
        tcp.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        tcp.write_all(request).expect("request");
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).expect("the answer");
        assert!(answer.contains("ferrovirt fastguest"), "{answer}");
    }
    let _ = listening.kill();
    let _ = listening.wait();

    // vnc --proxy-only: a local port speaking the display's RFB.
    let mut vnc = ferrovirt(&platform)
        .args(["vnc", "fwd", "--proxy-only"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ferrovirt vnc");
    let mut first_line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(vnc.stdout.take().expect("stdout")),
        &mut first_line,
    )
    .expect("its port");
    let port: Value = serde_json::from_str(&first_line).expect("{\"port\": N}");
    let mut display =
        std::net::TcpStream::connect(("127.0.0.1", port["port"].as_u64().expect("port") as u16))
            .expect("the VNC port");
    display
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut banner = [0u8; 12];
    display.read_exact(&mut banner).expect("the RFB banner");
    assert_eq!(&banner, b"RFB 003.008\n");
    let _ = vnc.kill();
    let _ = vnc.wait();

    // ssh: the system's ssh with port-forward as its ProxyCommand.
    let stdout = ssh_as_root(
        &platform,
        "vm/fwd",
        &identity,
        "echo logged-in-as-$(whoami)-on-$(hostname)",
    );
    assert!(
        stdout.contains("logged-in-as-root-on-fastguest"),
        "{stdout}"
    );

    // soft-reboot with no guest agent: the power button, and the machine reset when the
    // guest has powered off; the same instance boots again.
    let uid = running_uid(&platform, "fwd");
    let mut console = Console::open(&platform, "fwd");
    assert_eq!(
        verb(&platform, &["soft-reboot", "fwd"]),
        Ok("VMI fwd was scheduled to softreboot\n".into())
    );
    console.wait_for("FERROVIRT-GUEST-READY", BOOT);
    drop(console);
    assert_eq!(
        running_uid(&platform, "fwd"),
        uid,
        "a reboot keeps the instance"
    );

    // Refusals name the problem.
    let missing = verb(&platform, &["port-forward", "--stdio", "vm/nope", "80"])
        .expect_err("a VM that does not exist");
    assert!(missing.contains("\"nope\" not found"), "{missing}");
    verb(&platform, &["pause", "vmi", "fwd"]).expect("pause");
    platform.wait_json(&["get", "vmi", "fwd"], STOP, "not Paused", |v| {
        condition(v, "Paused").is_some_and(|c| c["status"] == "True")
    });
    let paused =
        verb(&platform, &["port-forward", "--stdio", "vmi/fwd", "8080"]).expect_err("a paused VMI");
    assert!(paused.contains("VMI is paused"), "{paused}");
    let closed =
        verb(&platform, &["port-forward", "--stdio", "vm/fwd", "udp/53"]).expect_err("udp");
    assert!(closed.contains("udp is not supported"), "{closed}");

    // Down, with the guest paused (it cannot obey the power button): the node's shutdown
    // grace ends it, and nothing stays mounted. Up again: Always brings the VM back with
    // its disk as it was.
    let before = running_uid(&platform, "fwd");
    platform.stop();
    assert_eq!(
        platform.mounts(),
        Vec::<String>::new(),
        "mounts left after down"
    );
    assert_eq!(qemu_processes_of(&platform), 0, "QEMU outlived down");
    platform.stop_and_restart();
    // Right after up the store may still show the old instance as it was at down, until
    // the controllers see its launcher gone: wait for the new one.
    platform.wait_json(
        &["get", "vmi", "fwd"],
        BOOT,
        "no new instance Running after up",
        |v| vmi_phase(v) == "Running" && v["metadata"]["uid"] != before.as_str(),
    );
    let mut console = Console::open(&platform, "fwd");
    console.run(
        "dd if=/dev/vda bs=512 skip=130001 count=1 2>/dev/null | head -c 11; echo",
        "FV-MARKER-2",
    );
}

#[test]
fn create_vm_prints_a_vm_that_imports_its_disk_and_boots() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("vm-create");
    let import = format!(
        "--volume-import=type:http,url:{},size:128Mi,name:root,bootorder:1",
        server.url(fast_guest_qcow2())
    );
    let manifest = verb(
        &platform,
        &[
            "create", "vm", "--name", "made", "--memory", "256Mi", &import,
        ],
    )
    .expect("create vm");
    platform.apply(&manifest);
    running_uid(&platform, "made");
    let vm = platform.json(&["get", "vm", "made"]).expect("the VM");
    assert_eq!(
        vm["spec"]["dataVolumeTemplates"][0]["metadata"]["name"],
        "root"
    );
    let mut console = Console::open(&platform, "made");
    console.run("echo MADE-$((40+2))", "MADE-42");
    let refused = verb(
        &platform,
        &["create", "vm", "--volume-import=type:http,url:http://x"],
    )
    .expect_err("no size");
    assert!(refused.contains("size must be specified"), "{refused}");
}

/// `status.startFailure`'s count and how far its retry time is from now, in seconds.
fn start_failure(vm: &Value) -> Option<(u64, i64)> {
    let record = &vm["status"]["startFailure"];
    let count = record["consecutiveFailCount"].as_u64()?;
    let retry = record["retryAfterTimestamp"].as_str()?;
    let retry: i64 = Command::new("date")
        .args(["-d", retry, "+%s"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    Some((count, retry - now))
}

#[test]
fn a_failed_import_shows_data_volume_error_and_failing_starts_back_off_longer_each_time() {
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("vm-failures");
    platform.apply(&vm_yaml(
        "lost",
        "Always",
        &server.url("no-such-image.qcow2"),
    ));
    // A clock the launcher refuses: each instance fails at start.
    platform.apply(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: looping
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        devices: {}
        clock:
          timezone: Europe/Paris
        resources:
          requests:
            memory: 64Mi
"#,
    );
    let lost = platform.wait_json(&["get", "vm", "lost"], BOOT, "no DataVolumeError", |vm| {
        printable(vm) == "DataVolumeError"
    });
    assert!(platform.json(&["get", "vmi", "lost"]).is_none(), "{lost:#}");

    let first = platform.wait_json(
        &["get", "vm", "looping"],
        STOP,
        "no CrashLoopBackOff",
        |vm| printable(vm) == "CrashLoopBackOff" && start_failure(vm).is_some_and(|f| f.0 == 1),
    );
    let (_, first_delay) = start_failure(&first).expect("a start failure");
    let second = platform.wait_json(&["get", "vm", "looping"], STOP, "no second failure", |vm| {
        start_failure(vm).is_some_and(|f| f.0 == 2)
    });
    let (_, second_delay) = start_failure(&second).expect("a start failure");
    assert!(
        (1..=20).contains(&first_delay) && second_delay > first_delay + 15,
        "the delay does not grow: {first_delay}s then {second_delay}s\n{second:#}"
    );
}

/// The guest agent through the platform: a Debian guest whose disk a DataVolume imports
/// applies its cloud-init user data; virt-handler reports the agent (AgentConnected, the
/// OS on the VMI) and guestosinfo, userlist and fslist answer from it.
#[test]
fn a_debian_vm_applies_cloud_init_and_its_guest_agent_answers_the_verbs() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("vm-agent");
    // Credentials the guest agent puts in: a key for root and root's password.
    platform.apply(
        r#"apiVersion: v1
kind: Secret
metadata:
  name: agent-keys
stringData:
  key1: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBoyJU6tjSudMNLxjbvcN+68n8luobqr9kgk6Rbd0xG0 agent@test
---
apiVersion: v1
kind: Secret
metadata:
  name: agent-passwords
stringData:
  root: agent-set-password
"#,
    );
    platform.apply(&format!(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: deb
spec:
  runStrategy: Always
  dataVolumeTemplates:
  - metadata:
      name: deb-root
    spec:
      source:
        http:
          url: "{}"
      storage:
        resources:
          requests:
            storage: 3Gi
  template:
    spec:
      accessCredentials:
      - sshPublicKey:
          source:
            secret:
              secretName: agent-keys
          propagationMethod:
            qemuGuestAgent:
              users: [root]
      - userPassword:
          source:
            secret:
              secretName: agent-passwords
          propagationMethod:
            qemuGuestAgent: {{}}
      domain:
        cpu:
          cores: 2
        resources:
          requests:
            memory: 1Gi
        devices:
          disks:
          - name: root
            disk:
              bus: virtio
          - name: cloudinit
            disk:
              bus: virtio
      volumes:
      - name: root
        dataVolume:
          name: deb-root
      - name: cloudinit
        cloudInitNoCloud:
          userData: |
            #cloud-config
            hostname: deb-on-platform
"#,
        server.url(debian_guest_qcow2())
    ));
    let vmi = platform.wait_json(
        &["get", "vmi", "deb"],
        Duration::from_secs(420),
        "the guest agent never connected",
        |v| condition(v, "AgentConnected").is_some_and(|c| c["status"] == "True"),
    );
    let info = platform.wait_json(
        &["get", "vmi", "deb"],
        Duration::from_secs(60),
        "no guestOSInfo on the VMI",
        |v| v["status"]["guestOSInfo"]["id"] == "debian",
    );
    eprintln!(
        "agent connected; VMI status: {:#}",
        info["status"]["guestOSInfo"]
    );
    assert_eq!(vmi_phase(&vmi), "Running");
    // The real agent took the key (root exists: guest-ssh-add-authorized-keys wrote root's
    // authorized_keys) and the password.
    let synced = platform.wait_json(
        &["get", "vmi", "deb"],
        Duration::from_secs(60),
        "the access credentials were not synchronized",
        |v| condition(v, "AccessCredentialsSynchronized").is_some_and(|c| c["status"] == "True"),
    );
    eprintln!(
        "credentials: {:#}",
        condition(&synced, "AccessCredentialsSynchronized").unwrap_or(&Value::Null)
    );

    let os: Value =
        serde_json::from_str(&verb(&platform, &["guestosinfo", "deb"]).expect("guestosinfo"))
            .expect("JSON");
    assert_eq!(os["os"]["id"], "debian", "{os:#}");
    assert_eq!(
        os["hostname"], "deb-on-platform",
        "cloud-init set the host name: {os:#}"
    );
    let filesystems: Value =
        serde_json::from_str(&verb(&platform, &["fslist", "deb"]).expect("fslist")).expect("JSON");
    assert!(
        filesystems["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|f| f["mountPoint"] == "/")),
        "{filesystems:#}"
    );
    let users: Value =
        serde_json::from_str(&verb(&platform, &["userlist", "deb"]).expect("userlist"))
            .expect("JSON");
    assert!(users["items"].is_array(), "{users:#}");
}

/// `ferrovirt up --insecure-registry HOST`: a containerDisk pulled over plain HTTP from a
/// local registry boots.
#[test]
fn a_container_disk_from_an_insecure_registry_boots_on_up() {
    let _booting = one_at_a_time();
    let registry = RegistryServer::start(RegistryServerOptions::default());
    let layout = OciLayout::image(&ImageSpec::new(
        "linux/amd64",
        vec![LayerSpec::disk_file(
            LayerCompression::Gzip,
            &guest("fast").join("disk.img"),
        )],
    ));
    registry.push(&layout, "disks/fast:v1");
    let host = registry.host();
    let platform = Platform::start_with("vm-registry", &["--insecure-registry", &host]);
    platform.apply(&format!(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: cdisk
spec:
  domain:
    resources:
      requests:
        memory: 256Mi
    devices:
      disks:
      - name: root
        disk:
          bus: virtio
  volumes:
  - name: root
    containerDisk:
      image: {host}/disks/fast:v1
"#
    ));
    platform.wait_json(
        &["get", "vmi", "cdisk"],
        BOOT,
        "the containerDisk VMI is not Running",
        |v| vmi_phase(v) == "Running",
    );
    let mut console = Console::open(&platform, "cdisk");
    console.run("echo CDISK-$((40+2))", "CDISK-42");
}

/// One of KubeVirt's components as a separate process acting as its service account of
/// deploy/virt/rbac.yaml (the embedded server's admin kubeconfig impersonating it, so a
/// call its ClusterRole misses fails); killed on drop, its output in a file of the data
/// directory.
struct Component {
    child: Child,
    log: std::path::PathBuf,
}

impl Component {
    fn start(platform: &Platform, command: &str, account: &str, args: &[&str]) -> Component {
        Self::start_as(platform, command, "kubevirt", account, args)
    }

    /// `ferrovirt COMMAND ARGS` as service account `namespace/account`.
    fn start_as(
        platform: &Platform,
        command: &str,
        namespace: &str,
        account: &str,
        args: &[&str],
    ) -> Component {
        let admin = std::fs::read_to_string(platform.kubeconfig()).expect("the kubeconfig");
        let impersonating = admin.replacen(
            "  user:\n",
            &format!("  user:\n    as: system:serviceaccount:{namespace}:{account}\n"),
            1,
        );
        assert_ne!(admin, impersonating, "the kubeconfig has a user");
        let kubeconfig = platform.data_dir().join(format!("{command}.kubeconfig"));
        std::fs::write(&kubeconfig, impersonating).expect("writing a kubeconfig");
        let log = platform.data_dir().join(format!("{command}.log"));
        let out = std::fs::File::create(&log).expect("a log file");
        let child = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
            .arg(command)
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .stdout(out.try_clone().expect("the log file"))
            .stderr(out)
            .spawn()
            .expect("starting a component");
        Component { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- {}:\n{}", self.log.display(), self.log());
        }
    }
}

/// A kubeconfig of the platform's that acts as `user`.
fn kubeconfig_as(platform: &Platform, user: &str) -> std::path::PathBuf {
    let admin = std::fs::read_to_string(platform.kubeconfig()).expect("the kubeconfig");
    let path = platform.data_dir().join(format!("{user}.kubeconfig"));
    let impersonating = admin.replacen("  user:\n", &format!("  user:\n    as: {user}\n"), 1);
    std::fs::write(&path, impersonating).expect("writing a kubeconfig");
    path
}

/// An AdmissionReview posted to virt-api's webhook at `path`, and its answer (status 200).
fn post_review(port: u16, path: &str, review: &Value) -> Value {
    let (code, body) = curl_virt_api(
        port,
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            &review.to_string(),
        ],
        path,
    );
    assert_eq!(code, "200", "{body}");
    serde_json::from_str(&body).expect("an AdmissionReview")
}

/// `curl` to virt-api itself (its certificate is not checked): the status code and body.
fn curl_virt_api(port: u16, args: &[&str], path: &str) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sk", "-w", "\n%{http_code}"])
        .args(args)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.to_owned(), body.to_owned())
}

#[test]
fn the_virt_components_run_a_vm_as_on_a_cluster() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    // The "cluster": the embedded API server, the node agent as its kubelet, CDI.
    let platform = Platform::start_with("virt-cluster", &["--no-virt"]);
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/virt");
    platform.ok(&["apply", "-f", &format!("{deploy}/rbac.yaml")]);
    // virt-api.yaml but its Deployment (the process below stands for its pod), and the
    // Service's Endpoints, which a cluster's endpoints controller would write.
    let manifests =
        std::fs::read_to_string(format!("{deploy}/virt-api.yaml")).expect("virt-api.yaml");
    let objects: Vec<&str> = manifests
        .split("\n---\n")
        .filter(|document| !document.contains("kind: Deployment"))
        .collect();
    platform.apply(&objects.join("\n---\n"));
    let api_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    platform.apply(&format!(
        "apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: virt-api\n  namespace: kubevirt\n\
         subsets:\n- addresses:\n  - ip: 127.0.0.1\n  ports:\n  - port: {api_port}\n"
    ));
    let node = platform.ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let sockets = api::kubevirt::pod_contract::sockets_dir_under(
        &platform.data_dir().join("node/pods/{uid}/root"),
    );
    let api_listen = format!("127.0.0.1:{api_port}");
    let _components = [
        Component::start(&platform, "virt-controller", "kubevirt-controller", &[]),
        Component::start(
            &platform,
            "virt-handler",
            "kubevirt-handler",
            &[
                "--node-name",
                node.trim(),
                "--listen",
                "127.0.0.1:0",
                "--advertise-address",
                "127.0.0.1",
                "--pod-sockets-dir",
                &sockets.display().to_string(),
            ],
        ),
        Component::start(
            &platform,
            "virt-api",
            "kubevirt-apiserver",
            &["--listen", &api_listen],
        ),
    ];
    platform.wait_json(
        &["get", "apiservice", "v1.subresources.kubevirt.io"],
        Duration::from_secs(60),
        "virt-api's APIService is not Available",
        |service| condition(service, "Available").is_some_and(|c| c["status"] == "True"),
    );

    // virt-handler marks its node for launcher pods and publishes its address there.
    let node = platform.wait_json(
        &["get", "node", node.trim()],
        Duration::from_secs(30),
        "virt-handler has not marked its node",
        |node| node["metadata"]["labels"]["kubevirt.io/schedulable"] == "true",
    );
    let address = &node["metadata"]["annotations"]["ferrovirt.io/virt-handler-address"];
    assert!(
        address
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{node:#}"
    );

    platform.apply(&vm_yaml("cl", "Always", &server.url(fast_guest_qcow2())));
    platform.wait_json(&["get", "vm", "cl"], BOOT, "the VM is not Running", |vm| {
        printable(vm) == "Running"
    });
    // The console: kubectl's API server, the APIService's proxy, virt-api, virt-handler on
    // the node over mutual TLS, the launcher's serial socket.
    let mut console = Console::open(&platform, "cl");
    console.wait_for("login:", BOOT);
    drop(console);

    // A user with KubeVirt's edit role pauses and unpauses; one without any is refused.
    platform.apply(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: alice-edits-vms\n\
         roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: kubevirt.io:edit\n\
         subjects:\n- kind: User\n  name: alice\n  apiGroup: rbac.authorization.k8s.io\n",
    );
    let as_user = |user: &str, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
            .env("KUBECONFIG", kubeconfig_as(&platform, user))
            .args(args)
            .output()
            .expect("ferrovirt");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (paused, stderr) = as_user("alice", &["pause", "vm", "cl"]);
    assert!(paused, "{stderr}");
    platform.wait_json(
        &["get", "vmi", "cl"],
        STOP,
        "the VMI is not Paused",
        |vmi| condition(vmi, "Paused").is_some_and(|c| c["status"] == "True"),
    );
    let (refused, stderr) = as_user("bob", &["unpause", "vm", "cl"]);
    assert!(!refused && stderr.contains("forbidden"), "{stderr}");
    let (unpaused, stderr) = as_user("alice", &["unpause", "vm", "cl"]);
    assert!(unpaused, "{stderr}");
    platform.wait_json(
        &["get", "vmi", "cl"],
        STOP,
        "the VMI is still Paused",
        |vmi| condition(vmi, "Paused").is_none(),
    );

    // virt-api answers only the front proxy, and asks the API server about each user itself.
    let info = "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/cl/guestosinfo";
    let (code, body) = curl_virt_api(api_port, &[], info);
    assert_eq!(code, "401", "{body}");
    let data = platform.data_dir();
    let cert = data.join("front-proxy-client.crt").display().to_string();
    let key = data.join("front-proxy-client.key").display().to_string();
    let as_front_proxy = |user: &str| {
        let header = format!("X-Remote-User: {user}");
        curl_virt_api(
            api_port,
            &["--cert", &cert, "--key", &key, "-H", &header],
            info,
        )
    };
    let (code, body) = as_front_proxy("bob");
    assert_eq!(code, "403", "{body}");
    assert!(body.contains("bob"), "{body}");
    // alice may: the request reaches the guest agent, which the fast guest lacks (409).
    let (code, body) = as_front_proxy("alice");
    assert_eq!(code, "409", "{body}");
    // And virt-api serves the admission webhooks.
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE",
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachine"},
            "object": {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                "metadata": {"name": "both"},
                "spec": {"running": true, "runStrategy": "Always",
                    "template": {"spec": {"domain": {"devices": {}}}}}}},
    });
    let answer = post_review(api_port, "/virtualmachines-mutate", &review);
    assert_eq!(answer["response"]["uid"], "u-1", "{answer:#}");
    assert_eq!(answer["response"]["allowed"], false, "{answer:#}");
    let message = answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("spec.running") && message.contains("runStrategy"),
        "{message}"
    );
    // The KubeVirt CR's default machine type reaches the webhook's defaulting of VMIs, as
    // virt-api's cluster config informer carries it there (its RBAC allows the watch).
    platform.apply(
        "apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata:\n  name: kubevirt\n  namespace: kubevirt\n\
         spec:\n  configuration:\n    architectureConfiguration:\n      amd64:\n        machineType: pc\n",
    );
    let vmi_review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-2", "operation": "CREATE",
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachineInstance"},
            "object": {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {"name": "plain", "namespace": "default"},
                "spec": {"domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}}}}},
    });
    let machine_of_defaulted_vmi = || {
        let answer = post_review(api_port, "/virtualmachineinstances-mutate", &vmi_review);
        assert_eq!(answer["response"]["allowed"], true, "{answer:#}");
        let patch = answer["response"]["patch"].as_str().unwrap_or_default();
        let patch = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch)
            .expect("the patch is base64");
        let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("a JSON patch");
        let mut vmi = vmi_review["request"]["object"].clone();
        json_patch::patch(&mut vmi, &patch).expect("the patch applies");
        vmi["spec"]["domain"]["machine"]["type"].clone()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while machine_of_defaulted_vmi() != "pc" {
        assert!(
            Instant::now() < deadline,
            "the KubeVirt CR's machine type did not reach virt-api: {}",
            machine_of_defaulted_vmi()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Its feature gates too: a video device is refused without VideoConfig, in virt-api's
    // words, and admitted once the CR turns the gate on.
    let mut video_review = vmi_review.clone();
    video_review["request"]["uid"] = "u-3".into();
    video_review["request"]["object"]["spec"]["domain"]["devices"]["video"] =
        serde_json::json!({"type": "virtio"});
    let answer = post_review(api_port, "/virtualmachineinstances-mutate", &video_review);
    assert_eq!(answer["response"]["allowed"], false, "{answer:#}");
    assert_eq!(
        answer["response"]["status"]["message"],
        "Video configuration is specified but the VideoConfig feature gate is not enabled"
    );
    platform.apply(
        "apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata:\n  name: kubevirt\n  namespace: kubevirt\n\
         spec:\n  configuration:\n    developerConfiguration:\n      featureGates: [VideoConfig]\n\
         \x20   architectureConfiguration:\n      amd64:\n        machineType: pc\n",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = post_review(api_port, "/virtualmachineinstances-mutate", &video_review);
        if answer["response"]["allowed"] == true {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the KubeVirt CR's VideoConfig gate did not reach virt-api: {answer:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    verb(&platform, &["stop", "cl"]).expect("stop");
    platform.wait_json(&["get", "vm", "cl"], STOP, "the VM is not Stopped", |vm| {
        printable(vm) == "Stopped"
    });
    assert_eq!(qemu_processes_of(&platform), 0);
    // virt-controller follows the CR too (its RBAC allows the watch): the CR leaves out
    // useEmulation, so a new launcher is told to refuse TCG. (The pod itself goes as soon as
    // the VMI fails, too soon to be read here; its arguments are unit-tested.)
    platform.apply(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: strict\n\
         spec:\n  domain:\n    resources:\n      requests:\n        memory: 64Mi\n    devices: {}\n",
    );
    assert_not_emulated(&platform, "strict");
    platform.ok(&["delete", "vmi", "strict", "--timeout=60s"]);
}

/// A Linux bridge in the machine's network namespace, deleted on drop.
struct HostBridge(String);

impl HostBridge {
    fn new() -> HostBridge {
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("fvbr{}x{made}", std::process::id() % 100_000);
        let ip = |args: &[&str]| {
            let status = Command::new("ip").args(args).status().expect("ip");
            assert!(status.success(), "ip {args:?} failed");
        };
        let _ = Command::new("ip")
            .args(["link", "del", &name])
            .stderr(Stdio::null())
            .status();
        ip(&["link", "add", &name, "type", "bridge"]);
        ip(&["link", "set", &name, "up"]);
        HostBridge(name)
    }
}

impl Drop for HostBridge {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

/// A VMI with its disk from `dv` and a second NIC on the secondary network `network`.
fn vmi_on_network(name: &str, dv: &str, network: &str, mac: &str) -> String {
    vmi_on_network_with(name, dv, network, mac, None)
}

/// The same, its pod network interface given `default_mac`.
fn vmi_on_network_with(
    name: &str,
    dv: &str,
    network: &str,
    mac: &str,
    default_mac: Option<&str>,
) -> String {
    let default_mac = default_mac
        .map(|m| format!("\n        macAddress: \"{m}\""))
        .unwrap_or_default();
    format!(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
spec:
  domain:
    resources:
      requests:
        memory: 256Mi
    devices:
      disks:
      - name: root
        disk:
          bus: virtio
      interfaces:
      - name: default
        masquerade: {{}}{default_mac}
      - name: blue
        bridge: {{}}
        macAddress: "{mac}"
  networks:
  - name: default
    pod: {{}}
  - name: blue
    multus:
      networkName: {network}
  volumes:
  - name: root
    dataVolume:
      name: {dv}
"#
    )
}

/// The MAC both VMIs of the bridge network test give their pod network interface.
const SHARED_MAC: &str = "02:00:00:77:00:aa";

/// VMs on a secondary network: the bridge marker reports the machine's bridge as a node
/// resource, a NetworkAttachmentDefinition names it, the launcher pods carry Multus's
/// annotation and request the bridge, and two guests reach each other over it. A network
/// whose definition is missing, or whose bridge is not on the node, keeps its VMI from
/// starting and says why; the two guests' equal MACs on their pod networks raise the MAC
/// pool's MACCollision on both.
#[test]
fn two_vms_on_a_bridge_network_reach_each_other() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("bridge-net");
    let bridge = HostBridge::new();
    let resource = format!("bridge.network.kubevirt.io/{}", bridge.0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while capacity(&platform, "allocatable", &resource).is_none() {
        assert!(
            Instant::now() < deadline,
            "the bridge marker did not report {resource}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        capacity(&platform, "allocatable", &resource).as_deref(),
        Some("1k")
    );
    let url = server.url(fast_guest_qcow2());
    let nad = |name: &str, bridge: &str| {
        format!(
            r#"apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: {name}
  annotations:
    k8s.v1.cni.cncf.io/resourceName: bridge.network.kubevirt.io/{bridge}
spec:
  config: '{{"cniVersion": "0.3.1", "name": "{name}", "type": "cnv-bridge", "bridge": "{bridge}"}}'
"#
        )
    };
    let dv = |name: &str| {
        format!(
            r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: {name}
spec:
  source:
    http:
      url: "{url}"
  storage:
    resources:
      requests:
        storage: 128Mi
"#
        )
    };
    platform.apply(
        &[
            nad("blue-net", &bridge.0),
            nad("nowhere-net", "fvbr-absent"),
            dv("a-root"),
            dv("b-root"),
            // The same MAC by hand on both pod network interfaces (separate user-mode
            // networks, so the guests do not mind): a collision for the MAC pool.
            vmi_on_network_with(
                "a",
                "a-root",
                "blue-net",
                "02:00:00:77:00:01",
                Some(SHARED_MAC),
            ),
            vmi_on_network_with(
                "b",
                "b-root",
                "blue-net",
                "02:00:00:77:00:02",
                Some(SHARED_MAC),
            ),
            vmi_on_network("lost", "a-root", "missing-net", "02:00:00:77:00:03"),
        ]
        .join("---\n"),
    );

    // A missing definition: no launcher pod, and the reason on the VMI.
    let lost = platform.wait_json(
        &["get", "vmi", "lost"],
        Duration::from_secs(120),
        "the VMI on a missing network does not say why",
        |v| condition(v, "Synchronized").is_some(),
    );
    let synchronized = condition(&lost, "Synchronized").expect("Synchronized");
    assert_eq!(synchronized["reason"], "FailedCreate", "{lost:#}");
    assert!(
        synchronized["message"]
            .as_str()
            .unwrap_or_default()
            .ends_with("failed to locate network attachment definition default/missing-net"),
        "{lost:#}"
    );

    for name in ["a", "b"] {
        platform.wait_json(
            &["get", "vmi", name],
            BOOT,
            "the VMI on the bridge network is not Running",
            |v| vmi_phase(v) == "Running",
        );
    }
    let pods = platform
        .json(&["get", "pods", "-l", "kubevirt.io/created-by"])
        .expect("pods");
    let pod = pods["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|p| p["metadata"]["labels"]["vm.kubevirt.io/name"] == "a")
        .expect("a's launcher pod")
        .clone();
    let annotation: Value = serde_json::from_str(
        pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
            .as_str()
            .expect("the networks annotation"),
    )
    .expect("JSON");
    assert_eq!(
        annotation,
        serde_json::json!([{"name": "blue-net", "namespace": "default",
            "interface": "pod16477688c0e", "mac": "02:00:00:77:00:01"}])
    );
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["requests"][&resource],
        "1"
    );

    // kubemacpool's collision detection warns both instances.
    for name in ["a", "b"] {
        let selector = format!("involvedObject.name={name},reason=MACCollision");
        platform.wait_json(
            &["get", "events", "--field-selector", &selector],
            Duration::from_secs(30),
            "no MACCollision event",
            |events| {
                events["items"].as_array().is_some_and(|items| {
                    items.iter().any(|e| {
                        e["type"] == "Warning"
                            && e["message"]
                                .as_str()
                                .is_some_and(|m| m.contains(SHARED_MAC))
                    })
                })
            },
        );
    }

    let mut a = Console::open(&platform, "a");
    a.run(
        "ip addr add 192.168.77.1/24 dev eth1 && ip link set eth1 up && echo A-\"UP\"",
        "A-UP",
    );
    let mut b = Console::open(&platform, "b");
    b.run(
        "ip addr add 192.168.77.2/24 dev eth1 && ip link set eth1 up && ping -c 3 -W 5 192.168.77.1 && echo PING-\"OK\"",
        "PING-OK",
    );
    a.send("cat /sys/class/net/eth1/address; ping -c 2 -W 5 192.168.77.2 && echo PONG-\"OK\"\n");
    a.wait_for("PONG-OK", Duration::from_secs(30));
    assert!(a.text().contains("02:00:00:77:00:01"), "{}", a.text());
    drop((a, b));

    // A bridge the node does not have: the launcher pod is not scheduled, as kube-scheduler
    // would leave it.
    platform.apply(&vmi_on_network(
        "far",
        "b-root",
        "nowhere-net",
        "02:00:00:77:00:04",
    ));
    let far = platform.wait_json(
        &["get", "pods", "-l", "vm.kubevirt.io/name=far"],
        Duration::from_secs(60),
        "the launcher pod on a bridge the node lacks is not Unschedulable",
        |pods| {
            pods["items"][0]["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["reason"] == "Unschedulable"))
        },
    );
    let message = far["items"][0]["status"]["conditions"][0]["message"].clone();
    assert_eq!(
        message, "0/1 nodes are available: 1 Insufficient bridge.network.kubevirt.io/fvbr-absent.",
        "{far:#}"
    );

    // The bridge goes, and so does the node resource.
    platform.ok(&["delete", "vmi", "a", "b", "far", "lost", "--wait=false"]);
    drop(bridge);
    let deadline = Instant::now() + Duration::from_secs(30);
    while capacity(&platform, "allocatable", &resource).is_some() {
        assert!(
            Instant::now() < deadline,
            "the bridge marker did not remove {resource}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `status.FIELD[RESOURCE]` of the platform's Node (`capacity` or `allocatable`).
fn capacity(platform: &Platform, field: &str, resource: &str) -> Option<String> {
    let node = platform.json(&["get", "nodes"])?["items"][0].clone();
    node["status"][field][resource].as_str().map(str::to_owned)
}

/// The bridge marker as deploy/network runs it on a cluster: its own process under its
/// service account and ClusterRole, reporting a bridge made and then deleted in capacity
/// only (a cluster's kubelet copies it to allocatable), with its health probe answering.
#[test]
fn the_bridge_marker_runs_as_on_a_cluster() {
    let platform = Platform::start_with("marker-cluster", &["--no-virt"]);
    let manifests = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/network/bridge-marker.yaml"
    ))
    .expect("bridge-marker.yaml");
    let objects: Vec<&str> = manifests
        .split("\n---\n")
        .filter(|document| !document.contains("kind: DaemonSet"))
        .collect();
    platform.apply(&objects.join("\n---\n"));
    let node = platform.ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let probe_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    let marker = Component::start_as(
        &platform,
        "bridge-marker",
        "cluster-network-addons",
        "bridge-marker",
        &[
            "--node-name",
            node.trim(),
            "--update-interval",
            "1",
            "--health-probe-port",
            &probe_port,
        ],
    );
    let bridge = HostBridge::new();
    let resource = format!("bridge.network.kubevirt.io/{}", bridge.0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while capacity(&platform, "capacity", &resource).is_none() {
        assert!(
            Instant::now() < deadline,
            "the marker did not report {resource}:\n{}",
            marker.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        capacity(&platform, "capacity", &resource).as_deref(),
        Some("1k")
    );
    assert_eq!(capacity(&platform, "allocatable", &resource), None);
    let health = Command::new("curl")
        .args(["-sf", &format!("http://127.0.0.1:{probe_port}/healthz")])
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&health.stdout), "ok");
    drop(bridge);
    let deadline = Instant::now() + Duration::from_secs(30);
    while capacity(&platform, "capacity", &resource).is_some() {
        assert!(
            Instant::now() < deadline,
            "the marker did not remove {resource}:\n{}",
            marker.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The QEMU command line of the running domain whose arguments mention `needle`.
fn qemu_command_line(needle: &str) -> Option<Vec<String>> {
    let out = Command::new("pgrep")
        .args(["-f", "qemu-system"])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|pid| {
            let raw = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).ok()?;
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.iter().any(|a| a.contains(needle)).then_some(args)
        })
}

/// Waits for the VMI `name`, whose KubeVirt CR leaves out `useEmulation`, to show that it was
/// not emulated: it runs on KVM (a machine whose KVM is usable), or it failed with KubeVirt's
/// message (here, where KVM is too slow and the launcher was told to refuse TCG).
fn assert_not_emulated(platform: &Platform, name: &str) {
    let vmi = platform.wait_json(
        &["get", "vmi", name],
        BOOT,
        "the VMI neither ran nor failed",
        |v| matches!(vmi_phase(v), "Running" | "Failed"),
    );
    if vmi_phase(&vmi) == "Running" {
        let args = qemu_command_line(name).expect("the VMI's QEMU");
        assert!(args.windows(2).any(|w| w == ["-accel", "kvm"]), "{args:?}");
    } else {
        let reason = vmi["status"]["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("kvm not present and emulation is not allowed"),
            "{vmi:#}"
        );
    }
}

/// virt-operator on one machine: the active KubeVirt CR's machine type and default binding
/// reach virt-api's defaulting of a VMI that leaves them out, and the launcher's QEMU. Its
/// `useEmulation` decides whether a launcher may run the guest under TCG: without it the
/// launcher is told to refuse, and the VMI runs on KVM or fails with KubeVirt's message.
#[test]
fn the_kubevirt_crs_configuration_reaches_new_vmis_and_their_launchers() {
    let _serial = one_at_a_time();
    let platform = Platform::start("kv-config");
    platform.ok(&["create", "namespace", "kubevirt"]);
    let kubevirt = |use_emulation: bool| {
        format!(
            "apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata:
  name: kubevirt
  namespace: kubevirt
spec:
  configuration:
    developerConfiguration:
      useEmulation: {use_emulation}
    architectureConfiguration:
      amd64:
        machineType: pc
    network:
      defaultNetworkInterface: masquerade
"
        )
    };
    let vmi = |name: &str| {
        format!(
            "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
spec:
  domain:
    resources:
      requests:
        memory: 64Mi
    devices: {{}}
"
        )
    };
    // The configuration is taken before the CR is reported for its generation.
    let deployed = |platform: &Platform| {
        platform.wait_json(
            &["get", "kubevirt", "kubevirt", "-n", "kubevirt"],
            STOP,
            "the KubeVirt CR was not deployed",
            |kv| {
                kv["status"]["phase"] == "Deployed"
                    && kv["status"]["observedGeneration"] == kv["metadata"]["generation"]
            },
        )
    };
    platform.apply(&kubevirt(false));
    deployed(&platform);
    platform.apply(&vmi("strictprobe"));
    assert_not_emulated(&platform, "strictprobe");
    platform.ok(&["delete", "vmi", "strictprobe", "--timeout=60s"]);

    platform.apply(&kubevirt(true));
    deployed(&platform);
    platform.apply(&vmi("kvconfigprobe"));
    let vmi = platform
        .json(&["get", "vmi", "kvconfigprobe"])
        .expect("the VMI");
    assert_eq!(vmi["spec"]["domain"]["machine"]["type"], "pc", "{vmi:#}");
    assert_eq!(
        vmi["spec"]["domain"]["devices"]["interfaces"],
        serde_json::json!([{"name": "default", "masquerade": {}}]),
        "{vmi:#}"
    );
    let vmi = platform.wait_json(
        &["get", "vmi", "kvconfigprobe"],
        BOOT,
        "the VMI did not run",
        |v| vmi_phase(v) == "Running",
    );
    let uid = vmi["metadata"]["uid"].as_str().expect("uid");
    let args = qemu_command_line("kvconfigprobe").expect("the VMI's QEMU");
    let machine = args
        .iter()
        .position(|a| a == "-machine")
        .and_then(|i| args.get(i + 1))
        .expect("-machine");
    assert!(machine.starts_with("pc,"), "{machine} ({uid})");
    platform.ok(&["delete", "vmi", "kvconfigprobe", "--timeout=60s"]);
}

/// Merge-patches the KubeVirt CR `kubevirt/kubevirt` with `patch`.
fn merge_patch_kubevirt(platform: &Platform, patch: &str) {
    platform.ok(&[
        "patch",
        "kubevirt",
        "kubevirt",
        "-n",
        "kubevirt",
        "--type=merge",
        "-p",
        patch,
    ]);
}

/// A port free on loopback now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// virt-operator's webhooks (ValidatingWebhookConfiguration `virt-operator-validator`,
/// Service `kubevirt-operator-webhook`), asked as kube-apiserver asks them, over TLS
/// verified with the caBundle the operator keeps in the configuration: under
/// `BlockUninstallIfWorkloadsExist` the Deployed CR's deletion is refused while a VM exists
/// and allowed once it is gone; an update with no infra replicas, or with an infra
/// placement the API server refuses for a Deployment, is refused in virt-operator's words,
/// and a graduated feature gate warned about.
fn operator_webhooks_guard_the_kubevirt_cr(platform: &Platform, port: u16) {
    let configuration = platform.wait_json(
        &[
            "get",
            "validatingwebhookconfiguration",
            "virt-operator-validator",
        ],
        Duration::from_secs(30),
        "the operator's CA in its webhook configuration",
        |configuration| {
            configuration["webhooks"].as_array().is_some_and(|hooks| {
                hooks
                    .iter()
                    .all(|h| h["clientConfig"]["caBundle"].is_string())
            })
        },
    );
    let bundle = configuration["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .expect("a caBundle");
    let ca = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, bundle)
        .expect("the caBundle is base64");
    let ca_file = platform.data_dir().join("virt-operator-ca.pem");
    std::fs::write(&ca_file, ca).expect("writing the CA");
    let ask = |path: &str, operation: &str, object: &Value, old: &Value| -> Value {
        const HOST: &str = "kubevirt-operator-webhook.kubevirt.svc";
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "review-1", "operation": operation, "namespace": "kubevirt",
                "name": "kubevirt", "userInfo": {"username": "admin"},
                "resource": {"group": "kubevirt.io", "version": "v1", "resource": "kubevirts"},
                "object": object, "oldObject": old,
            },
        });
        let output = Command::new("curl")
            .args([
                "-sS",
                "--fail-with-body",
                "-H",
                "Content-Type: application/json",
            ])
            .arg("--cacert")
            .arg(&ca_file)
            .args(["--resolve", &format!("{HOST}:{port}:127.0.0.1")])
            .args(["--data-binary", &review.to_string()])
            .arg(format!("https://{HOST}:{port}{path}"))
            .output()
            .expect("running curl");
        assert!(output.status.success(), "curl: {output:?}");
        let answer: Value = serde_json::from_slice(&output.stdout).expect("an AdmissionReview");
        assert_eq!(answer["response"]["uid"], "review-1", "{answer}");
        answer["response"].clone()
    };
    merge_patch_kubevirt(
        platform,
        r#"{"spec":{"uninstallStrategy":"BlockUninstallIfWorkloadsExist"}}"#,
    );
    let kubevirt = platform
        .json(&["get", "kubevirt", "kubevirt", "-n", "kubevirt"])
        .expect("the KubeVirt CR");
    platform.apply(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: blocks-uninstall\n  namespace: default\n\
         spec:\n  runStrategy: Halted\n  template:\n    spec:\n      domain:\n        devices: {}\n",
    );
    const DELETE_PATH: &str = "/kubevirt-validate-delete";
    let answer = ask(DELETE_PATH, "DELETE", &Value::Null, &kubevirt);
    assert_eq!(answer["allowed"], false, "{answer}");
    assert_eq!(
        answer["status"]["message"],
        "Rejecting the uninstall request, since there are still Virtual Machines present. Either delete all KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt."
    );
    platform.ok(&["delete", "vm", "blocks-uninstall", "-n", "default"]);
    let answer = ask(DELETE_PATH, "DELETE", &Value::Null, &kubevirt);
    assert_eq!(answer["allowed"], true, "{answer}");

    const UPDATE_PATH: &str = "/kubevirt-validate-update";
    let mut no_infra = kubevirt.clone();
    no_infra["spec"]["infra"] = serde_json::json!({"replicas": 0});
    let answer = ask(UPDATE_PATH, "UPDATE", &no_infra, &kubevirt);
    assert_eq!(answer["allowed"], false, "{answer}");
    assert_eq!(answer["status"]["code"], 422, "{answer}");
    assert_eq!(
        answer["status"]["message"],
        "infra replica count can't be 0"
    );
    // A changed placement is judged by the API server, through a dry-run Deployment.
    let mut misplaced = kubevirt.clone();
    misplaced["spec"]["infra"] =
        serde_json::json!({"nodePlacement": {"nodeSelector": {"bad key": "x"}}});
    let answer = ask(UPDATE_PATH, "UPDATE", &misplaced, &kubevirt);
    assert_eq!(answer["allowed"], false, "{answer}");
    let message = answer["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            r#"Deployment.apps "placement-validation-webhook" is invalid: spec.template.spec.nodeSelector: Invalid value: "bad key": name part must consist"#
        ),
        "{answer}"
    );
    let mut placed = kubevirt.clone();
    placed["spec"]["infra"] =
        serde_json::json!({"nodePlacement": {"nodeSelector": {"kubernetes.io/os": "linux"}}});
    let answer = ask(UPDATE_PATH, "UPDATE", &placed, &kubevirt);
    assert_eq!(answer["allowed"], true, "{answer}");
    let mut graduated = kubevirt.clone();
    graduated["spec"]["configuration"]["developerConfiguration"]["featureGates"] =
        serde_json::json!(["LiveMigration"]);
    let answer = ask(UPDATE_PATH, "UPDATE", &graduated, &kubevirt);
    assert_eq!(answer["allowed"], true, "{answer}");
    assert!(
        answer["warnings"][0]
            .as_str()
            .is_some_and(|w| w.starts_with("feature gate LiveMigration is deprecated")),
        "{answer}"
    );
}

/// virt-operator as deploy/virt-operator runs it on a cluster: its own process under its
/// service account, against the embedded API server without its in-process KubeVirt.
/// Upstream's KubeVirt CR deploys the components of deploy/virt with the operator's image
/// (`Deploying` until they are ready, then `Deployed`), a deleted Deployment is put back, a
/// second CR is `ExistingDeployment`, deleting the CR removes the components first, its
/// webhooks guard the CR's uninstall and updates, and its `customizeComponents` patches
/// what it deploys.
#[test]
fn virt_operator_deploys_the_components_for_a_kubevirt_cr_and_removes_them_with_it() {
    let platform = Platform::start_with("virt-operator", &["--no-virt"]);
    let manifests = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/virt-operator/operator.yaml"
    ))
    .expect("operator.yaml");
    let objects: Vec<&str> = manifests
        .split("\n---\n")
        .filter(|document| !document.contains("kind: Deployment"))
        .collect();
    platform.apply(&objects.join("\n---\n"));
    let image = "registry.example/ferrovirt/ferrovirt:test";
    let webhook_port = free_port();
    let webhook_listen = format!("127.0.0.1:{webhook_port}");
    let operator = Component::start_as(
        &platform,
        "virt-operator",
        "kubevirt",
        "kubevirt-operator",
        &["--image", image, "--webhook-listen", &webhook_listen],
    );
    // Upstream's kubevirt-cr.yaml.
    platform.apply(
        "apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata:\n  name: kubevirt\n  namespace: kubevirt\n\
         spec:\n  certificateRotateStrategy: {}\n  configuration:\n    developerConfiguration:\n      \
         featureGates: []\n  customizeComponents: {}\n  imagePullPolicy: IfNotPresent\n  \
         workloadUpdateStrategy: {}\n",
    );
    let kubevirt = ["get", "kubevirt", "kubevirt", "-n", "kubevirt"];
    let deploying = platform.wait_json(
        &kubevirt,
        Duration::from_secs(60),
        "the KubeVirt CR is not Deploying",
        |kv| kv["status"]["phase"] == "Deploying",
    );
    let available = condition(&deploying, "Available").expect("Available");
    assert_eq!(available["status"], "False", "{deploying}");
    assert_eq!(available["reason"], "DeploymentInProgress");
    assert_eq!(
        deploying["metadata"]["finalizers"],
        serde_json::json!(["kubevirt.io/foregroundDeleteKubeVirt"])
    );
    let image_of = |kind: &str, name: &str| {
        platform.ok(&[
            "get",
            kind,
            name,
            "-n",
            "kubevirt",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
    };
    assert_eq!(image_of("deployment", "virt-api"), image);
    assert_eq!(image_of("deployment", "virt-controller"), image);
    assert_eq!(image_of("daemonset", "virt-handler"), image);
    for (kind, name) in [
        ("clusterrole", "kubevirt-controller"),
        ("clusterrolebinding", "kubevirt-handler"),
        ("apiservice", "v1.subresources.kubevirt.io"),
        ("mutatingwebhookconfiguration", "virt-api-mutator"),
    ] {
        let object = platform.json(&["get", kind, name]).expect(name);
        assert_eq!(
            object["metadata"]["labels"]["app.kubernetes.io/managed-by"], "virt-operator",
            "{kind} {name}"
        );
    }

    // kube-controller-manager's part: the workloads report ready pods.
    let ready = [
        (
            "deployment",
            "virt-api",
            r#"{"status":{"replicas":1,"readyReplicas":1}}"#,
        ),
        (
            "deployment",
            "virt-controller",
            r#"{"status":{"replicas":1,"readyReplicas":1}}"#,
        ),
        (
            "daemonset",
            "virt-handler",
            r#"{"status":{"desiredNumberScheduled":1,"numberReady":1,"currentNumberScheduled":1,"numberMisscheduled":0}}"#,
        ),
    ];
    for (kind, name, status) in ready {
        platform.ok(&[
            "patch",
            kind,
            name,
            "-n",
            "kubevirt",
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ]);
    }
    let deployed = platform.wait_json(
        &kubevirt,
        Duration::from_secs(60),
        "the KubeVirt CR is not Deployed",
        |kv| kv["status"]["phase"] == "Deployed",
    );
    let available = condition(&deployed, "Available").expect("Available");
    assert_eq!(available["status"], "True");
    assert_eq!(available["reason"], "AllComponentsReady");
    assert_eq!(
        deployed["status"]["observedKubeVirtRegistry"],
        "registry.example/ferrovirt"
    );

    operator_webhooks_guard_the_kubevirt_cr(&platform, webhook_port);

    // common-instancetypes: deployed with the CR, gone when its deployment is disabled.
    let instancetype = ["get", "virtualmachineclusterinstancetype", "u1.medium"];
    let deployed_type = platform.wait_json(
        &instancetype,
        Duration::from_secs(60),
        "u1.medium is not deployed",
        |it| it["spec"]["cpu"]["guest"] == 1,
    );
    assert_eq!(
        deployed_type["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "virt-operator"
    );
    platform
        .json(&["get", "virtualmachineclusterpreference", "fedora"])
        .expect("the fedora preference");
    let toggle = |enabled: bool| {
        platform.ok(&[
            "patch", "kubevirt", "kubevirt", "-n", "kubevirt", "--type=merge", "-p",
            &format!(r#"{{"spec":{{"configuration":{{"commonInstancetypesDeployment":{{"enabled":{enabled}}}}}}}}}"#),
        ]);
    };
    toggle(false);
    let deadline = Instant::now() + Duration::from_secs(60);
    while platform.json(&instancetype).is_some() {
        assert!(
            Instant::now() < deadline,
            "u1.medium outlived commonInstancetypesDeployment.enabled: false"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    toggle(true);
    platform.wait_json(
        &instancetype,
        Duration::from_secs(60),
        "u1.medium is not back",
        |_| true,
    );

    // The CR's customizeComponents patches what is deployed (here a strategic patch of
    // virt-controller's container), and mark it with the patches' identifier.
    let patch = r#"{"spec":{"template":{"spec":{"containers":[{"name":"virt-controller","resources":{"limits":{"cpu":"200m"}}}]}}}}"#;
    let customize = serde_json::json!({"spec": {"customizeComponents": {"patches": [
        {"resourceType": "Deployment", "resourceName": "virt-controller", "type": "strategic",
         "patch": patch},
        {"resourceType": "Deployment", "resourceName": "virt-controller", "type": "merge",
         "patch": r#"{"metadata":{"labels":{"customized":"yes"}}}"#},
    ], "flags": {"controller": {"v": "4"}}}}});
    merge_patch_kubevirt(&platform, &customize.to_string());
    let customized = platform.wait_json(
        &["get", "deployment", "virt-controller", "-n", "kubevirt"],
        Duration::from_secs(60),
        "virt-controller was not customized",
        |d| d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "200m",
    );
    assert_eq!(
        customized["spec"]["template"]["spec"]["containers"][0]["image"], image,
        "the patch merged into the container"
    );
    assert!(
        customized["metadata"]["annotations"]["kubevirt.io/customizer-identifier"].is_string(),
        "{customized}"
    );
    assert_eq!(customized["metadata"]["labels"]["customized"], "yes");
    // The flags are the container's arguments, and the component takes them.
    let args = &customized["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(args, &serde_json::json!(["virt-controller", "--v", "4"]));
    let args: Vec<&str> = args
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let parsed = std::process::Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args(&args)
        .arg("--help")
        .output()
        .expect("running ferrovirt");
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );

    // Patches taken out of the CR are taken off what it deployed: the operator applies
    // its objects server-side, and what it applied before and applies no more goes.
    merge_patch_kubevirt(
        &platform,
        r#"{"spec":{"customizeComponents":{"patches":[]}}}"#,
    );
    platform.wait_json(
        &["get", "deployment", "virt-controller", "-n", "kubevirt"],
        Duration::from_secs(60),
        "the removed patches stayed on virt-controller",
        |d| {
            d["metadata"]["labels"].get("customized").is_none()
                && d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"]
                    .is_null()
        },
    );

    // A deployment deleted by hand comes back.
    platform.ok(&["delete", "deployment", "virt-controller", "-n", "kubevirt"]);
    platform.wait_json(
        &["get", "deployment", "virt-controller", "-n", "kubevirt"],
        Duration::from_secs(60),
        "virt-controller was not put back",
        |deployment| deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image,
    );

    // A second KubeVirt CR is not deployed.
    platform.ok(&["create", "namespace", "kubevirt-two"]);
    platform.apply(
        "apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata:\n  name: second\n  namespace: kubevirt-two\nspec: {}\n",
    );
    let second = platform.wait_json(
        &["get", "kubevirt", "second", "-n", "kubevirt-two"],
        Duration::from_secs(60),
        "the second KubeVirt CR is not ExistingDeployment",
        |kv| condition(kv, "Synchronized").is_some(),
    );
    let synchronized = condition(&second, "Synchronized").expect("Synchronized");
    assert_eq!(synchronized["reason"], "ExistingDeployment", "{second}");
    assert!(
        platform
            .json(&["get", "deployment", "virt-api", "-n", "kubevirt-two"])
            .is_none()
    );
    platform.ok(&["delete", "kubevirt", "second", "-n", "kubevirt-two"]);

    // Deleting the CR removes what it deployed, then the CR.
    platform.ok(&[
        "delete",
        "kubevirt",
        "kubevirt",
        "-n",
        "kubevirt",
        "--wait=false",
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while platform.json(&kubevirt).is_some() {
        assert!(
            Instant::now() < deadline,
            "the KubeVirt CR is still there:\n{}",
            operator.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    for (kind, name) in [
        ("deployment", "virt-api"),
        ("daemonset", "virt-handler"),
        ("serviceaccount", "kubevirt-handler"),
    ] {
        assert!(
            platform
                .json(&["get", kind, name, "-n", "kubevirt"])
                .is_none(),
            "{kind} {name} is left"
        );
    }
    for (kind, name) in [
        ("clusterrole", "kubevirt-controller"),
        ("apiservice", "v1.subresources.kubevirt.io"),
        ("mutatingwebhookconfiguration", "virt-api-mutator"),
    ] {
        assert!(
            platform.json(&["get", kind, name]).is_none(),
            "{kind} {name} is left"
        );
    }
}
