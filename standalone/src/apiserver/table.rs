//! Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks for, with a
//! Name column, the resource's columns (a CRD's additionalPrinterColumns) and ages rendered
//! as kubectl shows them ("5m", "3h").

use serde_json::{Value, json};

use super::resources::{Column, ResourceType, SERVICE_REFERENCE};

/// Whether an Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|part| part.contains("as=Table"))
}

/// A Table of `objects`; list metadata (resourceVersion, continue) is the caller's.
pub fn render(rt: &ResourceType, objects: Vec<Value>, list_meta: Value) -> Value {
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace.",
    })];
    definitions.extend(rt.columns.iter().map(|c| {
        let openapi_type = match c.kind.as_str() {
            "date" | SERVICE_REFERENCE => "string",
            other => other,
        };
        json!({"name": c.name, "type": openapi_type,
               "format": "", "priority": c.priority, "description": c.json_path})
    }));
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|object| {
            let mut cells = vec![object["metadata"]["name"].clone()];
            cells.extend(rt.columns.iter().map(|c| cell(&object, c)));
            json!({"cells": cells, "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

fn cell(object: &Value, column: &Column) -> Value {
    let value = evaluate(object, &column.json_path);
    match (column.kind.as_str(), &value) {
        ("date", Value::String(time)) => json!(age(time)),
        (SERVICE_REFERENCE, Value::Null) => json!("Local"),
        (SERVICE_REFERENCE, service) => json!(format!(
            "{}/{}",
            service["namespace"].as_str().unwrap_or_default(),
            service["name"].as_str().unwrap_or_default()
        )),
        (_, Value::Null) => json!("<none>"),
        (_, Value::Array(items)) => json!(
            items
                .iter()
                .map(|v| v
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| v.to_string()))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => value,
    }
}

/// The subset of JSONPath that printer columns use: `.a.b`, `[0]`, and
/// `[?(@.type=="Ready")]` filters.
pub fn evaluate(object: &Value, path: &str) -> Value {
    let mut current = object.clone();
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                return Value::Null;
            };
            let selector = &after[..end];
            rest = &after[end + 1..];
            current = index(&current, selector);
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            current = current.get(&after[..end]).cloned().unwrap_or(Value::Null);
            rest = &after[end..];
        } else {
            return Value::Null;
        }
    }
    current
}

fn index(current: &Value, selector: &str) -> Value {
    if let Ok(i) = selector.parse::<usize>() {
        return current.get(i).cloned().unwrap_or(Value::Null);
    }
    let Some(filter) = selector
        .strip_prefix("?(@.")
        .and_then(|f| f.strip_suffix(')'))
    else {
        return Value::Null;
    };
    let Some((field, expected)) = filter.split_once("==") else {
        return Value::Null;
    };
    let expected = expected.trim().trim_matches(|c| c == '"' || c == '\'');
    current
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|i| i[field.trim()].as_str() == Some(expected))
        })
        .cloned()
        .unwrap_or(Value::Null)
}

/// "45s", "12m", "5h", "3d" as kubectl prints ages.
pub fn age(timestamp: &str) -> String {
    let Ok(then) = timestamp.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let seconds = jiff::Timestamp::now()
        .as_second()
        .saturating_sub(then.as_second())
        .max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printer_column_paths() {
        let dv = json!({"status": {"phase": "Succeeded", "progress": "100.0%",
            "conditions": [{"type": "Bound", "status": "True"}, {"type": "Ready", "status": "False"}]}});
        assert_eq!(evaluate(&dv, ".status.phase"), "Succeeded");
        assert_eq!(evaluate(&dv, ".status.conditions[1].type"), "Ready");
        assert_eq!(
            evaluate(&dv, ".status.conditions[?(@.type==\"Ready\")].status"),
            "False"
        );
        assert_eq!(evaluate(&dv, ".status.missing"), Value::Null);
    }

    #[test]
    fn apiservice_columns() {
        let rt = super::super::resources::Registry::with_builtins()
            .find("apiregistration.k8s.io", "v1", "apiservices")
            .unwrap();
        let remote = json!({"metadata": {"name": "v1.subresources.kubevirt.io"},
            "spec": {"service": {"namespace": "kubevirt", "name": "virt-api"}},
            "status": {"conditions": [{"type": "Available", "status": "False"}]}});
        let local = json!({"metadata": {"name": "v1.apps"}, "spec": {"service": null}});
        let table = render(&rt, vec![remote, local], json!({}));
        let cells = |row: usize| table["rows"][row]["cells"].as_array().unwrap().clone();
        assert_eq!(cells(0)[1..3], [json!("kubevirt/virt-api"), json!("False")]);
        assert_eq!(cells(1)[1..3], [json!("Local"), json!("<none>")]);
        assert_eq!(table["columnDefinitions"][1]["type"], "string");
    }

    #[test]
    fn ages_read_like_kubectl() {
        let ten_minutes_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(600);
        assert_eq!(
            age(&ten_minutes_ago.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            "10m"
        );
        assert_eq!(age("garbage"), "<unknown>");
    }
}
