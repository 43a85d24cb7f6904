//! What the server does to an object's metadata and status on create and update, as pure
//! functions: names and uids, timestamps, generation, the status subresource split,
//! resourceVersion preconditions, and the initial status of built-in kinds.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::errors::ApiError;
use super::resources::ResourceType;

/// Now, as Kubernetes writes timestamps (seconds, UTC).
pub fn now() -> String {
    api::meta_time::rfc3339(jiff::Timestamp::now())
}

pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

pub fn uid(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap_or_default()
}

pub fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub fn is_deleting(object: &Value) -> bool {
    object["metadata"]
        .get("deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// Checks `apiVersion`/`kind` against the resource the request addressed, filling them in
/// when absent.
pub fn check_type(rt: &ResourceType, version: &str, object: &mut Value) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(ApiError::BadRequest(
            "the request body is not a JSON object".into(),
        ));
    }
    let api_version = rt.api_version(version);
    for (field, expected) in [
        ("apiVersion", api_version.as_str()),
        ("kind", rt.kind.as_str()),
    ] {
        match object.get(field).and_then(Value::as_str) {
            None | Some("") => object[field] = json!(expected),
            Some(given) if given == expected => {}
            Some(given) => {
                return Err(ApiError::BadRequest(format!(
                    "the {field} of the provided object (\"{given}\") does not match the {field} of the request (\"{expected}\")"
                )));
            }
        }
    }
    Ok(())
}

/// The metadata and status of a new object, before it is stored.
pub fn prepare_create(
    rt: &ResourceType,
    namespace: &str,
    mut object: Value,
) -> Result<Value, ApiError> {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let meta = &mut object["metadata"];
    if rt.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            _ => meta["namespace"] = json!(namespace),
        }
    } else if let Some(map) = meta.as_object_mut() {
        map.remove("namespace");
    }
    let name = match meta.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => {
                format!("{prefix}{}", api::common::random_name_suffix())
            }
            _ => {
                return Err(ApiError::Invalid {
                    kind: rt.kind.clone(),
                    name: String::new(),
                    message: "metadata.name: Required value: name or generateName is required"
                        .into(),
                });
            }
        },
    };
    check_name(rt, &name)?;
    meta["name"] = json!(name);
    meta["uid"] = json!(uuid::Uuid::new_v4().to_string());
    meta["creationTimestamp"] = json!(now());
    meta["generation"] = json!(1);
    if let Some(map) = meta.as_object_mut() {
        for field in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            map.remove(field);
        }
    }
    if rt.status_subresource {
        if let Some(map) = object.as_object_mut() {
            map.remove("status");
        }
    }
    fold_string_data(rt, &mut object)?;
    initial_status(rt, &mut object);
    Ok(object)
}

/// A Secret's `stringData` is write-only: the API server merges it into `data`, base64
/// encoded and winning over a key of the same name, and does not store it.
fn fold_string_data(rt: &ResourceType, object: &mut Value) -> Result<(), ApiError> {
    if !rt.group.is_empty() || rt.plural != "secrets" {
        return Ok(());
    }
    let Some(map) = object.as_object_mut() else {
        return Ok(());
    };
    let strings = match map.remove("stringData") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(strings)) => strings,
        Some(_) => {
            return Err(ApiError::BadRequest(
                "stringData: must be a map of strings".into(),
            ));
        }
    };
    if !map.get("data").is_some_and(Value::is_object) {
        map.insert("data".into(), json!({}));
    }
    let Some(data) = map.get_mut("data").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    for (key, value) in strings {
        let Some(text) = value.as_str() else {
            return Err(ApiError::BadRequest(format!(
                "stringData.{key}: must be a string"
            )));
        };
        data.insert(key, json!(STANDARD.encode(text)));
    }
    Ok(())
}

/// DNS-1123 subdomain rules, as the API server enforces on names; RBAC's kinds take any
/// path segment (`kubevirt.io:edit`, `system:controller:...`), as Kubernetes allows them.
fn check_name(rt: &ResourceType, name: &str) -> Result<(), ApiError> {
    if rt.group == "rbac.authorization.k8s.io" {
        return check_path_segment_name(rt, name);
    }
    let valid = name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(ApiError::Invalid {
            kind: rt.kind.clone(),
            name: name.to_string(),
            message: format!(
                "metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        })
    }
}

/// A name that can be one segment of a path: not `.` or `..`, no `/` or `%`.
fn check_path_segment_name(rt: &ResourceType, name: &str) -> Result<(), ApiError> {
    let problem = match name {
        "" => Some("name or generateName is required".to_owned()),
        "." | ".." => Some(format!("may not be '{name}'")),
        _ => ["/", "%"]
            .iter()
            .find(|c| name.contains(*c))
            .map(|c| format!("may not contain '{c}'")),
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(ApiError::Invalid {
            kind: rt.kind.clone(),
            name: name.to_string(),
            message: format!("metadata.name: Invalid value: \"{name}\": {problem}"),
        }),
    }
}

/// The status a built-in kind starts with, as its registry strategy sets it.
fn initial_status(rt: &ResourceType, object: &mut Value) {
    let phase = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => "Active",
        ("", "pods") | ("", "persistentvolumeclaims") => "Pending",
        ("", "persistentvolumes") => "Available",
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            object["status"] = crd_status(object);
            return;
        }
        _ => return,
    };
    object["status"] = json!({ "phase": phase });
    if rt.plural == "persistentvolumeclaims" && object["spec"]["volumeMode"].is_null() {
        object["spec"]["volumeMode"] = json!("Filesystem");
    }
    if rt.plural == "pods" && object["spec"]["restartPolicy"].is_null() {
        object["spec"]["restartPolicy"] = json!("Always");
    }
}

