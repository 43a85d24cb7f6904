use super::*;
use serde_json::{Value, json};

fn replica_set(extra: Value) -> VirtualMachineInstanceReplicaSet {
    let mut rs = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceReplicaSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": "rs-uid"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"domain": {"devices": {}}}}},
    });
    json_patch::merge(&mut rs, &extra);
    serde_json::from_value(rs).expect("a replica set")
}

fn vmi(
    name: &str,
    owner: Option<&str>,
    phase: &str,
    ready: bool,
    created: &str,
) -> VirtualMachineInstance {
    let owners = owner.map(|uid| {
        json!([{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceReplicaSet",
        "name": "web", "uid": uid, "controller": true}])
    });
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"),
                     "labels": {"app": "web"}, "ownerReferences": owners,
                     "creationTimestamp": created},
        "spec": {"domain": {"devices": {}}},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
    }))
    .expect("a VMI")
}

fn now() -> Time {
    Time("2026-11-28T22:00:00Z".parse().unwrap())
}

fn run(
    rs: &VirtualMachineInstanceReplicaSet,
    vmis: &[VirtualMachineInstance],
) -> Vec<ReplicaSetAction> {
    plan(&Observed {
        replica_set: rs,
        vmis,
        now: now(),
    })
    .expect("a valid replica set")
}

fn creates(actions: &[ReplicaSetAction]) -> Vec<&VirtualMachineInstance> {
    actions
        .iter()
        .filter_map(|a| match a {
            ReplicaSetAction::CreateVmi(v) => Some(v.as_ref()),
            _ => None,
        })
        .collect()
}

