//! Manifests held against our schemas the way a strict API server reads them: every field a
//! manifest sets is declared where it sits (so it is neither refused nor pruned), and no
//! object it sets keeps unknown fields (so a typo there is refused, as kubectl's strict field
//! validation is on a real cluster).

use std::path::Path;

use serde_json::Value;

use super::flat::{Flat, ROOT, child_path};
use super::ours;

/// What is wrong with `manifest` against our schema of its kind and version, one line each.
pub fn check(manifest: &Value) -> Vec<String> {
    let kind = manifest["kind"].as_str().unwrap_or_default();
    let version = manifest["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or_default();
    let Some(schema) = ours(kind, version) else {
        return vec![format!("{kind} {version}: not served")];
    };
    let mut problems = Vec::new();
    for (name, value) in manifest.as_object().into_iter().flatten() {
        if !["apiVersion", "kind", "metadata"].contains(&name.as_str()) {
            walk(&schema, &child_path(ROOT, name), value, &mut problems);
        }
    }
    problems
        .iter()
        .map(|p| format!("{kind} {version} {p}"))
        .collect()
}

fn walk(schema: &Flat, path: &str, value: &Value, problems: &mut Vec<String>) {
    let Some(node) = schema.get(path) else {
        problems.push(format!("{path}: not declared"));
        return;
    };
    match (node.class.as_str(), value) {
        ("meta", _) | ("any", _) | ("int-or-string", _) => {}
        ("object", Value::Object(fields)) => {
            if node.preserve {
                problems.push(format!("{path}: keeps unknown fields, a typo would pass"));
                return;
            }
            for (name, child) in fields {
                walk(schema, &child_path(path, name), child, problems);
            }
        }
        ("map", Value::Object(entries)) => {
            for child in entries.values() {
                walk(schema, &format!("{path}{{}}"), child, problems);
            }
        }
        ("array", Value::Array(items)) => {
            for item in items {
                walk(schema, &format!("{path}[]"), item, problems);
            }
        }
        (_, Value::Null) => {}
        ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("integer", Value::Number(_))
        | ("number", Value::Number(_)) => {}
        (class, other) => problems.push(format!("{path}: a {class} declared, {other} given")),
    }
}

/// Every document of every YAML file in `dir`.
pub fn documents(dir: &Path) -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut documents = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let values: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        documents.extend(
            values
                .into_iter()
                .filter(|v| v.is_object())
                .map(|v| (name.clone(), v)),
        );
    }
    documents
}
