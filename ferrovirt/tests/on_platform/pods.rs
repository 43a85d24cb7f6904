//! Pods of several containers on `ferrovirt up`'s node agent, as a kubelet runs them: each
//! container a process of its own, side by side, with its own status, exit code and log
//! (`kubectl logs -c`), and the pod's phase from all of them.

use crate::platform;

use std::time::Duration;

use platform::Platform;
use serde_json::Value;

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: two
spec:
  restartPolicy: Never
  containers:
  - name: hello
    image: quay.io/ferrovirt/ferrovirt:latest
    args: [\"--version\"]
  - name: bad
    image: quay.io/ferrovirt/ferrovirt:latest
    args: [\"task\", \"no-such-task\"]
";

fn status<'a>(pod: &'a Value, container: &str) -> &'a Value {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == container))
        .unwrap_or_else(|| panic!("no status of {container}: {pod:#}"))
}

#[test]
fn a_pod_of_two_containers_runs_both_and_fails_with_the_one_that_failed() {
    let platform = Platform::start("pods");
    platform.apply(POD);
    let pod = platform.wait_json(
        &["get", "pod", "two"],
        Duration::from_secs(60),
        "the pod to end",
        |pod| pod["status"]["phase"] == "Failed",
    );
    let exit = |name| &status(&pod, name)["state"]["terminated"];
    assert_eq!(exit("hello")["exitCode"], 0, "{pod:#}");
    assert_eq!(exit("hello")["reason"], "Completed", "{pod:#}");
    assert_eq!(exit("bad")["exitCode"], 2, "{pod:#}");
    assert_eq!(exit("bad")["reason"], "Error", "{pod:#}");

    let hello = platform.ok(&["logs", "two", "-c", "hello"]);
    assert!(hello.contains("ferrovirt "), "{hello}");
    let bad = platform.ok(&["logs", "two", "-c", "bad"]);
    assert!(
        bad.contains("unrecognized subcommand 'no-such-task'"),
        "{bad}"
    );
    let out = platform.kubectl(
        &["get", "--raw", "/api/v1/namespaces/default/pods/two/log"],
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("a container name must be specified for pod two, choose one of: [hello bad]"),
        "{stderr}"
    );
}

/// A TaskRun's pod as the runner of `ferrovirt up` makes it: each step waits for the one
/// before it through the shared `/tekton/run`, and a failed step skips the ones after it.
const STEPS: &str = "apiVersion: v1
kind: Pod
metadata:
  name: steps
spec:
  restartPolicy: Never
  volumes:
  - name: tekton-internal-run
    emptyDir: {}
  containers:
  - name: step-one
    image: quay.io/ferrovirt/ferrovirt:latest
    args: [task, step, --post-file, /tekton/run/0/out, --termination-path, /tekton/run/0/termination, --, --version]
    terminationMessagePath: /tekton/run/0/termination
    volumeMounts: [{name: tekton-internal-run, mountPath: /tekton/run}]
  - name: step-two
    image: quay.io/ferrovirt/ferrovirt:latest
    args: [task, step, --wait-file, /tekton/run/0/out, --post-file, /tekton/run/1/out, --termination-path, /tekton/run/1/termination, --, task, no-such-task]
    terminationMessagePath: /tekton/run/1/termination
    volumeMounts: [{name: tekton-internal-run, mountPath: /tekton/run}]
  - name: step-three
    image: quay.io/ferrovirt/ferrovirt:latest
    args: [task, step, --wait-file, /tekton/run/1/out, --post-file, /tekton/run/2/out, --termination-path, /tekton/run/2/termination, --, --version]
    terminationMessagePath: /tekton/run/2/termination
    volumeMounts: [{name: tekton-internal-run, mountPath: /tekton/run}]
";

