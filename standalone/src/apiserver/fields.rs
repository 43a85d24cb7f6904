//! Strict field validation for custom resources (`fieldValidation=Strict`, which kubectl
//! sends by default): the fields of an object that its CRD's structural schema does not
//! declare, named by their path (`spec.sorce`, `spec.template.volumes[0].nmae`), as the API
//! server's strict decoding error names them.
//!
//! Deliberately conservative: a schema node that is not plainly structural (`anyOf`,
//! `oneOf`, `allOf`, `not`, or `x-kubernetes-preserve-unknown-fields`) is not looked into,
//! so a valid object is never refused; `metadata` is the server's to check, not the CRD's.

use serde_json::Value;

/// The paths of the fields in `object` that `schema` (an `openAPIV3Schema`) does not declare.
pub fn unknown_fields(schema: &Value, object: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if opaque(schema) {
        return unknown;
    }
    if let (Some(properties), Some(fields)) = (schema.get("properties"), object.as_object()) {
        for (name, value) in fields {
            if matches!(name.as_str(), "apiVersion" | "kind" | "metadata") || skipped(name, value) {
                continue;
            }
            match properties.get(name) {
                Some(field) => walk(field, value, name, &mut unknown),
                None => unknown.push(name.clone()),
            }
        }
    }
    unknown
}

fn opaque(schema: &Value) -> bool {
    ["anyOf", "oneOf", "allOf", "not"]
        .iter()
        .any(|k| schema.get(k).is_some())
        || schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

/// What a patch may carry that is not a field: a null (removes the field) and strategic
/// merge directives (`$patch`, `$retainKeys`, ...).
fn skipped(name: &str, value: &Value) -> bool {
    value.is_null() || name.starts_with('$')
}

fn walk(schema: &Value, value: &Value, path: &str, unknown: &mut Vec<String>) {
    if opaque(schema) {
        return;
    }
    match value {
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            for (name, field) in fields {
                let envelope = matches!(name.as_str(), "apiVersion" | "kind" | "metadata");
                if skipped(name, field) || (embedded && envelope) {
                    continue;
                }
                let field_path = format!("{path}.{name}");
                match (properties.and_then(|p| p.get(name)), additional) {
                    (Some(sub), _) => walk(sub, field, &field_path, unknown),
                    (None, Some(sub)) if sub.is_object() => walk(sub, field, &field_path, unknown),
                    (None, Some(Value::Bool(true))) => {}
                    // No properties and no additionalProperties: a free-form object.
                    (None, None) if properties.is_none() => {}
                    (None, _) => unknown.push(field_path),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, element) in items.iter().enumerate() {
                    walk(item, element, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "source": {"type": "object", "properties": {"http": {
                            "type": "object", "properties": {"url": {"type": "string"}}}}},
                        "volumes": {"type": "array", "items": {
                            "type": "object", "properties": {"name": {"type": "string"}}}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    }
                }
            }
        })
    }

    #[test]
    fn declared_fields_maps_and_opaque_nodes_pass() {
        let object = json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "DataVolume",
            "metadata": {"name": "x", "anything": 1},
            "spec": {
                "source": {"http": {"url": "http://h/i"}},
                "volumes": [{"name": "a"}],
                "labels": {"a": "b"},
                "free": {"whatever": {"deep": true}},
                "either": 3,
            }
        });
        assert!(unknown_fields(&schema(), &object).is_empty());
    }

    #[test]
    fn undeclared_fields_are_named_by_path() {
        let object = json!({
            "spec": {
                "sorce": {},
                "source": {"http": {"ulr": "x"}},
                "volumes": [{"name": "a"}, {"nmae": "b"}],
            },
            "extra": 1,
            "gone": null,
            "$patch": "merge",
        });
        let mut found = unknown_fields(&schema(), &object);
        found.sort();
        assert_eq!(
            found,
            [
                "extra",
                "spec.sorce",
                "spec.source.http.ulr",
                "spec.volumes[1].nmae"
            ]
        );
    }
}
