//! Kubernetes' strategic merge patch, as kubectl sends it for the built-in kinds and as
//! virt-operator applies a KubeVirt CR's `customizeComponents` patches of type `strategic`.
//!
//! Hand-written: its rules come from Go struct tags that no Rust crate carries. Lists whose
//! items have a merge key (containers by `name`, volume mounts by `mountPath`, ...) merge
//! item by item; `$patch`, `$retainKeys`, `$setElementOrder/` and
//! `$deleteFromPrimitiveList/` directives are honoured; other lists are replaced.

use serde_json::{Map, Value};

/// Applies the strategic merge patch `patch` to `target`.
pub fn merge(target: &mut Value, patch: &Value) {
    strategic_merge(target, patch, "");
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
    fn containers_merge_by_name_and_directives_are_honoured() {
        let mut pod = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c1", "image": "old", "env": [{"name": "E", "value": "1"}]},
                                    {"name": "c2", "image": "keep"}],
                     "tolerations": [{"key": "t1"}]}});
        let patch = json!({"metadata": {"labels": {"b": null, "c": "3"}, "finalizers": ["y"]},
            "spec": {"$setElementOrder/containers": [{"name": "c1"}, {"name": "c2"}],
                     "containers": [{"name": "c1", "image": "new"}, {"name": "c2", "$patch": "delete"}],
                     "tolerations": [{"key": "t2"}]}});
        merge(&mut pod, &patch);
        assert_eq!(pod["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert_eq!(pod["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(
            pod["spec"]["containers"],
            json!([{"name": "c1", "image": "new", "env": [{"name": "E", "value": "1"}]}])
        );
        assert_eq!(pod["spec"]["tolerations"], json!([{"key": "t2"}]));
    }
}
