//! Discovery documents: /version, /api, /apis and the resource list of each group/version.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::resources::{ResourceType, version_priority};

pub const KUBERNETES_VERSION: (&str, &str) = ("1", "33");

pub fn version() -> Value {
    let (major, minor) = KUBERNETES_VERSION;
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": format!("v{major}.{minor}.0+ferrovirt"),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": api::go_platform(),
    })
}

/// `/api`: the legacy core group's versions.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

/// The named groups and the versions each serves, newest first as a preferred version.
pub(super) fn groups(types: &[ResourceType]) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rt in types.iter().filter(|rt| !rt.group.is_empty()) {
        let versions = groups.entry(rt.group.clone()).or_default();
        for version in &rt.versions {
            if !versions.contains(version) {
                versions.push(version.clone());
            }
        }
    }
    for versions in groups.values_mut() {
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    groups
}

/// `/apis`.
pub fn group_list(types: &[ResourceType]) -> Value {
    let groups: Vec<Value> = groups(types)
        .into_iter()
        .map(|(group, versions)| {
            let entries: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
                .collect();
            json!({"name": group, "versions": entries, "preferredVersion": entries[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub fn group(types: &[ResourceType], name: &str) -> Option<Value> {
    let list = group_list(types);
    let group = list["groups"]
        .as_array()?
        .iter()
        .find(|g| g["name"] == name)?
        .clone();
    let mut group = group;
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    Some(group)
}

/// `/api/v1` or `/apis/{group}/{version}`: the resources and subresources with their verbs.
pub fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for rt in types
        .iter()
        .filter(|rt| rt.group == group && rt.versions.iter().any(|v| v == version))
    {
        resources.push(json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs(),
            "shortNames": rt.short_names,
            "categories": rt.categories,
        }));
        if rt.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if rt.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::Registry;

    #[test]
    fn versions_sort_ga_beta_alpha() {
        let mut versions = vec!["v1alpha1", "v1beta1", "v1", "v2beta1", "v1beta2"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            versions,
            vec!["v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1"]
        );
    }

    #[test]
    fn core_resource_list_has_status_subresources() {
        let types = Registry::with_builtins().all();
        let list = resource_list(&types, "", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"pods") && names.contains(&"pods/status"));
        assert!(resource_list(&types, "", "v2").is_none());
        let apis = group_list(&types);
        assert!(
            apis["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "storage.k8s.io")
        );
    }
}