/// A CRD is established as soon as it is stored: this server serves it at once.
pub fn crd_status(crd: &Value) -> Value {
    let now = now();
    let condition = |kind: &str, reason: &str, message: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    let stored: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone())
        .collect();
    json!({
        "acceptedNames": crd["spec"]["names"],
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": stored,
    })
}

/// A CRD's `status.storedVersions` with its current storage version added, as
/// apiextensions-apiserver keeps the versions objects may still be stored at.
pub fn record_storage_version(crd: &mut Value) {
    let storage = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone());
    let Some(storage) = storage else {
        return;
    };
    if !crd["status"]["storedVersions"].is_array() {
        crd["status"]["storedVersions"] = json!([]);
    }
    if let Some(stored) = crd["status"]["storedVersions"].as_array_mut() {
        if !stored.contains(&storage) {
            stored.push(storage);
        }
    }
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpdateTarget {
    Main,
    Status,
}

/// The object an update stores, given the current one, or a 409 when the update was made
/// against an older resourceVersion.
pub fn prepare_update(
    rt: &ResourceType,
    current: &Value,
    mut new: Value,
    target: UpdateTarget,
) -> Result<Value, ApiError> {
    let conflict = || ApiError::Conflict {
        resource: rt.qualified_name(),
        name: name(current).to_string(),
    };
    match new["metadata"]["resourceVersion"].as_str() {
        Some(rv)
            if !rv.is_empty() && Some(rv) != current["metadata"]["resourceVersion"].as_str() =>
        {
            return Err(conflict());
        }
        _ => {}
    }
    if let Some(given) = new["metadata"]["name"].as_str() {
        if !given.is_empty() && given != name(current) {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({given}) does not match the name on the URL ({})",
                name(current)
            )));
        }
    }
    if rt.status_subresource && target == UpdateTarget::Status {
        let mut out = current.clone();
        out["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        return Ok(out);
    }
    if rt.status_subresource {
        match current.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                if let Some(map) = new.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
    if !new["metadata"].is_object() {
        new["metadata"] = json!({});
    }
    let old_meta = &current["metadata"];
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
    ] {
        match old_meta.get(field) {
            Some(value) => new["metadata"][field] = value.clone(),
            None => {
                if let Some(map) = new["metadata"].as_object_mut() {
                    map.remove(field);
                }
            }
        }
    }
    // Field ownership the write does not name stays as it was (an apply names its own).
    if new["metadata"]
        .get("managedFields")
        .is_none_or(Value::is_null)
    {
        match old_meta.get("managedFields") {
            Some(managed) => new["metadata"]["managedFields"] = managed.clone(),
            None => {
                if let Some(map) = new["metadata"].as_object_mut() {
                    map.remove("managedFields");
                }
            }
        }
    }
    fold_string_data(rt, &mut new)?;
    let generation = old_meta["generation"].as_i64().unwrap_or(1);
    let bumped = if spec_changed(current, &new) {
        generation + 1
    } else {
        generation
    };
    new["metadata"]["generation"] = json!(bumped);
    Ok(new)
}

