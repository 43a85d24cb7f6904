//! The top level of the VirtualMachineInstance spec and status and of the VirtualMachine
//! spec and status, held against KubeVirt's swagger: an object carrying every field upstream
//! declares there (built from the swagger itself) survives a read and a write unchanged,
//! and our CRD schemas declare each of its fields with upstream's JSON type.
//!
//! The domain, volumes, networks, the template's metadata and the DataVolume templates are
//! typed and tested elsewhere and left out here.

use std::path::PathBuf;

use api::kubevirt::{
    VirtualMachineInstanceSpec, VirtualMachineInstanceStatus, VirtualMachineSpec,
    VirtualMachineStatus,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

const SWAGGER: &str = "kubevirt-v1.6.6.swagger.json";
const TIME: &str = "2024-01-02T03:04:05Z";

/// Properties left out: typed and tested with their own parts of the tree.
const LEFT_OUT: [(&str, &str); 5] = [
    ("v1.VirtualMachineInstanceSpec", "domain"),
    ("v1.VirtualMachineInstanceSpec", "volumes"),
    ("v1.VirtualMachineInstanceSpec", "networks"),
    ("v1.VirtualMachineInstanceTemplateSpec", "metadata"),
    ("v1.VirtualMachineSpec", "dataVolumeTemplates"),
];

/// Strings our types read as closed sets: a value of the set.
const ENUM_VALUES: [(&str, &str, &str); 7] = [
    ("v1.VirtualMachineInstanceStatus", "phase", "Running"),
    (
        "v1.VirtualMachineInstancePhaseTransitionTimestamp",
        "phase",
        "Scheduled",
    ),
    ("v1.VirtualMachineSpec", "runStrategy", "Manual"),
    ("v1.VirtualMachineStatus", "runStrategy", "Halted"),
    ("v1.VirtualMachineStatus", "printableStatus", "Stopped"),
    ("v1.VirtualMachineCondition", "status", "True"),
    ("v1.VirtualMachineInstanceCondition", "status", "False"),
];

fn upstream_dir() -> PathBuf {
    std::env::var_os("FERROVIRT_UPSTREAM_API")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/upstream-api")
        })
}

/// The swagger's definitions, or None where the published schemas are not.
fn definitions() -> Option<Value> {
    let path = upstream_dir().join(SWAGGER);
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("{}: not found, nothing to hold against", path.display());
        return None;
    };
    let swagger: Value = serde_json::from_str(&text).expect("the swagger is JSON");
    Some(swagger["definitions"].clone())
}

/// Builds an example of swagger definitions: KubeVirt's with every property, Kubernetes'
/// with the required ones.
struct Sample<'a> {
    definitions: &'a Value,
}

impl Sample<'_> {
    fn of_definition(&self, name: &str) -> Value {
        match name {
            "k8s.io.apimachinery.pkg.api.resource.Quantity" => return json!("1Gi"),
            "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => return json!(TIME),
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => return json!(8080),
            // The disk of a hotplug request is the spec's disk, typed with the devices.
            "v1.Disk" => return json!({"name": "disk-name"}),
            _ => {}
        }
        let definition = &self.definitions[name];
        assert!(definition.is_object(), "no definition {name}");
        let all = name.starts_with("v1.");
        let required: Vec<&str> = definition["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut object = Map::new();
        let properties = definition["properties"].as_object().cloned();
        for (property, node) in properties.iter().flatten() {
            if LEFT_OUT.contains(&(name, property.as_str()))
                || !(all || required.contains(&property.as_str()))
            {
                continue;
            }
            object.insert(property.clone(), self.of_property(name, property, node));
        }
        Value::Object(object)
    }

    fn of_property(&self, owner: &str, property: &str, node: &Value) -> Value {
        if let Some((_, _, value)) = ENUM_VALUES
            .iter()
            .find(|(o, p, _)| *o == owner && *p == property)
        {
            return json!(value);
        }
        self.of_node(property, node)
    }

    fn of_node(&self, property: &str, node: &Value) -> Value {
        if let Some(reference) = node["$ref"].as_str() {
            return self.of_definition(reference.trim_start_matches("#/definitions/"));
        }
        if let Some(first) = node["enum"].get(0) {
            return first.clone();
        }
        let type_ = match &node["type"] {
            Value::Array(types) => types.first().and_then(Value::as_str).unwrap_or_default(),
            other => other.as_str().unwrap_or_default(),
        };
        match type_ {
            "string" if property.ends_with("Time") || property.ends_with("Timestamp") => {
                json!(TIME)
            }
            "string" => json!(format!("{property}-value")),
            "integer" => json!(3),
            "number" => json!(1.5),
            "boolean" => json!(true),
            "array" => json!([self.of_node(property, &node["items"])]),
            "object" => match node.get("additionalProperties") {
                Some(values) => json!({"key": self.of_node(property, values)}),
                None => json!({}),
            },
            other => panic!("{property}: type {other:?}"),
        }
    }
}

