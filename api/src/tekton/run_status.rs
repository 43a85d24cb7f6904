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

/// The `Succeeded` condition among a run's conditions.
pub fn succeeded(conditions: Option<&[RunCondition]>) -> Option<&RunCondition> {
    conditions?.iter().find(|c| c.type_ == SUCCEEDED)
}

/// Sets a run's `Succeeded` condition as knative's `SetCondition` does: its
/// `lastTransitionTime` (`now`) moves only when status, reason or message change, and an
/// empty reason or message is left out. Whether it changed.
pub fn set_succeeded(
    conditions: &mut Option<Vec<RunCondition>>,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) -> bool {
    let unchanged = succeeded(conditions.as_deref()).is_some_and(|c| {
        c.status == status
            && c.reason.as_deref().unwrap_or_default() == reason
            && c.message.as_deref().unwrap_or_default() == message
    });
    if unchanged {
        return false;
    }
    let list = conditions.get_or_insert_with(Vec::new);
    list.retain(|c| c.type_ != SUCCEEDED);
    list.push(RunCondition {
        type_: SUCCEEDED.into(),
        status: status.into(),
        severity: None,
        last_transition_time: Some(now.into()),
        reason: Some(reason.into()).filter(|r: &String| !r.is_empty()),
        message: Some(message.into()).filter(|m: &String| !m.is_empty()),
    });
    true
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_when_the_condition_changes() {
        let mut conditions = None;
        assert!(set_succeeded(
            &mut conditions,
            "Unknown",
            "Running",
            "m",
            "t1"
        ));
        assert!(!set_succeeded(
            &mut conditions,
            "Unknown",
            "Running",
            "m",
            "t2"
        ));
        let at = |c: &Option<Vec<RunCondition>>| {
            succeeded(c.as_deref()).and_then(|c| c.last_transition_time.clone())
        };
        assert_eq!(at(&conditions).as_deref(), Some("t1"));
        assert!(set_succeeded(
            &mut conditions,
            "True",
            "Succeeded",
            "",
            "t3"
        ));
        assert_eq!(at(&conditions).as_deref(), Some("t3"));
        let only = conditions.as_deref().unwrap();
        assert_eq!((only.len(), only[0].message.as_ref()), (1, None));
    }
}
