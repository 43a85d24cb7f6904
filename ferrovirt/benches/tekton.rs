//! A TaskRun on `ferrovirt up` side by side with the same task command run by hand, in one
//! run: wait-for-vmi-status over a VMI that is already Running, from `kubectl create` of the
//! TaskRun to its `Succeeded` condition (kubectl's watch, `kubectl wait`), against
//! `ferrovirt task wait-for-vmi-status` with the same parameters from spawn to exit. The
//! difference is what a step costs on this machine: the runner resolving the Task, the pod
//! of step containers, the node agent starting them, the entrypoint and the status written
//! back.
//!
//! `FV_BENCH_ROUNDS=10 cargo bench -p ferrovirt --bench tekton`

#[allow(dead_code)]
mod common;
#[path = "../tests/platform/mod.rs"]
mod platform;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{best_median, loadavg, rounds, workspace_root};
use ferrovirt_tests::{HttpServer, HttpServerOptions, TempDir, fast_guest_qcow2};
use platform::Platform;

const LIMIT: Duration = Duration::from_secs(300);
const VMI: &str = "bench-vm";

/// The fast guest on a DataVolume, started once; the TaskRuns wait for it.
fn vm(url: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {VMI}
spec:
  runStrategy: Always
  dataVolumeTemplates:
  - metadata:
      name: {VMI}
    spec:
      source:
        http:
          url: {url}
      storage:
        resources:
          requests:
            storage: 128Mi
  template:
    spec:
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
        dataVolume:
          name: {VMI}
"
    )
}

fn task_run(name: &str) -> String {
    format!(
        "apiVersion: tekton.dev/v1
kind: TaskRun
metadata:
  name: {name}
spec:
  serviceAccountName: wait-for-vmi-status-task
  taskRef:
    name: wait-for-vmi-status
  params:
  - name: vmiName
    value: {VMI}
  - name: successCondition
    value: status.phase == Running
"
    )
}

/// Seconds from creating TaskRun `name` to its `Succeeded` condition.
fn time_task_run(platform: &Platform, name: &str) -> f64 {
    let started = Instant::now();
    platform.ok_stdin(&["create", "-f", "-"], Some(&task_run(name)));
    let out = platform.kubectl(
        &[
            "wait",
            "--for=condition=Succeeded",
            "--timeout=120s",
            &format!("taskrun/{name}"),
        ],
        None,
    );
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "TaskRun {name} did not succeed: {}\n{:#}",
        String::from_utf8_lossy(&out.stderr),
        platform.json(&["get", "taskrun", name]).unwrap_or_default()
    );
    elapsed
}

/// Seconds of `ferrovirt task wait-for-vmi-status` by hand, with the TaskRun's parameters.
fn time_by_hand(platform: &Platform, results: &std::path::Path) -> f64 {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args(["task", "wait-for-vmi-status"])
        .env("KUBECONFIG", platform.kubeconfig())
        .env("FERROVIRT_TASK_RESULTS_DIR", results)
        .env("VMI_NAME", VMI)
        .env("VMI_NAMESPACE", "default")
        .env("SUCCESS_CONDITION", "status.phase == Running")
        .stdin(Stdio::null())
        .output()
        .expect("ferrovirt task");
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "by hand: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

fn deploy(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join("deploy/tekton").join(path))
        .unwrap_or_else(|e| panic!("deploy/tekton/{path}: {e}"))
}

fn main() {
    let rounds = rounds();
    let platform = Platform::start("bench-tekton");
    let server = HttpServer::start(HttpServerOptions::default());
    platform.apply(&deploy("tasks/wait-for-vmi-status.yaml"));
    platform.apply(&deploy("rbac/wait-for-vmi-status.yaml"));
    platform.apply(&vm(&server.url(fast_guest_qcow2())));
    platform.wait_json(&["get", "vmi", VMI], LIMIT, "the VMI to run", |vmi| {
        vmi["status"]["phase"] == "Running"
    });
    let scratch = TempDir::new("bench-tekton-results");
    // One of each first, untimed: the first pod pulls nothing, but the first TaskRun warms
    // the runner's caches and the binary's pages.
    time_task_run(&platform, "warm");
    time_by_hand(&platform, scratch.path());

    let before = loadavg();
    let mut runs = Vec::with_capacity(rounds);
    let mut by_hand = Vec::with_capacity(rounds);
    for round in 0..rounds {
        runs.push(time_task_run(&platform, &format!("run{round}")));
        by_hand.push(time_by_hand(&platform, scratch.path()));
    }
    let (run_best, run_median) = best_median(&runs);
    let (hand_best, hand_median) = best_median(&by_hand);
    println!("load {before} -> {}", loadavg());
    println!(
        "wait-for-vmi-status, {rounds} rounds | TaskRun create->Succeeded best {run_best:.3} s median {run_median:.3} s | by hand best {hand_best:.3} s median {hand_median:.3} s | per-step overhead (median) {:.3} s | ratio {:.1}x",
        run_median - hand_median,
        run_median / hand_median,
    );
}
