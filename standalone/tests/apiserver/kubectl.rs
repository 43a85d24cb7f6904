//! kubectl (the machine's /usr/bin/kubectl) against the embedded server: the CRDs of
//! deploy/crds, upstream-style DataVolume and VirtualMachine manifests, and the verbs and
//! flags an administrator uses on them.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Cluster, crds, crds_dir, data_file, run, wait_with_deadline};

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

#[test]
fn kubectl_applies_crds_and_manages_a_datavolume() {
    let c = Cluster::start(vec![]);
    let crd_dir = path(&crds_dir());
    let out = c.ok(&["apply", "-f", &crd_dir]);
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/datavolumes.cdi.kubevirt.io created"
        ),
        "{out}"
    );
    c.ok(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=30s",
        "-f",
        &crd_dir,
    ]);
    // Applying the same CRDs again changes nothing.
    let again = c.ok(&["apply", "-f", &crd_dir]);
    assert!(
        again.contains("datavolumes.cdi.kubevirt.io unchanged"),
        "{again}"
    );

    let resources = c.ok(&["api-resources"]);
    let line = |name: &str| {
        resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from api-resources:\n{resources}"))
            .to_string()
    };
    let dv = line("datavolumes");
    assert!(
        dv.contains("dv,dvs")
            && dv.contains("cdi.kubevirt.io/v1beta1")
            && dv.contains("true")
            && dv.contains("DataVolume"),
        "{dv}"
    );
    let vm = line("virtualmachines");
    assert!(
        vm.contains("vm,vms") && vm.contains("kubevirt.io/v1"),
        "{vm}"
    );
    assert!(line("configmaps").contains("cm"));

    // apply, get (Table with the CRD's printer columns), -o yaml, describe.
    let manifest = path(&data_file("datavolume-http.yaml"));
    let out = c.ok(&["apply", "-f", &manifest]);
    assert_eq!(out.trim(), "datavolume.cdi.kubevirt.io/fedora-http created");
    let table = c.ok(&["get", "dv"]);
    let header = table.lines().next().unwrap();
    assert!(
        header.starts_with("NAME") && header.contains("PHASE") && header.contains("AGE"),
        "{table}"
    );
    assert!(
        table.lines().nth(1).unwrap().starts_with("fedora-http"),
        "{table}"
    );
    let yaml = c.ok(&["get", "datavolume", "fedora-http", "-o", "yaml"]);
    assert!(
        yaml.contains("kind: DataVolume")
            && yaml.contains("storage: 5Gi")
            && yaml.contains("resourceVersion:"),
        "{yaml}"
    );
    let described = c.ok(&["describe", "dv", "fedora-http"]);
    assert!(
        described.contains("Name:")
            && described.contains("fedora-http")
            && described.contains("Kind:         DataVolume"),
        "{described}"
    );
    let dv = c.json(&["get", "dv", "fedora-http"]);
    assert_eq!(dv["metadata"]["generation"], 1);
    assert_eq!(
        dv["metadata"]["annotations"]["cdi.kubevirt.io/storage.bind.immediate.requested"],
        "true"
    );
    assert!(
        dv["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );

    // Merge and JSON patches on the spec bump the generation.
    c.ok(&[
        "patch",
        "dv",
        "fedora-http",
        "--type=merge",
        "-p",
        r#"{"spec":{"preallocation":true}}"#,
    ]);
    c.ok(&[
        "patch",
        "dv",
        "fedora-http",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/storage/resources/requests/storage","value":"6Gi"}]"#,
    ]);
    let dv = c.json(&["get", "dv", "fedora-http"]);
    assert_eq!(dv["spec"]["preallocation"], true);
    assert_eq!(
        dv["spec"]["storage"]["resources"]["requests"]["storage"],
        "6Gi"
    );
    assert_eq!(dv["metadata"]["generation"], 3);

    // A status patch on the main resource is ignored; through the subresource it lands, and
    // `kubectl wait --for=condition=Ready` (started before) sees it.
    c.ok(&[
        "patch",
        "dv",
        "fedora-http",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Bogus"}}"#,
    ]);
    assert!(c.json(&["get", "dv", "fedora-http"])["status"]["phase"] != "Bogus");
    let waiter = c
        .kubectl_command(&[
            "wait",
            "--for=condition=Ready",
            "dv/fedora-http",
            "--timeout=40s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    c.ok(&[
        "patch", "dv", "fedora-http", "--subresource=status", "--type=merge", "-p",
        r#"{"spec":{"preallocation":false},"status":{"phase":"Succeeded","progress":"100.0%","conditions":[{"type":"Ready","status":"True","reason":"Completed","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#,
    ]);
    let waited = wait_with_deadline(waiter, Duration::from_secs(60), "kubectl wait");
    assert!(
        waited.status.success(),
        "kubectl wait: {}",
        String::from_utf8_lossy(&waited.stderr)
    );
    assert!(String::from_utf8_lossy(&waited.stdout).contains("condition met"));
    let dv = c.json(&["get", "dv", "fedora-http"]);
    assert_eq!(dv["status"]["phase"], "Succeeded");
    assert_eq!(
        dv["spec"]["preallocation"], true,
        "spec changes through status are ignored"
    );
    assert_eq!(
        dv["metadata"]["generation"], 3,
        "status changes leave the generation"
    );
    let table = c.ok(&["get", "dv", "fedora-http"]);
    assert!(
        table.contains("Succeeded") && table.contains("100.0%"),
        "{table}"
    );

    // label, then select by it.
    c.ok(&["label", "dv", "fedora-http", "tier=gold"]);
    assert_eq!(
        c.ok(&["get", "dv", "-l", "tier=gold", "-o", "name"]).trim(),
        "datavolume.cdi.kubevirt.io/fedora-http"
    );
    assert_eq!(
        c.ok(&["get", "dv", "-l", "tier!=gold", "-o", "name"])
            .trim(),
        ""
    );

    // Re-applying the manifest unchanged, then changed.
    let text = std::fs::read_to_string(data_file("datavolume-http.yaml")).unwrap();
    let out = c.ok_stdin(&["apply", "-f", "-"], &text);
    assert!(
        out.contains("configured") || out.contains("unchanged"),
        "{out}"
    );
    let changed = text.replace("storage: 5Gi", "storage: 7Gi");
    let out = c.ok_stdin(&["apply", "-f", "-"], &changed);
    assert_eq!(
        out.trim(),
        "datavolume.cdi.kubevirt.io/fedora-http configured"
    );
    let dv = c.json(&["get", "dv", "fedora-http"]);
    assert_eq!(
        dv["spec"]["storage"]["resources"]["requests"]["storage"],
        "7Gi"
    );
    assert_eq!(
        dv["metadata"]["labels"]["tier"], "gold",
        "apply keeps fields it does not own"
    );
    let out = c.ok_stdin(&["apply", "-f", "-"], &changed);
    assert_eq!(
        out.trim(),
        "datavolume.cdi.kubevirt.io/fedora-http unchanged"
    );

    // A replace carrying an old resourceVersion is refused with 409 Conflict.
    let old = c.ok(&["get", "dv", "fedora-http", "-o", "json"]);
    c.ok(&["annotate", "dv", "fedora-http", "touched=yes"]);
    let err = c.ok_stdin_fails(&["replace", "-f", "-"], &old);
    assert!(
        err.contains("(Conflict)") && err.contains("the object has been modified"),
        "{err}"
    );
    // ... and accepted once it carries the current one.
    let mut current: Value =
        serde_json::from_str(&c.ok(&["get", "dv", "fedora-http", "-o", "json"])).unwrap();
    current["spec"]["preallocation"] = Value::Bool(false);
    let out = c.ok_stdin(&["replace", "-f", "-"], &current.to_string());
    assert_eq!(
        out.trim(),
        "datavolume.cdi.kubevirt.io/fedora-http replaced"
    );

    // delete and wait --for=delete.
    let waiter = c
        .kubectl_command(&["wait", "--for=delete", "dv/fedora-http", "--timeout=40s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = c.ok(&["delete", "dv", "fedora-http"]);
    assert_eq!(
        out.trim(),
        "datavolume.cdi.kubevirt.io \"fedora-http\" deleted"
    );
    let waited = wait_with_deadline(waiter, Duration::from_secs(60), "kubectl wait --for=delete");
    assert!(
        waited.status.success(),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    let err = c.fails(&["get", "dv", "fedora-http"]);
    assert!(err.contains("(NotFound)"), "{err}");
}

impl Cluster {
    fn ok_stdin_fails(&self, args: &[&str], input: &str) -> String {
        let out = crate::common::run(self.kubectl_command(args), Some(input));
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded unexpectedly"
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

#[test]
fn kubectl_manages_a_virtual_machine_with_datavolume_templates() {
    let c = Cluster::start(crds());
    let manifest = path(&data_file("virtualmachine-dvtemplates.yaml"));
    let out = c.ok(&["apply", "-f", &manifest]);
    assert_eq!(
        out.trim(),
        "virtualmachine.kubevirt.io/vm-fedora-datavolume created"
    );
    let vm = c.json(&["get", "vm", "vm-fedora-datavolume"]);
    assert_eq!(
        vm["spec"]["dataVolumeTemplates"][0]["metadata"]["name"],
        "fedora-dv"
    );
    assert_eq!(
        vm["spec"]["template"]["spec"]["volumes"][0]["dataVolume"]["name"],
        "fedora-dv"
    );
    assert_eq!(
        vm["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"]["userData"],
        "#cloud-config\npassword: fedora\nchpasswd: { expire: False }"
    );
    let table = c.ok(&["get", "vms"]);
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("vm-fedora-datavolume"),
        "{table}"
    );
    let described = c.ok(&["describe", "virtualmachine", "vm-fedora-datavolume"]);
    assert!(
        described.contains("Data Volume Templates:") && described.contains("fedora-dv"),
        "{described}"
    );

    c.ok(&[
        "patch",
        "vm",
        "vm-fedora-datavolume",
        "--type=merge",
        "-p",
        r#"{"spec":{"runStrategy":"Always"}}"#,
    ]);
    c.ok(&[
        "patch", "vm", "vm-fedora-datavolume", "--subresource=status", "--type=merge", "-p",
        r#"{"status":{"printableStatus":"Running","ready":true,"conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    c.ok(&[
        "wait",
        "--for=condition=Ready",
        "vm/vm-fedora-datavolume",
        "--timeout=30s",
    ]);
    let vm = c.json(&["get", "vm", "vm-fedora-datavolume"]);
    assert_eq!(vm["spec"]["runStrategy"], "Always");
    assert_eq!(vm["status"]["printableStatus"], "Running");
    assert_eq!(vm["metadata"]["generation"], 2);
    c.ok(&["delete", "-f", &manifest, "--wait=true", "--timeout=30s"]);
    assert_eq!(c.ok(&["get", "vm", "-o", "name"]).trim(), "");
}

#[test]
fn kubectl_get_watch_prints_changes_made_by_another_kubectl() {
    let c = Cluster::start(crds());
    c.ok(&["apply", "-f", &path(&data_file("datavolume-http.yaml"))]);
    let mut watcher = c
        .kubectl_command(&["get", "dv", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watcher.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut lines = Vec::new();
    let mut wait_for = |pred: &dyn Fn(&str) -> bool, what: &str| {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    let hit = pred(&line);
                    lines.push(line);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!(
                    "kubectl get -w never printed {what}; it printed:\n{}",
                    lines.join("\n")
                ),
            }
        }
    };
    wait_for(
        &|l| l.starts_with("ADDED") && l.contains("fedora-http"),
        "the existing DataVolume",
    );
    c.ok(&[
        "patch",
        "dv",
        "fedora-http",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"ImportInProgress","progress":"42.0%"}}"#,
    ]);
    wait_for(
        &|l| l.starts_with("MODIFIED") && l.contains("ImportInProgress") && l.contains("42.0%"),
        "the status change",
    );
    let second = std::fs::read_to_string(data_file("datavolume-http.yaml"))
        .unwrap()
        .replace("name: fedora-http", "name: second");
    c.ok_stdin(&["create", "-f", "-"], &second);
    wait_for(
        &|l| l.starts_with("ADDED") && l.contains("second"),
        "the new DataVolume",
    );
    c.ok(&["delete", "dv", "second"]);
    wait_for(
        &|l| l.starts_with("DELETED") && l.contains("second"),
        "the deletion",
    );
    watcher.kill().unwrap();
    watcher.wait().unwrap();
}

#[test]
fn kubectl_delete_waits_for_finalizers() {
    let c = Cluster::start(crds());
    c.ok(&["apply", "-f", &path(&data_file("datavolume-http.yaml"))]);
    c.ok(&[
        "patch",
        "dv",
        "fedora-http",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["test.ferrovirt.io/hold"]}}"#,
    ]);
    c.ok(&["delete", "dv", "fedora-http", "--wait=false"]);
    let dv = c.json(&["get", "dv", "fedora-http"]);
    assert!(dv["metadata"]["deletionTimestamp"].is_string(), "{dv}");
    assert_eq!(dv["metadata"]["finalizers"][0], "test.ferrovirt.io/hold");
    // Deleting again changes nothing; the object stays until the finalizer goes.
    c.ok(&["delete", "dv", "fedora-http", "--wait=false"]);
    std::thread::sleep(Duration::from_millis(300));
    c.ok(&["get", "dv", "fedora-http"]);
    let waiter = c
        .kubectl_command(&["wait", "--for=delete", "dv/fedora-http", "--timeout=40s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    c.ok(&[
        "patch",
        "dv",
        "fedora-http",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let waited = wait_with_deadline(waiter, Duration::from_secs(60), "kubectl wait --for=delete");
    assert!(
        waited.status.success(),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    assert!(
        c.fails(&["get", "dv", "fedora-http"])
            .contains("(NotFound)")
    );
}

#[test]
fn kubectl_deleting_an_owner_collects_its_dependents() {
    let c = Cluster::start(crds());
    c.ok(&["apply", "-f", &path(&data_file("datavolume-http.yaml"))]);
    let uid = c.ok(&["get", "dv", "fedora-http", "-o", "jsonpath={.metadata.uid}"]);
    assert_eq!(uid.len(), 36, "{uid}");
    let owned = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","ownerReferences":[{{"apiVersion":"cdi.kubevirt.io/v1beta1","kind":"DataVolume","name":"fedora-http","uid":"{uid}","controller":true,"blockOwnerDeletion":true}}]}},"data":{{"k":"v"}}}}"#
        )
    };
    c.ok_stdin(&["create", "-f", "-"], &owned("owned-by-dv"));
    c.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"unrelated"}}"#,
    );
    c.ok(&["delete", "dv", "fedora-http"]);
    c.ok(&[
        "wait",
        "--for=delete",
        "configmap/owned-by-dv",
        "--timeout=30s",
    ]);
    assert_eq!(
        c.ok(&["get", "cm", "unrelated", "-o", "name"]).trim(),
        "configmap/unrelated"
    );

    // With --cascade=orphan the dependent stays, without its owner reference.
    c.ok(&["apply", "-f", &path(&data_file("datavolume-http.yaml"))]);
    let uid2 = c.ok(&["get", "dv", "fedora-http", "-o", "jsonpath={.metadata.uid}"]);
    c.ok_stdin(
        &["create", "-f", "-"],
        &owned("orphaned").replace(&uid, &uid2),
    );
    c.ok(&["delete", "dv", "fedora-http", "--cascade=orphan"]);
    std::thread::sleep(Duration::from_millis(500));
    let cm = c.json(&["get", "cm", "orphaned"]);
    assert!(
        cm["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(|r| r.is_empty()),
        "{cm}"
    );
}

