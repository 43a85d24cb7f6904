//! The common templates operand: the bundle's Templates kept in `spec.commonTemplates.namespace`
//! with SSP's labels and owner annotations (a template edited by hand is put back), and the
//! templates of older bundle versions deprecated (or deleted when of an architecture this
//! machine is not), as kubevirt/ssp-operator's common-templates operand does.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use api::ssp::SSP;
use serde_json::Value;

use super::owner;
use super::plan::{
    Action, Change, Kind, is_being_deleted, merge_string_map, name_of, set_string_map, string_map,
};

/// The operand's name (`app.kubernetes.io/name`).
pub const OPERAND: &str = "common-templates";
/// The bundle version a template belongs to.
pub const VERSION_LABEL: &str = "template.kubevirt.io/version";
/// The template type label; the common templates are `base`.
pub const TYPE_LABEL: &str = "template.kubevirt.io/type";
/// The value of the type label of common templates.
pub const TYPE_BASE: &str = "base";
/// The architecture a template is for (amd64 when missing).
pub const ARCHITECTURE_LABEL: &str = "template.kubevirt.io/architecture";
/// The label and annotation of a template from an older bundle.
pub const DEPRECATED: &str = "template.kubevirt.io/deprecated";
/// The parameter naming a template's boot source DataSource.
pub const DATA_SOURCE_PARAMETER: &str = "DATA_SOURCE_NAME";
/// Label prefixes taken off a deprecated template, so that UIs no longer offer it.
const SELECTOR_PREFIXES: [&str; 3] = [
    "os.template.kubevirt.io/",
    "flavor.template.kubevirt.io/",
    "workload.template.kubevirt.io/",
];

/// The architecture of this machine as templates name it.
pub fn machine_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The architecture a template is for.
fn architecture_of(template: &Value) -> String {
    string_map(template, "labels")
        .remove(ARCHITECTURE_LABEL)
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "amd64".to_owned())
}

/// The bundle's version: the version label of its templates (the highest when they differ).
pub fn bundle_version(bundle: &[Value]) -> Option<String> {
    bundle
        .iter()
        .filter_map(|t| string_map(t, "labels").remove(VERSION_LABEL))
        .max_by(|a, b| compare_versions(a, b))
}

/// Compares two versions as semver does, tolerating a leading `v` and missing parts; a
/// version that does not parse is lower than any that does.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    parse_version(a).cmp(&parse_version(b))
}

fn parse_version(version: &str) -> Option<Vec<u64>> {
    let core = version.trim().trim_start_matches('v');
    let core = core.split(['-', '+']).next().unwrap_or_default();
    let mut parts: Vec<u64> = core
        .split('.')
        .map(|part| part.parse().ok())
        .collect::<Option<_>>()?;
    parts.resize(3.max(parts.len()), 0);
    Some(parts)
}

/// The names of the DataSources the bundle's templates boot from: the default of their
/// `DATA_SOURCE_NAME` parameter, for templates whose VM has a dataVolumeTemplate with a
/// `sourceRef`, and for this machine's architecture.
pub fn data_source_names(bundle: &[Value]) -> BTreeSet<String> {
    bundle
        .iter()
        .filter(|t| architecture_of(t) == machine_architecture())
        .filter(|t| uses_source_ref(t))
        .filter_map(|t| {
            t["parameters"]
                .as_array()?
                .iter()
                .find(|p| p["name"] == DATA_SOURCE_PARAMETER)?["value"]
                .as_str()
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        })
        .collect()
}

