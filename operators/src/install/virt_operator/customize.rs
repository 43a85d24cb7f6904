//! A KubeVirt CR's `spec.customizeComponents.patches`, as virt-operator applies them to what
//! it deploys: each patch names a kind (`resourceType`), a name (`resourceName`, `*` for
//! every object of the kind), a patch type (`json`, `merge` or `strategic`) and the patch
//! as a string. Every object a patch changes carries the hash of the patches in annotation
//! `kubevirt.io/customizer-identifier`, as upstream's do. A patch that does not apply fails
//! the whole deployment pass (upstream's behaviour: the operator retries, and the update
//! review already refuses a patch that is not JSON).
//!
//! `flags` (`api`, `controller`, `handler`: flag name to value) become one more strategic
//! patch per component, as upstream turns them into one: the container's arguments become
//! the component's name and the flags, sorted, lower-cased, `--name` for an empty value,
//! `--name=value` for a boolean, `--name value` otherwise. Upstream replaces the command;
//! here the image's entrypoint is `ferrovirt` and the component is its first argument, so
//! the arguments are replaced. The components take `--v LEVEL` as KubeVirt's do.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

/// The annotation naming the patches an object was customized with.
pub const IDENTIFIER_ANNOTATION: &str = "kubevirt.io/customizer-identifier";

/// Why the CR's patches could not be applied.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CustomizeError {
    #[error("patch {index} of spec.customizeComponents.patches is not valid JSON: {reason}")]
    NotJson { index: usize, reason: String },
    #[error("patch {index} of spec.customizeComponents.patches has unknown type {kind:?}")]
    UnknownType { index: usize, kind: String },
    #[error(
        "patch {index} of spec.customizeComponents.patches does not apply to {kind} {name}: {reason}"
    )]
    DoesNotApply {
        index: usize,
        kind: String,
        name: String,
        reason: String,
    },
}

