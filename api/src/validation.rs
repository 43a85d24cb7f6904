//! The error every validation function returns: the JSON path of the offending field and
//! what is wrong with it, worded for the person who wrote the manifest.

use std::fmt;

/// A dotted JSON path into an object, such as `spec.source.http.url` or
/// `spec.storagePools[1].name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldPath(String);

impl FieldPath {
    /// The path of a top-level field such as `spec`.
    pub fn new(root: &str) -> Self {
        Self(root.to_owned())
    }

    /// The path of a child field.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// The path of an element of a list field.
    pub fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What is wrong with a field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A required field is missing or empty.
    #[error("is required")]
    Required,
    /// Two fields that exclude each other are both set.
    #[error("cannot be set together with {other}")]
    Conflict {
        /// The path of the other field.
        other: String,
    },
    /// None of a set of alternatives is set.
    #[error("must set one of {options}")]
    NoneOf {
        /// The alternatives, comma separated.
        options: String,
    },
    /// More than one of a set of alternatives is set.
    #[error("must set exactly one of {options}, but {set} are set")]
    MoreThanOneOf {
        /// The alternatives, comma separated.
        options: String,
        /// The alternatives that are set, comma separated.
        set: String,
    },
    /// A value outside a fixed set of values.
    #[error("unsupported value {value:?}; supported values: {supported}")]
    Unsupported {
        /// The value found.
        value: String,
        /// The accepted values, comma separated.
        supported: String,
    },
    /// A quantity below the minimum.
    #[error("{value} is smaller than the minimum of {minimum}")]
    TooSmall {
        /// The value found.
        value: String,
        /// The minimum.
        minimum: String,
    },
    /// A string that is longer than allowed.
    #[error("is {length} characters long, longer than the maximum of {maximum}")]
    TooLong {
        /// The length found.
        length: usize,
        /// The maximum length.
        maximum: usize,
    },
    /// A URL that cannot be used.
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL found.
        url: String,
        /// Why it is not accepted.
        reason: String,
    },
    /// A value that must be unique within a list repeats an earlier one.
    #[error("duplicate value {value:?}, already used by {first}")]
    Duplicate {
        /// The repeated value.
        value: String,
        /// The path of the earlier field with the same value.
        first: String,
    },
    /// A host path that is not absolute.
    #[error("path {0:?} must be absolute")]
    NotAbsolute(String),
    /// Any other malformed value.
    #[error("{0}")]
    Invalid(String),
}

/// A field that fails validation: which one, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ValidationError {
    /// The JSON path of the field.
    pub field: FieldPath,
    /// What is wrong with it.
    pub problem: Problem,
}

impl ValidationError {
    /// An error for `field`.
    pub fn new(field: FieldPath, problem: Problem) -> Self {
        Self { field, problem }
    }
}

/// The result of a validation function.
pub type ValidationResult = Result<(), ValidationError>;

/// Kubernetes' words for a name that is not a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Whether `name` is a DNS-1123 subdomain, as most object names must be: at most 253 lower
/// case alphanumerics, `-` and `.`, dot-separated parts starting and ending alphanumeric.
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Joins alternative names for an error message.
pub fn join(names: &[&str]) -> String {
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_subdomains_are_kubernetes_names() {
        assert!(is_dns1123_subdomain("vm-1.example"));
        for bad in ["", "Vm", "-vm", "vm-", "a..b", "a_b", &"a".repeat(254)] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn paths_compose_children_and_indices() {
        let p = FieldPath::new("spec")
            .child("storagePools")
            .index(2)
            .child("name");
        assert_eq!(p.as_str(), "spec.storagePools[2].name");
        assert_eq!(FieldPath::new("").child("spec").as_str(), "spec");
    }

    #[test]
    fn message_names_the_field_and_the_problem() {
        let e = ValidationError::new(
            FieldPath::new("spec").child("pvc"),
            Problem::Conflict {
                other: "spec.storage".into(),
            },
        );
        assert_eq!(
            e.to_string(),
            "spec.pvc: cannot be set together with spec.storage"
        );
    }
}
