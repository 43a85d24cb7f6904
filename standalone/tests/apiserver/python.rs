//! Python's kubernetes client (Debian's python3-kubernetes for /usr/bin/python3): list,
//! create, and a watch that sees the changes it makes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{Cluster, wait_with_deadline};

const PYTHON: &str = "/usr/bin/python3";

fn has_kubernetes_module() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import kubernetes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn python_kubernetes_client_lists_creates_and_watches() {
    if !has_kubernetes_module() {
        let message = format!(
            "SKIPPED python_kubernetes_client_lists_creates_and_watches: {PYTHON} has no `kubernetes` module (apt-get install python3-kubernetes)"
        );
        // CI installs the package: there a missing module is a failure, not a skip.
        assert!(std::env::var_os("CI").is_none(), "{message}");
        eprintln!("{message}");
        return;
    }
    let c = Cluster::start(vec![]);
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing"}}"#,
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/list_watch.py");
    let child = Command::new(PYTHON)
        .arg(&script)
        .arg(c.kubeconfig())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_deadline(child, Duration::from_secs(60), "the python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed:\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("LISTED existing"), "{stdout}");
    assert!(stdout.trim_end().ends_with("OK"), "{stdout}");
}