#[test]
fn kubectl_selects_by_label_and_field_and_pages() {
    let c = Cluster::start(vec![]);
    let mut manifest = String::new();
    for i in 0..5 {
        let parity = if i % 2 == 0 { "even" } else { "odd" };
        manifest.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  labels:\n    parity: {parity}\n    app: paging\ndata:\n  index: \"{i}\"\n"
        ));
    }
    let out = c.ok_stdin(&["create", "-f", "-"], &manifest);
    assert_eq!(out.lines().count(), 5, "{out}");

    let names = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["get", "cm", "-o", "name"];
        all.extend(args);
        c.ok(&all).lines().map(String::from).collect()
    };
    assert_eq!(
        names(&["-l", "parity=odd"]),
        ["configmap/cm-1", "configmap/cm-3"]
    );
    assert_eq!(names(&["-l", "app=paging,parity in (even)"]).len(), 3);
    assert!(
        names(&["-l", "!parity"])
            .iter()
            .all(|n| !n.starts_with("configmap/cm-"))
    );
    assert_eq!(
        names(&["--field-selector", "metadata.name=cm-2"]),
        ["configmap/cm-2"]
    );
    assert_eq!(
        names(&[
            "--field-selector",
            "metadata.name!=cm-2",
            "-l",
            "app=paging"
        ])
        .len(),
        4
    );
    assert_eq!(
        names(&[
            "-A",
            "--field-selector",
            "metadata.namespace=default",
            "-l",
            "app=paging"
        ])
        .len(),
        5
    );

    // --chunk-size=2: kubectl follows the continue tokens over three pages.
    let paged = c.ok(&["get", "cm", "-l", "app=paging", "--chunk-size=2", "-v=6"]);
    let rows: Vec<&str> = paged.lines().skip(1).collect();
    assert_eq!(rows.len(), 5, "{paged}");
    for (i, row) in rows.iter().enumerate() {
        assert!(row.starts_with(&format!("cm-{i} ")), "{paged}");
    }
    let out = c.kubectl(&["get", "cm", "-l", "app=paging", "--chunk-size=2", "-v=6"]);
    let log = String::from_utf8_lossy(&out.stderr);
    let requests = log.lines().filter(|l| l.contains("limit=2")).count();
    assert_eq!(requests, 3, "expected three pages of two:\n{log}");
    assert_eq!(
        log.lines().filter(|l| l.contains("continue=")).count(),
        2,
        "{log}"
    );
}

