//! `/openapi/v2`: the Swagger 2.0 document of every group/version, for
//! `kubectl explain --output=plaintext-openapiv2` and older clients. Built from the OpenAPI v3
//! documents ([`super::openapi`]): their schemas become `definitions`, `$ref`s pointing there.
//! kubectl asks for it in gnostic's protobuf encoding (`openapi_v2.Document`), which
//! [`to_protobuf`] writes; others get JSON.

use prost::Message;
use serde_json::{Map, Value, json};

use super::discovery;
use super::openapi;
use super::resources::ResourceType;

/// What kubectl's discovery client asks for.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The content type kube-apiserver answers it with.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The Swagger 2.0 document: every group/version's schemas as `definitions`.
pub fn document(
    types: &[ResourceType],
    schema_of: impl Fn(&ResourceType, &str) -> Option<Value>,
) -> Value {
    let mut group_versions = vec![(String::new(), "v1".to_string())];
    for (group, versions) in discovery::groups(types) {
        group_versions.extend(versions.into_iter().map(|v| (group.clone(), v)));
    }
    let mut definitions = Map::new();
    for (group, version) in group_versions {
        let doc =
            openapi::openapi_v3_document(types, &group, &version, |rt| schema_of(rt, &version));
        let Some(Value::Object(schemas)) = doc.map(|mut d| d["components"]["schemas"].take())
        else {
            continue;
        };
        for (name, schema) in schemas {
            definitions.insert(name, to_swagger(open_root(schema)));
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": discovery::version()["gitVersion"]},
        "paths": {},
        "definitions": definitions,
    })
}

/// A kind whose schema keeps unknown fields at its root is published as a bare object in v2,
/// as kube-apiserver publishes such a CRD: v2 has no word for keeping unknown fields, and
/// kubectl's client-side validation would refuse every field the properties leave out.
fn open_root(schema: Value) -> Value {
    let open = schema["x-kubernetes-preserve-unknown-fields"] == true
        && !schema["x-kubernetes-group-version-kind"].is_null();
    if !open {
        return schema;
    }
    json!({
        "type": "object",
        "x-kubernetes-group-version-kind": schema["x-kubernetes-group-version-kind"],
    })
}

/// An OpenAPI v3 schema in Swagger 2.0's dialect: references into `definitions`, and what
/// Swagger 2.0 has no word for (`nullable`, `oneOf`, `anyOf`, `not`) left out, as
/// kube-apiserver does when it publishes a CRD's schema in v2.
fn to_swagger(schema: Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                match key.as_str() {
                    "$ref" => {
                        let target = value.as_str().unwrap_or_default();
                        let name = target.rsplit('/').next().unwrap_or_default();
                        out.insert(key, Value::String(format!("#/definitions/{name}")));
                    }
                    "nullable" | "oneOf" | "anyOf" | "not" => {}
                    // Field names, not keywords: only their schemas are converted.
                    "properties" => {
                        let fields = match value {
                            Value::Object(fields) => fields
                                .into_iter()
                                .map(|(name, field)| (name, to_swagger(field)))
                                .collect(),
                            other => other,
                        };
                        out.insert(key, fields);
                    }
                    // Free-form values: copied as they are.
                    "default" | "enum" | "example" | "x-kubernetes-group-version-kind" => {
                        out.insert(key, value);
                    }
                    _ => {
                        out.insert(key, to_swagger(value));
                    }
                }
            }
            // `allOf: [{$ref}]` (a reference with a description of its own) is the reference.
            if let Some(Value::Array(all_of)) = out.get("allOf")
                && let [only] = all_of.as_slice()
                && let Some(reference) = only.get("$ref").cloned()
            {
                out.remove("allOf");
                out.insert("$ref".into(), reference);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(to_swagger).collect()),
        other => other,
    }
}

/// The document in gnostic's `openapi_v2.Document` protobuf encoding. Only what kubectl reads
/// is carried: the definitions with their types, descriptions, properties, items, maps,
/// required fields, enums and extensions (`x-kubernetes-group-version-kind` among them).
pub fn to_protobuf(doc: &Value) -> Vec<u8> {
    let definitions = doc["definitions"]
        .as_object()
        .map(|defs| {
            defs.iter()
                .map(|(name, schema)| wire::NamedSchema {
                    name: name.clone(),
                    value: Some(proto_schema(schema)),
                })
                .collect()
        })
        .unwrap_or_default();
    wire::Document {
        swagger: "2.0".into(),
        info: Some(wire::Info {
            title: doc["info"]["title"].as_str().unwrap_or_default().into(),
            version: doc["info"]["version"].as_str().unwrap_or_default().into(),
        }),
        paths: Some(wire::Paths::default()),
        definitions: Some(wire::Definitions {
            additional_properties: definitions,
        }),
    }
    .encode_to_vec()
}

