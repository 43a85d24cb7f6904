//! The one refusal of admission: why a webhook refuses a request, as its AdmissionResponse
//! says it. Every decision of this crate refuses with it; the webhook servers answer it in an
//! AdmissionReview and the embedded API server passes it on as kube-apiserver does.

/// Why a webhook refuses a request, as its AdmissionResponse would say.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The HTTP status of the refusal (403 for controller-runtime's `Denied`).
    pub code: u16,
    pub message: String,
    /// Warnings the webhook gave with its refusal; kube-apiserver passes them on with it.
    pub warnings: Vec<String>,
}

impl Refusal {
    /// A refusal with HTTP status `code` and no warnings.
    pub fn new(code: u16, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
            warnings: Vec::new(),
        }
    }

    /// A plain denial (HTTP 403), as controller-runtime's `admission.Denied`.
    pub fn denied(message: impl Into<String>) -> Refusal {
        Refusal::new(403, message)
    }
}