/// `value` read as `T` and written back.
fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Value {
    let typed: T =
        serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{e}: {value:#}"));
    serde_json::to_value(typed).expect("serializes")
}

/// A spec with a minimal domain, the domain then dropped from both sides.
fn spec_round_trip(sample: &Value) -> (Value, Value) {
    let mut input = sample.clone();
    input["domain"] = json!({"devices": {}});
    let mut output = round_trip::<VirtualMachineInstanceSpec>(&input);
    input.as_object_mut().map(|o| o.remove("domain"));
    output.as_object_mut().map(|o| o.remove("domain"));
    (input, output)
}

#[test]
fn every_top_level_field_upstream_declares_is_kept_as_written() {
    let Some(definitions) = definitions() else {
        return;
    };
    let sample = Sample {
        definitions: &definitions,
    };
    let status = sample.of_definition("v1.VirtualMachineInstanceStatus");
    assert_eq!(round_trip::<VirtualMachineInstanceStatus>(&status), status);
    let (written, read) = spec_round_trip(&sample.of_definition("v1.VirtualMachineInstanceSpec"));
    assert_eq!(read, written);
    let status = sample.of_definition("v1.VirtualMachineStatus");
    assert_eq!(round_trip::<VirtualMachineStatus>(&status), status);

    let mut vm_spec = sample.of_definition("v1.VirtualMachineSpec");
    vm_spec["template"]["spec"]["domain"] = json!({"devices": {}});
    let mut read = round_trip::<VirtualMachineSpec>(&vm_spec);
    for spec in [&mut vm_spec, &mut read] {
        spec["template"]["spec"]
            .as_object_mut()
            .map(|o| o.remove("domain"));
    }
    assert_eq!(read, vm_spec);
}

/// The JSON type of `value` as a schema names it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// The places in `value` our `schema` does not declare, or declares with another type.
fn undeclared(path: &str, value: &Value, schema: &Value, found: &mut Vec<String>) {
    let declared = schema["type"].as_str();
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    if declared != Some(json_type(value)) && !int_or_string {
        found.push(format!(
            "{path}: ours {declared:?}, upstream {}",
            json_type(value)
        ));
        return;
    }
    match value {
        Value::Object(fields) => {
            for (name, field) in fields {
                let child = format!("{path}.{name}");
                match (&schema["properties"][name], &schema["additionalProperties"]) {
                    (Value::Object(_), _) => {
                        undeclared(&child, field, &schema["properties"][name], found)
                    }
                    (_, Value::Object(values)) => {
                        undeclared(&child, field, &Value::Object(values.clone()), found)
                    }
                    _ => found.push(format!("{child}: not declared")),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                undeclared(&format!("{path}[]"), item, &schema["items"], found);
            }
        }
        _ => {}
    }
}

fn crd_schema(kind: &str) -> Value {
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD of {kind}"));
    let crd = serde_json::to_value(crd).expect("a CRD serializes");
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let v1 = versions
        .iter()
        .find(|v| v["name"] == "v1")
        .unwrap_or_else(|| panic!("{kind} serves no v1"));
    v1["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn our_schemas_declare_every_top_level_field_with_upstreams_type() {
    let Some(definitions) = definitions() else {
        return;
    };
    let sample = Sample {
        definitions: &definitions,
    };
    let mut found = Vec::new();
    for (kind, prefix) in [
        ("VirtualMachineInstance", "v1.VirtualMachineInstance"),
        ("VirtualMachine", "v1.VirtualMachine"),
    ] {
        let schema = crd_schema(kind);
        for part in ["spec", "status"] {
            let upstream = sample.of_definition(&format!("{prefix}{}", capitalized(part)));
            undeclared(
                &format!("{kind}.{part}"),
                &upstream,
                &schema["properties"][part],
                &mut found,
            );
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_typo_at_the_top_level_is_not_declared() {
    let mut found = Vec::new();
    let schema = crd_schema("VirtualMachineInstance");
    undeclared(
        "spec",
        &json!({"hostname": "a", "hostnmae": "b"}),
        &schema["properties"]["spec"],
        &mut found,
    );
    assert_eq!(found, vec!["spec.hostnmae: not declared".to_string()]);
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}
