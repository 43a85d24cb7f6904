use super::*;
use serde_json::{Value, json};

fn pool(extra: Value) -> VirtualMachinePool {
    let mut pool = json!({
        "apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool",
        "metadata": {"name": "web", "namespace": "ns", "uid": "pool-uid"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "virtualMachineTemplate": {
                     "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                     "spec": {"runStrategy": "Halted",
                              "dataVolumeTemplates": [{"metadata": {"name": "disk"},
                                  "spec": {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "1Gi"}}}}}],
                              "template": {"spec": {"domain": {"devices": {}}, "volumes": [
                                  {"name": "root", "dataVolume": {"name": "disk"}},
                                  {"name": "cm", "configMap": {"name": "settings"}}]}}}}},
    });
    json_patch::merge(&mut pool, &extra);
    serde_json::from_value(pool).expect("a pool")
}

fn vm(name: &str, owner: Option<&str>) -> VirtualMachine {
    let owners = owner.map(|uid| {
        json!([{"apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool",
        "name": "web", "uid": uid, "controller": true}])
    });
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"),
                     "labels": {"app": "web"}, "ownerReferences": owners},
        "spec": {"template": {"spec": {"domain": {"devices": {}}}}},
    }))
    .expect("a VM")
}

fn run(pool: &VirtualMachinePool, vms: &[VirtualMachine]) -> Vec<PoolAction> {
    plan(&Observed {
        pool,
        vms,
        now: Time("2026-11-28T22:00:00Z".parse().unwrap()),
        shuffle_seed: 7,
    })
    .expect("a valid pool")
}

fn created(actions: &[PoolAction]) -> Vec<&VirtualMachine> {
    actions
        .iter()
        .filter_map(|a| match a {
            PoolAction::CreateVm(vm) => Some(vm.as_ref()),
            _ => None,
        })
        .collect()
}

fn deleted(actions: &[PoolAction]) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| match a {
            PoolAction::DeleteVm { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect()
}

fn written_status(actions: &[PoolAction]) -> &VirtualMachinePoolStatus {
    actions
        .iter()
        .find_map(|a| match a {
            PoolAction::WriteStatus(s) => Some(s.as_ref()),
            _ => None,
        })
        .expect("a status")
}

#[test]
fn creates_vms_at_the_lowest_free_indexes() {
    let pool = pool(json!({}));
    let vms = [vm("web-1", Some("pool-uid")), vm("web-3", None)];
    let names: Vec<String> = created(&run(&pool, &vms))
        .iter()
        .map(|vm| vm.name_any())
        .collect();
    assert_eq!(names, ["web-0", "web-2"]);
}

#[test]
fn each_vm_gets_the_template_and_its_own_data_volumes() {
    let pool = pool(json!({}));
    let actions = run(&pool, &[]);
    let vm = created(&actions)[2];
    assert_eq!(vm.name_any(), "web-2");
    assert_eq!(vm.labels()["app"], "web");
    assert_eq!(vm.annotations()["a"], "b");
    let owner = &vm.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("VirtualMachinePool", "pool-uid", Some(true))
    );
    let templates = vm.spec.data_volume_templates.as_ref().unwrap();
    assert_eq!(
        templates[0].metadata.as_ref().unwrap().name.as_deref(),
        Some("disk-2")
    );
    let volumes = vm
        .spec
        .template
        .as_ref()
        .unwrap()
        .spec
        .as_ref()
        .unwrap()
        .volumes
        .as_ref()
        .unwrap();
    assert_eq!(volumes[0].data_volume.as_ref().unwrap().name, "disk-2");
    assert_eq!(
        volumes[1].config_map.as_ref().unwrap().name.as_deref(),
        Some("settings")
    );
}

