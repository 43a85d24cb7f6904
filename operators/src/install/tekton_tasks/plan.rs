//! What a reconcile of a TektonTasks decides, from what it observed: for every task of the
//! catalogue (`tekton::catalog`) its Task in the tasks namespace, and its ClusterRole,
//! ServiceAccount and RoleBinding `<task>-task` (the last two in the CR's namespace), as
//! tekton-tasks-operator deploys its bundle. Nothing is deployed while
//! `spec.featureGates.deployTektonTaskResources` is off; with it on and Tekton's Task not
//! served, the plan says which CRD is missing instead of acting.

use std::collections::BTreeMap;

use api::tekton_tasks::TektonTasks;
use kube::ResourceExt;
use serde_json::Value;
use tekton::catalog::TASKS;

use crate::install::ssp::plan::{
    Action, Change, Kind, is_being_deleted, is_subset, merge_string_map, name_of, string_map,
};

/// The CRD that must be served before anything is deployed.
pub const TASK_CRD: &str = "tasks.tekton.dev";
/// `app.kubernetes.io/name` of the tasks' objects, as upstream.
pub const OPERAND: &str = "tekton-tasks";
/// `app.kubernetes.io/component`, as upstream.
pub const COMPONENT: &str = "tektonTasks";
/// `app.kubernetes.io/managed-by`, as upstream.
pub const MANAGED_BY: &str = "tekton-tasks-operator";
/// The label upstream puts on each Task with the tasks' version.
pub const VERSION_LABEL: &str = "tekton-tasks.kubevirt.io/version";
/// The owner annotations of operator-lib, standing for an owner reference across
/// namespaces (the ClusterRoles, and Tasks outside the CR's namespace).
pub const PRIMARY_RESOURCE: &str = "operator-sdk/primary-resource";
/// The owner's `Kind.group`.
pub const PRIMARY_RESOURCE_TYPE: &str = "operator-sdk/primary-resource-type";
/// The owner's kind and group, as operator-lib writes them.
pub const OWNER_TYPE: &str = "TektonTasks.tektontasks.kubevirt.io";

/// What the plan looks at.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The Tasks in the tasks namespace; `None` when Tekton's Task is not served.
    pub tasks: Option<Vec<Value>>,
    /// The ServiceAccounts in the CR's namespace.
    pub service_accounts: Vec<Value>,
    /// The RoleBindings in the CR's namespace.
    pub role_bindings: Vec<Value>,
    /// The ClusterRoles named after the tasks that exist.
    pub cluster_roles: Vec<Value>,
}

/// Why nothing could be planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingCrds(pub Vec<String>);

/// `namespace/name` of `tt`.
pub fn owner_key(tt: &TektonTasks) -> String {
    format!("{}/{}", tt.namespace().unwrap_or_default(), tt.name_any())
}

fn labels(version: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), OPERAND.to_owned()),
        (
            "app.kubernetes.io/component".to_owned(),
            COMPONENT.to_owned(),
        ),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGED_BY.to_owned(),
        ),
        (VERSION_LABEL.to_owned(), version.to_owned()),
    ])
}

fn owner_annotations(tt: &TektonTasks) -> BTreeMap<String, String> {
    BTreeMap::from([
        (PRIMARY_RESOURCE.to_owned(), owner_key(tt)),
        (PRIMARY_RESOURCE_TYPE.to_owned(), OWNER_TYPE.to_owned()),
    ])
}

/// Whether `object` carries the owner annotations of the TektonTasks `owner_key`.
pub fn is_owned_by(object: &Value, owner_key: &str) -> bool {
    let annotations = &object["metadata"]["annotations"];
    annotations[PRIMARY_RESOURCE_TYPE] == OWNER_TYPE && annotations[PRIMARY_RESOURCE] == owner_key
}

/// The TektonTasks (`namespace`, `name`) that `annotations` name as owner, if any.
pub fn owner_of(annotations: &BTreeMap<String, String>) -> Option<(String, String)> {
    if annotations.get(PRIMARY_RESOURCE_TYPE).map(String::as_str) != Some(OWNER_TYPE) {
        return None;
    }
    let (namespace, name) = annotations.get(PRIMARY_RESOURCE)?.split_once('/')?;
    Some((namespace.to_owned(), name.to_owned()))
}

/// One object the CR wants, with the fields kept as the operator writes them.
struct Wanted {
    kind: Kind,
    object: Value,
    fields: &'static [&'static str],
}

/// The ClusterRole names of the catalogue's tasks (`<task>-task`).
pub fn cluster_role_names() -> Vec<String> {
    TASKS.iter().map(|t| format!("{}-task", t.name)).collect()
}

