//! Parameters: what a Task or Pipeline declares (`ParamSpec`), what a run or pipeline task
//! passes (`Param`), and the value itself (`ParamValue`), whose JSON is a string, a list of
//! strings or an object of strings (`pkg/apis/pipeline/v1/param_types.go`).

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// The `type` names of a parameter or result.
pub mod param_type {
    pub const STRING: &str = "string";
    pub const ARRAY: &str = "array";
    pub const OBJECT: &str = "object";
}

/// A parameter's or result's value. Upstream's CRD leaves its schema open (no type, unknown
/// fields kept), since one field holds three JSON shapes.
///
/// Read as Tekton reads it: a list of strings is an array, an object of strings an object,
/// and anything else a string (a JSON string as its text, any other JSON, such as a number
/// or a list of numbers, as its JSON text), so no value is refused here; the reconcilers
/// check types against the declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamValue {
    String(String),
    Array(Vec<String>),
    Object(BTreeMap<String, String>),
}

impl Default for ParamValue {
    fn default() -> ParamValue {
        ParamValue::String(String::new())
    }
}

impl ParamValue {
    /// The `type` this value has (`string`, `array` or `object`).
    pub fn type_name(&self) -> &'static str {
        match self {
            ParamValue::String(_) => param_type::STRING,
            ParamValue::Array(_) => param_type::ARRAY,
            ParamValue::Object(_) => param_type::OBJECT,
        }
    }

    /// The text of a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            ParamValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// A JSON value as Tekton's `ParamValue.UnmarshalJSON` reads it.
    pub fn from_json(value: serde_json::Value) -> ParamValue {
        use serde_json::Value;
        match value {
            Value::String(s) => ParamValue::String(s),
            Value::Array(_) => match serde_json::from_value::<Vec<String>>(value.clone()) {
                Ok(items) => ParamValue::Array(items),
                Err(_) => ParamValue::String(value.to_string()),
            },
            Value::Object(_) => {
                match serde_json::from_value::<BTreeMap<String, String>>(value.clone()) {
                    Ok(fields) => ParamValue::Object(fields),
                    Err(_) => ParamValue::String(value.to_string()),
                }
            }
            other => ParamValue::String(other.to_string()),
        }
    }
}

impl From<&str> for ParamValue {
    fn from(text: &str) -> ParamValue {
        ParamValue::String(text.to_owned())
    }
}

impl Serialize for ParamValue {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ParamValue::String(s) => s.serialize(serializer),
            ParamValue::Array(items) => items.serialize(serializer),
            ParamValue::Object(fields) => fields.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(deserializer).map(ParamValue::from_json)
    }
}

impl JsonSchema for ParamValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ParamValue".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        super::schema::preserve_any(generator)
    }
}

/// A parameter passed to a Task, Pipeline, StepAction or resolver.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Param {
    pub name: String,
    pub value: ParamValue,
}

/// A parameter a Task or Pipeline declares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParamSpec {
    pub name: String,
    /// `string`, `array` or `object` ([`param_type`]); the webhook defaults it
    /// ([`ParamSpec::defaulted_type`]).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The keys of an object parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, PropertySpec>>,
    /// The value when a run passes none; without it the parameter is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<ParamValue>,
    /// The values allowed (alpha flag `enable-param-enum`).
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub enum_: Option<Vec<String>>,
}

impl ParamSpec {
    /// The type Tekton's webhook gives a declaration without one (`ParamSpec.SetDefaults`,
    /// first match wins): the one set; `object` when it has properties; `string` with no
    /// default; else the default's type.
    pub fn defaulted_type(&self) -> &str {
        if let Some(set) = self.type_.as_deref().filter(|t| !t.is_empty()) {
            return set;
        }
        if self.properties.is_some() {
            return param_type::OBJECT;
        }
        match &self.default {
            None => param_type::STRING,
            Some(value) => value.type_name(),
        }
    }
}

/// The type of one key of an object parameter or result.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PropertySpec {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_reads_as_tekton_reads_it_and_writes_back_the_same() {
        for (text, expected) in [
            (json!("x"), ParamValue::String("x".into())),
            (
                json!(["a", "b"]),
                ParamValue::Array(vec!["a".into(), "b".into()]),
            ),
            (
                json!({"k": "v"}),
                ParamValue::Object(BTreeMap::from([("k".into(), "v".into())])),
            ),
        ] {
            let value: ParamValue = serde_json::from_value(text.clone()).unwrap();
            assert_eq!(value, expected);
            assert_eq!(serde_json::to_value(&value).unwrap(), text);
        }
    }

    #[test]
    fn a_value_of_another_shape_is_its_json_text() {
        let number: ParamValue = serde_json::from_value(json!(3)).unwrap();
        assert_eq!(number, ParamValue::String("3".into()));
        let numbers: ParamValue = serde_json::from_value(json!([1, 2])).unwrap();
        assert_eq!(numbers, ParamValue::String("[1,2]".into()));
    }

    #[test]
    fn a_declaration_without_type_gets_tektons_default() {
        let spec = |v: serde_json::Value| serde_json::from_value::<ParamSpec>(v).unwrap();
        assert_eq!(spec(json!({"name": "p"})).defaulted_type(), "string");
        assert_eq!(
            spec(json!({"name": "p", "type": "array"})).defaulted_type(),
            "array"
        );
        assert_eq!(
            spec(json!({"name": "p", "properties": {"k": {}}})).defaulted_type(),
            "object"
        );
        assert_eq!(
            spec(json!({"name": "p", "default": ["a"]})).defaulted_type(),
            "array"
        );
        assert_eq!(
            spec(json!({"name": "p", "default": {"k": "v"}})).defaulted_type(),
            "object"
        );
        assert_eq!(
            spec(json!({"name": "p", "default": "x"})).defaulted_type(),
            "string"
        );
    }
}
