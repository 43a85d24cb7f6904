//! Pruning, as kube-apiserver prunes a custom resource before it stores it: every field its
//! CRD's structural schema does not declare is dropped (and named, for
//! `fieldValidation=Strict`'s refusal and `Warn`'s warnings: `spec.sorce`,
//! `spec.template.volumes[0].nmae`), and so is a null where the schema does not allow one.
//!
//! A node with `x-kubernetes-preserve-unknown-fields` keeps its unknown fields, its declared
//! ones still pruned inside; a node that `anyOf`/`oneOf`/`allOf`/`not` describe further is
//! kept whole (conservatively, so nothing valid is ever dropped). An object node with neither `properties` nor `additionalProperties`
//! declares nothing inside it, as upstream reads it (`blank: {}`). `metadata` is the
//! server's to check, not the CRD's; an embedded resource keeps its `apiVersion`, `kind`
//! and `metadata` too.
//!
//! A built-in kind is pruned the same way against its published OpenAPI schema
//! ([`prune_with_refs`]), whose `$ref`s are followed, as kube-apiserver's decoding into
//! its Go types drops what they do not have.

use serde_json::{Map, Value};

use super::go_types;

/// What is being pruned.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// An object as it is to be stored: undeclared fields and disallowed nulls go.
    Object,
    /// A request's body, possibly a patch: a null (which removes a field) and a strategic
    /// merge directive (`$patch`, `$retainKeys`, ...) are not fields, and are kept.
    Body,
}

/// Drops from `value` what `schema` (an `openAPIV3Schema`) does not declare; returns the
/// paths of the fields dropped.
pub fn prune(schema: &Value, value: &mut Value, input: Input) -> Vec<String> {
    let mut pruner = Pruner {
        input,
        refs: None,
        pruned: Vec::new(),
        type_error: None,
    };
    pruner.node(schema, value, "", true, "");
    pruner.pruned
}

/// [`prune`] of a value under the schema node `schema`, not at an object's root: a CRD's
/// `default` is pruned so.
pub fn prune_node(schema: &Value, value: &mut Value) -> Vec<String> {
    let mut pruner = Pruner {
        input: Input::Object,
        refs: None,
        pruned: Vec::new(),
        type_error: None,
    };
    pruner.node(schema, value, "", false, "");
    pruner.pruned
}

/// [`prune`] against a built-in kind's schema, `schema` referring (`$ref`, alone or as the
/// one member of an `allOf`) to the schemas of `refs` (`components.schemas`). A node
/// that declares nothing inside it (a Go raw type, free-form JSON) is kept whole. An
/// object (not a request's body) is also held to the schema's types, as decoding it into
/// the kind's Go type would: the first value of the wrong type is the error, in Go's
/// words ([`go_types`]).
pub fn prune_with_refs(
    schema: &Value,
    refs: &Map<String, Value>,
    value: &mut Value,
    input: Input,
) -> Result<Vec<String>, String> {
    let mut pruner = Pruner {
        input,
        refs: Some(refs),
        pruned: Vec::new(),
        type_error: None,
    };
    let kind = schema["title"].as_str().map_or("", go_types::short_name);
    pruner.node(schema, value, "", true, kind);
    match pruner.type_error {
        Some(error) => Err(error),
        None => Ok(pruner.pruned),
    }
}

struct Pruner<'a> {
    input: Input,
    refs: Option<&'a Map<String, Value>>,
    pruned: Vec<String>,
    /// The first value of a built-in kind's object whose type its schema refuses.
    type_error: Option<String>,
}

