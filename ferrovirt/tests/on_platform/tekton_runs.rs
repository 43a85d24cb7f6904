//! Tekton TaskRuns and PipelineRuns on `ferrovirt up`: the project's own Tasks from
//! `deploy/tekton/` run in a pod of step containers under the Task's service account, and the
//! TaskRun's status (condition, steps, results, pod name, times) is what Tekton writes; a
//! script step, a missing Task and a failing step fail the run with Tekton's reasons, and a
//! cancelled run ends and loses its pod. A PipelineRun passes results between its tasks,
//! skips by `when`, runs `finally` with the tasks' status, and ends as Tekton ends it.

use crate::platform;

use base64::Engine;
use std::path::Path;
use std::time::{Duration, Instant};

use platform::Platform;
use serde_json::Value;

fn deploy(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/tekton")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn apply_task(platform: &Platform, name: &str) {
    platform.apply(&deploy(&format!("tasks/{name}.yaml")));
    platform.apply(&deploy(&format!("rbac/{name}.yaml")));
}

fn ended(run: &Value) -> bool {
    let status = &run["status"]["conditions"][0]["status"];
    status == "True" || status == "False"
}

fn condition(run: &Value) -> (&str, &str, &str) {
    let c = &run["status"]["conditions"][0];
    (
        c["status"].as_str().unwrap_or_default(),
        c["reason"].as_str().unwrap_or_default(),
        c["message"].as_str().unwrap_or_default(),
    )
}

fn result<'a>(run: &'a Value, name: &str) -> &'a str {
    run["status"]["results"]
        .as_array()
        .and_then(|all| all.iter().find(|r| r["name"] == name))
        .and_then(|r| r["value"].as_str())
        .unwrap_or_else(|| panic!("no result {name}: {run:#}"))
}

const KEYS: &str = r#"
apiVersion: tekton.dev/v1
kind: TaskRun
metadata:
  name: keys
spec:
  serviceAccountName: generate-ssh-keys-task
  taskRef:
    name: generate-ssh-keys
  params:
  - name: privateKeySecretName
    value: conn
  - name: privateKeyConnectionOptions
    value: ["user:root", "disable-strict-host-key-checking:true"]
  - name: additionalSSHKeygenOptions
    value: "-t ed25519"
"#;

/// kubevirt-tekton-tasks' own step shape: its image, its `entrypoint` and `COMMAND`.
const UPSTREAM_IMAGE_KEYS: &str = r#"
apiVersion: tekton.dev/v1
kind: TaskRun
metadata:
  name: upstream-image
spec:
  serviceAccountName: generate-ssh-keys-task
  taskSpec:
    params:
    - name: privateKeySecretName
      type: string
    results:
    - name: publicKeySecretName
    - name: privateKeySecretName
    - name: publicKeySecretNamespace
    - name: privateKeySecretNamespace
    steps:
    - name: generate-ssh-keys
      image: quay.io/kubevirt/tekton-tasks:v0.26.0
      command: [entrypoint]
      args: ["--", "user:fedora"]
      env:
      - name: COMMAND
        value: generate-ssh-keys
      - name: PRIVATE_KEY_SECRET_NAME
        value: $(params.privateKeySecretName)
  params:
  - name: privateKeySecretName
    value: conn-upstream
"#;

#[test]
fn a_taskrun_runs_its_task_in_a_pod_and_reports_as_tekton_does() {
    let platform = Platform::start("taskruns");
    apply_task(&platform, "generate-ssh-keys");
    platform.apply(KEYS);
    let run = platform.wait_json(
        &["get", "taskrun", "keys"],
        Duration::from_secs(120),
        "the TaskRun to get there",
        ended,
    );
    assert_eq!(
        condition(&run),
        ("True", "Succeeded", "All Steps have completed executing"),
        "{run:#}"
    );
    assert_eq!(run["status"]["podName"], "keys-pod");
    assert_eq!(result(&run, "privateKeySecretName"), "conn");
    assert_eq!(result(&run, "privateKeySecretNamespace"), "default");
    assert!(
        result(&run, "publicKeySecretName").starts_with("public-key-"),
        "{run:#}"
    );
    let step = &run["status"]["steps"][0];
    assert_eq!(step["name"], "generate-ssh-keys", "{run:#}");
    assert_eq!(step["container"], "step-generate-ssh-keys");
    assert_eq!(step["terminated"]["exitCode"], 0);
    assert_eq!(step["terminationReason"], "Completed");
    assert!(run["status"]["startTime"].is_string() && run["status"]["completionTime"].is_string());
    assert_eq!(
        run["status"]["taskSpec"]["steps"][0]["args"],
        serde_json::json!(["--", "user:root", "disable-strict-host-key-checking:true"])
    );
    let conn = platform
        .json(&["get", "secret", "conn"])
        .expect("the connection secret");
    assert_eq!(conn["type"], "kubernetes.io/ssh-auth");
    // The pod is Tekton's, its step's log is kubectl's, and the printer columns are Tekton's.
    let pod = platform.json(&["get", "pod", "keys-pod"]).expect("the pod");
    assert_eq!(pod["metadata"]["labels"]["tekton.dev/taskRun"], "keys");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "TaskRun");
    assert_eq!(pod["spec"]["serviceAccountName"], "generate-ssh-keys-task");
    platform.ok(&["logs", "keys-pod", "-c", "step-generate-ssh-keys"]);
    let table = platform.ok(&["get", "taskrun", "keys"]);
    assert!(
        table.contains("SUCCEEDED") && table.contains("True"),
        "{table}"
    );

    // The same command named as kubevirt's image names it.
    platform.apply(UPSTREAM_IMAGE_KEYS);
    let run = platform.wait_json(
        &["get", "taskrun", "upstream-image"],
        Duration::from_secs(120),
        "the TaskRun to get there",
        ended,
    );
    assert_eq!(condition(&run).1, "Succeeded", "{run:#}");
    assert_eq!(result(&run, "privateKeySecretName"), "conn-upstream");

    // Run again, the task refuses the existing Secret: the step fails the run.
    platform.apply(&KEYS.replace("name: keys\n", "name: keys-again\n"));
    let again = platform.wait_json(
        &["get", "taskrun", "keys-again"],
        Duration::from_secs(120),
        "the TaskRun to get there",
        ended,
    );
    let (status, reason, message) = condition(&again);
    assert_eq!((status, reason), ("False", "StepFailed"), "{again:#}");
    assert_eq!(
        message,
        r#""step-generate-ssh-keys" exited with code 253: Error"#
    );
    let log = platform.ok(&["logs", "keys-again-pod", "-c", "step-generate-ssh-keys"]);
    assert!(log.contains("conn secret already exists"), "{log}");
}

