//! A built-in kind's values as Go's JSON decoding judges them: the schema's type of a node
//! named as its Go type (`int32`, `[]v1.Container`, `map[string]string`), and the error
//! `encoding/json` gives for a value of the wrong type, which kube-apiserver passes on
//! (`json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of
//! type int32`). Go's decoders that take more than the schema says are honoured: a
//! `Quantity` is a string or a number, an int-or-string either.

use serde_json::Value;

/// The Go type a value of the wrong type for `schema` should have had, or `None` when it
/// fits; `name` is the name of the schema `schema` was referred to by.
pub fn mismatch(schema: &Value, name: Option<&str>, value: &Value) -> Option<String> {
    if value.is_null() {
        return None;
    }
    if name.is_some_and(|n| n.ends_with(".api.resource.Quantity")) {
        return (!value.is_string() && !value.is_number()).then(|| "resource.Quantity".into());
    }
    // An int-or-string node names no type: anything goes to its own decoder.
    let wanted = schema.get("type").and_then(Value::as_str)?;
    (!super::values::has_type(schema, wanted, value)).then(|| go_type(schema, name))
}

/// Go's error for `value` found where the field `path` of struct `owner` wanted `wanted`:
/// the path is the fields' (a list's elements share their list's).
pub fn unmarshal_error(value: &Value, owner: &str, path: &str, wanted: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {owner}.{} of type {wanted}",
        json_kind(value),
        without_indices(path)
    )
}

/// The last segment of a schema's name: the Go type (`DeploymentSpec` of
/// `io.k8s.api.apps.v1.DeploymentSpec`).
pub fn short_name(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// The Go type of a schema node, as Go's errors print it (`v1.DeploymentSpec`).
fn go_type(schema: &Value, name: Option<&str>) -> String {
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
    if let Some(name) = name.filter(|_| kind == "object" || kind.is_empty()) {
        let mut parts = name.rsplit('.');
        let (short, package) = (parts.next().unwrap_or(name), parts.next().unwrap_or(""));
        return format!("{package}.{short}");
    }
    let element = |key: &str| {
        schema.get(key).filter(|s| s.is_object()).map_or_else(
            || "interface {}".to_string(),
            |s| {
                let referred = s["$ref"].as_str().and_then(|r| r.rsplit('/').next());
                go_type(s, referred)
            },
        )
    };
    match (kind, schema.get("format").and_then(Value::as_str)) {
        ("integer", Some(format @ ("int32" | "int64"))) => format.to_string(),
        ("integer", _) => "int".into(),
        ("number", _) => "float64".into(),
        ("boolean", _) => "bool".into(),
        ("string", _) => "string".into(),
        ("array", _) => format!("[]{}", element("items")),
        ("object", _) => format!("map[string]{}", element("additionalProperties")),
        _ => "interface {}".into(),
    }
}

/// How Go's errors name a JSON value's kind.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `path` without its list indices (`a.b[0].c` → `a.b.c`).
fn without_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_types_are_named_as_go_names_them() {
        let int32 = json!({"type": "integer", "format": "int32"});
        assert_eq!(mismatch(&int32, None, &json!(3)), None);
        assert_eq!(
            mismatch(&int32, None, &json!("3")).as_deref(),
            Some("int32")
        );
        assert_eq!(
            unmarshal_error(&json!("3"), "DeploymentSpec", "spec.replicas", "int32"),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        let containers = json!({"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}});
        assert_eq!(
            mismatch(&containers, None, &json!({})).as_deref(),
            Some("[]v1.Container")
        );
        let spec = json!({"type": "object", "properties": {}});
        assert_eq!(
            mismatch(&spec, Some("io.k8s.api.apps.v1.DeploymentSpec"), &json!([])).as_deref(),
            Some("v1.DeploymentSpec")
        );
        let labels = json!({"type": "object", "additionalProperties": {"type": "string"}});
        assert_eq!(
            mismatch(&labels, None, &json!("a")).as_deref(),
            Some("map[string]string")
        );
        assert_eq!(without_indices("a.b[0].c[12].d"), "a.b.c.d");
    }

    #[test]
    fn what_gos_own_decoders_take_fits() {
        let quantity = json!({"type": "string"});
        let name = Some("io.k8s.apimachinery.pkg.api.resource.Quantity");
        assert_eq!(mismatch(&quantity, name, &json!(2)), None);
        assert_eq!(mismatch(&quantity, name, &json!("2Gi")), None);
        assert!(mismatch(&quantity, name, &json!(true)).is_some());
        let port = json!({"x-kubernetes-int-or-string": true});
        assert_eq!(mismatch(&port, None, &json!("http")), None);
        assert_eq!(mismatch(&port, None, &json!(8080)), None);
        assert_eq!(
            mismatch(&json!({"type": "string"}), None, &Value::Null),
            None
        );
    }
}
