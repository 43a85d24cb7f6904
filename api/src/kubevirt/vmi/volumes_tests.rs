//! Volumes and networks: every field upstream declares round-trips, and the CRD schemas of
//! VMs and VM instances declare them with upstream's types and keep nothing unknown.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use crate::kubevirt::vmi::Network;

/// One volume per source, each source with every field upstream declares.
fn every_volume_source() -> Value {
    let secret = json!({"name": "s"});
    json!([
        {"name": "cd", "containerDisk": {"image": "quay.io/disk", "imagePullPolicy": "Always",
            "imagePullSecret": "pull", "path": "/disk/d.img"}},
        {"name": "nc", "cloudInitNoCloud": {"userData": "#cloud-config", "userDataBase64": "eA==",
            "secretRef": secret, "networkData": "version: 2", "networkDataBase64": "eQ==",
            "networkDataSecretRef": {"name": "n"}}},
        {"name": "cfg", "cloudInitConfigDrive": {"userData": "u", "userDataBase64": "dQ==",
            "secretRef": secret, "networkData": "n", "networkDataBase64": "bg==",
            "networkDataSecretRef": {"name": "n"}}},
        {"name": "dv", "dataVolume": {"name": "dv", "hotpluggable": false}},
        {"name": "pvc", "persistentVolumeClaim": {"claimName": "c", "readOnly": true,
            "hotpluggable": false}},
        {"name": "empty", "emptyDisk": {"capacity": "1Gi"}},
        {"name": "eph", "ephemeral": {"persistentVolumeClaim": {"claimName": "c", "readOnly": true}}},
        {"name": "host", "hostDisk": {"path": "/d.img", "type": "DiskOrCreate", "capacity": "2Gi",
            "shared": false}},
        {"name": "cm", "configMap": {"name": "cm", "optional": true, "volumeLabel": "L"}},
        {"name": "sec", "secret": {"secretName": "s", "optional": false, "volumeLabel": "L"}},
        {"name": "sa", "serviceAccount": {"serviceAccountName": "default"}},
        {"name": "dapi", "downwardAPI": {"volumeLabel": "L", "fields": [
            {"path": "labels", "mode": 420, "fieldRef": {"apiVersion": "v1",
                "fieldPath": "metadata.labels"}},
            {"path": "mem", "resourceFieldRef": {"containerName": "compute",
                "resource": "limits.memory", "divisor": "1Mi"}}]}},
        {"name": "metrics", "downwardMetrics": {}},
        {"name": "dump", "memoryDump": {"claimName": "d", "readOnly": false, "hotpluggable": true}},
        {"name": "sysprep-cm", "sysprep": {"configMap": {"name": "answers"}}},
        {"name": "sysprep-secret", "sysprep": {"secret": {"name": "answers"}}},
    ])
}

#[test]
fn every_volume_source_round_trips() {
    let given = every_volume_source();
    let volumes: Vec<Volume> = serde_json::from_value(given.clone()).expect("volumes parse");
    assert_eq!(
        serde_json::to_value(&volumes).expect("volumes serialize"),
        given
    );
    for volume in &volumes {
        let kinds = volume.source_kinds();
        assert_eq!(kinds.len(), 1, "{}: {kinds:?}", volume.name);
        let written = serde_json::to_value(volume).expect("a volume serializes");
        assert!(
            written.get(&kinds[0]).is_some(),
            "{}: {kinds:?}",
            volume.name
        );
    }
}

#[test]
fn every_network_field_round_trips() {
    let given = json!([
        {"name": "default", "pod": {"vmNetworkCIDR": "10.0.2.0/24",
            "vmIPv6NetworkCIDR": "fd10:0:2::/120"}},
        {"name": "br", "multus": {"networkName": "ns/br", "default": false}},
    ]);
    let networks: Vec<Network> = serde_json::from_value(given.clone()).expect("networks parse");
    assert_eq!(
        serde_json::to_value(&networks).expect("networks serialize"),
        given
    );
}

fn swagger_path() -> PathBuf {
    std::env::var_os("FERROVIRT_UPSTREAM_API")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/upstream-api")
        })
        .join("kubevirt-v1.6.6.swagger.json")
}

