//! Template processing with OpenShift's semantics (openshift/library-go templateprocessing and
//! `oc process`): parameter values given by the user replace the template's, `generate:
//! expression` parameters without a value get one, a required parameter left empty is an
//! error, then every `${NAME}` in a string of an object (keys included) becomes the value,
//! a string that is exactly `${{NAME}}` becomes the value read as JSON, hard-coded object
//! namespaces are dropped, and the template's labels are added to every object.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::{Map, Value, json};

use super::field_error::{FieldError, FieldErrors};
use super::generator::{self, Randomness};
use super::{EXPRESSION_GENERATOR, Template};

/// `${NAME}` anywhere in a string.
static STRING_PARAMETER: LazyLock<Regex> = LazyLock::new(|| pattern(r"\$\{([a-zA-Z0-9_]+?)\}"));
/// A string that is exactly `${{NAME}}`.
static NON_STRING_PARAMETER: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"^\$\{\{([a-zA-Z0-9_]+)\}\}$"));
/// What a parameter name may be made of.
static PARAMETER_NAME: LazyLock<Regex> = LazyLock::new(|| pattern(r"^[a-zA-Z0-9_]+$"));

fn pattern(text: &str) -> Regex {
    Regex::new(text).unwrap_or_else(|err| panic!("{err}"))
}

/// Parameter values the template does not declare (`oc process` refuses them unless told to
/// ignore them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(|name| format!("unknown parameter name {name:?}")).collect::<Vec<_>>().join("\n"))]
pub struct UnknownParameters(pub Vec<String>);

/// Sets the values given by the user (`-p NAME=VALUE`), as `oc process` does before sending
/// the template: a given value is never generated. Unknown names are refused unless
/// `ignore_unknown`.
pub fn set_parameters(
    template: &mut Template,
    values: &[(String, String)],
    ignore_unknown: bool,
) -> Result<(), UnknownParameters> {
    let mut unknown = Vec::new();
    for (name, value) in values {
        match template.parameters.iter_mut().find(|p| &p.name == name) {
            Some(parameter) => {
                parameter.value = value.clone();
                parameter.generate.clear();
            }
            None if ignore_unknown => {}
            None => unknown.push(name.clone()),
        }
    }
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(UnknownParameters(unknown))
    }
}

/// Checks what processing needs of a template (OpenShift's `ValidateProcessedTemplate`):
/// every parameter has a name made of letters, digits and `_`.
pub fn validate(template: &Template) -> Result<(), FieldErrors> {
    let mut errors = Vec::new();
    for (i, parameter) in template.parameters.iter().enumerate() {
        let field = format!("parameters[{i}].name");
        if parameter.name.is_empty() {
            errors.push(FieldError::required(field, ""));
        } else if !PARAMETER_NAME.is_match(&parameter.name) {
            let detail = format!("does not match {}", PARAMETER_NAME.as_str());
            errors.push(FieldError::invalid(field, &parameter.name, detail));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(FieldErrors(errors))
    }
}

/// Processes a template in place: generated values are written to its parameters, its
/// objects become the objects to create and its message is substituted.
pub fn process(template: &mut Template, random: &mut dyn Randomness) -> Result<(), FieldErrors> {
    validate(template)?;
    generate_values(template, random)?;
    let values: BTreeMap<String, String> = template
        .parameters
        .iter()
        .map(|p| (p.name.clone(), p.value.clone()))
        .collect();
    template.message = substitute_string(&values, &template.message);
    let labels: BTreeMap<String, String> = template
        .labels
        .iter()
        .map(|(k, v)| (substitute_string(&values, k), substitute_string(&values, v)))
        .collect();
    template.labels = labels;
    for object in &mut template.objects {
        strip_namespace(object);
        substitute(object, &values);
        add_labels(object, &template.labels);
    }
    Ok(())
}

/// The objects of a processed template as the `List` that `oc process` prints.
pub fn to_list(template: &Template) -> Value {
    json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": template.objects})
}

/// Gives a value to every parameter without one that has a generator, then refuses required
/// parameters that are still empty (library-go `GenerateParameterValues`).
fn generate_values(
    template: &mut Template,
    random: &mut dyn Randomness,
) -> Result<(), FieldErrors> {
    let mut errors = Vec::new();
    for (i, parameter) in template.parameters.iter_mut().enumerate() {
        if !parameter.value.is_empty() {
            continue;
        }
        let field = format!("template.parameters[{i}]");
        if !parameter.generate.is_empty() {
            if parameter.generate != EXPRESSION_GENERATOR {
                let detail = format!(
                    "Unknown generator name '{}' for parameter {}",
                    parameter.generate, parameter.name
                );
                errors.push(FieldError::invalid(field, &parameter.generate, detail));
                continue;
            }
            match generator::generate(&parameter.from, random) {
                Ok(value) => parameter.value = value,
                Err(err) => {
                    errors.push(FieldError::invalid(field, &parameter.from, err.to_string()));
                    continue;
                }
            }
        }
        if parameter.value.is_empty() && parameter.required {
            let detail = format!(
                "{field}: parameter {} is required and must be specified",
                parameter.name
            );
            errors.push(FieldError::required(field, detail));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(FieldErrors(errors))
    }
}

/// A string with every `${NAME}` of a known parameter replaced; unknown references stay.
fn substitute_string(values: &BTreeMap<String, String>, text: &str) -> String {
    STRING_PARAMETER
        .replace_all(text, |found: &Captures| match values.get(&found[1]) {
            Some(value) => value.clone(),
            None => found[0].to_string(),
        })
        .into_owned()
}

/// The value a string of an object becomes: `${{NAME}}` alone is the parameter's value read as
/// JSON (kept as a string when it is not JSON); otherwise the string substituted.
fn substitute_value(values: &BTreeMap<String, String>, text: &str) -> Value {
    if let Some(found) = NON_STRING_PARAMETER.captures(text)
        && let Some(value) = values.get(&found[1])
    {
        return serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.clone()));
    }
    Value::String(substitute_string(values, text))
}

