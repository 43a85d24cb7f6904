//! Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks for, with a
//! Name column, the resource's columns (a CRD's additionalPrinterColumns) and ages rendered
//! as kubectl shows them ("5m", "3h").

use serde_json::{Value, json};

use super::resources::{
    ACCESS_MODES, CLAIM_REFERENCE, CONTROLLER_REFERENCE, Column, POD_READY, POD_RESTARTS,
    POD_STATUS, ResourceType, SERVICE_REFERENCE,
};

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
            POD_RESTARTS => "integer",
            "date" | SERVICE_REFERENCE | CLAIM_REFERENCE | CONTROLLER_REFERENCE | ACCESS_MODES
            | POD_READY | POD_STATUS => "string",
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
    match column.kind.as_str() {
        POD_READY => return pod_ready(object),
        POD_STATUS => return json!(pod_status(object)),
        POD_RESTARTS => return json!(pod_restarts(object)),
        CONTROLLER_REFERENCE => return json!(controller_reference(object)),
        _ => {}
    }
    let value = evaluate(object, &column.json_path);
    match (column.kind.as_str(), &value) {
        (ACCESS_MODES, Value::Array(modes)) => json!(
            modes
                .iter()
                .map(|m| access_mode_abbreviation(m.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        ),
        (CLAIM_REFERENCE, Value::Object(_)) => json!(format!(
            "{}/{}",
            value["namespace"].as_str().unwrap_or_default(),
            value["name"].as_str().unwrap_or_default()
        )),
        (CLAIM_REFERENCE | ACCESS_MODES, _) => json!(""),
        ("date", Value::String(time)) => json!(age(time)),
        (SERVICE_REFERENCE, Value::Null) => json!("Local"),
        (SERVICE_REFERENCE, service) => json!(format!(
            "{}/{}",
            service["namespace"].as_str().unwrap_or_default(),
            service["name"].as_str().unwrap_or_default()
        )),
        // Go's bool: a field left out is false.
        ("boolean", Value::Null) => json!(false),
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

/// The owner reference marked `controller`, as kubectl prints it: the lower-cased
/// `Kind.group` (the kind alone in the core group), a slash, the name.
fn controller_reference(object: &Value) -> String {
    let owners = object["metadata"]["ownerReferences"].as_array();
    let controller = owners
        .into_iter()
        .flatten()
        .find(|owner| owner["controller"] == true);
    let Some(controller) = controller else {
        return "<none>".to_owned();
    };
    let kind = controller["kind"].as_str().unwrap_or_default();
    let api_version = controller["apiVersion"].as_str().unwrap_or_default();
    let kind_and_group = match api_version.split_once('/') {
        Some((group, _version)) => format!("{kind}.{group}"),
        None => kind.to_owned(),
    };
    let name = controller["name"].as_str().unwrap_or_default();
    format!("{}/{name}", kind_and_group.to_lowercase())
}

/// kubectl's abbreviation of an access mode.
fn access_mode_abbreviation(mode: &str) -> &str {
    match mode {
        "ReadWriteOnce" => "RWO",
        "ReadOnlyMany" => "ROX",
        "ReadWriteMany" => "RWX",
        "ReadWriteOncePod" => "RWOP",
        other => other,
    }
}

/// Ready containers of all, `1/2`.
fn pod_ready(pod: &Value) -> Value {
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = container_statuses(pod)
        .filter(|s| s["ready"].as_bool() == Some(true))
        .count();
    json!(format!("{ready}/{total}"))
}

fn container_statuses(pod: &Value) -> impl Iterator<Item = &Value> {
    pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
}

/// What kubectl shows as a pod's status: `Terminating` once it is being deleted, else the
/// reason of a container that waits (`CrashLoopBackOff`, `ContainerCreating`) or ended
/// (`Completed`, `Error`), else the phase.
fn pod_status(pod: &Value) -> String {
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return "Terminating".into();
    }
    let phase = pod["status"]["phase"]
        .as_str()
        .unwrap_or("Pending")
        .to_owned();
    let reason = |state: &str| {
        container_statuses(pod)
            .find_map(|s| s["state"][state]["reason"].as_str().map(str::to_owned))
    };
    if let Some(waiting) = reason("waiting") {
        return waiting;
    }
    if phase != "Running"
        && let Some(ended) = reason("terminated")
    {
        return ended;
    }
    pod["status"]["reason"]
        .as_str()
        .map_or(phase, str::to_owned)
}

/// The restarts of all its containers.
fn pod_restarts(pod: &Value) -> i64 {
    container_statuses(pod)
        .filter_map(|s| s["restartCount"].as_i64())
        .sum()
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

    fn builtin(group: &str, plural: &str) -> ResourceType {
        super::super::resources::Registry::with_builtins()
            .find(group, "v1", plural)
            .expect("a built-in type")
    }

    /// The cells of each row by column name.
    fn rows_of(rt: &ResourceType, objects: Vec<Value>) -> Vec<Vec<(String, Value)>> {
        let table = render(rt, objects, json!({}));
        let names: Vec<String> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect();
        table["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                names
                    .iter()
                    .cloned()
                    .zip(row["cells"].as_array().unwrap().iter().cloned())
                    .collect()
            })
            .collect()
    }

    fn cell_of<'a>(row: &'a [(String, Value)], name: &str) -> &'a Value {
        &row.iter().find(|(n, _)| n == name).expect(name).1
    }

    #[test]
    fn pods_print_as_kubectl_prints_them() {
        let rt = builtin("", "pods");
        let names: Vec<&str> = rt.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Ready", "Status", "Restarts", "Age", "IP", "Node"]);
        assert_eq!(rt.columns[4].priority, 1, "IP is a wide column");
        let pod = |status: Value| {
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}],
                "nodeName": "n1"}, "status": status})
        };
        let crashing = pod(
            json!({"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 4,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        );
        let completed = pod(json!({"phase": "Succeeded", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"reason": "Completed"}}}]}));
        let mut deleting = pod(json!({"phase": "Running"}));
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let rows = rows_of(&rt, vec![crashing, completed, deleting, pod(json!({}))]);
        assert_eq!(cell_of(&rows[0], "Ready"), "1/2");
        assert_eq!(cell_of(&rows[0], "Status"), "CrashLoopBackOff");
        assert_eq!(cell_of(&rows[0], "Restarts"), 5);
        assert_eq!(cell_of(&rows[0], "IP"), "10.0.0.5");
        assert_eq!(cell_of(&rows[0], "Node"), "n1");
        assert_eq!(cell_of(&rows[1], "Status"), "Completed");
        assert_eq!(cell_of(&rows[2], "Status"), "Terminating");
        assert_eq!(cell_of(&rows[3], "Status"), "Pending");
        assert_eq!(cell_of(&rows[3], "Ready"), "0/2");
    }

    #[test]
    fn volumes_print_claims_and_access_modes_as_kubectl() {
        let pv = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
            "claimRef": {"namespace": "ns", "name": "disk"}}, "status": {"phase": "Bound"}});
        let rows = rows_of(&builtin("", "persistentvolumes"), vec![pv]);
        assert_eq!(cell_of(&rows[0], "Access Modes"), "RWO,RWX");
        assert_eq!(cell_of(&rows[0], "Claim"), "ns/disk");
        let pvc =
            json!({"metadata": {"name": "disk"}, "status": {"accessModes": ["ReadWriteOncePod"]}});
        let rows = rows_of(&builtin("", "persistentvolumeclaims"), vec![pvc]);
        assert_eq!(cell_of(&rows[0], "Access Modes"), "RWOP");
    }

    #[test]
    fn controller_revisions_print_their_controller_and_revision() {
        let rt = builtin("apps", "controllerrevisions");
        let owned = json!({"metadata": {"name": "vm1-abc", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "other"},
            {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "vm1",
             "controller": true}]}, "revision": 3, "data": {}});
        let core_owned = json!({"metadata": {"name": "x", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "controller": true}]},
            "revision": 1});
        let orphan = json!({"metadata": {"name": "y"}, "revision": 1});
        let rows = rows_of(&rt, vec![owned, core_owned, orphan]);
        assert_eq!(
            cell_of(&rows[0], "Controller"),
            "virtualmachine.kubevirt.io/vm1"
        );
        assert_eq!(cell_of(&rows[0], "Revision"), 3);
        assert_eq!(cell_of(&rows[1], "Controller"), "replicationcontroller/rc");
        assert_eq!(cell_of(&rows[2], "Controller"), "<none>");
    }

    #[test]
    fn priority_classes_print_as_kubectl_prints_them() {
        let rt = builtin("scheduling.k8s.io", "priorityclasses");
        let names: Vec<&str> = rt.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["Value", "Global-Default", "Age", "PreemptionPolicy"]
        );
        let class = json!({"metadata": {"name": "high"}, "value": 1000,
            "preemptionPolicy": "PreemptLowerPriority"});
        let rows = rows_of(&rt, vec![class]);
        assert_eq!(cell_of(&rows[0], "Value"), 1000);
        assert_eq!(cell_of(&rows[0], "Global-Default"), false);
        assert_eq!(
            cell_of(&rows[0], "PreemptionPolicy"),
            "PreemptLowerPriority"
        );
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
