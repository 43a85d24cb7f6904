//! Errors of the API server, each ending as a Kubernetes `Status` object with the code and
//! reason that kubectl and client libraries act on (404 NotFound, 409 Conflict, ...).

use serde_json::{Value, json};

/// What a request failed with; `status()` renders it the way kube-apiserver does.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{resource} \"{name}\" not found")]
    NotFound { resource: String, name: String },
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists { resource: String, name: String },
    #[error(
        "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
    )]
    Conflict { resource: String, name: String },
    #[error("{0}")]
    BadRequest(String),
    #[error("{kind} \"{name}\" is invalid: {message}")]
    Invalid {
        kind: String,
        name: String,
        message: String,
    },
    /// An object that fails its schema (a custom resource its CRD's, a built-in kind
    /// kube-apiserver's validation): every field error, as kube-apiserver lists them (one
    /// alone, several in brackets).
    #[error("{} \"{name}\" is invalid: {}", qualified(.kind, .group), listed(.errors))]
    SchemaInvalid {
        kind: String,
        group: String,
        name: String,
        errors: Vec<String>,
    },
    #[error("the server could not find the requested resource")]
    NoSuchResource,
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("Unauthorized")]
    Unauthorized,
    #[error("the server has received too many requests and has asked us to try again later")]
    TooManyRequests,
    #[error("{0}")]
    Forbidden(String),
    #[error("the provided resource version is too old: {0}")]
    Gone(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("internal error: {0}")]
    Internal(String),
    /// An aggregated API's service failed to answer.
    #[error("service unavailable: {0}")]
    ServiceUnavailable(String),
    /// A validating webhook's refusal, with the code it gave (400 at least), as
    /// kube-apiserver passes it on.
    #[error("{message}")]
    Refused {
        code: u16,
        message: String,
        /// The admission warnings given with the refusal, sent as `Warning` headers.
        warnings: Vec<String>,
    },
}

impl ApiError {
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } | ApiError::NoSuchResource => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::BadRequest(_) => 400,
            ApiError::Invalid { .. } | ApiError::SchemaInvalid { .. } => 422,
            ApiError::MethodNotAllowed => 405,
            ApiError::Unauthorized => 401,
            ApiError::Forbidden(_) => 403,
            ApiError::Gone(_) => 410,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::TooManyRequests => 429,
            ApiError::Internal(_) => 500,
            ApiError::ServiceUnavailable(_) => 503,
            ApiError::Refused { code, .. } => (*code).max(400),
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } | ApiError::NoSuchResource => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Invalid { .. } | ApiError::SchemaInvalid { .. } => "Invalid",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Forbidden(_) => "Forbidden",
            ApiError::Gone(_) => "Expired",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::TooManyRequests => "TooManyRequests",
            ApiError::Internal(_) => "InternalError",
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
            ApiError::Refused { code, .. } => match code {
                403 => "Forbidden",
                404 => "NotFound",
                409 => "Conflict",
                422 => "Invalid",
                500.. => "InternalError",
                _ => "BadRequest",
            },
        }
    }

    /// The `metav1.Status` body for this error.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            ApiError::NotFound { resource, name }
            | ApiError::AlreadyExists { resource, name }
            | ApiError::Conflict { resource, name } => Some(details(resource, name)),
            ApiError::Invalid {
                kind,
                name,
                message,
            } => Some(json!({"name": name, "kind": kind, "causes": [invalid_cause(message)]})),
            ApiError::SchemaInvalid {
                kind,
                group,
                name,
                errors,
            } => {
                let causes: Vec<Value> = errors.iter().map(|e| invalid_cause(e)).collect();
                Some(json!({"name": name, "group": group, "kind": kind, "causes": causes}))
            }
            _ => None,
        };
        if let Some(details) = details {
            status["details"] = details;
        }
        status
    }

    pub fn internal(err: impl std::fmt::Display) -> Self {
        ApiError::Internal(err.to_string())
    }
}

/// The cause of an Invalid error: kubectl prints an Invalid error's causes (`field:
/// message`), not its message, so the message is one, its field split off where it starts
/// with one (`spec.x[0].y: problem`), as kube-apiserver's field errors are.
fn invalid_cause(message: &str) -> Value {
    let is_path = |field: &str| {
        !field.is_empty()
            && field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._[]-/".contains(c))
    };
    match message.split_once(": ") {
        Some((field, rest)) if is_path(field) => {
            json!({"reason": "FieldValueInvalid", "field": field, "message": rest})
        }
        _ => json!({"reason": "FieldValueInvalid", "message": message}),
    }
}

/// Field errors as kube-apiserver's aggregate prints them.
/// A kind as kube-apiserver names it in errors: `Deployment.apps`, `Pod` for the core group.
fn qualified(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

fn listed(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Status details name the group and kind separately: "datavolumes.cdi.kubevirt.io" has
/// group "cdi.kubevirt.io" and kind "datavolumes".
fn details(resource: &str, name: &str) -> Value {
    let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
    json!({"name": name, "group": group, "kind": kind})
}

impl From<rusqlite::Error> for ApiError {
    fn from(err: rusqlite::Error) -> Self {
        ApiError::Internal(format!("database: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_is_409_with_details() {
        let err = ApiError::Conflict {
            resource: "datavolumes.cdi.kubevirt.io".into(),
            name: "dv".into(),
        };
        let status = err.status();
        assert_eq!(status["code"], 409);
        assert_eq!(status["reason"], "Conflict");
        assert_eq!(status["details"]["group"], "cdi.kubevirt.io");
        assert_eq!(status["details"]["kind"], "datavolumes");
    }

    #[test]
    fn invalid_carries_its_message_as_a_cause_for_kubectl() {
        let err = ApiError::Invalid {
            kind: "DataVolume".into(),
            name: "dv".into(),
            message: "spec.source.http.url: is required".into(),
        };
        let cause = &err.status()["details"]["causes"][0];
        assert_eq!(cause["field"], "spec.source.http.url");
        assert_eq!(cause["message"], "is required");
        let plain = ApiError::Invalid {
            kind: "Pod".into(),
            name: "p".into(),
            message: "not a valid Pod: missing field".into(),
        };
        let cause = &plain.status()["details"]["causes"][0];
        assert!(cause.get("field").is_none());
        assert_eq!(cause["message"], "not a valid Pod: missing field");
    }
}
