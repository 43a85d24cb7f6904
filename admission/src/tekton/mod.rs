//! Tekton's webhook, the part that matters most on `ferrovirt up`: the defaults it sets on
//! Tasks, Pipelines and runs ([`defaults`]) and its refusal of runs that name neither or
//! both of a reference and an inline spec, or an unknown `spec.status` ([`validate`]).
//! Its other checks (variables, DAG, workspaces, updates after start) are not made here.

pub mod defaults;
pub mod validate;

/// Tekton's defaulting webhook.
pub const DEFAULTING_WEBHOOK: &str = "webhook.pipeline.tekton.dev";
/// Tekton's validating webhook, which refusals quote.
pub const VALIDATION_WEBHOOK: &str = "validation.webhook.pipeline.tekton.dev";
/// The resources (plurals of `tekton.dev`) both apply to.
pub const PLURALS: &[&str] = &["tasks", "taskruns", "pipelines", "pipelineruns"];