/// Substitutes parameters in every string of a JSON value, map keys included.
fn substitute(value: &mut Value, values: &BTreeMap<String, String>) {
    match value {
        Value::String(text) => *value = substitute_value(values, text),
        Value::Array(items) => items.iter_mut().for_each(|item| substitute(item, values)),
        Value::Object(fields) => {
            let old = std::mem::take(fields);
            for (key, mut field) in old {
                substitute(&mut field, values);
                fields.insert(substitute_string(values, &key), field);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Drops a namespace written into an object, unless it references a parameter: objects are
/// created in the namespace the template is instantiated in.
fn strip_namespace(object: &mut Value) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let keep = match metadata.get("namespace") {
        Some(Value::String(namespace)) => STRING_PARAMETER.is_match(namespace),
        _ => false,
    };
    if !keep {
        metadata.remove("namespace");
    }
}

/// Adds the template's labels to an object's, overwriting labels of the same key.
fn add_labels(object: &mut Value, labels: &BTreeMap<String, String>) {
    if labels.is_empty() {
        return;
    }
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let existing = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !existing.is_object() {
        *existing = Value::Object(Map::new());
    }
    if let Some(existing) = existing.as_object_mut() {
        for (key, value) in labels {
            existing.insert(key.clone(), Value::String(value.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Parameter;
    use super::super::generator::OsRandomness;
    use super::*;

    fn parameter(name: &str, value: &str) -> Parameter {
        Parameter {
            name: name.into(),
            value: value.into(),
            ..Parameter::default()
        }
    }

    fn template(objects: Vec<Value>, parameters: Vec<Parameter>) -> Template {
        Template {
            objects,
            parameters,
            ..Template::default()
        }
    }

    fn processed(mut template: Template) -> Result<Template, FieldErrors> {
        process(&mut template, &mut OsRandomness).map(|()| template)
    }

    #[test]
    fn string_references_are_replaced_anywhere_in_a_string() {
        let t = template(
            vec![
                json!({"metadata": {"name": "${NAME}"}, "data": {"k": "a-${NAME}-${X}-b", "${NAME}-key": "v"}}),
            ],
            vec![parameter("NAME", "vm"), parameter("X", "1")],
        );
        let out = processed(t).unwrap();
        assert_eq!(out.objects[0]["metadata"]["name"], "vm");
        assert_eq!(out.objects[0]["data"]["k"], "a-vm-1-b");
        assert_eq!(out.objects[0]["data"]["vm-key"], "v");
    }

    #[test]
    fn unknown_references_are_left_as_written() {
        let t = template(vec![json!({"a": "${NOPE}"})], vec![]);
        assert_eq!(processed(t).unwrap().objects[0]["a"], "${NOPE}");
    }

    #[test]
    fn non_string_references_become_json_values() {
        let t = template(
            vec![
                json!({"replicas": "${{N}}", "on": "${{B}}", "text": "${{T}}", "mixed": "x${{N}}"}),
            ],
            vec![
                parameter("N", "3"),
                parameter("B", "true"),
                parameter("T", "not json"),
            ],
        );
        let out = processed(t).unwrap();
        assert_eq!(out.objects[0]["replicas"], 3);
        assert_eq!(out.objects[0]["on"], true);
        assert_eq!(out.objects[0]["text"], "not json");
        // `${{N}}` is only recognised as the whole string.
        assert_eq!(out.objects[0]["mixed"], "x${{N}}");
    }

    #[test]
    fn expression_parameters_without_a_value_are_generated() {
        let mut generated = Parameter {
            generate: "expression".into(),
            from: "vm-[a-z0-9]{5}".into(),
            ..parameter("NAME", "")
        };
        let given = Parameter {
            value: "mine".into(),
            ..generated.clone()
        };
        generated.name = "OTHER".into();
        let t = template(
            vec![json!({"a": "${NAME}", "b": "${OTHER}"})],
            vec![given, generated],
        );
        let out = processed(t).unwrap();
        assert_eq!(out.objects[0]["a"], "mine");
        let value = out.objects[0]["b"].as_str().unwrap();
        assert!(pattern("^vm-[a-z0-9]{5}$").is_match(value), "{value}");
        assert_eq!(out.parameters[1].value, value);
    }

    #[test]
    fn a_required_parameter_left_empty_is_refused_with_openshifts_message() {
        let required = Parameter {
            required: true,
            ..parameter("DATA_SOURCE_NAME", "")
        };
        let t = template(vec![], vec![parameter("A", "x"), required]);
        let err = processed(t).unwrap_err();
        assert_eq!(
            err.to_string(),
            "template.parameters[1]: Required value: template.parameters[1]: parameter DATA_SOURCE_NAME is required and must be specified"
        );
    }

    #[test]
    fn an_unknown_generator_is_refused() {
        let p = Parameter {
            generate: "random".into(),
            ..parameter("P", "")
        };
        let err = processed(template(vec![], vec![p])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "template.parameters[0]: Invalid value: \"random\": Unknown generator name 'random' for parameter P"
        );
    }

    #[test]
    fn a_malformed_expression_is_refused() {
        let p = Parameter {
            generate: "expression".into(),
            from: "[abc]{3}".into(),
            ..parameter("P", "")
        };
        let err = processed(template(vec![], vec![p])).unwrap_err();
        assert!(
            err.to_string()
                .contains("malformed expresion syntax: [abc]"),
            "{err}"
        );
    }

    #[test]
    fn bad_parameter_names_are_refused() {
        let err = processed(template(vec![], vec![parameter("a-b", "")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "parameters[0].name: Invalid value: \"a-b\": does not match ^[a-zA-Z0-9_]+$"
        );
        let err = processed(template(vec![], vec![parameter("", "")])).unwrap_err();
        assert_eq!(err.to_string(), "parameters[0].name: Required value");
    }

    #[test]
    fn template_labels_are_added_to_every_object_substituted() {
        let mut t = template(
            vec![
                json!({"metadata": {"labels": {"app": "old", "keep": "k"}}}),
                json!({"kind": "X"}),
            ],
            vec![parameter("APP", "web")],
        );
        t.labels = BTreeMap::from([("app".into(), "${APP}".into())]);
        let out = processed(t).unwrap();
        assert_eq!(
            out.objects[0]["metadata"]["labels"],
            json!({"app": "web", "keep": "k"})
        );
        assert_eq!(out.objects[1]["metadata"]["labels"], json!({"app": "web"}));
    }

    #[test]
    fn hard_coded_namespaces_are_dropped_parameterised_ones_kept() {
        let t = template(
            vec![
                json!({"metadata": {"name": "a", "namespace": "fixed"}}),
                json!({"metadata": {"name": "b", "namespace": "${NS}"}}),
            ],
            vec![parameter("NS", "chosen")],
        );
        let out = processed(t).unwrap();
        assert!(out.objects[0]["metadata"].get("namespace").is_none());
        assert_eq!(out.objects[1]["metadata"]["namespace"], "chosen");
    }

    #[test]
    fn the_message_is_substituted() {
        let mut t = template(vec![], vec![parameter("USER", "admin")]);
        t.message = "log in as ${USER}".into();
        assert_eq!(processed(t).unwrap().message, "log in as admin");
    }

    #[test]
    fn user_values_replace_generation_and_unknown_names_are_refused() {
        let mut t = template(
            vec![json!({"a": "${NAME}"})],
            vec![Parameter {
                generate: "expression".into(),
                from: "[a-z]{8}".into(),
                ..parameter("NAME", "")
            }],
        );
        set_parameters(&mut t, &[("NAME".into(), "given".into())], false).unwrap();
        assert_eq!(t.parameters[0].generate, "");
        assert_eq!(processed(t.clone()).unwrap().objects[0]["a"], "given");
        let err = set_parameters(&mut t, &[("NOPE".into(), "x".into())], false).unwrap_err();
        assert_eq!(err.to_string(), "unknown parameter name \"NOPE\"");
        set_parameters(&mut t, &[("NOPE".into(), "x".into())], true).unwrap();
    }

    #[test]
    fn the_list_holds_the_objects() {
        let t = processed(template(vec![json!({"kind": "ConfigMap"})], vec![])).unwrap();
        let list = to_list(&t);
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"][0]["kind"], "ConfigMap");
    }
}
