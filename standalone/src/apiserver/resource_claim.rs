//! Dynamic resource allocation (`resource.k8s.io`): served so that a user's ResourceClaim or
//! ResourceClaimTemplate (KubeVirt's `pgpu-resource-claim-tmpl.yaml`, a GPU claim) meets a
//! refusal that says why, rather than kubectl's "no matches for kind". Nothing on this
//! machine allocates devices: no DRA driver runs and the node agent passes no device to a
//! pod, so a claim could never be satisfied and is refused when it is written.

use serde_json::Value;

pub const GROUP: &str = "resource.k8s.io";
/// The versions Kubernetes 1.34 serves, newest first; the first is the storage version.
pub const VERSIONS: [&str; 3] = ["v1", "v1beta2", "v1beta1"];
/// The kinds a user writes to ask for devices.
pub const KINDS: [(&str, &str); 2] = [
    ("ResourceClaim", "resourceclaims"),
    ("ResourceClaimTemplate", "resourceclaimtemplates"),
];

/// The refusal of a write of `kind` in `group` (none for another kind).
pub fn validate(group: &str, kind: &str, _object: &Value) -> Vec<String> {
    if group != GROUP || !KINDS.iter().any(|(k, _)| *k == kind) {
        return Vec::new();
    }
    vec![format!(
        "spec: Forbidden: dynamic resource allocation ({kind}) is not supported on ferrovirt up: \
         no DRA driver runs on this machine to allocate the devices it asks for"
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claims_are_refused_with_a_reason_and_other_kinds_pass() {
        let template = json!({"spec": {"spec": {"devices": {"requests": [{"name": "pgpu"}]}}}});
        let errors = validate(GROUP, "ResourceClaimTemplate", &template);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("spec: Forbidden: dynamic resource allocation (ResourceClaimTemplate) is not supported on ferrovirt up"), "{errors:?}");
        assert_eq!(validate(GROUP, "ResourceClaim", &template).len(), 1);
        assert!(validate("scheduling.k8s.io", "PriorityClass", &template).is_empty());
    }
}
