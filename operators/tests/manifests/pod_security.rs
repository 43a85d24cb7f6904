//! Pod Security admission and `deploy/`: a namespace where a workload of these manifests
//! runs privileged, or on the host's network, PID space or paths, is labelled
//! `pod-security.kubernetes.io/enforce: privileged`, or a cluster enforcing the baseline
//! level (the default of many distributions) refuses its pods. And every copy of one
//! Namespace across the files carries the same labels, or applying the files one after
//! another would take a label off again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";

fn yaml_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "yaml") {
            found.push(path);
        }
    }
}

/// Every object of every file under `deploy/`, with the file it is in.
fn deploy_objects() -> Vec<(PathBuf, Value)> {
    let mut files = Vec::new();
    yaml_files(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy"),
        &mut files,
    );
    files
        .into_iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(&file).expect("a manifest");
            text.split("\n---")
                .map(|doc| {
                    serde_saphyr::from_str::<Value>(doc)
                        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
                })
                .filter(|doc| !doc.is_null())
                .map(|doc| (file.clone(), doc))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether a pod template asks for what Pod Security's baseline level forbids.
fn needs_privileged(pod: &Value) -> bool {
    let host = ["hostNetwork", "hostPID", "hostIPC"]
        .iter()
        .any(|field| pod[field] == true);
    let host_path = pod["volumes"]
        .as_array()
        .is_some_and(|volumes| volumes.iter().any(|v| v.get("hostPath").is_some()));
    let privileged = pod["containers"].as_array().is_some_and(|containers| {
        containers
            .iter()
            .any(|c| c["securityContext"]["privileged"] == true)
    });
    host || host_path || privileged
}

#[test]
fn privileged_workloads_run_in_namespaces_labelled_privileged() {
    let objects = deploy_objects();
    let mut labels: BTreeMap<String, (PathBuf, Value)> = BTreeMap::new();
    for (file, object) in objects.iter().filter(|(_, o)| o["kind"] == "Namespace") {
        let name = object["metadata"]["name"]
            .as_str()
            .expect("a name")
            .to_owned();
        let these = object["metadata"]["labels"].clone();
        if let Some((first, seen)) = labels.get(&name) {
            assert_eq!(
                seen,
                &these,
                "Namespace {name}: {} and {} label it differently",
                first.display(),
                file.display()
            );
        }
        labels.insert(name, (file.clone(), these));
    }
    let workloads = objects
        .iter()
        .filter(|(_, o)| matches!(o["kind"].as_str(), Some("Deployment" | "DaemonSet")));
    let mut checked = 0;
    for (file, workload) in workloads {
        if !needs_privileged(&workload["spec"]["template"]["spec"]) {
            continue;
        }
        checked += 1;
        let namespace = workload["metadata"]["namespace"]
            .as_str()
            .expect("a namespace");
        let name = &workload["metadata"]["name"];
        let level = labels
            .get(namespace)
            .map(|(_, labels)| labels[ENFORCE].clone());
        assert_eq!(
            level,
            Some(Value::from("privileged")),
            "{name} of {} runs privileged in namespace {namespace}, which is not labelled {ENFORCE}: privileged",
            file.display()
        );
    }
    // At least virt-handler, the CSI driver and the bridge marker.
    assert!(checked >= 3, "only {checked} privileged workloads found");
}