#[test]
fn kubectl_server_dry_runs_are_judged_and_write_nothing() {
    let c = Cluster::start(vec![]);
    let manifest = |value: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"dry"}},"data":{{"k":"{value}"}}}}"#
        )
    };
    let dry_apply = |value: &str| {
        run(
            c.kubectl_command(&["apply", "--dry-run=server", "-f", "-"]),
            Some(&manifest(value)),
        )
    };

    // A create: answered as if made, nothing stored.
    let out = dry_apply("a");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("created (server dry run)"), "{stdout}");
    let err = c.fails(&["get", "cm", "dry"]);
    assert!(err.contains("not found"), "{err}");

    // An update and a delete of a stored object leave it as it was.
    run(
        c.kubectl_command(&["apply", "-f", "-"]),
        Some(&manifest("a")),
    );
    let before = c.ok(&[
        "get",
        "cm",
        "dry",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let out = dry_apply("b");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.ok(&["delete", "cm", "dry", "--dry-run=server"]);
    let after = c.ok(&[
        "get",
        "cm",
        "dry",
        "-o",
        "jsonpath={.metadata.resourceVersion} {.data.k}",
    ]);
    assert_eq!(after, format!("{before} a"));

    // A dry-run CRD registers no resource.
    let crd =
        std::fs::read_to_string(crds_dir().join("cdi.kubevirt.io_datavolumes.yaml")).expect("CRD");
    let out = run(
        c.kubectl_command(&["create", "--dry-run=server", "-f", "-"]),
        Some(&crd),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("created (server dry run)"), "{stdout}");
    let err = c.fails(&["get", "datavolumes"]);
    assert!(
        err.contains("the server doesn't have a resource type"),
        "{err}"
    );

    // Only "All" is a dry run.
    let out = run(
        c.kubectl_command(&[
            "create",
            "--raw",
            "/api/v1/namespaces/default/configmaps?dryRun=Some",
            "-f",
            "-",
        ]),
        Some(&manifest("c")),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(r#"dryRun: Unsupported value: \"Some\""#)
            || stderr.contains(r#"dryRun: Unsupported value: "Some""#),
        "{stderr}"
    );
}

#[test]
fn kubectl_meets_a_reason_for_a_device_claim_not_an_unknown_kind() {
    let c = Cluster::start(vec![]);
    // KubeVirt v1.6.6's `examples/pgpu-resource-claim-tmpl.yaml`, at each version served.
    for version in ["v1beta1", "v1"] {
        let template = format!(
            "apiVersion: resource.k8s.io/{version}
kind: ResourceClaimTemplate
metadata:
  name: pgpu-resource-claim-tmpl
spec:
  spec:
    devices:
      requests:
      - deviceClassName: gpu.example.com
        name: pgpu
"
        );
        let out = run(c.kubectl_command(&["apply", "-f", "-"]), Some(&template));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "applied at {version}");
        assert!(
            stderr.contains(
                "spec: Forbidden: dynamic resource allocation (ResourceClaimTemplate) is not supported on ferrovirt up"
            ),
            "{stderr}"
        );
    }
    assert_eq!(
        c.ok(&["get", "resourceclaimtemplates,resourceclaims", "-o", "name"]),
        ""
    );
}

#[test]
fn kubectl_refuses_unknown_fields_of_a_custom_resource_and_applies_upstream_examples() {
    let c = Cluster::start(crds());
    let typo = r#"apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: typo
spec:
  sorce:
    http:
      url: "http://example.com/disk.img"
  storage:
    resources:
      requests:
        storage: 1Gi
"#;
    let err = c.ok_stdin_fails(&["apply", "-f", "-"], typo);
    assert!(err.contains(r#"unknown field "spec.sorce""#), "{err}");
    let err = c.fails(&["get", "dv", "typo"]);
    assert!(err.contains("not found"), "{err}");
    // kubectl --validate=false (fieldValidation=Ignore) takes it, and the unknown field is
    // pruned, as kube-apiserver prunes it.
    c.ok_stdin(&["apply", "--validate=false", "-f", "-"], typo);
    let stored = c.json(&["get", "dv", "typo"]);
    assert!(stored["spec"].get("sorce").is_none(), "{stored}");
    assert_eq!(
        stored["spec"]["storage"]["resources"]["requests"]["storage"],
        "1Gi"
    );
    c.ok(&["delete", "dv", "typo"]);
    // --validate=warn (fieldValidation=Warn) warns of what it prunes.
    let out = run(
        c.kubectl_command(&["apply", "--validate=warn", "-f", "-"]),
        Some(typo),
    );
    let warned = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{warned}");
    assert!(
        warned.contains(r#"Warning: unknown field "spec.sorce""#),
        "{warned}"
    );
    c.ok(&["delete", "dv", "typo"]);
    // A `kind: List` (what `kubectl get -o yaml` writes) is validated by kubectl itself
    // against the published schemas, which name every object's apiVersion, kind and metadata.
    c.ok_stdin(&["apply", "-f", "-"], &typo.replace("sorce", "source"));
    let listed = c.ok(&["get", "dv", "-o", "yaml"]);
    assert!(listed.contains("kind: List"), "{listed}");
    c.ok_stdin(&["apply", "-f", "-"], &listed);
    let list = r#"apiVersion: v1
kind: List
items:
- apiVersion: cdi.kubevirt.io/v1beta1
  kind: DataVolume
  metadata:
    name: listed
    labels: {from: list}
  spec:
    source: {blank: {}}
    storage: {resources: {requests: {storage: 1Gi}}}
"#;
    c.ok_stdin(&["apply", "-f", "-"], list);
    c.ok(&["get", "dv", "listed"]);
    let err = c.ok_stdin_fails(&["apply", "-f", "-"], &list.replace("source:", "sorce:"));
    assert!(
        err.contains("sorce"),
        "a List's typo is still refused: {err}"
    );
    // Every upstream example applies under strict validation.
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../api/tests/examples");
    for entry in std::fs::read_dir(&examples).expect("the upstream examples") {
        let file = entry.expect("an example").path();
        let text = std::fs::read_to_string(&file).expect("an example's text");
        // The namespaces the example names (hco.yaml's kubevirt-hyperconverged, ...).
        for line in text.lines() {
            if let Some(ns) = line.trim().strip_prefix("namespace: ") {
                let namespace = format!(
                    r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{}"}}}}"#,
                    ns.trim()
                );
                c.ok_stdin(&["apply", "-f", "-"], &namespace);
            }
        }
        let out = run(c.kubectl_command(&["apply", "-f", &path(&file)]), None);
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A typo deep in a VM's domain is refused as a real cluster refuses it: the VM's schema
    // is typed down to its leaves (issue 40), not an object that keeps unknown fields.
    let vm = r#"apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: typo-vm
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        cpu:
          coress: 2
        devices:
          disks:
          - name: root
            disk: {buss: virtio}
      volumes:
      - name: root
        containerDisk: {image: quay.io/containerdisks/fedora:latest}
"#;
    let err = c.ok_stdin_fails(&["apply", "-f", "-"], vm);
    assert!(
        err.contains(r#"unknown field "spec.template.spec.domain.cpu.coress""#)
            && err.contains(
                r#"unknown field "spec.template.spec.domain.devices.disks[0].disk.buss""#
            ),
        "{err}"
    );
    let fixed = vm.replace("coress", "cores").replace("buss", "bus");
    c.ok_stdin(&["apply", "-f", "-"], &fixed);
    let stored = c.json(&["get", "vm", "typo-vm"]);
    assert_eq!(
        stored["spec"]["template"]["spec"]["domain"]["cpu"]["cores"],
        2
    );
}

#[test]
fn kubectl_gets_the_crd_schemas_and_cel_rules_refusals() {
    let c = Cluster::start(crds());
    // Upstream HCO's v1beta1 CEL rules, on the HyperConverged CRD.
    c.ok(&["create", "namespace", "kubevirt-hyperconverged"]);
    let hc = r#"apiVersion: hco.kubevirt.io/v1beta1
kind: HyperConverged
metadata:
  name: kubevirt-hyperconverged
  namespace: kubevirt-hyperconverged
spec:
  resourceRequirements:
    vmiCPUAllocationRatio: 4
  kubeMacPoolConfiguration:
    rangeStart: "02:00:00:00:00:00"
    rangeEnd: "02:00:00:00:ff:ff"
"#;
    c.ok_stdin(&["apply", "-f", "-"], hc);
    let err = c.ok_stdin_fails(
        &["apply", "-f", "-"],
        &hc.replace("    rangeEnd: \"02:00:00:00:ff:ff\"\n", ""),
    );
    assert!(
        err.contains(r#"The HyperConverged "kubevirt-hyperconverged" is invalid: spec.kubeMacPoolConfiguration: Invalid value: "object": both rangeStart and rangeEnd must be configured together, or both omitted"#),
        "{err}"
    );
    let err = c.ok_stdin_fails(
        &["apply", "-f", "-"],
        &hc.replace("vmiCPUAllocationRatio: 4", "vmiCPUAllocationRatio: 0")
            .replace("02:00:00:00:ff:ff", "02:00:00:00:ff"),
    );
    assert!(
        err.contains("spec.resourceRequirements.vmiCPUAllocationRatio: Invalid value: 0: spec.resourceRequirements.vmiCPUAllocationRatio in body should be greater than or equal to 1")
            && err.contains("vmiCPUAllocationRatio must be greater than 0")
            && err.contains("spec.kubeMacPoolConfiguration.rangeEnd: Invalid value: \"02:00:00:00:ff\""),
        "every error is listed: {err}"
    );
    let stored = c.json(&[
        "get",
        "hco",
        "-n",
        "kubevirt-hyperconverged",
        "kubevirt-hyperconverged",
    ]);
    // Stored at v1, where the ratio is a virtualization setting, and judged there too.
    assert_eq!(stored["apiVersion"], "hco.kubevirt.io/v1");
    assert_eq!(stored["spec"]["virtualization"]["vmiCPUAllocationRatio"], 4);
    let err = c.ok_stdin_fails(
        &["apply", "-f", "-"],
        "apiVersion: hco.kubevirt.io/v1\nkind: HyperConverged\nmetadata: {name: kubevirt-hyperconverged, namespace: kubevirt-hyperconverged}\nspec:\n  virtualization: {vmiCPUAllocationRatio: 0}\n  featureGates: [{name: downwardMetrics}, {name: DownwardMetrics}]\n",
    );
    assert!(
        err.contains("spec.virtualization: Invalid value: \"object\": vmiCPUAllocationRatio must be greater than 0")
            && err.contains("feature gate names must be unique (case-insensitive)"),
        "{err}"
    );
    // CDI's rule on a StorageProfile's access modes.
    let profile = r#"{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "StorageProfile",
        "metadata": {"name": "local"},
        "spec": {"claimPropertySets": [{"accessModes": ["ReadWriteOnce"], "volumeMode": "Block"}]}}"#;
    c.ok_stdin(&["apply", "-f", "-"], profile);
    let err = c.ok_stdin_fails(
        &["apply", "-f", "-"],
        &profile.replace("ReadWriteOnce", "ReadWriteSometimes"),
    );
    assert!(
        err.contains(
            r#"spec.claimPropertySets[0].accessModes: Invalid value: "array": Illegal AccessMode"#
        ),
        "{err}"
    );

    // A CRD of its own: structural checks, a transition rule, a status checked too.
    let crd = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: string, enum: [small, large]}
              owner:
                type: string
                x-kubernetes-validations:
                - {rule: "self == oldSelf", message: owner is immutable}
          status:
            type: object
            properties:
              phase: {type: string, enum: [Pending, Ready]}
"#;
    c.ok_stdin(&["apply", "-f", "-"], crd);
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: small, owner: ann}\n";
    // kubectl may need a moment to discover the new resource.
    let applied = (0..50).any(|_| {
        let done = run(c.kubectl_command(&["apply", "-f", "-"]), Some(widget))
            .status
            .success();
        if !done {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        done
    });
    assert!(applied, "the widget applies");
    let err = c.ok_stdin_fails(&["apply", "-f", "-"], &widget.replace("small", "medium"));
    assert!(
        err.contains(
            r#"spec.size: Unsupported value: "medium": supported values: "small", "large""#
        ),
        "{err}"
    );
    let err = c.ok_stdin_fails(&["apply", "-f", "-"], &widget.replace("ann", "bob"));
    assert!(
        err.contains(r#"spec.owner: Invalid value: "string": owner is immutable"#),
        "{err}"
    );
    let err = c.ok_stdin_fails(&["apply", "-f", "-"], &widget.replace("size: small, ", ""));
    assert!(err.contains("spec.size: Required value"), "{err}");
    let phase = |phase: &str| {
        let patch = format!(r#"{{"status":{{"phase":"{phase}"}}}}"#);
        let args = [
            "patch",
            "widget",
            "w",
            "--subresource=status",
            "--type=merge",
            "-p",
        ];
        c.kubectl(&[&args[..], &[patch.as_str()]].concat())
    };
    let refused = phase("Gone");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains(r#"status.phase: Unsupported value: "Gone""#),
        "{err}"
    );
    assert!(phase("Ready").status.success());
    assert_eq!(c.json(&["get", "widget", "w"])["spec"]["owner"], "ann");
    // An undeclared field is pruned before the object is compared with the stored one: no
    // change, no new generation.
    let generation = c.json(&["get", "widget", "w"])["metadata"]["generation"].clone();
    c.ok_stdin(
        &["apply", "--validate=false", "-f", "-"],
        &widget.replace("owner: ann}", "owner: ann, color: red}"),
    );
    let after = c.json(&["get", "widget", "w"]);
    assert_eq!(after["metadata"]["generation"], generation, "{after}");
    assert!(after["spec"].get("color").is_none(), "{after}");

    // A rule that does not compile keeps the CRD out, naming the rule.
    let err = c.ok_stdin_fails(
        &["apply", "-f", "-"],
        &crd.replace("widgets", "gadgets")
            .replace("Widget", "Gadget")
            .replace("widget}", "gadget}")
            .replace("self == oldSelf", "self =="),
    );
    assert!(
        err.contains(
            "x-kubernetes-validations[0].rule: Invalid value: \"self ==\": compilation failed"
        ),
        "{err}"
    );
}

#[test]
fn kubectl_explain_prints_the_descriptions_of_custom_and_built_in_fields() {
    let c = Cluster::start(crds());
    let source = c.ok(&["explain", "datavolume.spec.source"]);
    for shown in [
        "KIND:       DataVolume",
        "FIELD: source <Object>",
        "The source of the data.",
        "http\t<Object>",
        "An http(s) endpoint.",
    ] {
        assert!(source.contains(shown), "{shown:?} not in:\n{source}");
    }
    let url = c.ok(&["explain", "dv.spec.source.http.url"]);
    assert!(url.contains("The URL of the image."), "{url}");
    let run_strategy = c.ok(&["explain", "vm.spec.runStrategy"]);
    assert!(run_strategy.contains("RerunOnFailure"), "{run_strategy}");
    // Built-in kinds carry Kubernetes' own schemas.
    let image = c.ok(&["explain", "pod.spec.containers.image"]);
    assert!(image.contains("Container image name."), "{image}");
    let claim = c.ok(&["explain", "pvc.spec.accessModes"]);
    assert!(
        claim.contains("accessModes contains the desired access modes"),
        "{claim}"
    );
    let err = c.fails(&["explain", "datavolume.spec.sorce"]);
    assert!(err.contains("field \"sorce\" does not exist"), "{err}");
}

/// `--output=plaintext-openapiv2` reads `/openapi/v2` in gnostic's protobuf encoding; other
/// clients get the same document in JSON.
#[test]
fn kubectl_explain_from_openapi_v2() {
    let c = Cluster::start(crds());
    let v2 = |path: &str| c.ok(&["explain", "--output=plaintext-openapiv2", path]);
    let source = v2("datavolume.spec.source");
    for shown in [
        "KIND:     DataVolume",
        "VERSION:  cdi.kubevirt.io/v1beta1",
        "The source of the data.",
        "http\t<Object>",
        "An http(s) endpoint.",
    ] {
        assert!(source.contains(shown), "{shown:?} not in:\n{source}");
    }
    let image = v2("pod.spec.containers.image");
    assert!(image.contains("Container image name."), "{image}");
    let limits = v2("pod.spec.containers.resources.limits");
    assert!(
        limits.contains("Limits describes the maximum amount"),
        "{limits}"
    );
    let err = c.fails(&["explain", "--output=plaintext-openapiv2", "dv.spec.sorce"]);
    assert!(err.contains("sorce"), "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&c.ok(&["get", "--raw", "/openapi/v2"])).expect("JSON");
    assert_eq!(json["swagger"], "2.0");
    let dv = &json["definitions"]["cdi.kubevirt.io.v1beta1.DataVolume"];
    assert_eq!(
        dv["x-kubernetes-group-version-kind"][0]["kind"],
        "DataVolume"
    );
}

/// kubectl's create generators send protobuf and read protobuf back; `create token` asks
/// for a TokenRequest whose token authenticates as the service account, under RBAC, until
/// the account is deleted.
#[test]
fn kubectl_create_generators_speak_protobuf_and_tokens_follow_rbac() {
    let c = Cluster::start(vec![]);
    c.ok(&["create", "namespace", "team"]);
    fn ns<'a>(args: &[&'a str]) -> Vec<&'a str> {
        [&["-n", "team"], args].concat()
    }
    c.ok(&ns(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
    ]));
    c.ok(&ns(&[
        "create",
        "secret",
        "generic",
        "pass",
        "--from-literal=word=hunter2",
    ]));
    c.ok(&ns(&[
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80:http",
    ]));
    c.ok(&ns(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--port=8080",
    ]));
    c.ok(&ns(&["create", "serviceaccount", "robot"]));
    c.ok(&ns(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=configmaps",
    ]));
    c.ok(&ns(&[
        "create",
        "rolebinding",
        "robot-reads",
        "--role=reader",
        "--serviceaccount=team:robot",
    ]));

    // What was sent in protobuf reads back as the JSON it means.
    assert_eq!(
        c.json(&ns(&["get", "configmap", "settings"]))["data"]["mode"],
        "fast"
    );
    assert_eq!(
        c.json(&ns(&["get", "secret", "pass"]))["data"]["word"],
        "aHVudGVyMg=="
    );
    let service = c.json(&ns(&["get", "service", "web"]));
    assert_eq!(service["spec"]["ports"][0]["port"], 80);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
    let deployment = c.json(&ns(&["get", "deployment", "web"]));
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx");
    assert_eq!(container["ports"][0]["containerPort"], 8080);
    assert_eq!(deployment["spec"]["replicas"], 1);
    let verbose = c.kubectl(&["create", "namespace", "other", "-v=8"]);
    let log = String::from_utf8_lossy(&verbose.stderr);
    assert!(verbose.status.success(), "{log}");
    assert!(
        log.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl sent and got protobuf:\n{log}"
    );

    let token = c.ok(&ns(&["create", "token", "robot"])).trim().to_string();
    let robot = ["--token", token.as_str(), "-n", "team"];
    let as_robot = |args: &[&'static str]| [&robot[..], args].concat();
    assert_eq!(
        c.ok(&as_robot(&["auth", "can-i", "list", "configmaps"]))
            .trim(),
        "yes"
    );
    // A plain denial carries no reason (as Kubernetes' RBAC): kubectl prints a bare "no".
    let can_not = c.kubectl(&as_robot(&["auth", "can-i", "list", "secrets"]));
    assert_eq!(String::from_utf8_lossy(&can_not.stdout).trim(), "no");
    let impersonated = ["--as=system:serviceaccount:team:robot"];
    for (verb, answer) in [("get", "yes"), ("delete", "no")] {
        let asked = c.kubectl(&ns(&[
            &impersonated[..],
            &["auth", "can-i", verb, "configmaps"],
        ]
        .concat()));
        assert_eq!(
            String::from_utf8_lossy(&asked.stdout).trim(),
            answer,
            "{asked:?}"
        );
    }
    assert!(c.ok(&as_robot(&["get", "configmaps"])).contains("settings"));
    let forbidden = c.fails(&as_robot(&["get", "secrets"]));
    assert!(
        forbidden
            .contains("User \"system:serviceaccount:team:robot\" cannot list resource \"secrets\""),
        "{forbidden}"
    );
    let short = c.fails(&ns(&["create", "token", "robot", "--duration=1m"]));
    assert!(short.contains("less than 10 minutes"), "{short}");
    let missing = c.fails(&ns(&["create", "token", "nobody"]));
    assert!(
        missing.contains("serviceaccounts \"nobody\" not found"),
        "{missing}"
    );

    // Deleting the account revokes its tokens.
    c.ok(&ns(&["delete", "serviceaccount", "robot"]));
    let revoked = c.fails(&as_robot(&["get", "configmaps"]));
    assert!(
        revoked.contains("Unauthorized") || revoked.contains("provide credentials"),
        "{revoked}"
    );
}

/// Widgets stored at v2 (`spec.dimensions.size`) and served at v1 too (`spec.size`).
const CONVERTED_WIDGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  conversion: {strategy: Webhook}
  versions:
  - name: v2
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              dimensions:
                type: object
                properties:
                  size: {type: string, enum: [small, large]}
                  color: {type: string}
          status:
            type: object
            properties:
              phase: {type: string}
  - name: v1
    served: true
    storage: false
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string, enum: [small, large, medium]}
          status:
            type: object
            properties:
              phase: {type: string}
"#;

/// The widgets' conversion webhook: v1's `spec.size` is v2's `spec.dimensions.size` (v2's
/// `color` has no place in v1).
fn convert_widget(object: &Value, to: &str) -> Result<Value, String> {
    let mut out = object.clone();
    let spec = &mut out["spec"];
    match to {
        "example.com/v2" => {
            let size = spec.as_object_mut().and_then(|s| s.remove("size"));
            spec["dimensions"]["size"] = size.ok_or("a v1 widget needs spec.size")?;
        }
        "example.com/v1" => {
            let dimensions = spec.as_object_mut().and_then(|s| s.remove("dimensions"));
            spec["size"] = dimensions.map(|d| d["size"].clone()).unwrap_or_default();
        }
        other => return Err(format!("no version {other}")),
    }
    out["apiVersion"] = serde_json::json!(to);
    Ok(out)
}

#[test]
fn kubectl_reads_and_writes_a_custom_resource_at_each_served_version() {
    let c = Cluster::start(Vec::new());
    c.ok_stdin(&["apply", "-f", "-"], CONVERTED_WIDGETS);
    let widget =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: small}\n";
    // Without its webhook the API server cannot store the widget, and says why.
    let refused = (0..50).find_map(|_| {
        let out = run(c.kubectl_command(&["apply", "-f", "-"]), Some(widget));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if err.contains("conversion webhook") {
            return Some(err);
        }
        std::thread::sleep(Duration::from_millis(100));
        None
    });
    let err = refused.expect("the write fails for want of a conversion webhook");
    assert!(
        err.contains("conversion webhook for example.com/v1, Kind=Widget failed"),
        "{err}"
    );

    c.server
        .register_converter(standalone::apiserver::Converter::new(
            "example.com",
            "Widget",
            convert_widget,
        ));
    c.ok_stdin(&["apply", "-f", "-"], widget);
    let v2 = c.json(&["get", "widgets.v2.example.com", "w"]);
    assert_eq!(v2["apiVersion"], "example.com/v2");
    assert_eq!(
        v2["spec"],
        serde_json::json!({"dimensions": {"size": "small"}})
    );
    let v1 = c.json(&["get", "widgets.v1.example.com", "w"]);
    assert_eq!(v1["spec"], serde_json::json!({"size": "small"}), "{v1}");

    // A patch is written against the version it is sent to, and judged by its schema.
    c.ok(&[
        "patch",
        "widgets.v1.example.com",
        "w",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":"large"}}"#,
    ]);
    let v2 = c.json(&["get", "widgets.v2.example.com", "w"]);
    assert_eq!(v2["spec"]["dimensions"]["size"], "large");
    let out = c.kubectl(&[
        "patch",
        "widgets.v2.example.com",
        "w",
        "--type=merge",
        "-p",
        r#"{"spec":{"dimensions":{"size":"medium"}}}"#,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(r#"spec.dimensions.size: Unsupported value: "medium""#),
        "{err}"
    );
    // A conversion that fails refuses the write and loses nothing.
    let out = c.kubectl(&[
        "patch",
        "widgets.v1.example.com",
        "w",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/size"}]"#,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("a v1 widget needs spec.size"),
        "{err}"
    );
    let v1 = c.json(&["get", "widgets.v1.example.com", "w"]);
    assert_eq!(v1["spec"]["size"], "large");
    let listed = c.json(&["get", "widgets.v1.example.com"]);
    assert_eq!(listed["items"][0]["spec"]["size"], "large", "{listed}");

    // A status written at v1 leaves the rest as stored: v2's color, which v1 cannot say,
    // stays.
    c.ok(&[
        "patch",
        "widgets.v2.example.com",
        "w",
        "--type=merge",
        "-p",
        r#"{"spec":{"dimensions":{"color":"red"}}}"#,
    ]);
    c.ok(&[
        "patch",
        "widgets.v1.example.com",
        "w",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Ready"}}"#,
    ]);
    let v2 = c.json(&["get", "widgets.v2.example.com", "w"]);
    assert_eq!(v2["status"]["phase"], "Ready");
    assert_eq!(v2["spec"]["dimensions"]["color"], "red", "{v2}");
}

/// Gadgets whose schema gives defaults: at the top of `spec`, under a defaulted object, in
/// list items and map values, and a nullable one.
const DEFAULTED_GADGETS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer, default: 1}
              strategy:
                type: object
                default: {type: Rolling}
                properties:
                  type: {type: string, enum: [Rolling, Recreate]}
                  maxUnavailable: {type: integer, default: 1}
              ports:
                type: array
                items:
                  type: object
                  properties:
                    port: {type: integer}
                    protocol: {type: string, default: TCP}
              note: {type: string, nullable: true, default: none}
"#;

#[test]
fn kubectl_sees_the_defaults_of_a_custom_resources_schema() {
    let c = Cluster::start(Vec::new());
    c.ok_stdin(&["apply", "-f", "-"], DEFAULTED_GADGETS);
    let gadget = "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\nspec:\n  ports: [{port: 80}, {port: 53, protocol: UDP}]\n";
    wait_for_crd(&c, gadget);
    let stored = c.json(&["get", "gadget", "g"]);
    assert_eq!(
        stored["spec"],
        serde_json::json!({
            "replicas": 1,
            "strategy": {"type": "Rolling", "maxUnavailable": 1},
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            "note": "none",
        }),
        "{stored}"
    );
    // A null the schema allows is kept, not defaulted.
    let nulled =
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: h}\nspec: {note: null}\n";
    c.ok_stdin(&["create", "-f", "-"], nulled);
    let h = c.json(&["get", "gadget", "h"]);
    assert_eq!(h["spec"]["note"], serde_json::Value::Null, "{h}");
    assert_eq!(h["spec"]["replicas"], 1, "{h}");

    // Writing the defaults out is no change: no new generation.
    let explicit = gadget.replace(
        "spec:\n",
        "spec:\n  replicas: 1\n  strategy: {type: Rolling, maxUnavailable: 1}\n",
    );
    c.ok_stdin(&["apply", "-f", "-"], &explicit);
    let again = c.json(&["get", "gadget", "g"]);
    assert_eq!(
        again["metadata"]["generation"],
        stored["metadata"]["generation"]
    );

    // A default the CRD gains later shows on reading what was stored before, and nothing
    // is written for it.
    let with_color = DEFAULTED_GADGETS.replace(
        "              note:",
        "              color: {type: string, default: blue}\n              note:",
    );
    c.ok_stdin(&["apply", "-f", "-"], &with_color);
    let read = (0..50)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            c.json(&["get", "gadget", "g"])
        })
        .find(|g| g["spec"]["color"] == "blue")
        .expect("the new default is read");
    assert_eq!(
        read["metadata"]["resourceVersion"],
        again["metadata"]["resourceVersion"]
    );

    // A default its own schema refuses makes the CRD invalid, as kube-apiserver says.
    let err = c.ok_stdin_fails(
        &["apply", "-f", "-"],
        &DEFAULTED_GADGETS.replace("default: 1}", "default: one}"),
    );
    assert!(
        err.contains("properties[spec].properties[replicas].default: Invalid value")
            && err.contains("must be of type integer"),
        "{err}"
    );
}