fn uses_source_ref(template: &Value) -> bool {
    template["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|vm| {
            vm["spec"]["dataVolumeTemplates"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .any(|dv| !dv["spec"]["sourceRef"].is_null())
}

/// A bundle template as it is kept in `namespace` for `ssp`.
pub fn desired(template: &Value, ssp: &SSP, namespace: &str) -> Value {
    let mut desired = template.clone();
    super::plan::metadata_mut(&mut desired)
        .insert("namespace".to_owned(), Value::String(namespace.to_owned()));
    merge_string_map(&mut desired, "labels", &owner::app_labels(ssp, OPERAND));
    merge_string_map(&mut desired, "annotations", &owner::owner_annotations(ssp));
    desired
}

/// Whether a label or annotation key is one that the templates define (and so one that is
/// removed when the bundle no longer has it).
fn is_predefined(key: &str) -> bool {
    let kubevirt = key
        .split_once("template.kubevirt.io/")
        .is_some_and(|(prefix, _)| prefix.is_empty() || prefix.ends_with('.'));
    matches!(key, "description" | "tags" | "iconClass")
        || key.starts_with("openshift.io/")
        || kubevirt
}

/// `found` updated to `desired`: its labels and annotations with the desired ones set and the
/// predefined ones the bundle dropped removed, its objects and parameters the bundle's.
pub fn updated(found: &Value, desired: &Value) -> Value {
    let mut next = found.clone();
    for field in ["labels", "annotations"] {
        let wanted = string_map(desired, field);
        let mut map = string_map(found, field);
        map.retain(|key, _| !is_predefined(key) || wanted.contains_key(key));
        map.extend(wanted);
        set_string_map(&mut next, field, &map);
    }
    for field in ["objects", "parameters"] {
        match desired.get(field) {
            Some(value) => next[field] = value.clone(),
            None => {
                if let Some(object) = next.as_object_mut() {
                    object.remove(field);
                }
            }
        }
    }
    next
}

/// `found` marked deprecated: the deprecated label and annotation set, the OS, flavor and
/// workload labels taken off, and SSP's labels and owner annotations kept on.
pub fn deprecated(found: &Value, ssp: &SSP) -> Value {
    let mut next = found.clone();
    let mut labels = string_map(found, "labels");
    labels.retain(|key, _| !SELECTOR_PREFIXES.iter().any(|p| key.starts_with(p)));
    labels.extend(owner::app_labels(ssp, OPERAND));
    labels.insert(DEPRECATED.to_owned(), "true".to_owned());
    set_string_map(&mut next, "labels", &labels);
    let mut annotations = string_map(found, "annotations");
    annotations.extend(owner::owner_annotations(ssp));
    annotations.insert(DEPRECATED.to_owned(), "true".to_owned());
    set_string_map(&mut next, "annotations", &annotations);
    next
}

/// The changes that bring the templates in the namespace (`observed`) to the bundle for
/// `ssp`: bundle templates created or put back, older ones deprecated or deleted.
pub fn plan(bundle: &[Value], ssp: &SSP, namespace: &str, observed: &[Value]) -> Vec<Action> {
    let arch = machine_architecture();
    let found: BTreeMap<&str, &Value> = observed.iter().map(|t| (name_of(t), t)).collect();
    let mut actions = Vec::new();
    let mut wanted = BTreeSet::new();
    for template in bundle.iter().filter(|t| architecture_of(t) == arch) {
        let desired = desired(template, ssp, namespace);
        wanted.insert(name_of(&desired).to_owned());
        match found.get(name_of(&desired)) {
            None => actions.push(Action::on(
                Kind::Template,
                &desired,
                Change::Create(desired.clone()),
            )),
            Some(found) if is_being_deleted(found) => {}
            Some(found) => {
                let next = updated(found, &desired);
                if &next != *found {
                    actions.push(Action::on(
                        Kind::Template,
                        &next,
                        Change::Replace(next.clone()),
                    ));
                }
            }
        }
    }
    let version = bundle_version(bundle);
    let owner_key = owner::owner_key(ssp);
    for old in observed {
        if wanted.contains(name_of(old))
            || is_being_deleted(old)
            || !is_old(old, version.as_deref(), &owner_key)
        {
            continue;
        }
        if architecture_of(old) != arch {
            actions.push(Action::on(Kind::Template, old, Change::Delete));
            continue;
        }
        let label = string_map(old, "labels").remove(VERSION_LABEL);
        let current = match (&label, &version) {
            (Some(label), Some(version)) => {
                parse_version(label).is_some() && compare_versions(label, version) != Ordering::Less
            }
            _ => false,
        };
        if current {
            continue;
        }
        let next = deprecated(old, ssp);
        if &next != old {
            actions.push(Action::on(
                Kind::Template,
                &next,
                Change::Replace(next.clone()),
            ));
        }
    }
    actions
}

/// Whether a template not in the bundle is one of SSP's: a base template of another version,
/// or one this SSP made.
fn is_old(template: &Value, version: Option<&str>, owner_key: &str) -> bool {
    let labels = string_map(template, "labels");
    let other_base = labels.get(TYPE_LABEL).map(String::as_str) == Some(TYPE_BASE)
        && labels.get(VERSION_LABEL).map(String::as_str) != version;
    other_base || owner::is_owned_by(template, owner_key)
}

/// What deleting `ssp` removes of the templates: the ones it made and the deprecated ones.
pub fn cleanup(ssp: &SSP, observed: &[Value]) -> Vec<Action> {
    let owner_key = owner::owner_key(ssp);
    observed
        .iter()
        .filter(|t| !is_being_deleted(t))
        .filter(|t| {
            owner::is_owned_by(t, &owner_key)
                || string_map(t, "labels").get(DEPRECATED).map(String::as_str) == Some("true")
        })
        .map(|t| Action::on(Kind::Template, t, Change::Delete))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ssp() -> SSP {
        serde_json::from_value(json!({
            "apiVersion": "ssp.kubevirt.io/v1beta2", "kind": "SSP",
            "metadata": {"name": "ssp", "namespace": "kubevirt"},
            "spec": {"commonTemplates": {"namespace": "openshift"}},
        }))
        .unwrap()
    }

    fn template(name: &str, version: &str, source: Option<&str>) -> Value {
        let mut dvt = json!({"metadata": {"name": "${NAME}"}, "spec": {"storage": {}}});
        if source.is_some() {
            dvt["spec"]["sourceRef"] = json!({"kind": "DataSource", "name": "${DATA_SOURCE_NAME}"});
        }
        json!({
            "apiVersion": "template.openshift.io/v1", "kind": "Template",
            "metadata": {
                "name": name,
                "labels": {
                    VERSION_LABEL: version, TYPE_LABEL: TYPE_BASE,
                    "os.template.kubevirt.io/fedora": "true",
                    ARCHITECTURE_LABEL: machine_architecture(),
                },
                "annotations": {"description": "A Fedora VM", "template.kubevirt.io/editable": "x"},
            },
            "objects": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                         "spec": {"dataVolumeTemplates": [dvt]}}],
            "parameters": [{"name": "NAME", "generate": "expression"},
                           {"name": DATA_SOURCE_PARAMETER, "value": source.unwrap_or("")}],
        })
    }

    fn kinds(actions: &[Action]) -> Vec<(String, &'static str)> {
        actions
            .iter()
            .map(|a| {
                let change = match a.change {
                    Change::Create(_) => "create",
                    Change::Replace(_) => "replace",
                    Change::Delete => "delete",
                };
                (a.name.clone(), change)
            })
            .collect()
    }

    #[test]
    fn versions_compare_as_semver_tolerantly() {
        assert_eq!(compare_versions("v0.35.0", "v0.34.2"), Ordering::Greater);
        assert_eq!(compare_versions("0.35", "v0.35.0"), Ordering::Equal);
        assert_eq!(compare_versions("v0.9.1", "v0.10.0"), Ordering::Less);
        assert_eq!(compare_versions("junk", "v0.1.0"), Ordering::Less);
        let bundle = [
            template("a", "v0.35.0", None),
            template("b", "v0.36.0", None),
        ];
        assert_eq!(bundle_version(&bundle).as_deref(), Some("v0.36.0"));
    }

    #[test]
    fn missing_templates_are_created_with_ssps_labels_and_owner() {
        let bundle = [template("fedora-server-small", "v0.35.0", Some("fedora"))];
        let actions = plan(&bundle, &ssp(), "openshift", &[]);
        assert_eq!(
            kinds(&actions),
            [("fedora-server-small".to_owned(), "create")]
        );
        let Change::Create(created) = &actions[0].change else {
            panic!()
        };
        assert_eq!(created["metadata"]["namespace"], "openshift");
        let labels = &created["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/component"], "templating");
        assert_eq!(labels["app.kubernetes.io/name"], "common-templates");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "ssp-operator");
        assert_eq!(
            created["metadata"]["annotations"][owner::PRIMARY_RESOURCE],
            "kubevirt/ssp"
        );
        // Unchanged, nothing to do.
        assert!(plan(&bundle, &ssp(), "openshift", std::slice::from_ref(created)).is_empty());
    }

    #[test]
    fn a_template_edited_by_hand_is_put_back_keeping_foreign_metadata() {
        let bundle = [template("fedora-server-small", "v0.35.0", Some("fedora"))];
        let mut edited = desired(&bundle[0], &ssp(), "openshift");
        edited["metadata"]["resourceVersion"] = json!("7");
        edited["parameters"] = json!([]);
        edited["metadata"]["labels"]["mine"] = json!("kept");
        edited["metadata"]["labels"]["os.template.kubevirt.io/gone"] = json!("true");
        edited["metadata"]["annotations"]["openshift.io/display-name"] = json!("Mine");
        let actions = plan(&bundle, &ssp(), "openshift", &[edited]);
        let Change::Replace(fixed) = &actions[0].change else {
            panic!("{actions:?}")
        };
        assert_eq!(fixed["parameters"], bundle[0]["parameters"]);
        assert_eq!(fixed["metadata"]["resourceVersion"], "7");
        assert_eq!(fixed["metadata"]["labels"]["mine"], "kept");
        assert!(
            fixed["metadata"]["labels"]
                .get("os.template.kubevirt.io/gone")
                .is_none()
        );
        assert!(
            fixed["metadata"]["annotations"]
                .get("openshift.io/display-name")
                .is_none()
        );
    }

    #[test]
    fn older_templates_are_deprecated_newer_kept_other_architectures_deleted() {
        let bundle = [template("fedora-server-small", "v0.35.0", None)];
        let old = template("fedora-server-small-v0.34.0", "v0.34.0", None);
        let newer = template("fedora-server-small-v0.36.0", "v0.36.0", None);
        let mut foreign = template("fedora-s390x", "v0.34.0", None);
        foreign["metadata"]["labels"][ARCHITECTURE_LABEL] = json!("s390x-other");
        let unrelated = json!({"metadata": {"name": "mine", "labels": {TYPE_LABEL: "vm"}}});
        let observed = [old, newer, foreign, unrelated];
        let actions = plan(&bundle, &ssp(), "openshift", &observed);
        assert_eq!(
            kinds(&actions),
            [
                ("fedora-server-small".to_owned(), "create"),
                ("fedora-server-small-v0.34.0".to_owned(), "replace"),
                ("fedora-s390x".to_owned(), "delete"),
            ]
        );
        let Change::Replace(deprecated) = &actions[1].change else {
            panic!()
        };
        let labels = &deprecated["metadata"]["labels"];
        assert_eq!(labels[DEPRECATED], "true");
        assert_eq!(deprecated["metadata"]["annotations"][DEPRECATED], "true");
        assert!(labels.get("os.template.kubevirt.io/fedora").is_none());
        // Once deprecated, it stays as it is.
        let after = plan(
            &bundle,
            &ssp(),
            "openshift",
            std::slice::from_ref(deprecated),
        );
        assert_eq!(
            kinds(&after),
            [("fedora-server-small".to_owned(), "create")]
        );
        // Deleting the SSP removes its templates and the deprecated ones.
        let created = desired(&bundle[0], &ssp(), "openshift");
        let gone = cleanup(&ssp(), &[created, deprecated.clone(), observed[3].clone()]);
        assert_eq!(gone.len(), 2);
    }

    #[test]
    fn boot_sources_are_the_data_sources_of_templates_with_a_source_ref() {
        let bundle = [
            template("fedora-server-small", "v0.35.0", Some("fedora")),
            template("fedora-desktop-small", "v0.35.0", Some("fedora")),
            template("rhel9-server-small", "v0.35.0", Some("rhel9")),
            template("windows", "v0.35.0", None),
        ];
        let names: Vec<_> = data_source_names(&bundle).into_iter().collect();
        assert_eq!(names, ["fedora", "rhel9"]);
    }
}
