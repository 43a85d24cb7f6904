//! What a reconcile of an SSP decides to write: a list of changes to objects, each a whole
//! JSON object (so a replace is conditional on the resourceVersion it was read at), and the
//! helpers the operand plans share to merge labels and annotations the way SSP does.

use std::collections::BTreeMap;

use kube::api::{ApiResource, GroupVersionKind};
use serde_json::{Map, Value};

/// The kinds of objects the SSP operator (and the tekton-tasks operator beside it) writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A core Namespace (the golden images namespace).
    Namespace,
    /// A `template.openshift.io/v1` Template.
    Template,
    /// A `cdi.kubevirt.io/v1beta1` DataImportCron.
    DataImportCron,
    /// A `cdi.kubevirt.io/v1beta1` DataSource.
    DataSource,
    /// An RBAC Role.
    Role,
    /// An RBAC RoleBinding.
    RoleBinding,
    /// An RBAC ClusterRole.
    ClusterRole,
    /// A core ServiceAccount (a Tekton task's).
    ServiceAccount,
    /// A `tekton.dev/v1` Task.
    Task,
}

impl Kind {
    /// The API resource of the kind.
    pub fn resource(self) -> ApiResource {
        let gvk = match self {
            Kind::Namespace => GroupVersionKind::gvk("", "v1", "Namespace"),
            Kind::Template => GroupVersionKind::gvk("template.openshift.io", "v1", "Template"),
            Kind::DataImportCron => {
                GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataImportCron")
            }
            Kind::DataSource => GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataSource"),
            Kind::ServiceAccount => GroupVersionKind::gvk("", "v1", "ServiceAccount"),
            Kind::Task => GroupVersionKind::gvk("tekton.dev", "v1", "Task"),
            Kind::Role | Kind::RoleBinding | Kind::ClusterRole => {
                GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", self.name())
            }
        };
        ApiResource::from_gvk(&gvk)
    }

    /// The kind's name, as status messages name it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::Template => "Template",
            Kind::DataImportCron => "DataImportCron",
            Kind::DataSource => "DataSource",
            Kind::Role => "Role",
            Kind::RoleBinding => "RoleBinding",
            Kind::ClusterRole => "ClusterRole",
            Kind::ServiceAccount => "ServiceAccount",
            Kind::Task => "Task",
        }
    }
}

/// What is done to one object.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The object is created.
    Create(Value),
    /// The object is replaced by this one (carrying the resourceVersion it was read at).
    Replace(Value),
    /// The object is deleted.
    Delete,
}

/// One change to one object.
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    /// The object's kind.
    pub kind: Kind,
    /// Its namespace (none for a Namespace).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// What is done to it.
    pub change: Change,
}

impl Action {
    /// `KIND NAMESPACE/NAME`, as SSP's status messages name a resource.
    pub fn describe(&self) -> String {
        format!(
            "{} {}/{}",
            self.kind.name(),
            self.namespace.as_deref().unwrap_or_default(),
            self.name
        )
    }

    /// A change to `object` of `kind`, named by its metadata.
    pub fn on(kind: Kind, object: &Value, change: Change) -> Action {
        Action {
            kind,
            namespace: object["metadata"]["namespace"].as_str().map(str::to_owned),
            name: name_of(object).to_owned(),
            change,
        }
    }
}

/// The name of a JSON object.
pub fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// Whether a JSON object is being deleted.
pub fn is_being_deleted(object: &Value) -> bool {
    !object["metadata"]["deletionTimestamp"].is_null()
}

/// The string map at `metadata.<field>` of a JSON object.
pub fn string_map(object: &Value, field: &str) -> BTreeMap<String, String> {
    object["metadata"][field]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// The mutable `metadata` of a JSON object, made an object if it was not one.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object["metadata"].is_object() {
        object["metadata"] = Value::Object(Map::new());
    }
    match &mut object["metadata"] {
        Value::Object(map) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// Sets `metadata.<field>` of a JSON object to `map` (removed when empty).
pub fn set_string_map(object: &mut Value, field: &str, map: &BTreeMap<String, String>) {
    let metadata = metadata_mut(object);
    if map.is_empty() {
        metadata.remove(field);
    } else {
        let value = map
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        metadata.insert(field.to_owned(), Value::Object(value));
    }
}

/// Merges `extra` into `metadata.<field>` of a JSON object, `extra` winning.
pub fn merge_string_map(object: &mut Value, field: &str, extra: &BTreeMap<String, String>) {
    let mut map = string_map(object, field);
    map.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    set_string_map(object, field, &map);
}

/// Whether every field of `wanted` is in `found` with the same value (objects compared
/// key by key, anything else exactly): fields the API server or a webhook added to `found`
/// do not count as a difference.
pub fn is_subset(wanted: &Value, found: &Value) -> bool {
    match (wanted, found) {
        (Value::Object(wanted), Value::Object(found)) => wanted.iter().all(|(key, value)| {
            found.get(key).is_some_and(|found| is_subset(value, found)) || value.is_null()
        }),
        _ => wanted == found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subsets_ignore_what_the_server_added_but_not_what_changed() {
        let found = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "e": "server"});
        assert!(is_subset(&json!({"a": 1, "b": {"c": [1, 2]}}), &found));
        assert!(is_subset(&json!({"a": 1, "z": null}), &found));
        assert!(!is_subset(&json!({"b": {"c": [1]}}), &found));
        assert!(!is_subset(&json!({"a": 2}), &found));
        assert!(!is_subset(&json!({"f": 2}), &found));
    }

    #[test]
    fn maps_merge_with_the_new_values_winning() {
        let mut object = json!({"metadata": {"name": "t", "labels": {"a": "1", "b": "2"}}});
        merge_string_map(
            &mut object,
            "labels",
            &BTreeMap::from([("b".into(), "3".into())]),
        );
        assert_eq!(object["metadata"]["labels"], json!({"a": "1", "b": "3"}));
        set_string_map(&mut object, "labels", &BTreeMap::new());
        assert!(object["metadata"].get("labels").is_none());
        let action = Action::on(
            Kind::Template,
            &json!({"metadata": {"name": "t", "namespace": "ns"}}),
            Change::Delete,
        );
        assert_eq!(action.describe(), "Template ns/t");
    }
}
