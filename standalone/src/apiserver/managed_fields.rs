//! Server-side apply's field ownership, for appliers: each field manager's applied
//! configuration is recorded in `metadata.managedFields` (operation `Apply`, FieldsV1),
//! and a field a manager applied before but leaves out of its new configuration is
//! removed, unless another applier still applies it, as kube-apiserver's field manager
//! does. This is what makes dropping a field from an applied manifest (or an operator's
//! desired object, as virt-operator's after a `customizeComponents` patch is removed)
//! take the field off the object.
//!
//! Written here because it is the API server's own semantics over JSON objects; no crate
//! implements structured-merge-diff. The subset: lists are owned whole (this server's
//! apply replaces them, as for an `atomic` list), writes other than apply record no
//! ownership, and conflicts between managers are not detected (every apply behaves as
//! forced).

use serde_json::{Map, Value, json};

/// The fields `config` (an applied configuration) sets, as FieldsV1
/// (`{"f:spec": {"f:replicas": {}}}`): of `metadata` only the labels and annotations, as
/// those are what an applier owns there.
pub fn applied_fields(config: &Value) -> Value {
    let Some(fields) = config.as_object() else {
        return json!({});
    };
    let mut set = Map::new();
    for (name, value) in fields {
        match name.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                let owned: Map<String, Value> = ["labels", "annotations"]
                    .iter()
                    .filter_map(|k| value.get(*k).map(|v| (format!("f:{k}"), fields_of(v))))
                    .collect();
                if !owned.is_empty() {
                    set.insert("f:metadata".into(), Value::Object(owned));
                }
            }
            _ if value.is_null() => {}
            _ => {
                set.insert(format!("f:{name}"), fields_of(value));
            }
        }
    }
    Value::Object(set)
}

/// The FieldsV1 of one value: a map's fields, anything else (a list too) a leaf.
fn fields_of(value: &Value) -> Value {
    match value {
        Value::Object(map) if !map.is_empty() => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (format!("f:{k}"), fields_of(v)))
                .collect(),
        ),
        _ => json!({}),
    }
}

/// Records `manager`'s apply of `config` on `object` (the object the apply made, with
/// `current`'s managed fields): what it applied before and applies no more is removed
/// unless another applier applies it, and its entry is replaced. An apply of the same
/// fields leaves the entry as it was, its time too, so that it changes nothing.
pub fn record_apply(
    object: &mut Value,
    current: &Value,
    config: &Value,
    manager: &str,
    subresource: Option<&str>,
) {
    let mut entries: Vec<Value> = current["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let is_own = |entry: &Value| {
        entry["manager"] == manager
            && entry["operation"] == "Apply"
            && entry["subresource"].as_str() == subresource
    };
    let applied = applied_fields(config);
    let own = entries.iter().position(is_own);
    if let Some(i) = own {
        let others: Vec<&Map<String, Value>> = entries
            .iter()
            .filter(|e| !is_own(e) && e["operation"] == "Apply")
            .filter_map(|e| e["fieldsV1"].as_object())
            .collect();
        if let (Some(before), Some(now)) = (entries[i]["fieldsV1"].as_object(), applied.as_object())
        {
            drop_unapplied(object, before, now, &others);
        }
    }
    let unchanged = own.is_some_and(|i| entries[i]["fieldsV1"] == applied);
    if !unchanged {
        let mut entry = json!({
            "manager": manager,
            "operation": "Apply",
            "apiVersion": object["apiVersion"],
            "time": super::object::now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": applied,
        });
        if let Some(subresource) = subresource {
            entry["subresource"] = json!(subresource);
        }
        match own {
            Some(i) => entries[i] = entry,
            None => entries.push(entry),
        }
    }
    object["metadata"]["managedFields"] = Value::Array(entries);
}

/// Removes from `value` each field `before` holds that neither `now` nor any of `others`
/// does. Only what was owned goes: a map owned in part loses just those parts (and goes
/// if that leaves it empty, `metadata` never), so fields written by anyone else stay.
fn drop_unapplied(
    value: &mut Value,
    before: &Map<String, Value>,
    now: &Map<String, Value>,
    others: &[&Map<String, Value>],
) {
    let Some(fields) = value.as_object_mut() else {
        return;
    };
    for (key, owned_before) in before {
        let Some(name) = key.strip_prefix("f:") else {
            continue;
        };
        let owned_now = now.get(key).and_then(Value::as_object);
        let others_below: Vec<&Map<String, Value>> = others
            .iter()
            .filter_map(|o| o.get(key).and_then(Value::as_object))
            .collect();
        // Applied whole, now or by another: it stays as the merge left it.
        if owned_now.is_some_and(Map::is_empty) || others_below.iter().any(|m| m.is_empty()) {
            continue;
        }
        match owned_before.as_object().filter(|m| !m.is_empty()) {
            // Owned in part: only those parts go.
            Some(before_below) => {
                let Some(child) = fields.get_mut(name) else {
                    continue;
                };
                let empty = Map::new();
                drop_unapplied(
                    child,
                    before_below,
                    owned_now.unwrap_or(&empty),
                    &others_below,
                );
                let emptied = child.as_object().is_some_and(Map::is_empty);
                if emptied && owned_now.is_none() && others_below.is_empty() && name != "metadata" {
                    fields.remove(name);
                }
            }
            // Owned whole, and applied by no one now.
            None if owned_now.is_none() && others_below.is_empty() => {
                fields.remove(name);
            }
            None => {}
        }
    }
}

