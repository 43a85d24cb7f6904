//! Schema shapes of upstream's Tekton CRDs that the derive cannot give: fields Tekton leaves
//! open (`x-kubernetes-preserve-unknown-fields` with no type), so that a manifest is held to
//! exactly what Tekton's API server holds it to.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::Value;

/// A field of any JSON shape, kept as it comes: upstream's embedded specs (`taskSpec`,
/// `pipelineSpec`), volumes, affinity and pod security context, and every `ParamValue`.
/// The Rust type still reads it typed; only the API server does not check it.
pub fn preserve_any(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// How k8s-openapi describes the `name` of core's object references (`LocalObjectReference`
/// and the key selectors that embed it).
const REFERENT_NAME: &str = "Name of the referent. This field is effectively required";

/// `schema` with the `name` of every core object reference optional, as Kubernetes' own
/// schema (and so Tekton's CRDs) has it: k8s-openapi lists it as required because its Rust
/// field is a `String`, which reads a missing name as empty, as Kubernetes does.
pub fn optional_referent_names(schema: &mut Value) {
    match schema {
        Value::Object(node) => {
            let names_a_referent = node
                .get("properties")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.get("description"))
                .and_then(Value::as_str)
                .is_some_and(|d| d.starts_with(REFERENT_NAME));
            if names_a_referent {
                if let Some(Value::Array(required)) = node.get_mut("required") {
                    required.retain(|field| field != "name");
                    if required.is_empty() {
                        node.remove("required");
                    }
                }
            }
            node.values_mut().for_each(optional_referent_names);
        }
        Value::Array(items) => items.iter_mut().for_each(optional_referent_names),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_referent_name_is_optional_and_other_required_fields_stay() {
        let mut schema = json!({"properties": {"env": {"items": {
            "properties": {"name": {"description": format!("{REFERENT_NAME}, but ...")},
                           "key": {}},
            "required": ["key", "name"],
        }}}, "required": ["name"]});
        optional_referent_names(&mut schema);
        assert_eq!(
            schema["properties"]["env"]["items"]["required"],
            json!(["key"])
        );
        assert_eq!(schema["required"], json!(["name"]));
    }
}
