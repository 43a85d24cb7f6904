//! VirtualMachinePools and VirtualMachineInstanceReplicaSets on `ferrovirt up`, through
//! kubectl: a pool of 3 Halted VMs (no guest boots) scales to 5 and back to 2 with `kubectl
//! scale`, the highest indexes going first under `DescendingOrder`; a replica set of 2 VMIs
//! replaces one that is deleted and scales with `kubectl scale`; both answer a
//! HorizontalPodAutoscaler's read of `/scale`; a selector that misses the template's labels
//! is refused with upstream's words.

use crate::platform;

use std::time::{Duration, Instant};

use platform::Platform;
use serde_json::Value;

const NAMESPACE: &str = "replicas";

fn pool_yaml(name: &str, replicas: u32, selector_app: &str) -> String {
    format!(
        r#"apiVersion: pool.kubevirt.io/v1alpha1
kind: VirtualMachinePool
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {selector_app}
  scaleInStrategy:
    proactive:
      selectionPolicy:
        basePolicy: DescendingOrder
  virtualMachineTemplate:
    metadata:
      labels:
        app: {name}
    spec:
      runStrategy: Halted
      template:
        metadata:
          labels:
            app: {name}
        spec:
          domain:
            resources:
              requests:
                memory: 64Mi
            devices: {{}}
"#
    )
}

/// The instances boot no disk at all: QEMU's firmware finds nothing to boot and idles, which
/// is enough for an instance to count (its launcher pod exists and its phase is Scheduled or
/// Running) and costs little on two shared cores.
fn replica_set_yaml(name: &str, replicas: u32, selector_app: &str) -> String {
    format!(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachineInstanceReplicaSet
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {selector_app}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      domain:
        resources:
          requests:
            memory: 64Mi
        devices: {{}}
"#
    )
}

/// The names of the listed objects that are not being deleted, sorted.
fn live_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
        .collect();
    names.sort();
    names
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
        .collect();
    names.sort();
    names
}

fn expect(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn refusal(platform: &Platform, yaml: &str) -> String {
    let out = platform.kubectl(&["apply", "-f", "-"], Some(yaml));
    assert!(!out.status.success(), "accepted:\n{yaml}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn scale_of(platform: &Platform, path: &str) -> Value {
    let text = platform.ok(&["get", "--raw", path]);
    serde_json::from_str(&text).expect("a Scale")
}

#[test]
fn a_pool_scales_out_and_in_and_a_replica_set_keeps_its_count() {
    let started = Instant::now();
    let platform = Platform::start("replicas");
    platform.ok(&["create", "namespace", NAMESPACE]);

    // The pool: 3 VMs, then 5, then 2; the highest indexes go.
    platform.apply(&pool_yaml("web", 3, "web"));
    let vms = ["get", "vm", "-n", NAMESPACE, "-o", "json"];
    let limit = Duration::from_secs(60);
    platform.wait_json(&vms, limit, "3 pool VMs", |l| {
        names(l) == expect(&["web-0", "web-1", "web-2"])
    });
    platform.ok(&["scale", "vmpool/web", "-n", NAMESPACE, "--replicas=5"]);
    let five = ["web-0", "web-1", "web-2", "web-3", "web-4"];
    platform.wait_json(&vms, limit, "5 pool VMs", |l| names(l) == expect(&five));
    platform.ok(&["scale", "vmpool/web", "-n", NAMESPACE, "--replicas=2"]);
    platform.wait_json(&vms, limit, "web-0 and web-1 left", |l| {
        names(l) == expect(&["web-0", "web-1"])
    });
    let pool_path =
        format!("/apis/pool.kubevirt.io/v1alpha1/namespaces/{NAMESPACE}/virtualmachinepools/web");
    platform.wait_json(
        &["get", "vmpool", "web", "-n", NAMESPACE, "-o", "json"],
        limit,
        "the pool's status",
        |p| p["status"]["replicas"] == 2 && p["status"]["labelSelector"] == "app=web",
    );
    let scale = scale_of(&platform, &format!("{pool_path}/scale"));
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(
        scale["status"],
        serde_json::json!({"replicas": 2, "selector": "app=web"})
    );
    let owner = &platform
        .json(&["get", "vm", "web-0", "-n", NAMESPACE, "-o", "json"])
        .expect("web-0")["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["controller"].as_bool()),
        (Some("VirtualMachinePool"), Some(true))
    );
    let message = refusal(&platform, &pool_yaml("bad-pool", 1, "other"));
    assert!(
        message.contains("selector does not match labels."),
        "{message}"
    );
    eprintln!("pool: {:?}", started.elapsed());

    // The replica set: 2 instances, one deleted and replaced, then scaled to 1.
    let rs_started = Instant::now();
    platform.apply(&replica_set_yaml("rs", 2, "rs"));
    let vmis = ["get", "vmi", "-n", NAMESPACE, "-l", "app=rs", "-o", "json"];
    let counted = |l: &Value| {
        l["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| {
                matches!(
                    v["status"]["phase"].as_str(),
                    Some("Scheduling" | "Scheduled" | "Running")
                )
            })
            .count()
    };
    let boot = Duration::from_secs(180);
    let two = platform.wait_json(&vmis, boot, "2 scheduled VMIs", |l| {
        counted(l) == 2 && live_names(l).len() == 2
    });
    let first = live_names(&two);
    assert!(first.iter().all(|n| n.starts_with("rs")), "{first:?}");
    platform.ok(&["delete", "vmi", &first[0], "-n", NAMESPACE, "--wait=false"]);
    platform.wait_json(&vmis, boot, "a replacement VMI", |l| {
        let live = live_names(l);
        live.len() == 2 && !live.contains(&first[0]) && counted(l) >= 2
    });
    platform.ok(&["scale", "vmirs/rs", "-n", NAMESPACE, "--replicas=1"]);
    platform.wait_json(&vmis, boot, "1 VMI", |l| live_names(l).len() == 1);
    let rs_path = format!(
        "/apis/kubevirt.io/v1/namespaces/{NAMESPACE}/virtualmachineinstancereplicasets/rs/scale"
    );
    platform.wait_json(
        &["get", "vmirs", "rs", "-n", NAMESPACE, "-o", "json"],
        limit,
        "the replica set's status",
        |r| r["status"]["replicas"] == 1,
    );
    let scale = scale_of(&platform, &rs_path);
    assert_eq!(
        (
            scale["spec"]["replicas"].as_i64(),
            scale["status"]["selector"].as_str()
        ),
        (Some(1), Some("app=rs"))
    );
    let message = refusal(&platform, &replica_set_yaml("bad-rs", 1, "other"));
    assert!(
        message.contains("selector does not match labels."),
        "{message}"
    );
    platform.ok(&["scale", "vmirs/rs", "-n", NAMESPACE, "--replicas=0"]);
    platform.wait_json(&vmis, boot, "no VMI", |l| names(l).is_empty());
    eprintln!(
        "replica set: {:?}; total {:?}",
        rs_started.elapsed(),
        started.elapsed()
    );
}