/// Applies `object` once its CRD, just applied, is served.
fn wait_for_crd(c: &Cluster, object: &str) {
    let applied = (0..50).any(|_| {
        let out = run(c.kubectl_command(&["apply", "-f", "-"]), Some(object));
        if out.status.success() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
        false
    });
    assert!(applied, "the custom resource is served");
}

#[test]
fn kubectl_refuses_unknown_fields_of_a_built_in_kind_and_they_are_not_stored() {
    let c = Cluster::start(Vec::new());
    let deployment = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAcount: web
      containers:
      - name: web
        image: nginx
        imagePullPolcy: Always
        ports: [{containerPort: 80, protcol: TCP}]
        resources: {limits: {memory: 64Mi}}
"#;
    let err = c.ok_stdin_fails(&["apply", "-f", "-"], deployment);
    assert!(
        err.contains(r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: "#)
            && err.contains(r#"unknown field "spec.template.spec.serviceAcount""#)
            && err.contains(r#"unknown field "spec.template.spec.containers[0].imagePullPolcy""#)
            && err.contains(r#"unknown field "spec.template.spec.containers[0].ports[0].protcol""#),
        "{err}"
    );
    // Without strict validation the write goes through, and what the kind does not have
    // is dropped, as kube-apiserver's decoding drops it.
    c.ok_stdin(&["apply", "--validate=false", "-f", "-"], deployment);
    let stored = c.json(&["get", "deployment", "web"]);
    let pod = &stored["spec"]["template"]["spec"];
    assert!(pod.get("serviceAcount").is_none(), "{stored}");
    assert_eq!(pod["containers"][0]["image"], "nginx");
    assert!(pod["containers"][0].get("imagePullPolcy").is_none());
    assert_eq!(
        pod["containers"][0]["ports"][0],
        serde_json::json!({"containerPort": 80})
    );
    assert_eq!(
        pod["containers"][0]["resources"]["limits"]["memory"],
        "64Mi"
    );
}

#[test]
fn kubectl_server_side_apply_takes_off_what_the_applier_drops() {
    let c = Cluster::start(Vec::new());
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {team: a, tier: web}\ndata: {one: \"1\", two: \"2\"}\n";
    c.ok_stdin(&["apply", "--server-side", "-f", "-"], config);
    // Another writer's field, and another applier's label.
    c.ok(&[
        "patch",
        "configmap",
        "settings",
        "--type=merge",
        "-p",
        r#"{"data":{"three":"3"}}"#,
    ]);
    c.ok_stdin(
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {tier: web}\n",
    );
    let managed = c.json(&["get", "configmap", "settings", "--show-managed-fields"]);
    let managers: Vec<&str> = managed["metadata"]["managedFields"]
        .as_array()
        .expect("managed fields")
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert_eq!(managers, ["kubectl", "other"], "{managed}");
    assert_eq!(
        managed["metadata"]["managedFields"][0]["fieldsV1"]["f:data"],
        serde_json::json!({"f:one": {}, "f:two": {}})
    );

    // kubectl's applier drops label tier (still applied by `other`) and data.two.
    let fewer = config
        .replace(", tier: web", "")
        .replace(", two: \"2\"", "");
    c.ok_stdin(&["apply", "--server-side", "-f", "-"], &fewer);
    let after = c.json(&["get", "configmap", "settings"]);
    assert_eq!(
        after["metadata"]["labels"],
        serde_json::json!({"team": "a", "tier": "web"})
    );
    assert_eq!(
        after["data"],
        serde_json::json!({"one": "1", "three": "3"}),
        "{after}"
    );
    // Applying the same again is no write at all.
    c.ok_stdin(&["apply", "--server-side", "-f", "-"], &fewer);
    let again = c.json(&["get", "configmap", "settings"]);
    assert_eq!(
        again["metadata"]["resourceVersion"],
        after["metadata"]["resourceVersion"]
    );
}