/// Applies `customize` (the CR's `spec.customizeComponents`) to `objects`, in order.
pub fn customize(objects: &mut [Value], customize: &Value) -> Result<(), CustomizeError> {
    let mut patches = customize["patches"].as_array().cloned().unwrap_or_default();
    patches.extend(flag_patches(&customize["flags"]));
    if patches.is_empty() {
        return Ok(());
    }
    let identifier = identifier(&patches);
    for (index, patch) in patches.iter().enumerate() {
        let body: Value = serde_json::from_str(patch["patch"].as_str().unwrap_or_default())
            .map_err(|e| CustomizeError::NotJson {
                index,
                reason: e.to_string(),
            })?;
        let kind = patch["type"].as_str().unwrap_or_default();
        for object in objects.iter_mut().filter(|o| targets(patch, o)) {
            apply(object, kind, &body).map_err(|reason| match reason {
                Failure::UnknownType => CustomizeError::UnknownType {
                    index,
                    kind: kind.to_owned(),
                },
                Failure::DoesNotApply(reason) => CustomizeError::DoesNotApply {
                    index,
                    kind: object["kind"].as_str().unwrap_or_default().to_owned(),
                    name: object["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    reason,
                },
            })?;
            object["metadata"]["annotations"][IDENTIFIER_ANNOTATION] = json!(identifier);
        }
    }
    Ok(())
}

/// The components `flags` may name: its key, and the kind and name of the workload (and of
/// its container).
const FLAGGED: [(&str, &str, &str); 3] = [
    ("api", "Deployment", "virt-api"),
    ("controller", "Deployment", "virt-controller"),
    ("handler", "DaemonSet", "virt-handler"),
];

/// The patches that give each component named in `flags` its flags.
fn flag_patches(flags: &Value) -> Vec<Value> {
    FLAGGED
        .iter()
        .filter_map(|&(key, kind, name)| {
            let flags = flags[key].as_object().filter(|f| !f.is_empty())?;
            let mut args = vec![name.to_owned()];
            args.extend(flag_args(flags));
            let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": name, "args": args}]}}}});
            Some(json!({"resourceType": kind, "resourceName": name, "type": "strategic",
                        "patch": patch.to_string()}))
        })
        .collect()
}

/// A component's flags as arguments, as upstream writes them.
fn flag_args(flags: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut names: Vec<&String> = flags.keys().collect();
    names.sort();
    names
        .into_iter()
        .flat_map(|name| {
            let flag = format!("--{}", name.to_lowercase());
            let value = flags[name].as_str().unwrap_or_default().to_lowercase();
            match value.as_str() {
                "" => vec![flag],
                "true" | "false" => vec![format!("{flag}={value}")],
                _ => vec![flag, value],
            }
        })
        .collect()
}

/// Whether `patch` is meant for `object`.
fn targets(patch: &Value, object: &Value) -> bool {
    let name = patch["resourceName"].as_str().unwrap_or_default();
    object["kind"] == patch["resourceType"] && (name == "*" || object["metadata"]["name"] == name)
}

enum Failure {
    UnknownType,
    DoesNotApply(String),
}

fn apply(object: &mut Value, kind: &str, body: &Value) -> Result<(), Failure> {
    match kind {
        "json" => {
            let operations: json_patch::Patch = serde_json::from_value(body.clone())
                .map_err(|e| Failure::DoesNotApply(e.to_string()))?;
            json_patch::patch(object, &operations).map_err(|e| Failure::DoesNotApply(e.to_string()))
        }
        "merge" => {
            json_patch::merge(object, body);
            Ok(())
        }
        "strategic" => {
            api::strategic_merge::merge(object, body);
            Ok(())
        }
        _ => Err(Failure::UnknownType),
    }
}

/// A stable identifier of the patches, so a change of them shows on what they changed.
fn identifier(patches: &[Value]) -> String {
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(patches)
        .unwrap_or_default()
        .hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects() -> Vec<Value> {
        vec![
            json!({"kind": "Deployment", "metadata": {"name": "virt-api"},
                   "spec": {"template": {"spec": {"containers": [{"name": "virt-api", "image": "i"}]}}}}),
            json!({"kind": "Deployment", "metadata": {"name": "virt-controller"},
                   "spec": {"template": {"spec": {"containers": [{"name": "virt-controller", "image": "i"}]}}}}),
            json!({"kind": "Service", "metadata": {"name": "virt-api"}, "spec": {}}),
        ]
    }

    #[test]
    fn each_patch_type_changes_only_the_objects_it_names() {
        let mut objects = objects();
        let patches = json!({"patches": [
            {"resourceType": "Deployment", "resourceName": "virt-controller", "type": "strategic",
             "patch": r#"{"spec":{"template":{"spec":{"containers":[{"name":"virt-controller","resources":{"limits":{"cpu":"200m"}}}]}}}}"#},
            {"resourceType": "Deployment", "resourceName": "*", "type": "merge",
             "patch": r#"{"metadata":{"labels":{"team":"virt"}}}"#},
            {"resourceType": "Service", "resourceName": "virt-api", "type": "json",
             "patch": r#"[{"op":"add","path":"/spec/type","value":"NodePort"}]"#},
        ]});
        customize(&mut objects, &patches).expect("the patches apply");
        let controller = &objects[1]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(controller["resources"]["limits"]["cpu"], "200m");
        assert_eq!(
            controller["image"], "i",
            "the strategic patch merges the container"
        );
        assert!(objects[0]["spec"]["template"]["spec"]["containers"][0]["resources"].is_null());
        assert_eq!(objects[0]["metadata"]["labels"]["team"], "virt");
        assert_eq!(objects[1]["metadata"]["labels"]["team"], "virt");
        assert_eq!(objects[2]["spec"]["type"], "NodePort");
        let id = &objects[0]["metadata"]["annotations"][IDENTIFIER_ANNOTATION];
        assert!(id.is_string());
        assert_eq!(
            &objects[2]["metadata"]["annotations"][IDENTIFIER_ANNOTATION],
            id
        );
    }

    #[test]
    fn flags_become_the_components_arguments() {
        let mut objects = objects();
        let flags = json!({"flags": {"controller": {"v": "4", "Leader-Elect": "True", "dry": ""},
                                     "api": {}}});
        customize(&mut objects, &flags).expect("the flags apply");
        let controller = &objects[1]["spec"]["template"]["spec"]["containers"][0];
        // Sorted by the names as written (upper case first), as upstream sorts them.
        assert_eq!(
            controller["args"],
            json!([
                "virt-controller",
                "--leader-elect=true",
                "--dry",
                "--v",
                "4"
            ])
        );
        assert_eq!(
            controller["image"], "i",
            "the rest of the container is kept"
        );
        assert!(objects[0]["spec"]["template"]["spec"]["containers"][0]["args"].is_null());
        assert!(objects[1]["metadata"]["annotations"][IDENTIFIER_ANNOTATION].is_string());
    }

    #[test]
    fn no_patches_change_nothing() {
        let mut customized = objects();
        customize(&mut customized, &json!({})).expect("nothing to apply");
        customize(&mut customized, &json!({"patches": []})).expect("nothing to apply");
        assert_eq!(customized, objects());
    }

    #[test]
    fn a_bad_patch_is_named() {
        let bad =
            |patch: Value| customize(&mut objects(), &json!({"patches": [patch]})).unwrap_err();
        assert!(matches!(
            bad(
                json!({"resourceType": "Service", "resourceName": "*", "type": "merge", "patch": "{"})
            ),
            CustomizeError::NotJson { index: 0, .. }
        ));
        assert_eq!(
            bad(
                json!({"resourceType": "Service", "resourceName": "*", "type": "yaml", "patch": "{}"})
            ),
            CustomizeError::UnknownType {
                index: 0,
                kind: "yaml".into()
            }
        );
        let missing = bad(
            json!({"resourceType": "Service", "resourceName": "virt-api", "type": "json",
                                 "patch": r#"[{"op":"replace","path":"/spec/nothing/there","value":1}]"#}),
        );
        assert!(
            matches!(&missing, CustomizeError::DoesNotApply { kind, name, .. } if kind == "Service" && name == "virt-api"),
            "{missing:?}"
        );
    }
}