const SCRIPT: &str = r#"
apiVersion: tekton.dev/v1
kind: TaskRun
metadata:
  name: script
spec:
  taskSpec:
    steps:
    - name: hello
      image: alpine
      script: echo hello
"#;

const MISSING: &str = r#"
apiVersion: tekton.dev/v1
kind: TaskRun
metadata:
  name: missing
spec:
  taskRef:
    name: no-such-task
"#;

const WAIT: &str = r#"
apiVersion: tekton.dev/v1
kind: TaskRun
metadata:
  name: wait
spec:
  serviceAccountName: wait-for-vmi-status-task
  taskRef:
    name: wait-for-vmi-status
  params:
  - name: vmiName
    value: never-made
  - name: successCondition
    value: status.phase == Running
"#;

#[test]
fn runs_the_machine_cannot_run_fail_with_tekton_s_reasons_and_a_cancel_ends_one() {
    let platform = Platform::start("taskruns-refused");
    // Every namespace has its `default` service account, which runs name by default.
    platform.ok(&["create", "namespace", "fresh"]);
    let start = Instant::now();
    while platform
        .json(&["get", "serviceaccount", "default", "-n", "fresh"])
        .is_none()
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no default service account"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    platform.apply(SCRIPT);
    let run = platform.wait_json(
        &["get", "taskrun", "script"],
        Duration::from_secs(60),
        "the TaskRun to get there",
        ended,
    );
    let (status, reason, message) = condition(&run);
    assert_eq!((status, reason), ("False", "PodCreationFailed"), "{run:#}");
    assert!(
        message.starts_with(r#"failed to create task run pod "script": step "hello" has a script, which ferrovirt up does not run"#),
        "{message}"
    );
    assert!(platform.json(&["get", "pod", "script-pod"]).is_none());

    platform.apply(MISSING);
    let run = platform.wait_json(
        &["get", "taskrun", "missing"],
        Duration::from_secs(60),
        "the TaskRun to get there",
        ended,
    );
    assert_eq!(
        condition(&run),
        (
            "False",
            "TaskRunResolutionFailed",
            r#"error when listing tasks for taskRun missing: tasks.tekton.dev "no-such-task" not found"#
        )
    );

    apply_task(&platform, "wait-for-vmi-status");
    platform.apply(WAIT);
    platform.wait_json(
        &["get", "taskrun", "wait"],
        Duration::from_secs(120),
        "the TaskRun to get there",
        |run| run["status"]["steps"][0]["running"].is_object(),
    );
    platform.ok(&[
        "patch",
        "taskrun",
        "wait",
        "--type=merge",
        "-p",
        r#"{"spec":{"status":"TaskRunCancelled","statusMessage":"no VM today"}}"#,
    ]);
    let run = platform.wait_json(
        &["get", "taskrun", "wait"],
        Duration::from_secs(60),
        "the TaskRun to get there",
        ended,
    );
    assert_eq!(
        condition(&run),
        (
            "False",
            "TaskRunCancelled",
            r#"TaskRun "wait" was cancelled. no VM today"#
        )
    );
    assert_eq!(
        run["status"]["steps"][0]["terminated"]["reason"],
        "TaskRunCancelled"
    );
    let start = Instant::now();
    while platform.json(&["get", "pod", "wait-pod"]).is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the cancelled run's pod stayed"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // No process of the pod outlives it: the step's command ended with its step.
    let left = processes_of(platform.data_dir(), "wait-for-vmi-status");
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// The processes run under `data_dir` (the pod root in their environment) whose command line
/// names `word`.
fn processes_of(data_dir: &Path, word: &str) -> Vec<String> {
    let dir = data_dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let ours = String::from_utf8_lossy(&environ).contains(&dir);
            (ours && cmdline.contains(word)).then_some(cmdline)
        })
        .collect()
}