#[test]
fn name_generation_suffixes_config_maps_when_asked() {
    let pool = pool(json!({"spec": {"nameGeneration": {"appendIndexToConfigMapRefs": true}}}));
    let actions = run(&pool, &[]);
    let volumes = created(&actions)[1]
        .spec
        .template
        .as_ref()
        .unwrap()
        .spec
        .as_ref()
        .unwrap()
        .volumes
        .clone()
        .unwrap();
    assert_eq!(
        volumes[1].config_map.as_ref().unwrap().name.as_deref(),
        Some("settings-1")
    );
}

#[test]
fn descending_order_scales_in_from_the_highest_index() {
    let pool = pool(json!({"spec": {"replicas": 2,
        "scaleInStrategy": {"proactive": {"selectionPolicy": {"basePolicy": "DescendingOrder"}}}}}));
    let vms: Vec<VirtualMachine> = (0..5)
        .map(|i| vm(&format!("web-{i}"), Some("pool-uid")))
        .collect();
    assert_eq!(deleted(&run(&pool, &vms)), ["web-4", "web-3", "web-2"]);
}

#[test]
fn random_scale_in_deletes_the_right_count_and_counts_those_already_going() {
    let pool = pool(json!({"spec": {"replicas": 2}}));
    let mut vms: Vec<VirtualMachine> = (0..5)
        .map(|i| vm(&format!("web-{i}"), Some("pool-uid")))
        .collect();
    assert_eq!(deleted(&run(&pool, &vms)).len(), 3);
    vms[0].metadata.deletion_timestamp = Some(Time("2026-11-28T22:00:00Z".parse().unwrap()));
    let actions = run(&pool, &vms);
    let going = deleted(&actions);
    assert_eq!(going.len(), 2);
    assert!(!going.contains(&"web-0"));
}

#[test]
fn releases_vms_it_no_longer_selects_and_adopts_none() {
    let pool = pool(json!({"spec": {"replicas": 1}}));
    let mut moved = vm("web-0", Some("pool-uid"));
    moved.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    let actions = run(&pool, &[moved, vm("stray", None)]);
    assert_eq!(
        actions[0],
        PoolAction::Release {
            name: "web-0".into(),
            uid: "web-0-uid".into()
        }
    );
    assert_eq!(created(&actions).len(), 1);
    assert_eq!(created(&actions)[0].name_any(), "web-1");
}

#[test]
fn a_paused_pool_only_reports_with_upstreams_condition() {
    let pool = pool(json!({"spec": {"paused": true}}));
    let actions = run(&pool, &[]);
    assert!(created(&actions).is_empty());
    let status = written_status(&actions);
    let condition = &status.conditions[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.reason.as_deref(),
            condition.message.as_deref()
        ),
        (
            "ReplicaPaused",
            Some("SuccessfulPaused"),
            Some("Pool controller is paused")
        )
    );
    assert_eq!(status.label_selector, "app=web");
    assert!(actions.contains(&PoolAction::Event {
        reason: "SuccessfulPaused",
        message: "Pool is paused".into()
    }));
}

#[test]
fn a_failed_scale_out_is_a_replica_failure_condition() {
    let pool = pool(json!({}));
    let status = status(
        &pool,
        &[],
        Some(("FailedScaleOut", "Error during scale out: quota")),
        &Time("2026-11-28T22:00:00Z".parse().unwrap()),
    );
    assert_eq!(
        status.conditions[0].reason.as_deref(),
        Some("FailedScaleOut")
    );
}

#[test]
fn a_selector_that_misses_the_template_is_not_acted_on() {
    let pool = pool(json!({"spec": {"selector": {"matchLabels": {"app": "db"}}}}));
    let observed = Observed {
        pool: &pool,
        vms: &[],
        now: Time("2026-11-28T22:00:00Z".parse().unwrap()),
        shuffle_seed: 1,
    };
    assert_eq!(plan(&observed), Err(InvalidSpec::SelectorMismatch));
}

#[test]
fn the_index_is_the_last_dash_separated_number() {
    assert_eq!(index_from_name("my-pool-12"), 12);
    assert_eq!(index_from_name("odd"), 0);
}