impl<'a> Pruner<'a> {
    /// Prunes `value` (at `path`) under `schema`; `owner` is the Go struct whose field it
    /// is, for a built-in kind's type errors.
    fn node(
        &mut self,
        schema: &'a Value,
        value: &mut Value,
        path: &str,
        root: bool,
        owner: &'a str,
    ) {
        let (schema, type_name) = self.resolve_named(schema);
        let raw = type_name.is_some() && self.free_form(schema);
        if self.refs.is_some() && self.input == Input::Object && !root && !raw {
            if let Some(wanted) = go_types::mismatch(schema, type_name, value) {
                self.type_error
                    .get_or_insert_with(|| go_types::unmarshal_error(value, owner, path, &wanted));
                return;
            }
        }
        if described_by_combinators(schema) || self.free_form(schema) {
            return;
        }
        // The fields below belong to this node's Go struct, if it is one.
        let owner = type_name.map_or(owner, go_types::short_name);
        match value {
            Value::Object(fields) => self.fields(schema, fields, path, root, owner),
            Value::Array(items) => {
                if let Some(item) = schema.get("items").filter(|i| i.is_object()) {
                    for (i, element) in items.iter_mut().enumerate() {
                        self.node(item, element, &format!("{path}[{i}]"), false, owner);
                    }
                }
            }
            _ => {}
        }
    }

    /// The schema `schema` refers to, if it is only a reference.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        self.resolve_named(schema).0
    }

    /// [`Pruner::resolve`], with the name of the schema referred to, if any.
    fn resolve_named(&self, mut schema: &'a Value) -> (&'a Value, Option<&'a str>) {
        let Some(refs) = self.refs else {
            return (schema, None);
        };
        let mut named = None;
        // A reference may lead to another; a handful of steps is plenty.
        for _ in 0..8 {
            let reference = schema.get("$ref").or_else(|| {
                match schema
                    .get("allOf")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                {
                    Some([only]) => only.get("$ref"),
                    _ => None,
                }
            });
            let target = reference
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
                .and_then(|name| refs.get_key_value(name));
            match target {
                Some((name, found)) => {
                    schema = found;
                    named = Some(name.as_str());
                }
                None => break,
            }
        }
        (schema, named)
    }

    /// Whether a built-in kind's node holds any JSON: one that declares no fields, no map
    /// values and no items is a Go raw type (`JSON`, `RawExtension`, `FieldsV1`), whatever
    /// `type` it names.
    fn free_form(&self, schema: &Value) -> bool {
        self.refs.is_some()
            && ["properties", "additionalProperties", "items"]
                .iter()
                .all(|k| schema.get(k).is_none())
    }

    fn fields(
        &mut self,
        schema: &'a Value,
        fields: &mut Map<String, Value>,
        path: &str,
        root: bool,
        owner: &'a str,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let embedded =
            root || schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
        // Unknown fields stay here; the declared ones are still pruned inside.
        let preserve =
            schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        fields.retain(|name, field| {
            if embedded && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                return true;
            }
            if self.input == Input::Body && (field.is_null() || name.starts_with('$')) {
                return true;
            }
            let field_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let declared = properties
                .and_then(|p| p.get(name))
                .or(additional.filter(|a| a.is_object()));
            match declared {
                Some(sub) if field.is_null() => nullable(self.resolve(sub)),
                Some(sub) => {
                    self.node(sub, field, &field_path, false, owner);
                    true
                }
                None if preserve || additional == Some(&Value::Bool(true)) => true,
                None => {
                    self.pruned.push(field_path);
                    false
                }
            }
        });
    }
}

/// Whether `anyOf`/`oneOf`/`allOf`/`not` say more of the node: it is kept whole.
fn described_by_combinators(schema: &Value) -> bool {
    ["anyOf", "oneOf", "allOf", "not"]
        .iter()
        .any(|k| schema.get(k).is_some())
}

