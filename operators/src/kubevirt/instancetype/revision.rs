//! The ControllerRevisions that keep the instancetype and preference a VM was first given
//! (KubeVirt's `pkg/instancetype/revision`): named and labelled as upstream, holding the
//! object as it was, owned by the VM; and the VM's `status.instancetypeRef` /
//! `preferenceRef` kept in step with its matchers.

use std::collections::BTreeMap;

use api::kubevirt::VirtualMachine;
use api::kubevirt::vm::{ControllerRevisionRef, InstancetypeMatcher, InstancetypeStatusRef};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::ResourceExt;
use serde_json::Value;

/// The labels upstream puts on a revision, describing the object it holds.
pub mod labels {
    /// The object's generation.
    pub const OBJECT_GENERATION: &str = "instancetype.kubevirt.io/object-generation";
    /// The object's kind.
    pub const OBJECT_KIND: &str = "instancetype.kubevirt.io/object-kind";
    /// The object's name.
    pub const OBJECT_NAME: &str = "instancetype.kubevirt.io/object-name";
    /// The object's UID.
    pub const OBJECT_UID: &str = "instancetype.kubevirt.io/object-uid";
    /// The object's API version.
    pub const OBJECT_VERSION: &str = "instancetype.kubevirt.io/object-version";
}

/// The status reference a matcher leads to from the current one: the same revision while
/// the matcher still names the same object, none (a new one is to be made) once it names
/// another; a `revisionName` the user gives wins.
pub fn next_ref(
    matcher: &InstancetypeMatcher,
    current: Option<&InstancetypeStatusRef>,
) -> InstancetypeStatusRef {
    let mut next = current.cloned().unwrap_or_default();
    let mut moved = false;
    for (wanted, field) in [
        (&matcher.name, &mut next.name),
        (&matcher.kind, &mut next.kind),
        (&matcher.infer_from_volume, &mut next.infer_from_volume),
    ] {
        if let Some(value) = wanted.as_ref().filter(|v| !v.is_empty())
            && field.as_ref() != Some(value)
        {
            *field = Some(value.clone());
            moved = true;
        }
    }
    if moved {
        next.controller_revision_ref = None;
    }
    if matcher.infer_from_volume_failure_policy.is_some() {
        next.infer_from_volume_failure_policy = matcher.infer_from_volume_failure_policy.clone();
    }
    if let Some(pinned) = matcher.revision_name.as_ref().filter(|n| !n.is_empty()) {
        next.controller_revision_ref = Some(ControllerRevisionRef {
            name: Some(pinned.clone()),
        });
    }
    next
}

/// The revision's name: `VM-OBJECT-VERSION-UID-GENERATION`, as upstream.
pub fn name(vm: &VirtualMachine, object: &ObjectMeta) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        vm.name_any(),
        object.name.as_deref().unwrap_or_default(),
        api::instancetype::VERSION,
        object.uid.as_deref().unwrap_or_default(),
        object.generation.unwrap_or_default()
    )
}

/// The revision holding `object` (the instancetype or preference as read, with its kind),
/// owned by the VM: its metadata without labels, annotations, finalizers, owners and
/// managed fields, as upstream stores it.
pub fn for_object(
    vm: &VirtualMachine,
    owner: &OwnerReference,
    kind: &str,
    meta: &ObjectMeta,
    spec: &impl serde::Serialize,
) -> Result<ControllerRevision, serde_json::Error> {
    let kept = ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        generation: meta.generation,
        creation_timestamp: meta.creation_timestamp.clone(),
        ..Default::default()
    };
    let data = serde_json::json!({
        "apiVersion": format!("{}/{}", api::instancetype::GROUP, api::instancetype::VERSION),
        "kind": kind,
        "metadata": serde_json::to_value(&kept)?,
        "spec": serde_json::to_value(spec)?,
    });
    let labels = BTreeMap::from([
        (
            labels::OBJECT_GENERATION.to_string(),
            meta.generation.unwrap_or_default().to_string(),
        ),
        (labels::OBJECT_KIND.to_string(), kind.to_string()),
        (
            labels::OBJECT_NAME.to_string(),
            meta.name.clone().unwrap_or_default(),
        ),
        (
            labels::OBJECT_UID.to_string(),
            meta.uid.clone().unwrap_or_default(),
        ),
        (
            labels::OBJECT_VERSION.to_string(),
            api::instancetype::VERSION.to_string(),
        ),
    ]);
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name(vm, meta)),
            namespace: vm.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![owner.clone()]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision: 0,
    })
}

