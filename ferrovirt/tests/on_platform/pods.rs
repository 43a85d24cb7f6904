//! Pods of several containers on `ferrovirt up`'s node agent, as a kubelet runs them: each
//! container a process of its own, side by side, with its own status, exit code and log
//! (`kubectl logs -c`), and the pod's phase from all of them.

use crate::platform;

use std::time::{Duration, Instant};

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

fn wait_pod(platform: &Platform, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        if let Some(pod) = platform.json(&["get", "pod", "two"]) {
            if done(&pod) {
                return pod;
            }
            assert!(
                start.elapsed() < limit,
                "the pod did not end: {pod:#}\n{}",
                platform.log()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

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
    let pod = wait_pod(&platform, Duration::from_secs(60), |pod| {
        pod["status"]["phase"] == "Failed"
    });
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
