//! PriorityClasses and VirtualMachineInstancePresets on `ferrovirt up`, through kubectl:
//! the built-in classes are listed as kube-apiserver lists them, a user class is made and a
//! bad one refused in kube-apiserver's words, a VMI naming a class gets a launcher pod of that
//! priority (and one naming no such class reports the refusal), a preset is applied to the
//! VMI its selector selects with the deprecation warning, and upstream's examples apply.

use crate::platform;

use std::time::{Duration, Instant};

use platform::{Platform, condition};
use serde_json::Value;

const NAMESPACE: &str = "priorities";

/// A VMI that need not boot: its launcher pod existing is enough.
fn vmi_yaml(name: &str, extra_spec: &str, labels: &str) -> String {
    format!(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
  namespace: {NAMESPACE}
  labels: {labels}
spec:
{extra_spec}  domain:
    resources:
      requests:
        memory: 64Mi
    devices: {{}}
"#
    )
}

fn launcher_pod(platform: &Platform, vmi: &str, limit: Duration) -> Value {
    let start = Instant::now();
    loop {
        let pods = platform.json(&[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            &format!("vm.kubevirt.io/name={vmi}"),
            "-o",
            "json",
        ]);
        if let Some(pod) = pods.and_then(|list| list["items"].get(0).cloned()) {
            return pod;
        }
        assert!(start.elapsed() < limit, "no launcher pod for {vmi}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn wait_vmi(
    platform: &Platform,
    vmi: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let object = platform.json(&["get", "vmi", "-n", NAMESPACE, vmi, "-o", "json"]);
        if let Some(object) = object.filter(&done) {
            return object;
        }
        assert!(start.elapsed() < limit, "VMI {vmi} did not get there");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn priority_classes_and_presets_as_kubernetes_and_kubevirt_have_them() {
    let platform = Platform::start("priority-presets");
    platform.ok(&["create", "namespace", NAMESPACE]);

    // The built-in classes, with kube-apiserver's columns.
    let listed = platform.ok(&["get", "priorityclasses"]);
    let header = listed.lines().next().unwrap_or_default();
    for column in ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"] {
        assert!(header.contains(column), "{listed}");
    }
    for (name, value) in [
        ("system-cluster-critical", "2000000000"),
        ("system-node-critical", "2000001000"),
    ] {
        let row = listed
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default();
        assert!(row.contains(value) && row.contains("false"), "{listed}");
    }

    // A user class, and bad ones refused in kube-apiserver's words.
    platform.apply(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: vm-high}\nvalue: 1000000\n",
    );
    let too_high = platform.kubectl(
        &["create", "-f", "-"],
        Some("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: too-high}\nvalue: 1000000001\n"),
    );
    let stderr = String::from_utf8_lossy(&too_high.stderr);
    assert!(!too_high.status.success());
    assert!(
        stderr.contains(
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        ),
        "{stderr}"
    );
    let reserved = platform.kubectl(
        &["create", "-f", "-"],
        Some("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: system-mine}\nvalue: 10\n"),
    );
    let stderr = String::from_utf8_lossy(&reserved.stderr);
    assert!(
        stderr.contains("priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"),
        "{stderr}"
    );
    let changed = platform.kubectl(
        &[
            "patch",
            "priorityclass",
            "vm-high",
            "--type=merge",
            "-p",
            r#"{"value": 5}"#,
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&changed.stderr);
    assert!(
        stderr.contains("value: Forbidden: may not be changed in an update."),
        "{stderr}"
    );

    // A VMI naming the class gets a launcher pod of its priority.
    platform.apply(&vmi_yaml("classed", "  priorityClassName: vm-high\n", "{}"));
    let pod = launcher_pod(&platform, "classed", Duration::from_secs(60));
    assert_eq!(pod["spec"]["priorityClassName"], "vm-high", "{pod}");
    assert_eq!(pod["spec"]["priority"], 1000000, "{pod}");
    platform.ok(&["delete", "vmi", "-n", NAMESPACE, "classed", "--wait=false"]);

    // One naming no class reports the API server's refusal of its pod.
    platform.apply(&vmi_yaml(
        "unclassed",
        "  priorityClassName: missing\n",
        "{}",
    ));
    let refused = wait_vmi(&platform, "unclassed", Duration::from_secs(60), |vmi| {
        condition(vmi, "Synchronized").is_some()
    });
    let synchronized = condition(&refused, "Synchronized")
        .cloned()
        .unwrap_or_default();
    assert_eq!(synchronized["reason"], "FailedCreate", "{refused}");
    let message = synchronized["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("failed to create virtual machine pod: pods ")
            && message.ends_with("is forbidden: no PriorityClass with name missing was found"),
        "{message}"
    );
    platform.ok(&[
        "delete",
        "vmi",
        "-n",
        NAMESPACE,
        "unclassed",
        "--wait=false",
    ]);

    // A preset, applied to the VMI its selector selects, with the deprecation warning.
    let preset = format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstancePreset\nmetadata: {{name: two-cores, namespace: {NAMESPACE}}}\nspec:\n  selector: {{matchLabels: {{size: two}}}}\n  domain:\n    cpu: {{cores: 2}}\n    devices: {{}}\n"
    );
    let created = platform.kubectl(&["apply", "-f", "-"], Some(preset.as_str()));
    let stderr = String::from_utf8_lossy(&created.stderr);
    assert!(created.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."),
        "{stderr}"
    );
    let sized_vmi = vmi_yaml("sized", "", "{size: two}");
    let created = platform.kubectl(&["apply", "-f", "-"], Some(sized_vmi.as_str()));
    let stderr = String::from_utf8_lossy(&created.stderr);
    assert!(created.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."),
        "{stderr}"
    );
    let yaml = platform.ok(&["get", "vmi", "-n", NAMESPACE, "sized", "-o", "yaml"]);
    assert!(
        yaml.contains("virtualmachinepreset.kubevirt.io/two-cores: kubevirt.io/v1"),
        "{yaml}"
    );
    let sized = platform
        .json(&["get", "vmi", "-n", NAMESPACE, "sized", "-o", "json"])
        .unwrap_or_default();
    assert_eq!(sized["spec"]["domain"]["cpu"]["cores"], 2, "{sized}");
    platform.ok(&["delete", "vmi", "-n", NAMESPACE, "sized", "--wait=false"]);

    // Upstream's examples of both kinds apply (KubeVirt's `examples/`, not in this
    // repository, from the directory FERROVIRT_UPSTREAM_EXAMPLES names).
    let Some(examples) = std::env::var_os("FERROVIRT_UPSTREAM_EXAMPLES") else {
        return;
    };
    let examples = std::path::PathBuf::from(examples);
    for file in [
        "non-preemtible.yaml",
        "preemtible.yaml",
        "vmi-preset-small.yaml",
        "vm-priorityclass.yaml",
    ] {
        let path = examples.join(file);
        let Ok(example) = std::fs::read_to_string(&path) else {
            panic!("{} is missing", path.display());
        };
        let applied = platform.kubectl(
            &["apply", "-n", NAMESPACE, "-f", "-"],
            Some(example.as_str()),
        );
        assert!(
            applied.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
    }
}
