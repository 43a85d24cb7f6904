//! The patch types of the Kubernetes API: JSON patch (RFC 6902), JSON merge patch
//! (RFC 7386), strategic merge patch as kubectl sends it for core types, and server-side
//! apply (merged like a merge patch that never deletes: this server does not track field
//! managers).
//!
//! Strategic merge is hand-written: its rules come from Go struct tags that no Rust crate
//! carries. Lists whose items have a merge key (containers by `name`, volume mounts by
//! `mountPath`, ...) merge item by item; `$patch`, `$retainKeys`, `$setElementOrder/` and
//! `$deleteFromPrimitiveList/` directives are honoured; other lists are replaced.

use serde_json::{Map, Value};

use super::errors::ApiError;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            other => Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got \"{other}\")"
            ))),
        }
    }
}

/// A patch as a request carries it.
pub struct Patch {
    pub kind: PatchType,
    pub body: Value,
}

/// Parses a patch body: JSON, or YAML for apply.
pub fn parse_body(kind: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(value) = serde_json::from_slice(body) {
        return Ok(value);
    }
    if kind == PatchType::Apply {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::BadRequest("apply body is not UTF-8".into()))?;
        return serde_saphyr::from_str(text)
            .map_err(|e| ApiError::BadRequest(format!("apply body is not valid YAML: {e}")));
    }
    Err(ApiError::BadRequest(
        "the patch body is not valid JSON".into(),
    ))
}

/// Applies `patch` of type `kind` to `target`.
pub fn apply(kind: PatchType, target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut out = target.clone();
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &ops).map_err(|e| ApiError::Invalid {
                kind: kind_of(target),
                name: name_of(target),
                message: format!("JSON patch failed: {e}"),
            })?;
        }
        PatchType::Merge => json_patch::merge(&mut out, patch),
        PatchType::Strategic => strategic_merge(&mut out, patch, ""),
        PatchType::Apply => apply_merge(&mut out, patch),
    }
    Ok(out)
}

fn kind_of(v: &Value) -> String {
    v["kind"].as_str().unwrap_or_default().to_string()
}

fn name_of(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Server-side apply without field ownership: maps merge, everything else replaces, and
/// nothing is removed.
fn apply_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (key, value) in p {
                if value.is_null() {
                    continue;
                }
                apply_merge(t.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// The merge key of a list field, by the field's name (and, for `ports`, where it sits).
fn merge_key(field: &str, parent: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ownerReferences" => "uid",
        "conditions" => "type",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "ports" if parent == "spec" => "port",
        "ports" => "containerPort",
        _ => return None,
    })
}

/// Primitive lists that merge as sets rather than being replaced.
fn merges_as_set(field: &str) -> bool {
    field == "finalizers"
}

fn strategic_merge(target: &mut Value, patch: &Value, field: &str) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replacement = patch.clone();
        replacement.remove("$patch");
        *target = Value::Object(replacement);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(object) = target else {
        return;
    };
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        object.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (key, value) in patch {
        if key == "$retainKeys" || key == "$patch" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(list) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(remove)) = (object.get_mut(list), value)
            {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if value.is_null() {
            object.remove(key);
            continue;
        }
        let slot = object.entry(key.clone()).or_insert(Value::Null);
        match value {
            Value::Array(items) => merge_list(slot, items, key, field),
            Value::Object(_) => strategic_merge(slot, value, key),
            other => *slot = other.clone(),
        }
    }
}

fn merge_list(target: &mut Value, patch: &[Value], field: &str, parent: &str) {
    let key =
        merge_key(field, parent).filter(|key| patch.iter().all(|item| item.get(*key).is_some()));
    match (key, target.as_array_mut()) {
        (Some(key), Some(existing)) => {
            for item in patch {
                let id = &item[key];
                let position = existing.iter().position(|e| &e[key] == id);
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(i), true) => {
                        existing.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => strategic_merge(&mut existing[i], item, field),
                    (None, false) => {
                        let mut fresh = Value::Object(Map::new());
                        strategic_merge(&mut fresh, item, field);
                        existing.push(fresh);
                    }
                }
            }
        }
        (None, Some(existing)) if merges_as_set(field) => {
            for item in patch {
                if !existing.contains(item) {
                    existing.push(item.clone());
                }
            }
        }
        _ => {
            let mut replaced = Vec::with_capacity(patch.len());
            for item in patch {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, item, field);
                replaced.push(fresh);
            }
            *target = Value::Array(replaced);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_containers_by_name_and_honours_directives() {
        let pod = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c1", "image": "old", "env": [{"name": "E", "value": "1"}]},
                                    {"name": "c2", "image": "keep"}],
                     "tolerations": [{"key": "t1"}]}});
        let patch = json!({"metadata": {"labels": {"b": null, "c": "3"}, "finalizers": ["y"]},
            "spec": {"$setElementOrder/containers": [{"name": "c1"}, {"name": "c2"}],
                     "containers": [{"name": "c1", "image": "new"}, {"name": "c2", "$patch": "delete"}],
                     "tolerations": [{"key": "t2"}]}});
        let out = apply(PatchType::Strategic, &pod, &patch).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert_eq!(out["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "c1", "image": "new", "env": [{"name": "E", "value": "1"}]}])
        );
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "t2"}]));
    }

    #[test]
    fn merge_json_and_apply_patches() {
        let dv = json!({"spec": {"source": {"http": {"url": "a"}}, "storage": {"x": 1}}});
        let merged = apply(PatchType::Merge, &dv, &json!({"spec": {"storage": null}})).unwrap();
        assert_eq!(merged, json!({"spec": {"source": {"http": {"url": "a"}}}}));
        let ops = json!([{"op": "replace", "path": "/spec/source/http/url", "value": "b"}]);
        let patched = apply(PatchType::Json, &dv, &ops).unwrap();
        assert_eq!(patched["spec"]["source"]["http"]["url"], "b");
        let bad = json!([{"op": "test", "path": "/spec/storage/x", "value": 2}]);
        assert!(apply(PatchType::Json, &dv, &bad).is_err());
        let applied = apply(
            PatchType::Apply,
            &dv,
            &json!({"status": {"phase": "Succeeded"}}),
        )
        .unwrap();
        assert_eq!(applied["status"]["phase"], "Succeeded");
        assert_eq!(applied["spec"], dv["spec"]);
    }

    #[test]
    fn apply_body_may_be_yaml() {
        let body = b"status:\n  phase: Pending\n";
        assert_eq!(
            parse_body(PatchType::Apply, body).unwrap()["status"]["phase"],
            "Pending"
        );
        assert!(parse_body(PatchType::Merge, body).is_err());
    }
}