fn deletes(actions: &[ReplicaSetAction]) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| match a {
            ReplicaSetAction::DeleteVmi { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect()
}

fn written_status(actions: &[ReplicaSetAction]) -> &VirtualMachineInstanceReplicaSetStatus {
    actions
        .iter()
        .find_map(|a| match a {
            ReplicaSetAction::WriteStatus(s) => Some(s.as_ref()),
            _ => None,
        })
        .expect("a status")
}

#[test]
fn creates_the_missing_instances_from_the_template_owned_and_named_after_the_replica_set() {
    let rs = replica_set(json!({}));
    let actions = run(&rs, &[]);
    let created = creates(&actions);
    assert_eq!(created.len(), 2);
    let meta = &created[0].metadata;
    assert_eq!(meta.generate_name.as_deref(), Some("web"));
    assert_eq!(meta.name, None);
    assert_eq!(meta.labels.as_ref().unwrap()["app"], "web");
    let owner = &meta.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("VirtualMachineInstanceReplicaSet", "rs-uid")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    let status = written_status(&actions);
    assert_eq!(
        (status.replicas, status.label_selector.as_str()),
        (0, "app=web")
    );
}

#[test]
fn the_template_name_is_the_base_name_when_set() {
    let rs = replica_set(json!({"spec": {"template": {"metadata": {"generateName": "tpl-"}}}}));
    assert_eq!(
        creates(&run(&rs, &[]))[0].metadata.generate_name.as_deref(),
        Some("tpl-")
    );
}

#[test]
fn deletes_the_extra_instances_least_useful_first() {
    let rs = replica_set(json!({"spec": {"replicas": 1}}));
    let vmis = [
        vmi(
            "old-running",
            Some("rs-uid"),
            "Running",
            true,
            "2026-11-28T20:00:00Z",
        ),
        vmi(
            "new-running",
            Some("rs-uid"),
            "Running",
            true,
            "2026-11-28T21:00:00Z",
        ),
        vmi(
            "pending",
            Some("rs-uid"),
            "Pending",
            false,
            "2026-11-28T19:00:00Z",
        ),
    ];
    assert_eq!(deletes(&run(&rs, &vmis)), ["pending", "new-running"]);
}

#[test]
fn keeps_the_count_adopting_orphans_and_ignoring_others_instances() {
    let rs = replica_set(json!({}));
    let vmis = [
        vmi(
            "mine",
            Some("rs-uid"),
            "Running",
            true,
            "2026-11-28T20:00:00Z",
        ),
        vmi("orphan", None, "Running", false, "2026-11-28T20:00:00Z"),
        vmi(
            "theirs",
            Some("other"),
            "Running",
            true,
            "2026-11-28T20:00:00Z",
        ),
    ];
    let actions = run(&rs, &vmis);
    assert!(actions.contains(&ReplicaSetAction::Adopt {
        name: "orphan".into(),
        uid: "orphan-uid".into()
    }));
    assert!(creates(&actions).is_empty() && deletes(&actions).is_empty());
    let status = written_status(&actions);
    assert_eq!((status.replicas, status.ready_replicas), (2, 1));
}

#[test]
fn releases_owned_instances_it_no_longer_selects() {
    let rs = replica_set(json!({"spec": {"replicas": 0}}));
    let mut relabelled = vmi(
        "moved",
        Some("rs-uid"),
        "Running",
        true,
        "2026-11-28T20:00:00Z",
    );
    relabelled.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    let actions = run(&rs, &[relabelled]);
    assert_eq!(
        actions[0],
        ReplicaSetAction::Release {
            name: "moved".into(),
            uid: "moved-uid".into()
        }
    );
    assert!(deletes(&actions).is_empty());
}

#[test]
fn replaces_a_deleted_or_finished_instance_and_cleans_up_the_finished_one() {
    let rs = replica_set(json!({}));
    let mut deleting = vmi(
        "going",
        Some("rs-uid"),
        "Running",
        true,
        "2026-11-28T20:00:00Z",
    );
    deleting.metadata.deletion_timestamp = Some(now());
    let vmis = [
        deleting,
        vmi(
            "done",
            Some("rs-uid"),
            "Succeeded",
            false,
            "2026-11-28T20:00:00Z",
        ),
    ];
    let actions = run(&rs, &vmis);
    assert_eq!(creates(&actions).len(), 2);
    assert!(actions.contains(&ReplicaSetAction::DeleteFinishedVmi {
        name: "done".into(),
        uid: "done-uid".into()
    }));
}

#[test]
fn a_paused_replica_set_only_reports_with_upstreams_condition_and_event() {
    let rs = replica_set(json!({"spec": {"paused": true}}));
    let actions = run(&rs, &[]);
    assert!(creates(&actions).is_empty());
    let condition = &written_status(&actions).conditions[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.reason.as_deref(),
            condition.message.as_deref()
        ),
        (
            "ReplicaPaused",
            Some("Paused"),
            Some("Controller got paused")
        )
    );
    assert!(actions.contains(&ReplicaSetAction::Event {
        reason: "SuccessfulPaused",
        message: "Paused".into()
    }));
}

#[test]
fn a_failed_create_is_a_replica_failure_condition() {
    let rs = replica_set(json!({}));
    let status = status(&rs, &[], Some("quota exceeded"), &now());
    let condition = &status.conditions[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.reason.as_deref(),
            condition.message.as_deref()
        ),
        (
            "ReplicaFailure",
            Some("FailedCreate"),
            Some("quota exceeded")
        )
    );
}

#[test]
fn a_selector_that_misses_the_template_is_not_acted_on() {
    let rs = replica_set(json!({"spec": {"selector": {"matchLabels": {"app": "db"}}}}));
    assert_eq!(
        plan(&Observed {
            replica_set: &rs,
            vmis: &[],
            now: now()
        }),
        Err(InvalidSpec::SelectorMismatch)
    );
}

#[test]
fn an_unchanged_status_is_not_written_again() {
    let mut rs = replica_set(json!({"spec": {"replicas": 1}}));
    let vmis = [vmi(
        "a",
        Some("rs-uid"),
        "Running",
        true,
        "2026-11-28T20:00:00Z",
    )];
    let status = written_status(&run(&rs, &vmis)).clone();
    rs.status = Some(status);
    assert!(run(&rs, &vmis).is_empty());
}
