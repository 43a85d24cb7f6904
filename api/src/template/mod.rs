//! template.openshift.io/v1 Template: a list of objects with `${PARAMETER}` references,
//! parameters and labels, served as a CRD (OpenShift serves it natively), and its processing
//! with `oc process` semantics ([`process`]).

pub mod field_error;
pub mod generator;
pub mod process;

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The API group.
pub const GROUP: &str = "template.openshift.io";
/// The served version.
pub const VERSION: &str = "v1";
/// `apiVersion` of a Template.
pub const API_VERSION: &str = "template.openshift.io/v1";
/// The kind.
pub const KIND: &str = "Template";
/// The stored resource.
pub const PLURAL: &str = "templates";
/// The create-only resource that answers with a processed Template (`oc process`).
pub const PROCESSED_PLURAL: &str = "processedtemplates";
/// The generator of `generate: expression` parameters.
pub const EXPRESSION_GENERATOR: &str = "expression";

/// A template: objects to create, with parameters substituted into them and labels added.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Template {
    /// `template.openshift.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `Template`.
    #[serde(default)]
    pub kind: String,
    /// Name, namespace, labels and annotations of the template itself.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Shown to the user after the template is instantiated; parameters are substituted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The objects the template creates, with parameter references.
    #[serde(default)]
    pub objects: Vec<serde_json::Value>,
    /// The parameters of the objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
    /// Labels added to every object the template creates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A template parameter.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Parameter {
    /// Referenced as `${NAME}` (a string) or `${{NAME}}` (any JSON value).
    pub name: String,
    /// The name shown in a user interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// What the parameter is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The value; a generated one when empty and `generate` is set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// The generator of the value: only `expression` exists.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub generate: String,
    /// The input of the generator, such as `[a-z0-9]{8}`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub from: String,
    /// Processing fails when the value is still empty after generation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

impl kube::Resource for Template {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The CustomResourceDefinition of Template: the OpenShift type's fields, each object kept as
/// given.
pub fn crd() -> CustomResourceDefinition {
    let parameter = json!({
        "type": "object",
        "description": "A parameter of the template's objects.",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "description": "Referenced as ${NAME} or ${{NAME}}."},
            "displayName": {"type": "string"},
            "description": {"type": "string"},
            "value": {"type": "string"},
            "generate": {"type": "string", "description": "The generator of the value: expression."},
            "from": {"type": "string", "description": "The input of the generator."},
            "required": {"type": "boolean"}
        }
    });
    let schema = json!({
        "type": "object",
        "description": "Template contains the inputs needed to produce a Config.",
        "required": ["objects"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "message": {"type": "string"},
            "objects": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            },
            "parameters": {"type": "array", "items": parameter},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
        }
    });
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PLURAL}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": "TemplateList", "plural": PLURAL, "singular": "template"},
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": schema},
                "additionalPrinterColumns": [
                    {"name": "Description", "type": "string", "jsonPath": ".metadata.annotations.description", "priority": 1}
                ]
            }]
        }
    });
    serde_json::from_value(crd).unwrap_or_else(|err| panic!("the Template CRD is malformed: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_names_the_openshift_type() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("templates.template.openshift.io")
        );
        assert_eq!(crd.spec.names.kind, "Template");
        assert_eq!(crd.spec.scope, "Namespaced");
    }

    #[test]
    fn template_round_trips_with_upstream_field_names() {
        let text = json!({
            "apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "t"},
            "objects": [{"kind": "ConfigMap"}],
            "parameters": [{"name": "A", "generate": "expression", "from": "[a-z]{3}", "required": true}],
            "labels": {"app": "x"}, "message": "hi"
        });
        let template: Template = serde_json::from_value(text.clone()).unwrap();
        assert!(template.parameters[0].required);
        assert_eq!(serde_json::to_value(&template).unwrap(), text);
    }
}