/// Everything `tt` deploys, its Tasks running `image`, labelled with `version`.
fn wanted(tt: &TektonTasks, image: &str, version: &str) -> Vec<Wanted> {
    let tasks_namespace = tt.tasks_namespace();
    let accounts_namespace = tt.service_accounts_namespace();
    let mut all = Vec::new();
    for task in TASKS {
        let mut object = task.task_object(image);
        object["metadata"]["namespace"] = Value::String(tasks_namespace.clone());
        all.push(Wanted {
            kind: Kind::Task,
            object,
            fields: &["spec"],
        });
        for mut object in task.rbac_objects() {
            let (kind, fields): (Kind, &'static [&'static str]) =
                match object["kind"].as_str().unwrap_or_default() {
                    "ClusterRole" => (Kind::ClusterRole, &["rules"]),
                    "ServiceAccount" => (Kind::ServiceAccount, &[]),
                    _ => (Kind::RoleBinding, &["roleRef", "subjects"]),
                };
            if kind != Kind::ClusterRole {
                object["metadata"]["namespace"] = Value::String(accounts_namespace.clone());
            }
            all.push(Wanted {
                kind,
                object,
                fields,
            });
        }
    }
    for wanted in &mut all {
        merge_string_map(&mut wanted.object, "labels", &labels(version));
        merge_string_map(&mut wanted.object, "annotations", &owner_annotations(tt));
    }
    all
}

fn found<'a>(observed: &'a Observed, kind: Kind, name: &str) -> Option<&'a Value> {
    let list: &[Value] = match kind {
        Kind::Task => observed.tasks.as_deref().unwrap_or_default(),
        Kind::ServiceAccount => &observed.service_accounts,
        Kind::RoleBinding => &observed.role_bindings,
        _ => &observed.cluster_roles,
    };
    list.iter().find(|o| name_of(o) == name)
}

/// The change that brings `found` to `wanted`: created when missing, else its labels and
/// annotations merged and its kept fields set (reverting edits, as upstream). Fields the
/// API server or Tekton's defaulting added are not a difference, so a deployed object is
/// not rewritten on every reconcile.
fn reconcile_one(wanted: &Wanted, found: Option<&Value>) -> Option<Action> {
    let Some(found) = found else {
        let object = wanted.object.clone();
        return Some(Action::on(
            wanted.kind,
            &object,
            Change::Create(object.clone()),
        ));
    };
    if is_being_deleted(found) {
        return None;
    }
    let mut next = found.clone();
    for field in ["labels", "annotations"] {
        merge_string_map(&mut next, field, &string_map(&wanted.object, field));
    }
    let edited = wanted
        .fields
        .iter()
        .any(|field| !is_subset(&wanted.object[*field], &found[*field]));
    if edited {
        for field in wanted.fields {
            next[*field] = wanted.object[*field].clone();
        }
    }
    (&next != found).then(|| Action::on(wanted.kind, &next, Change::Replace(next.clone())))
}

/// The changes that deploy what `tt` asks for (none while its feature gate is off), or the
/// CRD that is missing.
pub fn plan(
    tt: &TektonTasks,
    image: &str,
    version: &str,
    observed: &Observed,
) -> Result<Vec<Action>, MissingCrds> {
    if !tt.deploys_task_resources() {
        return Ok(Vec::new());
    }
    if observed.tasks.is_none() {
        return Err(MissingCrds(vec![TASK_CRD.to_owned()]));
    }
    Ok(wanted(tt, image, version)
        .iter()
        .filter_map(|w| reconcile_one(w, found(observed, w.kind, name_of(&w.object))))
        .collect())
}

