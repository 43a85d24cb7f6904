//! The generated bundle held against upstream's. Where upstream's published bundles are
//! (`../shared/upstream-api`, or the directory `FERROVIRT_UPSTREAM_API` names), every
//! object is compared field by field and every difference reported; everywhere, the
//! generated objects must match the fingerprints kept from upstream's (per object, its kind,
//! name and the sha256 of its canonical JSON), which `FERROVIRT_UPSTREAM_API_WRITE=1`
//! rewrites from the published bundles.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::deploy::{Step, enabled, step, with_operator_labels};
use super::{cluster_instancetypes, cluster_preferences};

const INSTANCETYPES_FILE: &str = "kubevirt-v1.6.6-common-clusterinstancetypes-bundle.yaml";
const PREFERENCES_FILE: &str = "kubevirt-v1.6.6-common-clusterpreferences-bundle.yaml";

fn fingerprints_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/upstream-api/common-instancetypes-v1.4.1.sha256")
}

fn published_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("FERROVIRT_UPSTREAM_API")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/upstream-api")
        });
    dir.is_dir().then_some(dir)
}

/// The objects of a published multi-document bundle.
fn published(dir: &std::path::Path, file: &str) -> Vec<Value> {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---")
        .map(|document| document.trim_start_matches("---"))
        .filter(|document| document.lines().any(|l| l.starts_with("kind:")))
        .map(|document| {
            serde_saphyr::from_str::<Value>(document)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

/// What is compared of an object: kind, name, labels, annotations and spec, keys sorted.
fn canonical(object: &Value) -> Value {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let metadata = &object["metadata"];
    sorted(&json!({
        "apiVersion": object["apiVersion"],
        "kind": object["kind"],
        "metadata": {
            "name": metadata["name"],
            "labels": metadata["labels"],
            "annotations": metadata["annotations"],
        },
        "spec": object["spec"],
    }))
}

/// `kind name sha256` per object, ordered.
fn fingerprints(objects: &[Value]) -> String {
    let mut lines: Vec<String> = objects
        .iter()
        .map(|object| {
            let text = serde_json::to_string(&canonical(object)).expect("JSON serializes");
            let digest = hex::encode(Sha256::digest(text.as_bytes()));
            let kind = object["kind"].as_str().unwrap_or_default();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            format!("{kind} {name} {digest}")
        })
        .collect();
    lines.sort();
    lines.join("\n") + "\n"
}

fn generated() -> Vec<Value> {
    cluster_instancetypes()
        .into_iter()
        .chain(cluster_preferences())
        .collect()
}

/// Every difference between `ours` and `theirs`, path by path.
fn differences(path: &str, ours: &Value, theirs: &Value, found: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            let none = Value::Null;
            for key in keys {
                let here = format!("{path}.{key}");
                differences(
                    &here,
                    a.get(key).unwrap_or(&none),
                    b.get(key).unwrap_or(&none),
                    found,
                );
            }
        }
        (a, b) if a != b => found.push(format!("{path}: ours {a}, upstream {b}")),
        _ => {}
    }
}

#[test]
fn the_bundle_is_upstreams_object_by_object() {
    let Some(dir) = published_dir() else {
        eprintln!("no published upstream bundles here: the kept fingerprints are used");
        return;
    };
    let theirs: BTreeMap<(String, String), Value> = [INSTANCETYPES_FILE, PREFERENCES_FILE]
        .iter()
        .flat_map(|file| published(&dir, file))
        .map(|o| {
            let key = (
                o["kind"].as_str().unwrap_or_default().to_owned(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            (key, canonical(&o))
        })
        .collect();
    let ours: BTreeMap<(String, String), Value> = generated()
        .iter()
        .map(|o| {
            let key = (
                o["kind"].as_str().unwrap_or_default().to_owned(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            (key, canonical(o))
        })
        .collect();
    let mut found = Vec::new();
    for key in theirs.keys().filter(|k| !ours.contains_key(*k)) {
        found.push(format!("{} {}: missing", key.0, key.1));
    }
    for key in ours.keys().filter(|k| !theirs.contains_key(*k)) {
        found.push(format!("{} {}: not upstream's", key.0, key.1));
    }
    for (key, mine) in &ours {
        if let Some(upstream) = theirs.get(key) {
            differences(&format!("{} {}", key.0, key.1), mine, upstream, &mut found);
        }
    }
    let published_objects: Vec<Value> = theirs.values().cloned().collect();
    let expected = fingerprints(&published_objects);
    let path = fingerprints_file();
    if std::env::var_os("FERROVIRT_UPSTREAM_API_WRITE").is_some() {
        std::fs::write(&path, &expected).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        kept,
        expected,
        "{} is stale; rewrite with FERROVIRT_UPSTREAM_API_WRITE=1",
        path.display()
    );
    assert!(
        found.is_empty(),
        "{} differences:\n{}",
        found.len(),
        found.join("\n")
    );
    assert_eq!(theirs.len(), 55 + 54, "upstream's bundles changed size");
}

#[test]
fn the_bundle_matches_the_kept_fingerprints() {
    let path = fingerprints_file();
    let kept = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(kept.lines().count(), 55 + 54);
    let ours = fingerprints(&generated());
    let differing: Vec<String> = kept
        .lines()
        .filter(|line| !ours.lines().any(|mine| mine == *line))
        .map(|line| format!("upstream's {line}"))
        .chain(
            ours.lines()
                .filter(|line| !kept.lines().any(|theirs| theirs == *line))
                .map(|line| format!("ours {line}")),
        )
        .collect();
    assert!(
        differing.is_empty(),
        "differ from the kept fingerprints:\n{}",
        differing.join("\n")
    );
}

#[test]
fn the_bundle_reads_as_the_typed_kinds_without_loss() {
    use api::instancetype::{VirtualMachineClusterInstancetype, VirtualMachineClusterPreference};
    for object in generated() {
        let round_trip = match object["kind"].as_str() {
            Some("VirtualMachineClusterInstancetype") => serde_json::to_value(
                serde_json::from_value::<VirtualMachineClusterInstancetype>(object.clone())
                    .expect("an instancetype"),
            ),
            _ => serde_json::to_value(
                serde_json::from_value::<VirtualMachineClusterPreference>(object.clone())
                    .expect("a preference"),
            ),
        }
        .expect("serializes");
        assert_eq!(
            round_trip["spec"], object["spec"],
            "{}",
            object["metadata"]["name"]
        );
    }
}

#[test]
fn u1_medium_is_one_vcpu_and_four_gibibytes() {
    let u1 = cluster_instancetypes()
        .into_iter()
        .find(|o| o["metadata"]["name"] == "u1.medium")
        .expect("u1.medium");
    assert_eq!(
        u1["spec"],
        json!({"cpu": {"guest": 1}, "memory": {"guest": "4Gi"}})
    );
    assert_eq!(
        u1["metadata"]["labels"]["instancetype.kubevirt.io/common-instancetypes-version"],
        "v1.4.1"
    );
}

#[test]
fn deployment_is_on_unless_the_kubevirt_cr_turns_it_off() {
    assert!(enabled(&json!({"spec": {}})));
    let on =
        json!({"spec": {"configuration": {"commonInstancetypesDeployment": {"enabled": true}}}});
    let off =
        json!({"spec": {"configuration": {"commonInstancetypesDeployment": {"enabled": false}}}});
    assert!(enabled(&on));
    assert!(!enabled(&off));
}

#[test]
fn operator_labels_follow_the_product_fields() {
    let object = json!({"metadata": {"name": "x", "labels": {"a": "b"}}});
    let plain = with_operator_labels(object.clone(), &json!({"spec": {}}));
    assert_eq!(
        plain["metadata"]["labels"],
        json!({"a": "b", "app.kubernetes.io/component": "kubevirt", "app.kubernetes.io/managed-by": "virt-operator"})
    );
    let hco =
        json!({"spec": {"productComponent": "compute", "productName": "kubevirt-hyperconverged"}});
    let labelled = with_operator_labels(object, &hco);
    assert_eq!(
        labelled["metadata"]["labels"]["app.kubernetes.io/component"],
        "compute"
    );
    assert_eq!(
        labelled["metadata"]["labels"]["app.kubernetes.io/part-of"],
        "kubevirt-hyperconverged"
    );
}

#[test]
fn an_edited_object_is_replaced_and_an_untouched_one_left() {
    let desired = with_operator_labels(cluster_instancetypes()[0].clone(), &json!({}));
    assert_eq!(step(None, &desired), Step::Create);
    let mut found = desired.clone();
    found["metadata"]["resourceVersion"] = json!("7");
    found["metadata"]["uid"] = json!("u");
    assert_eq!(step(Some(&found), &desired), Step::UpToDate);
    found["spec"]["cpu"]["guest"] = json!(64);
    assert_eq!(step(Some(&found), &desired), Step::Update("7".into()));
    let mut relabelled = desired.clone();
    relabelled["metadata"]["labels"] = Value::Object(Map::new());
    assert_eq!(
        step(Some(&relabelled), &desired),
        Step::Update(String::new())
    );
}