const PIPELINE: &str = r#"
apiVersion: tekton.dev/v1
kind: Pipeline
metadata:
  name: keys
spec:
  params:
  - name: secretName
    type: string
  - name: mode
    default: always
  results:
  - name: second
    value: $(tasks.again.results.privateKeySecretName)
  tasks:
  - name: keys
    taskRef:
      name: generate-ssh-keys
    params:
    - name: privateKeySecretName
      value: $(params.secretName)
  - name: again
    taskRef:
      name: generate-ssh-keys
    params:
    - name: privateKeySecretName
      value: $(tasks.keys.results.privateKeySecretName)-2
  - name: never
    when:
    - input: $(params.mode)
      operator: in
      values: [never]
    taskRef:
      name: generate-ssh-keys
  finally:
  - name: report
    taskRef:
      name: generate-ssh-keys
    params:
    - name: privateKeySecretName
      value: report-$(context.pipelineRun.name)
    - name: privateKeyConnectionOptions
      value: ["status:$(tasks.status)", "keys:$(tasks.keys.status)"]
"#;

fn pipeline_run(name: &str, secret: &str) -> String {
    format!(
        "apiVersion: tekton.dev/v1
kind: PipelineRun
metadata:
  name: {name}
spec:
  pipelineRef:
    name: keys
  taskRunTemplate:
    serviceAccountName: generate-ssh-keys-task
  params:
  - name: secretName
    value: {secret}
"
    )
}

fn secret_value(platform: &Platform, name: &str, key: &str) -> String {
    let secret = platform.json(&["get", "secret", name]).expect("the secret");
    let encoded = secret["data"][key].as_str().unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn a_pipelinerun_passes_results_skips_by_when_and_runs_finally() {
    let platform = Platform::start("pipelineruns");
    apply_task(&platform, "generate-ssh-keys");
    platform.apply(PIPELINE);
    platform.apply(&pipeline_run("ok", "conn"));
    let run = platform.wait_json(
        &["get", "pipelinerun", "ok"],
        Duration::from_secs(240),
        "the pipelinerun to get there",
        ended,
    );
    assert_eq!(
        condition(&run),
        (
            "True",
            "Completed",
            "Tasks Completed: 3 (Failed: 0, Cancelled 0), Skipped: 1"
        ),
        "{run:#}"
    );
    assert_eq!(
        run["status"]["results"],
        serde_json::json!([{"name": "second", "value": "conn-2"}])
    );
    assert_eq!(run["status"]["skippedTasks"][0]["name"], "never");
    assert_eq!(
        run["status"]["skippedTasks"][0]["reason"],
        "When Expressions evaluated to false"
    );
    let children: Vec<&str> = run["status"]["childReferences"]
        .as_array()
        .expect("childReferences")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(children, ["ok-keys", "ok-again", "ok-report"], "{run:#}");
    let again = platform
        .json(&["get", "taskrun", "ok-again"])
        .expect("the TaskRun");
    assert_eq!(
        again["metadata"]["labels"]["tekton.dev/pipelineTask"],
        "again"
    );
    assert_eq!(
        again["metadata"]["ownerReferences"][0]["kind"],
        "PipelineRun"
    );
    assert!(platform.json(&["get", "secret", "conn-2"]).is_some());
    // `$(tasks.status)` is Completed when a task was skipped, as Tekton has it.
    assert_eq!(secret_value(&platform, "report-ok", "status"), "Completed");
    assert_eq!(secret_value(&platform, "report-ok", "keys"), "Succeeded");

    // The same names again: the first task fails, the second is skipped, finally still runs.
    platform.apply(&pipeline_run("again", "conn"));
    let run = platform.wait_json(
        &["get", "pipelinerun", "again"],
        Duration::from_secs(240),
        "the pipelinerun to get there",
        ended,
    );
    assert_eq!(
        condition(&run),
        (
            "False",
            "Failed",
            "Tasks Completed: 2 (Failed: 1, Cancelled 0), Skipped: 2"
        ),
        "{run:#}"
    );
    let skipped: Vec<(&str, &str)> = run["status"]["skippedTasks"]
        .as_array()
        .expect("skippedTasks")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default(),
                s["reason"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        skipped,
        [
            ("again", "PipelineRun was stopping"),
            ("never", "PipelineRun was stopping")
        ],
        "{run:#}"
    );
    let failed = platform
        .json(&["get", "taskrun", "again-keys"])
        .expect("the TaskRun");
    assert_eq!(condition(&failed).1, "StepFailed");
    assert_eq!(secret_value(&platform, "report-again", "status"), "Failed");
    assert_eq!(secret_value(&platform, "report-again", "keys"), "Failed");
}
