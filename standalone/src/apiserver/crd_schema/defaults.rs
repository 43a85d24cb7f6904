//! Defaulting, as kube-apiserver defaults a custom resource from its CRD's structural
//! schema: a field the object leaves out gets a copy of its schema's `default`, and what is
//! under it (the default's own fields included) is defaulted in turn, through `properties`,
//! `items` and `additionalProperties`.
//!
//! It runs after pruning, which has already dropped the nulls the schema does not allow: a
//! field holding such a null is therefore defaulted as a missing one is, while a null the
//! schema allows (`nullable: true`) is kept, as upstream keeps it. The root's `metadata` is
//! the server's own and gets nothing from the schema.

use serde_json::{Map, Value};

use super::prune::nullable;

/// Fills in the defaults `schema` (an `openAPIV3Schema`) gives what `value` leaves out.
pub fn apply(schema: &Value, value: &mut Value) {
    node(schema, value, true);
}

fn node(schema: &Value, value: &mut Value, root: bool) {
    match value {
        Value::Object(fields) => object(schema, fields, root),
        Value::Array(items) => {
            if let Some(item) = schema.get("items").filter(|i| i.is_object()) {
                for element in items {
                    node(item, element, false);
                }
            }
        }
        _ => {}
    }
}

fn object(schema: &Value, fields: &mut Map<String, Value>, root: bool) {
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        if root && name == "metadata" {
            continue;
        }
        let Some(default) = property.get("default") else {
            continue;
        };
        let missing = match fields.get(name) {
            None => true,
            Some(Value::Null) => !nullable(property),
            Some(_) => false,
        };
        if missing {
            fields.insert(name.clone(), default.clone());
        }
    }
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (name, field) in fields.iter_mut() {
        if root && name == "metadata" {
            continue;
        }
        if let Some(sub) = properties.and_then(|p| p.get(name)).or(additional) {
            node(sub, field, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}},
                "spec": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "strategy": {
                            "type": "object",
                            "default": {"type": "Rolling"},
                            "properties": {
                                "type": {"type": "string"},
                                "maxUnavailable": {"type": "integer", "default": 1},
                            }
                        },
                        "ports": {"type": "array", "items": {
                            "type": "object",
                            "properties": {"protocol": {"type": "string", "default": "TCP"}}}},
                        "pools": {"type": "object", "additionalProperties": {
                            "type": "object",
                            "properties": {"size": {"type": "string", "default": "1Gi"}}}},
                        "optional": {"type": "string", "nullable": true, "default": "set"},
                    }
                }
            }
        })
    }

    #[test]
    fn missing_fields_get_their_defaults_and_the_defaults_theirs() {
        let mut object = json!({"metadata": {}});
        apply(&schema(), &mut object);
        assert_eq!(
            object,
            json!({
                "metadata": {},
                "spec": {
                    "replicas": 1,
                    "strategy": {"type": "Rolling", "maxUnavailable": 1},
                    "optional": "set",
                }
            })
        );
    }

    #[test]
    fn what_is_set_stays_and_lists_and_maps_are_defaulted_inside() {
        let mut object = json!({"spec": {
            "replicas": 3,
            "strategy": {"type": "Recreate", "maxUnavailable": 0},
            "ports": [{"protocol": "UDP"}, {}],
            "pools": {"a": {}, "b": {"size": "5Gi"}},
            "optional": null,
        }});
        apply(&schema(), &mut object);
        assert_eq!(
            object,
            json!({"spec": {
                "replicas": 3,
                "strategy": {"type": "Recreate", "maxUnavailable": 0},
                "ports": [{"protocol": "UDP"}, {"protocol": "TCP"}],
                "pools": {"a": {"size": "1Gi"}, "b": {"size": "5Gi"}},
                "optional": null,
            }})
        );
    }

    #[test]
    fn a_null_the_schema_does_not_allow_is_defaulted() {
        let mut object = json!({"spec": {"replicas": null}});
        apply(&schema(), &mut object);
        assert_eq!(object["spec"]["replicas"], 1);
    }
}
