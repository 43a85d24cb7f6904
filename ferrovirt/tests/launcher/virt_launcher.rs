//! `ferrovirt virt-launcher`, the launcher pod's entrypoint, and the launcher's promise
//! that QEMU never outlives it. These need no guest OS: a VMI with an empty disk boots
//! into SeaBIOS, which ignores the power button.

use crate::guest;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use api::kubevirt::pod_contract;
use ferrovirt_tests::TempDir;
use guest::RunningVmi;
use virt::launcher::control::{self, proto};

const NO_OS: &str = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: noos
spec:
  terminationGracePeriodSeconds: 30
  domain:
    resources:
      requests:
        memory: 64Mi
    devices:
      disks:
      - name: scratch
        disk: {bus: virtio}
  volumes:
  - name: scratch
    emptyDisk:
      capacity: 16Mi
";

fn wait_for(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < deadline, "{what} within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn launcher_socket(pod_root: &Path) -> PathBuf {
    pod_contract::control_socket(&pod_contract::sockets_dir_under(pod_root))
}

fn start_pod(pod_root: &Path, extra: &[&str]) -> std::process::Child {
    std::fs::create_dir_all(pod_root.join("dev")).expect("pod /dev");
    Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .arg("virt-launcher")
        .arg(format!("--node-cache={}", pod_root.join("cache").display()))
        .args(extra)
        .env("FERROVIRT_POD_ROOT", pod_root)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferrovirt virt-launcher")
}

/// The pod entrypoint runs the VMI it is given, answers on KubeVirt's socket path, and
/// when told to shut down a guest that ignores ACPI, kills it at the end of the grace
/// period and leaves a termination message that says so.
#[tokio::test(flavor = "multi_thread")]
async fn the_pod_entrypoint_leaves_a_termination_message_saying_how_the_domain_ended() {
    let pod = TempDir::new("virt-launcher-pod");
    let vmi = pod.join("vmi.yaml");
    std::fs::write(&vmi, NO_OS).expect("vmi");
    let mut child = start_pod(pod.path(), &["--vmi", vmi.to_str().expect("utf-8")]);
    let socket = launcher_socket(pod.path());
    wait_for("the control socket", Duration::from_secs(30), || {
        socket.exists()
    });
    let mut client = control::connect(&socket).await.expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = client
            .get_domain(proto::EmptyRequest {})
            .await
            .expect("GetDomain")
            .into_inner();
        if !reply.domain.is_empty() {
            let domain: serde_json::Value = serde_json::from_str(&reply.domain).expect("JSON");
            assert_eq!(domain["state"], "Running", "{domain}");
            assert_eq!(domain["name"], "default_noos");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no domain: {}",
            reply.response.map(|r| r.message).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reply = client
        .shutdown_virtual_machine(proto::ShutdownRequest {
            grace_period_seconds: 1,
        })
        .await
        .expect("Shutdown")
        .into_inner();
    assert!(reply.success, "{}", reply.message);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(!status.success());
    let message =
        std::fs::read_to_string(pod.join("dev/termination-log")).expect("termination log");
    assert_eq!(
        message,
        "destroyed: the guest did not power off within the grace period of 1s and was killed"
    );
}

/// Before any Sync, the launcher answers Ping, refuses commands for the missing domain,
/// and SIGTERM ends it cleanly.
#[tokio::test(flavor = "multi_thread")]
async fn a_launcher_without_a_domain_answers_and_stops_on_sigterm() {
    let pod = TempDir::new("virt-launcher-idle");
    let mut child = start_pod(pod.path(), &[]);
    let socket = launcher_socket(pod.path());
    wait_for("the control socket", Duration::from_secs(30), || {
        socket.exists()
    });
    let mut client = control::connect(&socket).await.expect("connect");
    let ping = client
        .ping(proto::EmptyRequest {})
        .await
        .expect("Ping")
        .into_inner();
    assert!(ping.success);
    let pause = client
        .pause_virtual_machine(proto::EmptyRequest {})
        .await
        .expect("Pause")
        .into_inner();
    assert!(!pause.success);
    assert_eq!(pause.message, "no domain: the VMI has not been synced");
    let bad = client
        .sync_virtual_machine(proto::VmiRequest {
            vmi: Some(proto::Vmi { vmi_json: br#"{"kind": "VirtualMachineInstance", "metadata": {"name": "x"}, "spec": {"domain": {"devices": {"tpm": {}}}}}"#.to_vec() }),
        })
        .await
        .expect("Sync")
        .into_inner();
    assert!(!bad.success);
    assert!(bad.message.contains("spec.domain"), "{}", bad.message);
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(status.success(), "{status}");
    assert_eq!(
        std::fs::read_to_string(pod.join("dev/termination-log")).expect("termination log"),
        "no domain was started"
    );
}

/// QEMU never outlives its launcher: a kill -9 of the launcher takes QEMU with it.
#[test]
fn qemu_dies_with_its_launcher() {
    let mut vmi = RunningVmi::start("noos", NO_OS, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !vmi.log().contains("domain running") {
        assert!(
            Instant::now() < deadline,
            "the domain did not start:\n{}",
            vmi.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let qemu = vmi
        .children()
        .into_iter()
        .next()
        .expect("QEMU is the launcher's child");
    vmi.kill_launcher();
    wait_for(
        "QEMU to die with its launcher",
        Duration::from_secs(10),
        || {
            match std::fs::read_to_string(format!("/proc/{qemu}/stat")) {
                Err(_) => true,
                // A zombie waiting for its reaper is dead too.
                Ok(stat) => stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z')),
            }
        },
    );
}