/// The spec a revision holds.
pub fn spec_of<T: serde::de::DeserializeOwned>(revision: &ControllerRevision) -> Result<T, String> {
    let name = revision.name_any();
    let spec = revision
        .data
        .as_ref()
        .and_then(|d| d.0.get("spec"))
        .cloned()
        .unwrap_or(Value::Null);
    serde_json::from_value(spec)
        .map_err(|e| format!("ControllerRevision {name} does not hold a v1beta1 object: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(name: &str) -> InstancetypeMatcher {
        InstancetypeMatcher {
            name: Some(name.into()),
            kind: Some("virtualmachineclusterinstancetype".into()),
            ..Default::default()
        }
    }

    fn stored(name: &str, revision: &str) -> InstancetypeStatusRef {
        InstancetypeStatusRef {
            name: Some(name.into()),
            kind: Some("virtualmachineclusterinstancetype".into()),
            controller_revision_ref: Some(ControllerRevisionRef {
                name: Some(revision.into()),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_revision_is_kept_while_the_matcher_names_the_same_object() {
        let current = stored("u1.small", "vm-u1.small-v1beta1-uid-1");
        assert_eq!(next_ref(&matcher("u1.small"), Some(&current)), current);
        let moved = next_ref(&matcher("u1.medium"), Some(&current));
        assert_eq!(moved.name.as_deref(), Some("u1.medium"));
        assert_eq!(moved.controller_revision_ref, None);
        assert_eq!(
            next_ref(&matcher("u1.small"), None).controller_revision_ref,
            None
        );
    }

    #[test]
    fn a_pinned_revision_wins() {
        let mut pinned = matcher("u1.medium");
        pinned.revision_name = Some("mine".into());
        let next = next_ref(&pinned, Some(&stored("u1.small", "old")));
        assert_eq!(
            next.controller_revision_ref.and_then(|r| r.name).as_deref(),
            Some("mine")
        );
    }

    #[test]
    fn a_revision_is_named_labelled_and_owned_as_upstream() {
        let mut vm = VirtualMachine::new("vm1", Default::default());
        vm.metadata.namespace = Some("ns".into());
        vm.metadata.uid = Some("vm-uid".into());
        let meta = ObjectMeta {
            name: Some("u1.small".into()),
            uid: Some("it-uid".into()),
            generation: Some(3),
            labels: Some(BTreeMap::from([("x".into(), "y".into())])),
            ..Default::default()
        };
        let spec = serde_json::json!({"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}});
        let owner = OwnerReference {
            uid: "vm-uid".into(),
            controller: Some(true),
            ..Default::default()
        };
        let rev = for_object(
            &vm,
            &owner,
            "VirtualMachineClusterInstancetype",
            &meta,
            &spec,
        )
        .unwrap();
        assert_eq!(rev.name_any(), "vm1-u1.small-v1beta1-it-uid-3");
        assert_eq!(rev.namespace().as_deref(), Some("ns"));
        assert_eq!(
            rev.labels()[labels::OBJECT_KIND],
            "VirtualMachineClusterInstancetype"
        );
        assert_eq!(rev.labels()[labels::OBJECT_GENERATION], "3");
        let data = &rev.data.as_ref().unwrap().0;
        assert_eq!(data["kind"], "VirtualMachineClusterInstancetype");
        assert!(data["metadata"].get("labels").is_none());
        assert_eq!(spec_of::<Value>(&rev).unwrap(), spec);
        assert_eq!(rev.owner_references()[0].uid, "vm-uid");
    }
}
