//! The OpenAPI value validations of one schema node, worded as kube-apiserver words them:
//! type, enum, minimum/maximum (and their exclusive forms), minLength/maxLength, pattern,
//! minItems/maxItems.

use regex::Regex;
use serde_json::Value;

/// The problems of `value` (at `path`) under the schema node `node`; a value of the wrong
/// type is an error of its own (`Err`), under which nothing more is judged.
pub fn check(
    node: &Value,
    path: &str,
    value: &Value,
    pattern: Option<&Regex>,
) -> Result<Vec<String>, String> {
    if let Some(wanted) = node.get("type").and_then(Value::as_str)
        && !has_type(node, wanted, value)
    {
        let found = type_name(value);
        return Err(format!(
            "{path}: Invalid value: \"{found}\": {path} in body must be of type {wanted}: \"{found}\""
        ));
    }
    let mut problems = Vec::new();
    if let Some(allowed) = node.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(Value::to_string).collect();
        problems.push(format!(
            "{path}: Unsupported value: {value}: supported values: {}",
            supported.join(", ")
        ));
    }
    match value {
        Value::Number(_) => bounds(node, path, value, &mut problems),
        Value::String(text) => string(node, path, text, pattern, &mut problems),
        Value::Array(items) => sizes(node, path, items.len(), &mut problems),
        _ => {}
    }
    Ok(problems)
}

/// The OpenAPI type of a JSON value, as kube-apiserver names it in errors.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `value` is of the OpenAPI type `wanted` under `node` (an int-or-string node
/// takes either).
pub(super) fn has_type(node: &Value, wanted: &str, value: &Value) -> bool {
    let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    match (wanted, value) {
        (_, Value::String(_) | Value::Number(_)) if int_or_string => {
            !matches!(value, Value::Number(n) if n.is_f64())
        }
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => !n.is_f64(),
        _ => wanted == type_name(value),
    }
}

fn bounds(node: &Value, path: &str, value: &Value, problems: &mut Vec<String>) {
    let Some(n) = value.as_f64() else {
        return;
    };
    let exclusive = |key: &str| node.get(key) == Some(&Value::Bool(true));
    if let Some(minimum) = node.get("minimum").and_then(Value::as_f64) {
        let (below, words) = if exclusive("exclusiveMinimum") {
            (n <= minimum, "greater than")
        } else {
            (n < minimum, "greater than or equal to")
        };
        if below {
            problems.push(format!(
                "{path}: Invalid value: {value}: {path} in body should be {words} {}",
                node["minimum"]
            ));
        }
    }
    if let Some(maximum) = node.get("maximum").and_then(Value::as_f64) {
        let (above, words) = if exclusive("exclusiveMaximum") {
            (n >= maximum, "less than")
        } else {
            (n > maximum, "less than or equal to")
        };
        if above {
            problems.push(format!(
                "{path}: Invalid value: {value}: {path} in body should be {words} {}",
                node["maximum"]
            ));
        }
    }
}

fn string(
    node: &Value,
    path: &str,
    text: &str,
    pattern: Option<&Regex>,
    problems: &mut Vec<String>,
) {
    let length = text.chars().count() as u64;
    if let Some(minimum) = node.get("minLength").and_then(Value::as_u64)
        && length < minimum
    {
        problems.push(format!(
            "{path}: Invalid value: {text:?}: {path} in body should be at least {minimum} chars long"
        ));
    }
    if let Some(maximum) = node.get("maxLength").and_then(Value::as_u64)
        && length > maximum
    {
        problems.push(format!(
            "{path}: Too long: may not be more than {maximum} bytes"
        ));
    }
    if let Some(regex) = pattern
        && !regex.is_match(text)
    {
        problems.push(format!(
            "{path}: Invalid value: {text:?}: {path} in body should match '{}'",
            regex.as_str()
        ));
    }
}

fn sizes(node: &Value, path: &str, length: usize, problems: &mut Vec<String>) {
    let length = length as u64;
    if let Some(maximum) = node.get("maxItems").and_then(Value::as_u64)
        && length > maximum
    {
        problems.push(format!(
            "{path}: Too many: {length}: must have at most {maximum} items"
        ));
    }
    if let Some(minimum) = node.get("minItems").and_then(Value::as_u64)
        && length < minimum
    {
        problems.push(format!(
            "{path}: Invalid value: {length}: {path} in body should have at least {minimum} items"
        ));
    }
}