/// What `tt` made, deleted with it: every observed object carrying its owner annotations.
pub fn cleanup(tt: &TektonTasks, observed: &Observed) -> Vec<Action> {
    let key = owner_key(tt);
    let tasks = observed.tasks.iter().flatten().map(|o| (Kind::Task, o));
    let rest = [
        (Kind::RoleBinding, &observed.role_bindings),
        (Kind::ServiceAccount, &observed.service_accounts),
        (Kind::ClusterRole, &observed.cluster_roles),
    ]
    .into_iter()
    .flat_map(|(kind, list)| list.iter().map(move |o| (kind, o)));
    tasks
        .chain(rest)
        .filter(|(_, o)| is_owned_by(o, &key) && !is_being_deleted(o))
        .map(|(kind, o)| Action::on(kind, o, Change::Delete))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tt(spec: Value) -> TektonTasks {
        serde_json::from_value(json!({
            "apiVersion": "tektontasks.kubevirt.io/v1alpha1", "kind": "TektonTasks",
            "metadata": {"name": "tto", "namespace": "kubevirt"}, "spec": spec,
        }))
        .unwrap()
    }

    fn on() -> TektonTasks {
        tt(json!({"featureGates": {"deployTektonTaskResources": true},
                  "tasks": {"namespace": "tasks"}}))
    }

    fn served() -> Observed {
        Observed {
            tasks: Some(Vec::new()),
            ..Observed::default()
        }
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
    fn nothing_is_deployed_while_the_gate_is_off_even_without_tekton() {
        let off = tt(json!({"tasks": {"namespace": "tasks"}}));
        assert_eq!(plan(&off, "img", "v1", &Observed::default()), Ok(vec![]));
        let explicit = tt(json!({"featureGates": {"deployTektonTaskResources": false}}));
        assert_eq!(plan(&explicit, "img", "v1", &served()), Ok(vec![]));
    }

    #[test]
    fn a_missing_task_crd_is_named_not_acted_on() {
        assert_eq!(
            plan(&on(), "img", "v1", &Observed::default()),
            Err(MissingCrds(vec!["tasks.tekton.dev".into()]))
        );
    }

    #[test]
    fn every_catalogue_task_and_its_rbac_go_where_upstream_puts_them() {
        let actions = plan(&on(), "img", "v1", &served()).unwrap();
        assert_eq!(actions.len(), TASKS.len() * 4);
        let names: Vec<String> = actions.iter().map(Action::describe).collect();
        for task in TASKS {
            let n = task.name;
            for expected in [
                format!("Task tasks/{n}"),
                format!("ClusterRole /{n}-task"),
                format!("ServiceAccount kubevirt/{n}-task"),
                format!("RoleBinding kubevirt/{n}-task"),
            ] {
                assert!(names.contains(&expected), "{expected} not in {names:?}");
            }
        }
        let objects = created(&actions);
        let task = objects
            .iter()
            .find(|o| o["kind"] == "Task" && o["metadata"]["name"] == "cleanup-vm")
            .unwrap();
        assert_eq!(task["spec"]["steps"][0]["image"], "img");
        assert_eq!(task["metadata"]["labels"][VERSION_LABEL], "v1");
        assert_eq!(
            task["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "tekton-tasks-operator"
        );
        assert_eq!(
            task["metadata"]["labels"]["app.kubernetes.io/part-of"],
            "ferrovirt"
        );
        assert!(is_owned_by(task, "kubevirt/tto"));
        let binding = objects
            .iter()
            .find(|o| o["kind"] == "RoleBinding" && o["metadata"]["name"] == "cleanup-vm-task")
            .unwrap();
        assert_eq!(binding["roleRef"]["name"], "cleanup-vm-task");
        assert_eq!(binding["subjects"][0]["name"], "cleanup-vm-task");
    }

    #[test]
    fn tasks_default_to_the_crs_namespace() {
        let tt = tt(json!({"featureGates": {"deployTektonTaskResources": true}}));
        let actions = plan(&tt, "img", "v1", &served()).unwrap();
        assert!(
            actions
                .iter()
                .filter(|a| a.kind == Kind::Task)
                .all(|a| a.namespace.as_deref() == Some("kubevirt"))
        );
    }

    #[test]
    fn deployed_objects_stay_and_edits_are_reverted() {
        let objects = created(&plan(&on(), "img", "v1", &served()).unwrap());
        let of = |kind: &str| -> Vec<Value> {
            objects
                .iter()
                .filter(|o| o["kind"] == kind)
                .cloned()
                .collect()
        };
        let mut tasks = of("Task");
        // A field the server adds beside ours is no edit.
        tasks[1]["spec"]["displayName"] = json!("added");
        tasks[0]["spec"]["steps"][0]["image"] = json!("other");
        tasks[0]["metadata"]["resourceVersion"] = json!("7");
        let observed = Observed {
            tasks: Some(tasks.clone()),
            service_accounts: of("ServiceAccount"),
            role_bindings: of("RoleBinding"),
            cluster_roles: of("ClusterRole"),
        };
        let actions = plan(&on(), "img", "v1", &observed).unwrap();
        assert_eq!(actions.len(), 1, "{actions:?}");
        let Change::Replace(fixed) = &actions[0].change else {
            panic!("{actions:?}")
        };
        assert_eq!(fixed["spec"]["steps"][0]["image"], "img");
        assert_eq!(fixed["metadata"]["resourceVersion"], "7");
        assert_eq!(cleanup(&on(), &observed).len(), TASKS.len() * 4);
        let other: TektonTasks = tt(json!({}));
        let mut renamed = other.clone();
        renamed.metadata.name = Some("another".into());
        assert!(cleanup(&renamed, &observed).is_empty());
    }

    #[test]
    fn owners_are_read_back_from_their_annotations() {
        let annotations = owner_annotations(&on());
        assert_eq!(
            owner_of(&annotations),
            Some(("kubevirt".to_owned(), "tto".to_owned()))
        );
        assert_eq!(owner_of(&BTreeMap::new()), None);
        assert_eq!(cluster_role_names().len(), TASKS.len());
    }
}
