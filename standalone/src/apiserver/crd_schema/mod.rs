//! What kube-apiserver's apiextensions validation does to a custom resource before it is
//! stored: the CRD's structural schema checked (types, enums, bounds, lengths, patterns,
//! required fields, list sizes) and its CEL rules (`x-kubernetes-validations`) evaluated,
//! each failure a field error in kube-apiserver's words (`spec.x: Invalid value: ...`).
//!
//! An update ratchets, as kube-apiserver does since 1.30: a value the update leaves as it
//! was is not judged again, so an object stored under an older schema can still be edited
//! elsewhere. Nulls are skipped (kube-apiserver prunes them before validating), and so is
//! what only `anyOf`/`oneOf`/`allOf`/`not` would say: those value validations are left out.
//! Before it is judged, an object is pruned of what its schema does not declare
//! ([`prune`]) and given the defaults its schema declares ([`defaults`]).

mod defaults;
mod go_types;
mod prune;
mod rules;
mod values;

pub use prune::{Input, prune_with_refs};

use std::collections::HashMap;
use std::fmt;

use regex::Regex;
use serde_json::Value;

use rules::Rule;

/// A CRD's served versions, each its schema with the CEL rules and patterns compiled.
pub struct CrdSchemas {
    versions: HashMap<String, VersionSchema>,
}

impl fmt::Debug for CrdSchemas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut versions: Vec<&String> = self.versions.keys().collect();
        versions.sort();
        f.debug_struct("CrdSchemas")
            .field("versions", &versions)
            .finish()
    }
}

/// One version's `openAPIV3Schema`, and what of it is compiled once: the rules and
/// patterns of each schema node, keyed by the node's location in the schema.
struct VersionSchema {
    schema: Value,
    rules: HashMap<String, Vec<Rule>>,
    patterns: HashMap<String, Regex>,
}

impl CrdSchemas {
    /// Compiles every version of `crd` that has a schema. The errors are the CRD's own
    /// field errors: a rule that does not compile, a pattern that is not a regular
    /// expression.
    pub fn compile(crd: &Value) -> Result<Self, Vec<String>> {
        let mut versions = HashMap::new();
        let mut errors = Vec::new();
        let listed = crd["spec"]["versions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, version) in listed.into_iter().enumerate() {
            let (Some(name), schema) = (
                version["name"].as_str().map(str::to_string),
                &version["schema"]["openAPIV3Schema"],
            ) else {
                continue;
            };
            if !schema.is_object() {
                continue;
            }
            let mut compiled = VersionSchema {
                schema: schema.clone(),
                rules: HashMap::new(),
                patterns: HashMap::new(),
            };
            let place = format!("spec.versions[{i}].schema.openAPIV3Schema");
            compiled.compile_node(schema, "", &place, &mut errors);
            compiled.check_defaults(schema, "", &place, &mut errors);
            versions.insert(name, compiled);
        }
        if errors.is_empty() {
            Ok(CrdSchemas { versions })
        } else {
            Err(errors)
        }
    }

    /// `version`'s `openAPIV3Schema`, if it has one.
    pub fn schema(&self, version: &str) -> Option<&Value> {
        self.versions.get(version).map(|v| &v.schema)
    }

    /// Drops from `value` what `version`'s schema does not declare, as kube-apiserver
    /// prunes; returns the paths of the fields dropped.
    pub fn prune(&self, version: &str, value: &mut Value, input: Input) -> Vec<String> {
        match self.versions.get(version) {
            Some(compiled) => prune::prune(&compiled.schema, value, input),
            None => Vec::new(),
        }
    }

    /// Fills in what `version`'s schema gives as `default` where `value` leaves it out, as
    /// kube-apiserver defaults a request's object and every object it reads from storage.
    pub fn default(&self, version: &str, value: &mut Value) {
        if let Some(compiled) = self.versions.get(version) {
            defaults::apply(&compiled.schema, value);
        }
    }

    /// The field errors of `object` under `version`'s schema; `old` is the stored object
    /// of an update, against which unchanged values ratchet and transition rules
    /// (`oldSelf`) are evaluated.
    pub fn validate(&self, version: &str, object: &Value, old: Option<&Value>) -> Vec<String> {
        let Some(schema) = self.versions.get(version) else {
            return Vec::new();
        };
        let mut walk = Walk {
            schema,
            errors: Vec::new(),
        };
        walk.node(&schema.schema, "", "", object, old);
        walk.errors
    }
}

impl VersionSchema {
    /// Compiles the rules and pattern of the node at `pointer` (shown as `place` in
    /// errors) and of every node under it.
    fn compile_node(&mut self, node: &Value, pointer: &str, place: &str, errors: &mut Vec<String>) {
        if let Some(listed) = node.get("x-kubernetes-validations") {
            match rules::compile_all(listed, place) {
                Ok(compiled) if !compiled.is_empty() => {
                    self.rules.insert(pointer.to_string(), compiled);
                }
                Ok(_) => {}
                Err(mut failed) => errors.append(&mut failed),
            }
        }
        if let Some(pattern) = node.get("pattern").and_then(Value::as_str) {
            match Regex::new(pattern) {
                Ok(regex) => {
                    self.patterns.insert(pointer.to_string(), regex);
                }
                Err(err) => errors.push(format!(
                    "{place}.pattern: Invalid value: {pattern:?}: not a regular expression: {err}"
                )),
            }
        }
        for (name, child) in children(node) {
            let child_pointer = format!("{pointer}/{name}");
            self.compile_node(child, &child_pointer, &child_place(place, &name), errors);
        }
    }
}

