//! What a replicating controller (VMI replica set, VM pool) does about an object its
//! selector may select, as KubeVirt's controller-ref manager decides it
//! (`pkg/controller/controller_ref_manager.go`), and the conditions both write.

use std::collections::BTreeMap;

use api::kubevirt::vmi::VirtualMachineCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};

/// What becomes of one object of the namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Controlled by the owner and selected: one of its replicas.
    Owned,
    /// Selected, controlled by nobody: to be adopted (then one of its replicas).
    Adopt,
    /// Controlled by the owner but no longer selected: to be released.
    Release,
    /// Not the owner's business.
    Ignore,
}

/// The controller reference of an object, if it has one.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// How an owner of UID `owner_uid` selecting with `selector` claims an object;
/// `may_adopt` is false while the owner is being deleted or where the owner never adopts.
pub fn claim(
    owner_uid: &str,
    selector: &LabelSelector,
    object: &ObjectMeta,
    may_adopt: bool,
) -> Claim {
    let empty = BTreeMap::new();
    let selected = api::label_selector::selects(selector, object.labels.as_ref().unwrap_or(&empty));
    match controller_of(object) {
        Some(r) if r.uid == owner_uid && selected => Claim::Owned,
        Some(r) if r.uid == owner_uid => Claim::Release,
        Some(_) => Claim::Ignore,
        None if selected && may_adopt && object.deletion_timestamp.is_none() => Claim::Adopt,
        None => Claim::Ignore,
    }
}

/// The JSON patch that makes `owner` the controller of an object of UID `uid` (refused by
/// the server if the object was replaced meanwhile).
pub fn adopt_patch(uid: &str, owner: &OwnerReference, current: &ObjectMeta) -> serde_json::Value {
    let mut references = current.owner_references.clone().unwrap_or_default();
    references.push(owner.clone());
    serde_json::json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/metadata/ownerReferences", "value": references},
    ])
}

/// The JSON patch that takes the reference to owner `owner_uid` off an object of UID `uid`.
pub fn release_patch(uid: &str, owner_uid: &str, current: &ObjectMeta) -> serde_json::Value {
    let references: Vec<&OwnerReference> = current
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.uid != owner_uid)
        .collect();
    serde_json::json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/metadata/ownerReferences", "value": references},
    ])
}

/// `conditions` with `type_` present (kept as it is when already there: upstream adds a
/// condition once and does not refresh it) when `wanted` holds, absent otherwise.
pub fn set_condition(
    conditions: &mut Vec<VirtualMachineCondition>,
    wanted: Option<(&str, &str, &str)>,
    type_: &str,
    now: &Time,
) {
    let present = conditions.iter().any(|c| c.type_ == type_);
    match wanted {
        Some((_, reason, message)) if !present => {
            conditions.push(VirtualMachineCondition::new(
                type_, true, reason, message, now,
            ));
        }
        None => conditions.retain(|c| c.type_ != type_),
        Some(_) => {}
    }
}

/// Whether `conditions` has one of type `type_`.
pub fn has_condition(conditions: &[VirtualMachineCondition], type_: &str) -> bool {
    conditions.iter().any(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)], controller_uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            owner_references: controller_uid.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn owned_adopted_released_or_ignored() {
        let selector: LabelSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {"app": "a"}})).unwrap();
        assert_eq!(
            claim("u", &selector, &meta(&[("app", "a")], Some("u")), true),
            Claim::Owned
        );
        assert_eq!(
            claim("u", &selector, &meta(&[("app", "b")], Some("u")), true),
            Claim::Release
        );
        assert_eq!(
            claim("u", &selector, &meta(&[("app", "a")], None), true),
            Claim::Adopt
        );
        assert_eq!(
            claim("u", &selector, &meta(&[("app", "a")], None), false),
            Claim::Ignore
        );
        assert_eq!(
            claim("u", &selector, &meta(&[("app", "a")], Some("v")), true),
            Claim::Ignore
        );
        assert_eq!(
            claim("u", &selector, &meta(&[("app", "b")], None), true),
            Claim::Ignore
        );
    }
}