/// Whether an apply request names its field manager, as kube-apiserver requires.
pub fn check_manager(manager: Option<&str>) -> Result<&str, String> {
    match manager {
        Some(manager) if !manager.is_empty() => Ok(manager),
        _ => Err(
            "PATCH, application/apply-patch+yaml: fieldManager is required for apply requests"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_applied_fields_are_the_configs_maps_down_to_their_leaves() {
        let config = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "1"}},
            "data": {"k": "v"},
            "list": [1, 2],
            "empty": {},
        });
        assert_eq!(
            applied_fields(&config),
            json!({
                "f:metadata": {"f:labels": {"f:a": {}}},
                "f:data": {"f:k": {}},
                "f:list": {},
                "f:empty": {},
            })
        );
    }

    #[test]
    fn what_an_applier_drops_goes_unless_another_applies_it() {
        let first = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1", "y": "2"}, "spec": {"inner": {"z": 1}}});
        let mut object = json!({"apiVersion": "v1", "metadata": {"name": "o", "labels": {"a": "1", "b": "2"}}, "data": {"x": "1", "y": "2", "kept": "by-hand"}, "spec": {"inner": {"z": 1}}});
        let current = object.clone();
        record_apply(&mut object, &current, &first, "me", None);
        assert_eq!(object["metadata"]["managedFields"][0]["manager"], "me");
        // Another applier applies label b.
        let current = object.clone();
        record_apply(
            &mut object,
            &current,
            &json!({"metadata": {"labels": {"b": "2"}}}),
            "other",
            None,
        );
        assert_eq!(
            object["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        // `me` drops label b, data.y and the whole spec.
        let second = json!({"metadata": {"labels": {"a": "1"}}, "data": {"x": "1"}});
        let current = object.clone();
        record_apply(&mut object, &current, &second, "me", None);
        assert_eq!(object["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        assert_eq!(object["data"], json!({"x": "1", "kept": "by-hand"}));
        assert!(object.get("spec").is_none(), "{object}");
        let entries = object["metadata"]["managedFields"].as_array().unwrap();
        let mine = entries.iter().find(|e| e["manager"] == "me").unwrap();
        assert_eq!(
            mine["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:data": {"f:x": {}}})
        );
    }

    #[test]
    fn status_appliers_are_their_own_and_a_manager_is_required() {
        let mut object = json!({"metadata": {"name": "o"}, "status": {"phase": "Ready"}});
        let current = object.clone();
        record_apply(
            &mut object,
            &current,
            &json!({"status": {"phase": "Ready"}}),
            "me",
            Some("status"),
        );
        assert_eq!(
            object["metadata"]["managedFields"][0]["subresource"],
            "status"
        );
        let current = object.clone();
        record_apply(
            &mut object,
            &current,
            &json!({"spec": {"a": 1}}),
            "me",
            None,
        );
        assert_eq!(
            object["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(object["status"]["phase"], "Ready");
        assert!(check_manager(None).is_err());
        assert_eq!(check_manager(Some("kubectl")), Ok("kubectl"));
    }

    #[test]
    fn what_others_wrote_and_the_metadata_stay_when_an_applier_drops_its_part() {
        let mut object =
            json!({"metadata": {"name": "o", "labels": {"mine": "1"}}, "data": {"x": "1"}});
        let current = object.clone();
        record_apply(
            &mut object,
            &current,
            &json!({"metadata": {"labels": {"mine": "1"}}, "data": {"x": "1"}}),
            "me",
            None,
        );
        // Someone labels it by hand (an update, which owns nothing here).
        object["metadata"]["labels"]["theirs"] = json!("2");
        object["data"]["y"] = json!("2");
        let current = object.clone();
        record_apply(&mut object, &current, &json!({}), "me", None);
        assert_eq!(object["metadata"]["name"], "o");
        assert_eq!(object["metadata"]["labels"], json!({"theirs": "2"}));
        assert_eq!(object["data"], json!({"y": "2"}));
    }

    #[test]
    fn applying_the_same_fields_again_changes_nothing() {
        let config = json!({"data": {"x": "1"}});
        let mut object = json!({"metadata": {"name": "o"}, "data": {"x": "1"}});
        let current = object.clone();
        record_apply(&mut object, &current, &config, "me", None);
        let once = object.clone();
        let mut again = once.clone();
        record_apply(&mut again, &once, &json!({"data": {"x": "2"}}), "me", None);
        assert_eq!(
            again["metadata"]["managedFields"],
            once["metadata"]["managedFields"]
        );
    }
}