fn swagger() -> Value {
    let dir = std::env::var_os("FERROVIRT_UPSTREAM_API")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/upstream-api")
        });
    let file = dir.join("kubevirt-v1.6.6.swagger.json");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; set FERROVIRT_UPSTREAM_API to the upstream schemas",
            file.display()
        )
    });
    let swagger: Value = serde_json::from_str(&text).expect("the swagger is JSON");
    swagger["definitions"].clone()
}

/// The schema at `path` (property names, `[]` for array items) of `kind`'s v1 CRD.
fn ours(kind: &str, path: &[&str]) -> Value {
    let crd = crate::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD of {kind}"));
    let crd = serde_json::to_value(crd).expect("a CRD serializes");
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let v1 = versions.iter().find(|v| v["name"] == "v1").expect("v1");
    let mut node = &v1["schema"]["openAPIV3Schema"];
    for step in path {
        node = match *step {
            "[]" => &node["items"],
            name => &node["properties"][name],
        };
        assert!(node.is_object(), "{kind} has no {path:?}");
    }
    node.clone()
}

/// Upstream's JSON types of a node: Quantity-like references count as int-or-string.
fn upstream_type(definitions: &Value, node: &Value) -> String {
    match node["$ref"].as_str() {
        Some(r) if r.ends_with("resource.Quantity") || r.ends_with("intstr.IntOrString") => {
            "int-or-string".into()
        }
        Some(r) => upstream_type(
            definitions,
            &definitions[r.trim_start_matches("#/definitions/")],
        ),
        None => node["type"].as_str().unwrap_or("object").to_owned(),
    }
}

fn our_type(node: &Value) -> String {
    if node["x-kubernetes-int-or-string"] == true {
        return "int-or-string".into();
    }
    node["type"].as_str().unwrap_or("?").to_owned()
}

/// Differences between upstream's definition `node` and our schema `our`, by field path.
fn differences(definitions: &Value, node: &Value, our: &Value, at: &str, out: &mut Vec<String>) {
    if let Some(r) = node["$ref"].as_str() {
        let name = r.trim_start_matches("#/definitions/");
        if upstream_type(definitions, node) == "int-or-string" {
            if our_type(our) != "int-or-string" {
                out.push(format!(
                    "{at}: ours is {}, not int-or-string",
                    our_type(our)
                ));
            }
            return;
        }
        return differences(definitions, &definitions[name], our, at, out);
    }
    let (theirs, mine) = (upstream_type(definitions, node), our_type(our));
    if theirs != mine {
        out.push(format!("{at}: upstream {theirs}, ours {mine}"));
        return;
    }
    if our["x-kubernetes-preserve-unknown-fields"] == true {
        out.push(format!("{at}: ours keeps unknown fields"));
    }
    if theirs == "array" {
        return differences(
            definitions,
            &node["items"],
            &our["items"],
            &format!("{at}[]"),
            out,
        );
    }
    let empty = serde_json::Map::new();
    let upstream = node["properties"].as_object().unwrap_or(&empty);
    let declared = our["properties"].as_object().unwrap_or(&empty);
    for (name, field) in upstream {
        match declared.get(name) {
            Some(mine) => differences(definitions, field, mine, &format!("{at}.{name}"), out),
            None => out.push(format!("{at}.{name}: missing in ours")),
        }
    }
    for name in declared.keys().filter(|n| !upstream.contains_key(*n)) {
        out.push(format!("{at}.{name}: not upstream's"));
    }
}

#[test]
fn volumes_and_networks_are_declared_as_upstream_declares_them() {
    // Where the published schemas are not (CI), the kept form holds the same paths:
    // api/tests/crds/upstream.
    if !swagger_path().exists() {
        eprintln!(
            "{}: not found, nothing to hold against",
            swagger_path().display()
        );
        return;
    }
    let definitions = swagger();
    let mut found = Vec::new();
    for (kind, spec) in [
        ("VirtualMachineInstance", vec!["spec"]),
        ("VirtualMachine", vec!["spec", "template", "spec"]),
    ] {
        for (field, definition) in [("volumes", "v1.Volume"), ("networks", "v1.Network")] {
            let mut path = spec.clone();
            path.extend([field, "[]"]);
            differences(
                &definitions,
                &definitions[definition],
                &ours(kind, &path),
                &format!("{kind}.{}", path.join(".")),
                &mut found,
            );
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