impl VersionSchema {
    /// Refuses, as kube-apiserver refuses a CRD, a `default` (of the node at `pointer` or
    /// under it) that its own schema would prune or refuse: each one is pruned and judged
    /// as a value of its node would be.
    fn check_defaults(&self, node: &Value, pointer: &str, place: &str, errors: &mut Vec<String>) {
        if let Some(default) = node.get("default") {
            let path = format!("{place}.default");
            let mut pruned = default.clone();
            let unknown = prune::prune_node(node, &mut pruned);
            if !unknown.is_empty() {
                errors.push(format!(
                    "{path}: Invalid value: {default}: must not have unknown fields, got: {}",
                    unknown.join(", ")
                ));
            }
            let mut walk = Walk {
                schema: self,
                errors: Vec::new(),
            };
            walk.node(node, pointer, &path, &pruned, None);
            errors.append(&mut walk.errors);
        }
        for (name, child) in children(node) {
            let child_pointer = format!("{pointer}/{name}");
            self.check_defaults(child, &child_pointer, &child_place(place, &name), errors);
        }
    }
}

/// How kube-apiserver names the schema node `name` (as [`children`] gives it) under `place`:
/// `properties[spec]`, `items`, `additionalProperties`.
fn child_place(place: &str, name: &str) -> String {
    match name.split_once('/') {
        Some((keyword, field)) => format!("{place}.{keyword}[{field}]"),
        None => format!("{place}.{name}"),
    }
}

/// The schema nodes directly under `node`, each with its location relative to it:
/// `properties/NAME`, `items`, `additionalProperties`.
fn children(node: &Value) -> Vec<(String, &Value)> {
    let mut found = Vec::new();
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            found.push((format!("properties/{}", escape(name)), child));
        }
    }
    if let Some(items) = node.get("items").filter(|i| i.is_object()) {
        found.push(("items".to_string(), items));
    }
    if let Some(additional) = node.get("additionalProperties").filter(|a| a.is_object()) {
        found.push(("additionalProperties".to_string(), additional));
    }
    found
}

/// A property name as one segment of a location (RFC 6901).
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// One validation of one object, collecting its field errors.
struct Walk<'a> {
    schema: &'a VersionSchema,
    errors: Vec<String>,
}

impl Walk<'_> {
    /// Judges `value` (at `path`, under the schema node `node` at `pointer`), then what is
    /// under it; `old` is the stored value it corresponds to, if any.
    fn node(
        &mut self,
        node: &Value,
        pointer: &str,
        path: &str,
        value: &Value,
        old: Option<&Value>,
    ) {
        if value.is_null() || old == Some(value) {
            return;
        }
        let pattern = self.schema.patterns.get(pointer);
        match values::check(node, path, value, pattern) {
            Ok(mut problems) => self.errors.append(&mut problems),
            Err(wrong_type) => {
                self.errors.push(wrong_type);
                return;
            }
        }
        match value {
            Value::Object(fields) => self.fields(node, pointer, path, fields, old),
            Value::Array(items) => self.items(node, pointer, path, items, old),
            _ => {}
        }
        if let Some(rules) = self.schema.rules.get(pointer) {
            for rule in rules {
                if let Some(error) = rule.judge(path, value, old) {
                    self.errors.push(error);
                }
            }
        }
    }

    fn fields(
        &mut self,
        node: &Value,
        pointer: &str,
        path: &str,
        fields: &serde_json::Map<String, Value>,
        old: Option<&Value>,
    ) {
        for required in node["required"].as_array().into_iter().flatten() {
            let Some(name) = required.as_str() else {
                continue;
            };
            // A null left after pruning is one the schema allows: it is there.
            if !fields.contains_key(name) {
                self.errors
                    .push(format!("{}: Required value", join(path, name)));
            }
        }
        let embedded = path.is_empty()
            || node.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
        let properties = node.get("properties").and_then(Value::as_object);
        let additional = node.get("additionalProperties").filter(|a| a.is_object());
        for (name, value) in fields {
            if embedded && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            let old = old.and_then(|o| o.get(name));
            if let Some(child) = properties.and_then(|p| p.get(name)) {
                let child_pointer = format!("{pointer}/properties/{}", escape(name));
                self.node(child, &child_pointer, &join(path, name), value, old);
            } else if let Some(child) = additional {
                let child_pointer = format!("{pointer}/additionalProperties");
                self.node(
                    child,
                    &child_pointer,
                    &format!("{path}[{name}]"),
                    value,
                    old,
                );
            }
        }
    }

    fn items(
        &mut self,
        node: &Value,
        pointer: &str,
        path: &str,
        items: &[Value],
        old: Option<&Value>,
    ) {
        let Some(item) = node.get("items").filter(|i| i.is_object()) else {
            return;
        };
        let child_pointer = format!("{pointer}/items");
        let old_items = old.and_then(Value::as_array);
        for (i, value) in items.iter().enumerate() {
            let old = old_items.and_then(|list| corresponding(node, list, value));
            self.node(item, &child_pointer, &format!("{path}[{i}]"), value, old);
        }
    }
}

/// The element of the stored list that `value` updates: in a list of type `map`, the one
/// with the same keys (kube-apiserver correlates no other list's elements).
fn corresponding<'v>(node: &Value, old: &'v [Value], value: &Value) -> Option<&'v Value> {
    if node.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> = node["x-kubernetes-list-map-keys"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    old.iter()
        .find(|candidate| keys.iter().all(|key| candidate.get(key) == value.get(key)))
}

/// `path.name`, or `name` at the root.
fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

#[cfg(test)]
mod tests;
