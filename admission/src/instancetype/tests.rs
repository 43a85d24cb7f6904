use serde_json::json;

use super::check_matchers;
use super::kinds::{validate_instancetype, validate_preference, webhook_name};

#[test]
fn a_matcher_needs_a_name_or_a_volume_but_not_both() {
    let vm = json!({"spec": {"instancetype": {}, "preference": {"inferFromVolume": "root",
        "name": "fedora", "kind": "VirtualMachinePreference",
        "inferFromVolumeFailurePolicy": "Maybe"}}});
    let refusal = check_matchers(&vm, None).unwrap_err();
    assert_eq!(
        refusal.message,
        "Either Name or InferFromVolume should be provided within the InstancetypeMatcher, \
         Name should not be provided when InferFromVolume is used within the PreferenceMatcher, \
         Kind should not be provided when InferFromVolume is used within the PreferenceMatcher, \
         Invalid value 'Maybe' for InferFromVolumeFailurePolicy"
    );
    let fine = json!({"spec": {"instancetype": {"name": "u1.small"}}});
    assert!(check_matchers(&fine, None).is_ok());
}

#[test]
fn a_renamed_matcher_must_drop_its_pinned_revision() {
    let old = json!({"spec": {"instancetype": {"name": "a", "revisionName": "r"}}});
    let new = json!({"spec": {"instancetype": {"name": "b", "revisionName": "r"}}});
    assert_eq!(
        check_matchers(&new, Some(&old)).unwrap_err().message,
        "the Matcher Name has been updated without updating the RevisionName"
    );
}

#[test]
fn kinds_are_checked_as_kubevirt_checks_them() {
    let it = |memory: serde_json::Value| json!({"spec": {"cpu": {"guest": 1}, "memory": memory}});
    assert!(validate_instancetype(&it(json!({"guest": "1Gi"}))).is_ok());
    assert_eq!(
        validate_instancetype(&it(json!({"guest": "1Gi", "overcommitPercent": 10,
            "hugepages": {"pageSize": "2Mi"}})))
        .unwrap_err()
        .message,
        "spec.memory.overcommitPercent and spec.memory.hugepages should not be requested together."
    );
    let pref = |cpu: serde_json::Value| json!({"spec": {"cpu": cpu}});
    assert_eq!(
        validate_preference(&pref(json!({"preferredCPUTopology": "diagonal"})))
            .unwrap_err()
            .message,
        "unknown preferredCPUTopology diagonal"
    );
    assert_eq!(
        validate_preference(&pref(json!({"preferredCPUTopology": "preferCores"}))).unwrap(),
        vec![
            "PreferredCPUTopology preferCores is deprecated for removal in a future release, please use cores instead"
                .to_string()
        ]
    );
    assert_eq!(
        validate_preference(&pref(json!({"preferredCPUTopology": "spread",
            "spreadOptions": {"across": "CoresThreads", "ratio": 3}})))
        .unwrap_err()
        .message,
        "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads"
    );
    assert_eq!(
        webhook_name("virtualmachineclusterpreferences"),
        "virtualmachineclusterpreference-validator.instancetype.kubevirt.io"
    );
}