/// Whether the schema node allows a null (`nullable: true`).
pub(super) fn nullable(schema: &Value) -> bool {
    schema.get("nullable") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "source": {"type": "object", "properties": {
                            "http": {"type": "object", "properties": {"url": {"type": "string"}}},
                            "blank": {"type": "object"},
                        }},
                        "volumes": {"type": "array", "items": {
                            "type": "object", "properties": {"name": {"type": "string"}}}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {"typed": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                        "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                        "maybe": {"type": "string", "nullable": true},
                        "never": {"type": "string"},
                    }
                }
            }
        })
    }

    #[test]
    fn declared_fields_maps_and_kept_nodes_stay() {
        let object = json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "DataVolume",
            "metadata": {"name": "x", "anything": 1},
            "spec": {
                "source": {"http": {"url": "http://h/i"}},
                "volumes": [{"name": "a"}],
                "labels": {"a": "b"},
                "free": {"whatever": {"deep": true}},
                "either": 3,
                "maybe": null,
            }
        });
        let mut pruned = object.clone();
        assert!(prune(&schema(), &mut pruned, Input::Object).is_empty());
        assert_eq!(pruned, object);
    }

    #[test]
    fn undeclared_fields_and_disallowed_nulls_go() {
        let mut object = json!({
            "spec": {
                "sorce": {},
                "source": {"http": {"ulr": "x"}, "blank": {"size": 1}},
                "free": {"kept": 1, "typed": {"a": "x", "b": 2}},
                "volumes": [{"name": "a"}, {"nmae": "b"}],
                "never": null,
            },
            "extra": 1,
        });
        let mut found = prune(&schema(), &mut object, Input::Object);
        found.sort();
        assert_eq!(
            found,
            [
                "extra",
                "spec.free.typed.b",
                "spec.sorce",
                "spec.source.blank.size",
                "spec.source.http.ulr",
                "spec.volumes[1].nmae"
            ]
        );
        assert_eq!(
            object,
            json!({"spec": {
                "source": {"http": {}, "blank": {}},
                "free": {"kept": 1, "typed": {"a": "x"}},
                "volumes": [{"name": "a"}, {}],
            }})
        );
    }

    #[test]
    fn a_patch_body_keeps_its_nulls_and_directives() {
        let mut body = json!({"spec": {"never": null, "gone": null, "$patch": "merge", "typo": 1}});
        assert_eq!(prune(&schema(), &mut body, Input::Body), ["spec.typo"]);
        assert_eq!(
            body,
            json!({"spec": {"never": null, "gone": null, "$patch": "merge"}})
        );
    }

    #[test]
    fn a_built_in_kind_is_pruned_through_its_references_and_raw_types_stay_whole() {
        let root = json!({"type": "object", "properties": {
            "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}]},
            "spec": {"allOf": [{"$ref": "#/components/schemas/Spec"}], "description": "d"},
        }});
        let refs = json!({
            "Meta": {"type": "object", "properties": {"name": {"type": "string"}}},
            "Spec": {"type": "object", "properties": {
                "containers": {"type": "array", "items": {"$ref": "#/components/schemas/Container"}},
                "limits": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Quantity"}},
                "raw": {"$ref": "#/components/schemas/JSON"},
            }},
            "Container": {"type": "object", "properties": {"name": {"type": "string"}}},
            "Quantity": {"type": "string"},
            "JSON": {"type": "object"},
        });
        let refs = refs.as_object().unwrap();
        let mut object = json!({
            "metadata": {"name": "x", "whatever": 1},
            "spec": {
                "containers": [{"name": "a", "imagePullPolcy": "Always"}],
                "limits": {"memory": "1Gi"},
                "raw": {"any": {"thing": [1]}},
                "typo": true,
            },
        });
        let mut found = prune_with_refs(&root, refs, &mut object, Input::Object).expect("typed");
        found.sort();
        assert_eq!(found, ["spec.containers[0].imagePullPolcy", "spec.typo"]);
        assert_eq!(
            object,
            json!({
                "metadata": {"name": "x", "whatever": 1},
                "spec": {
                    "containers": [{"name": "a"}],
                    "limits": {"memory": "1Gi"},
                    "raw": {"any": {"thing": [1]}},
                },
            })
        );
    }
}