/// Whether anything but metadata and status differs.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("metadata");
            map.remove("status");
        }
        v
    };
    strip(old) != strip(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::Registry;

    fn dv_type() -> ResourceType {
        crate::apiserver::resources::from_crd(&json!({"spec": {
            "group": "cdi.kubevirt.io", "scope": "Namespaced",
            "names": {"kind": "DataVolume", "plural": "datavolumes"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true, "subresources": {"status": {}}}]}}))
        .unwrap()
    }

    #[test]
    fn a_crd_remembers_every_version_it_stored_at() {
        let mut crd = json!({"spec": {"versions": [
            {"name": "v1", "storage": true}, {"name": "v1beta1", "storage": false}]},
            "status": {"storedVersions": ["v1beta1"]}});
        record_storage_version(&mut crd);
        assert_eq!(crd["status"]["storedVersions"], json!(["v1beta1", "v1"]));
        record_storage_version(&mut crd);
        assert_eq!(crd["status"]["storedVersions"], json!(["v1beta1", "v1"]));
        let mut fresh = json!({"spec": {"versions": [{"name": "v2", "storage": true}]}});
        record_storage_version(&mut fresh);
        assert_eq!(fresh["status"]["storedVersions"], json!(["v2"]));
    }

    #[test]
    fn rbac_names_are_path_segments_and_others_dns_subdomains() {
        let registry = Registry::with_builtins();
        let roles = registry
            .find("rbac.authorization.k8s.io", "v1", "clusterroles")
            .expect("ClusterRoles");
        for good in ["kubevirt.io:edit", "system:controller:x", "Mixed_Case"] {
            assert!(check_name(&roles, good).is_ok(), "{good}");
        }
        for bad in [".", "..", "a/b", "a%2F"] {
            assert!(check_name(&roles, bad).is_err(), "{bad}");
        }
        assert!(check_name(&dv_type(), "kubevirt.io:edit").is_err());
    }

    #[test]
    fn create_fills_metadata_and_drops_status() {
        let rt = dv_type();
        let dv = json!({"metadata": {"generateName": "dv-"}, "spec": {}, "status": {"phase": "Succeeded"}});
        let out = prepare_create(&rt, "ns", dv).unwrap();
        assert!(name(&out).starts_with("dv-") && name(&out).len() == 8);
        assert_eq!(out["metadata"]["namespace"], "ns");
        assert_eq!(out["metadata"]["generation"], 1);
        assert!(out.get("status").is_none());
        let bad = json!({"metadata": {"name": "Bad_Name"}});
        assert!(matches!(
            prepare_create(&rt, "ns", bad),
            Err(ApiError::Invalid { .. })
        ));
        let other_ns = json!({"metadata": {"name": "a", "namespace": "other"}});
        assert!(prepare_create(&rt, "ns", other_ns).is_err());
    }

    #[test]
    fn builtin_kinds_start_with_their_phase() {
        let registry = Registry::with_builtins();
        let pvc = registry.find("", "v1", "persistentvolumeclaims").unwrap();
        let out = prepare_create(
            &pvc,
            "default",
            json!({"metadata": {"name": "p"}, "spec": {}}),
        )
        .unwrap();
        assert_eq!(out["status"]["phase"], "Pending");
        assert_eq!(out["spec"]["volumeMode"], "Filesystem");
    }

    #[test]
    fn secret_string_data_is_folded_into_data() {
        let registry = Registry::with_builtins();
        let secrets = registry.find("", "v1", "secrets").unwrap();
        let secret = json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eA=="},
                            "stringData": {"b": "new", "c": "hello"}});
        let out = prepare_create(&secrets, "default", secret).unwrap();
        assert_eq!(
            out["data"],
            json!({"a": "eA==", "b": "bmV3", "c": "aGVsbG8="})
        );
        assert!(out.get("stringData").is_none());
        let update = json!({"metadata": {"name": "s"}, "stringData": {"d": "x"}});
        let out = prepare_update(&secrets, &out, update, UpdateTarget::Main).unwrap();
        assert_eq!(out["data"], json!({"d": "eA=="}));
        let bad = json!({"metadata": {"name": "s"}, "stringData": {"e": 1}});
        assert!(prepare_create(&secrets, "default", bad).is_err());
        let config_maps = registry.find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata": {"name": "c"}, "stringData": {"kept": "as is"}});
        let out = prepare_create(&config_maps, "default", cm).unwrap();
        assert_eq!(out["stringData"]["kept"], "as is");
    }

    #[test]
    fn update_checks_version_splits_status_and_bumps_generation() {
        let rt = dv_type();
        let current = json!({"metadata": {"name": "a", "uid": "u", "resourceVersion": "5", "generation": 1},
                             "spec": {"x": 1}, "status": {"phase": "Pending"}});
        let stale = json!({"metadata": {"name": "a", "resourceVersion": "4"}, "spec": {"x": 2}});
        assert!(matches!(
            prepare_update(&rt, &current, stale, UpdateTarget::Main),
            Err(ApiError::Conflict { .. })
        ));

        let new = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {"x": 2}, "status": {"phase": "Failed"}});
        let out = prepare_update(&rt, &current, new.clone(), UpdateTarget::Main).unwrap();
        assert_eq!(out["metadata"]["generation"], 2);
        assert_eq!(out["status"]["phase"], "Pending");
        assert_eq!(out["metadata"]["uid"], "u");

        let out = prepare_update(&rt, &current, new, UpdateTarget::Status).unwrap();
        assert_eq!(out["spec"]["x"], 1);
        assert_eq!(out["status"]["phase"], "Failed");
        assert_eq!(out["metadata"]["generation"], 1);

        let labels_only =
            json!({"metadata": {"name": "a", "labels": {"l": "v"}}, "spec": {"x": 1}});
        let out = prepare_update(&rt, &current, labels_only, UpdateTarget::Main).unwrap();
        assert_eq!(out["metadata"]["generation"], 1);
    }
}
