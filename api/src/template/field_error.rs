//! Field errors as Kubernetes' apimachinery prints them (`field.Error`, `ErrorList`), so a
//! refused template reads as OpenShift's API server reports it.

use std::fmt;

/// The kind of a field error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Required value`.
    Required,
    /// `Invalid value: VALUE`, the value quoted as Go's `%q` quotes a string.
    Invalid(String),
}

/// One problem with one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, such as `template.parameters[1]`.
    pub field: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// Why, in words.
    pub detail: String,
}

impl FieldError {
    /// A missing value.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Required,
            detail: detail.into(),
        }
    }

    /// A value that is not acceptable.
    pub fn invalid(field: impl Into<String>, value: &str, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: FieldErrorKind::Invalid(value.to_string()),
            detail: detail.into(),
        }
    }

    /// The message without the field, as apimachinery's `ErrorBody` (the `message` of a
    /// status cause).
    pub fn body(&self) -> String {
        let mut body = match &self.kind {
            FieldErrorKind::Required => "Required value".to_string(),
            FieldErrorKind::Invalid(value) => format!("Invalid value: {value:?}"),
        };
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Several field errors, printed as apimachinery aggregates them: one alone as itself, more
/// as `[first, second]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FieldErrors(pub Vec<FieldError>);

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let messages: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        match messages.as_slice() {
            [one] => f.write_str(one),
            many => write!(f, "[{}]", many.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_and_invalid_print_as_apimachinery() {
        let required = FieldError::required("template.parameters[1]", "parameter X is required");
        assert_eq!(
            required.to_string(),
            "template.parameters[1]: Required value: parameter X is required"
        );
        let invalid = FieldError::invalid("parameters[0].name", "a-b", "does not match");
        assert_eq!(
            invalid.to_string(),
            "parameters[0].name: Invalid value: \"a-b\": does not match"
        );
        assert_eq!(
            FieldErrors(vec![required.clone()]).to_string(),
            required.to_string()
        );
        assert_eq!(
            FieldErrors(vec![required, invalid]).to_string(),
            "[template.parameters[1]: Required value: parameter X is required, parameters[0].name: Invalid value: \"a-b\": does not match]"
        );
    }
}