/// A free-form value as gnostic carries it: its YAML text (JSON is YAML).
fn any(value: &Value) -> wire::Any {
    wire::Any {
        yaml: value.to_string(),
    }
}

fn proto_schema(schema: &Value) -> wire::Schema {
    let text = |key: &str| schema[key].as_str().unwrap_or_default().to_string();
    let strings = |key: &str| -> Vec<String> {
        schema[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = match &schema["type"] {
        Value::String(t) => vec![t.clone()],
        Value::Array(_) => strings("type"),
        _ => Vec::new(),
    };
    let properties = schema["properties"]
        .as_object()
        .map(|props| wire::Properties {
            additional_properties: props
                .iter()
                .map(|(name, value)| wire::NamedSchema {
                    name: name.clone(),
                    value: Some(proto_schema(value)),
                })
                .collect(),
        });
    let additional_properties = match &schema["additionalProperties"] {
        Value::Bool(b) => Some(wire::additional_properties::Oneof::Boolean(*b)),
        value @ Value::Object(_) => Some(wire::additional_properties::Oneof::Schema(Box::new(
            proto_schema(value),
        ))),
        _ => None,
    }
    .map(|oneof| Box::new(wire::AdditionalPropertiesItem { oneof: Some(oneof) }));
    let vendor_extension = schema
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with("x-"))
        .map(|(name, value)| wire::NamedAny {
            name: name.clone(),
            value: Some(any(value)),
        })
        .collect();
    wire::Schema {
        xref: text("$ref"),
        format: text("format"),
        title: text("title"),
        description: text("description"),
        default: schema.get("default").map(any),
        required: strings("required"),
        r#enum: schema["enum"]
            .as_array()
            .map(|values| values.iter().map(any).collect())
            .unwrap_or_default(),
        additional_properties,
        r#type: (!kind.is_empty()).then_some(wire::TypeItem { value: kind }),
        items: schema
            .get("items")
            .filter(|items| items.is_object())
            .map(|items| wire::ItemsItem {
                schema: vec![proto_schema(items)],
            }),
        all_of: schema["allOf"]
            .as_array()
            .map(|all| all.iter().map(proto_schema).collect())
            .unwrap_or_default(),
        properties,
        vendor_extension,
    }
}

/// The messages of gnostic's OpenAPIv2.proto that kubectl reads, with their field numbers;
/// the fields left out are never set here, so an encoding without them is the same.
mod wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Document {
        #[prost(string, tag = "1")]
        pub swagger: String,
        #[prost(message, optional, tag = "2")]
        pub info: Option<Info>,
        #[prost(message, optional, tag = "8")]
        pub paths: Option<Paths>,
        #[prost(message, optional, tag = "9")]
        pub definitions: Option<Definitions>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Info {
        #[prost(string, tag = "1")]
        pub title: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Paths {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Definitions {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedSchema {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Schema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Properties {
        #[prost(message, repeated, tag = "1")]
        pub additional_properties: Vec<NamedSchema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Schema {
        #[prost(string, tag = "1")]
        pub xref: String,
        #[prost(string, tag = "2")]
        pub format: String,
        #[prost(string, tag = "3")]
        pub title: String,
        #[prost(string, tag = "4")]
        pub description: String,
        #[prost(message, optional, tag = "5")]
        pub default: Option<Any>,
        #[prost(string, repeated, tag = "19")]
        pub required: Vec<String>,
        #[prost(message, repeated, tag = "20")]
        pub r#enum: Vec<Any>,
        #[prost(message, optional, boxed, tag = "21")]
        pub additional_properties: Option<Box<AdditionalPropertiesItem>>,
        #[prost(message, optional, tag = "22")]
        pub r#type: Option<TypeItem>,
        #[prost(message, optional, tag = "23")]
        pub items: Option<ItemsItem>,
        #[prost(message, repeated, tag = "24")]
        pub all_of: Vec<Schema>,
        #[prost(message, optional, tag = "25")]
        pub properties: Option<Properties>,
        #[prost(message, repeated, tag = "31")]
        pub vendor_extension: Vec<NamedAny>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TypeItem {
        #[prost(string, repeated, tag = "1")]
        pub value: Vec<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ItemsItem {
        #[prost(message, repeated, tag = "1")]
        pub schema: Vec<Schema>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AdditionalPropertiesItem {
        #[prost(oneof = "additional_properties::Oneof", tags = "1, 2")]
        pub oneof: Option<additional_properties::Oneof>,
    }

    pub mod additional_properties {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Oneof {
            #[prost(message, tag = "1")]
            Schema(Box<super::Schema>),
            #[prost(bool, tag = "2")]
            Boolean(bool),
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamedAny {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<Any>,
    }

    /// gnostic's `Any`: field 1 (a `google.protobuf.Any`) is never set, field 2 is the YAML.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Any {
        #[prost(string, tag = "2")]
        pub yaml: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_keeping_unknown_fields_at_its_root_is_a_bare_object() {
        let gvk = json!([{"group": "g", "version": "v1", "kind": "K"}]);
        let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"apiVersion": {"type": "string"}}, "x-kubernetes-group-version-kind": gvk});
        assert_eq!(
            open_root(open),
            json!({"type": "object", "x-kubernetes-group-version-kind": gvk})
        );
        let closed = json!({"type": "object", "properties": {"spec": {"type": "object"}},
            "x-kubernetes-group-version-kind": gvk});
        assert_eq!(open_root(closed.clone()), closed);
        let field = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        assert_eq!(open_root(field.clone()), field, "only a kind's root");
    }

    #[test]
    fn references_move_to_definitions_and_v3_only_words_go() {
        let v3 = json!({
            "type": "object",
            "nullable": true,
            "properties": {
                "spec": {"allOf": [{"$ref": "#/components/schemas/a.Spec"}], "description": "d"},
                "n": {"oneOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
            },
        });
        let v2 = to_swagger(v3);
        assert_eq!(v2["properties"]["spec"]["$ref"], "#/definitions/a.Spec");
        assert_eq!(v2["properties"]["spec"]["description"], "d");
        assert!(v2.get("nullable").is_none());
        assert!(v2["properties"]["n"].get("oneOf").is_none());
        assert_eq!(v2["properties"]["n"]["x-kubernetes-int-or-string"], true);
    }

    #[test]
    fn the_protobuf_document_carries_types_properties_and_extensions() {
        let doc = json!({
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "definitions": {"g.v1.K": {
                "type": "object",
                "description": "a kind",
                "required": ["spec"],
                "properties": {
                    "spec": {"type": "object", "additionalProperties": {"type": "string"}},
                    "list": {"type": "array", "items": {"$ref": "#/definitions/g.v1.Item"}},
                },
                "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "K"}],
            }},
        });
        let bytes = to_protobuf(&doc);
        let back = wire::Document::decode(bytes.as_slice()).expect("decodes");
        let defs = back.definitions.expect("definitions").additional_properties;
        let kind = defs[0].value.as_ref().expect("schema");
        assert_eq!(defs[0].name, "g.v1.K");
        assert_eq!(kind.description, "a kind");
        assert_eq!(kind.r#type.as_ref().expect("type").value, ["object"]);
        assert_eq!(kind.required, ["spec"]);
        let props = &kind
            .properties
            .as_ref()
            .expect("properties")
            .additional_properties;
        let spec = props.iter().find(|p| p.name == "spec").expect("spec");
        let map = spec
            .value
            .as_ref()
            .and_then(|s| s.additional_properties.as_ref());
        assert!(matches!(
            map.and_then(|m| m.oneof.as_ref()),
            Some(wire::additional_properties::Oneof::Schema(_))
        ));
        let list = props.iter().find(|p| p.name == "list").expect("list");
        let items = list
            .value
            .as_ref()
            .and_then(|s| s.items.as_ref())
            .expect("items");
        assert_eq!(items.schema[0].xref, "#/definitions/g.v1.Item");
        assert_eq!(
            kind.vendor_extension[0].name,
            "x-kubernetes-group-version-kind"
        );
        let gvk: Value =
            serde_json::from_str(&kind.vendor_extension[0].value.as_ref().expect("any").yaml)
                .expect("json");
        assert_eq!(gvk[0]["kind"], "K");
    }
}
