//! Who may use the golden images, as ssp-operator grants it: the Role
//! `os-images.kubevirt.io:view` in the golden images namespace bound to every authenticated
//! user and service account (reading the boot sources and cloning from them), and the
//! ClusterRole `os-images.kubevirt.io:edit` for those who may manage them.

use serde_json::{Value, json};

use super::boot_sources::{GOLDEN_IMAGES_NAMESPACE, OPERAND};
use super::owner;
use super::plan::{Action, Change, Kind, is_being_deleted, merge_string_map, string_map};

/// The Role (and RoleBinding) letting everyone read and clone the golden images.
pub const VIEW_ROLE: &str = "os-images.kubevirt.io:view";
/// The ClusterRole for managing golden images.
pub const EDIT_CLUSTER_ROLE: &str = "os-images.kubevirt.io:edit";

/// The three objects as found, if they exist.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The view Role.
    pub view_role: Option<Value>,
    /// The view RoleBinding.
    pub view_binding: Option<Value>,
    /// The edit ClusterRole.
    pub edit_role: Option<Value>,
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

const READ: [&str; 3] = ["get", "list", "watch"];
const ALL: [&str; 7] = [
    "create", "delete", "get", "list", "patch", "update", "watch",
];

fn view_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": VIEW_ROLE, "namespace": GOLDEN_IMAGES_NAMESPACE},
        "rules": [
            rule("", &["persistentvolumeclaims", "persistentvolumeclaims/status"], &READ),
            rule("snapshot.storage.k8s.io", &["volumesnapshots", "volumesnapshots/status"], &READ),
            rule("cdi.kubevirt.io", &["datavolumes"], &READ),
            rule("cdi.kubevirt.io", &["datavolumes/source"], &["create"]),
            rule("cdi.kubevirt.io", &["datasources"], &READ),
            rule("cdi.kubevirt.io", &["dataimportcrons"], &READ),
            rule("", &["namespaces"], &READ),
        ],
    })
}

fn view_binding() -> Value {
    let group = |name: &str| json!({"kind": "Group", "name": name, "apiGroup": "rbac.authorization.k8s.io"});
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": VIEW_ROLE, "namespace": GOLDEN_IMAGES_NAMESPACE},
        "subjects": [group("system:authenticated"), group("system:serviceaccounts")],
        "roleRef": {"kind": "Role", "name": VIEW_ROLE, "apiGroup": "rbac.authorization.k8s.io"},
    })
}

fn edit_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": EDIT_CLUSTER_ROLE},
        "rules": [
            rule("", &["persistentvolumeclaims"], &ALL),
            rule("", &["persistentvolumeclaims/status"], &READ),
            rule("cdi.kubevirt.io", &["datavolumes"], &ALL),
            rule("cdi.kubevirt.io", &["datavolumes/source"], &["create"]),
            rule("cdi.kubevirt.io", &["datasources"], &ALL),
            rule("cdi.kubevirt.io", &["dataimportcrons"], &ALL),
        ],
    })
}

/// The change that brings `found` to `desired` (labelled and annotated for `ssp`): its
/// labels and annotations merged, its `fields` set.
fn reconcile_one(
    ssp: &api::ssp::SSP,
    kind: Kind,
    mut desired: Value,
    fields: &[&str],
    found: Option<&Value>,
) -> Option<Action> {
    merge_string_map(&mut desired, "labels", &owner::app_labels(ssp, OPERAND));
    merge_string_map(&mut desired, "annotations", &owner::owner_annotations(ssp));
    let Some(found) = found else {
        return Some(Action::on(kind, &desired, Change::Create(desired.clone())));
    };
    if is_being_deleted(found) {
        return None;
    }
    let mut next = found.clone();
    merge_string_map(&mut next, "labels", &string_map(&desired, "labels"));
    merge_string_map(
        &mut next,
        "annotations",
        &string_map(&desired, "annotations"),
    );
    for field in fields {
        next[*field] = desired[*field].clone();
    }
    (&next != found).then(|| Action::on(kind, &next, Change::Replace(next.clone())))
}

/// The changes that keep the golden image roles as SSP makes them.
pub fn plan(ssp: &api::ssp::SSP, observed: &Observed) -> Vec<Action> {
    [
        reconcile_one(
            ssp,
            Kind::Role,
            view_role(),
            &["rules"],
            observed.view_role.as_ref(),
        ),
        reconcile_one(
            ssp,
            Kind::RoleBinding,
            view_binding(),
            &["subjects", "roleRef"],
            observed.view_binding.as_ref(),
        ),
        reconcile_one(
            ssp,
            Kind::ClusterRole,
            edit_role(),
            &["rules"],
            observed.edit_role.as_ref(),
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The roles `ssp` made, deleted with it.
pub fn cleanup(ssp: &api::ssp::SSP, observed: &Observed) -> Vec<Action> {
    let owner_key = owner::owner_key(ssp);
    [
        (Kind::Role, &observed.view_role),
        (Kind::RoleBinding, &observed.view_binding),
        (Kind::ClusterRole, &observed.edit_role),
    ]
    .into_iter()
    .filter_map(|(kind, found)| {
        let found = found.as_ref()?;
        (owner::is_owned_by(found, &owner_key) && !is_being_deleted(found))
            .then(|| Action::on(kind, found, Change::Delete))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssp() -> api::ssp::SSP {
        serde_json::from_value(json!({
            "apiVersion": "ssp.kubevirt.io/v1beta2", "kind": "SSP",
            "metadata": {"name": "ssp", "namespace": "kubevirt"},
            "spec": {"commonTemplates": {"namespace": "openshift"}},
        }))
        .unwrap()
    }

    fn created(actions: &[Action]) -> Vec<Value> {
        actions
            .iter()
            .filter_map(|a| match &a.change {
                Change::Create(o) => Some(o.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn everyone_may_view_the_golden_images_and_edits_are_put_back() {
        let actions = plan(&ssp(), &Observed::default());
        let names: Vec<String> = actions.iter().map(Action::describe).collect();
        assert_eq!(
            names,
            [
                "Role kubevirt-os-images/os-images.kubevirt.io:view",
                "RoleBinding kubevirt-os-images/os-images.kubevirt.io:view",
                "ClusterRole /os-images.kubevirt.io:edit",
            ]
        );
        let objects = created(&actions);
        assert_eq!(objects[1]["subjects"][0]["name"], "system:authenticated");
        assert_eq!(
            objects[0]["rules"][3]["resources"],
            json!(["datavolumes/source"])
        );
        let mut edited = objects[0].clone();
        edited["rules"] = json!([]);
        let observed = Observed {
            view_role: Some(edited),
            view_binding: Some(objects[1].clone()),
            edit_role: Some(objects[2].clone()),
        };
        let actions = plan(&ssp(), &observed);
        assert_eq!(actions.len(), 1);
        let Change::Replace(fixed) = &actions[0].change else {
            panic!("{actions:?}")
        };
        assert_eq!(fixed["rules"], objects[0]["rules"]);
        assert_eq!(cleanup(&ssp(), &observed).len(), 3);
    }
}
