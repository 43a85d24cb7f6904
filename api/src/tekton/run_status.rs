//! What the status of a TaskRun and a PipelineRun share: knative's conditions (Tekton uses
//! one, `Succeeded`) and the provenance of the spec that ran.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The one condition type of a run.
pub const SUCCEEDED: &str = "Succeeded";

/// A knative condition (`knative.dev/pkg/apis.Condition`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `Error` (the default when empty), `Warning` or `Info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// RFC 3339; changes whenever status, reason or message do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where the spec that ran came from, and the feature flags it ran under.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_source: Option<RefSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_flags: Option<FeatureFlags>,
}

/// The source of a resolved Task or Pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_point: Option<String>,
}

/// Tekton's feature flags (`pkg/apis/config/feature_flags.go`) as recorded in a status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureFlags {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub await_sidecar_readiness: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coschedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_creds_init: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_inline_spec: Option<String>,
    #[serde(
        default,
        rename = "enableAPIFields",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_api_fields: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_artifacts: Option<bool>,
    #[serde(
        default,
        rename = "enableCELInWhenExpression",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_cel_in_when_expression: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_concise_resolver_syntax: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_keep_pod_on_cancel: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_kubernetes_sidecar: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_param_enum: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_provenance_in_status: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_step_actions: Option<bool>,
    #[serde(
        default,
        rename = "enableTektonOCIBundles",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_tekton_oci_bundles: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_termination_message_compression: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_wait_exponential_backoff: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforce_nonfalsifiability: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_result_size: Option<i64>,
    #[serde(
        default,
        rename = "requireGitSSHSecretKnownHosts",
        skip_serializing_if = "Option::is_none"
    )]
    pub require_git_ssh_secret_known_hosts: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_extraction_method: Option<String>,
    #[serde(
        default,
        rename = "runningInEnvWithInjectedSidecars",
        skip_serializing_if = "Option::is_none"
    )]
    pub running_in_env_with_injected_sidecars: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_cloud_events_for_runs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_security_context: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_security_context_read_only_root_filesystem: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_no_match_policy: Option<String>,
}