/// The termination message of `container`, as Tekton's entries.
fn termination(pod: &Value, container: &str) -> Vec<Value> {
    let text = status(pod, container)["state"]["terminated"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{container}: {e}: {text:?}"))
}

#[test]
fn the_steps_of_a_taskrun_pod_run_in_order_and_a_failure_skips_the_rest() {
    let platform = Platform::start("steps");
    platform.apply(STEPS);
    let pod = platform.wait_json(
        &["get", "pod", "steps"],
        Duration::from_secs(60),
        "the pod to end",
        |pod| pod["status"]["phase"] == "Failed",
    );
    let code = |name| status(&pod, name)["state"]["terminated"]["exitCode"].clone();
    assert_eq!(
        (code("step-one"), code("step-two"), code("step-three")),
        (
            serde_json::json!(0),
            serde_json::json!(2),
            serde_json::json!(1)
        ),
        "{pod:#}"
    );
    let started = |name| {
        termination(&pod, name)
            .into_iter()
            .find(|e| e["key"] == "StartedAt")
            .and_then(|e| e["value"].as_str().map(String::from))
            .unwrap_or_else(|| panic!("no StartedAt of {name}: {pod:#}"))
    };
    assert!(started("step-one") <= started("step-two"), "{pod:#}");
    let skipped = termination(&pod, "step-three");
    assert!(
        skipped.contains(&serde_json::json!({"key": "Reason", "value": "Skipped", "type": 3})),
        "{skipped:?}"
    );
    let log = platform.ok(&["logs", "steps", "-c", "step-two"]);
    assert!(log.contains("no-such-task"), "{log}");
}

/// A pod acting as its service account: `keys` may make Secrets, `nobody` nothing.
const ACCOUNTS: &str = "apiVersion: v1
kind: ServiceAccount
metadata:
  name: keys
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: nobody
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: secrets
rules:
- apiGroups: [\"\"]
  resources: [secrets]
  verbs: [get, create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: keys-secrets
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: secrets
subjects:
- kind: ServiceAccount
  name: keys
";

fn keys_pod(name: &str, account: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  serviceAccountName: {account}
  volumes:
  - name: results
    emptyDir: {{}}
  containers:
  - name: step-generate
    image: quay.io/ferrovirt/ferrovirt:latest
    args: [task, step, --results, 'publicKeySecretName,privateKeySecretName', --, task, generate-ssh-keys]
    terminationMessagePath: /tekton/termination
    env:
    - name: PUBLIC_KEY_SECRET_NAME
      value: {name}-public
    volumeMounts: [{{name: results, mountPath: /tekton/results}}]
"
    )
}

#[test]
fn a_pod_acts_as_its_service_account_and_its_step_reports_the_results() {
    let platform = Platform::start("accounts");
    platform.apply(ACCOUNTS);
    platform.apply(&keys_pod("allowed", "keys"));
    platform.apply(&keys_pod("denied", "nobody"));
    let allowed = platform.wait_json(
        &["get", "pod", "allowed"],
        Duration::from_secs(60),
        "the pod to end",
        |pod| pod["status"]["phase"] == "Succeeded" || pod["status"]["phase"] == "Failed",
    );
    let results = termination(&allowed, "step-generate");
    assert!(
        results.contains(
            &serde_json::json!({"key": "publicKeySecretName", "value": "allowed-public", "type": 1})
        ),
        "{results:?}\n{}",
        platform.ok(&["logs", "allowed"])
    );
    let private = results
        .iter()
        .find(|r| r["key"] == "privateKeySecretName")
        .and_then(|r| r["value"].as_str())
        .unwrap_or_else(|| panic!("no private key Secret in {results:?}"));
    let secret = platform
        .json(&["get", "secret", private])
        .expect("the private key Secret");
    assert_eq!(secret["type"], "kubernetes.io/ssh-auth");

    let denied = platform.wait_json(
        &["get", "pod", "denied"],
        Duration::from_secs(60),
        "the pod to end",
        |pod| pod["status"]["phase"] == "Failed",
    );
    let log = platform.ok(&["logs", "denied"]);
    assert!(
        log.contains("system:serviceaccount:default:nobody"),
        "the refusal does not name the pod's account: {log}\n{denied:#}"
    );
}
