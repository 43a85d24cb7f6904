use std::collections::BTreeMap;

use serde_json::json;

use super::matcher::{Family, Scope};
use super::requirements::{check, check_spread};
use super::topology::Topology;
use super::*;
use crate::kubevirt::vmi::VirtualMachineInstanceSpec;

fn instancetype(value: serde_json::Value) -> VirtualMachineInstancetypeSpec {
    serde_json::from_value(value).expect("an instancetype spec")
}

fn preference(value: serde_json::Value) -> VirtualMachinePreferenceSpec {
    serde_json::from_value(value).expect("a preference spec")
}

fn vmi(value: serde_json::Value) -> VirtualMachineInstanceSpec {
    serde_json::from_value(value).expect("an instance spec")
}

fn u1_small() -> VirtualMachineInstancetypeSpec {
    instancetype(json!({"cpu": {"guest": 2}, "memory": {"guest": "2Gi"}}))
}

fn applied(
    it: Option<&VirtualMachineInstancetypeSpec>,
    pref: Option<&VirtualMachinePreferenceSpec>,
    spec: serde_json::Value,
) -> Result<serde_json::Value, Conflicts> {
    let mut spec = vmi(spec);
    let mut annotations = BTreeMap::new();
    apply("spec", it, pref, &mut spec, &mut annotations)?;
    Ok(serde_json::to_value(spec).expect("serializes"))
}

#[test]
fn vcpus_go_to_sockets_unless_the_preference_says_otherwise() {
    let spec = applied(Some(&u1_small()), None, json!({"domain": {"devices": {}}})).unwrap();
    assert_eq!(
        spec["domain"]["cpu"],
        json!({"sockets": 2, "cores": 1, "threads": 1})
    );
    assert_eq!(spec["domain"]["memory"], json!({"guest": "2Gi"}));
    let cores = preference(json!({"cpu": {"preferredCPUTopology": "cores"}}));
    assert_eq!(
        Topology::of(4, Some(&cores)),
        Topology {
            sockets: 1,
            cores: 4,
            threads: 1
        }
    );
    let spread = preference(json!({"cpu": {"preferredCPUTopology": "spread",
        "spreadOptions": {"across": "SocketsCoresThreads", "ratio": 2}}}));
    assert_eq!(
        Topology::of(8, Some(&spread)),
        Topology {
            sockets: 2,
            cores: 2,
            threads: 2
        }
    );
    assert_eq!(
        Topology::of(1, Some(&cores)),
        Topology {
            sockets: 1,
            cores: 1,
            threads: 1
        }
    );
}

#[test]
fn a_field_both_set_is_a_conflict_with_kubevirts_message() {
    let err = applied(
        Some(&u1_small()),
        None,
        json!({"domain": {"cpu": {"sockets": 2}, "memory": {"guest": "1Gi"}, "devices": {}}}),
    )
    .unwrap_err();
    assert_eq!(
        err.0,
        vec![
            "spec.domain.cpu.sockets".to_string(),
            "spec.domain.memory".to_string()
        ]
    );
    assert_eq!(
        err.to_string(),
        "VM field(s) spec.domain.cpu.sockets, spec.domain.memory conflicts with selected instance type"
    );
    assert_eq!(
        err.instance_message(),
        "VMI conflicts with instancetype spec in fields: [spec.domain.cpu.sockets, spec.domain.memory]"
    );
}

#[test]
fn overcommitted_memory_requests_less_than_the_guest_sees() {
    let it = instancetype(json!({"cpu": {"guest": 1},
        "memory": {"guest": "1Gi", "overcommitPercent": 50}}));
    let spec = applied(Some(&it), None, json!({"domain": {"devices": {}}})).unwrap();
    assert_eq!(
        spec["domain"]["resources"]["requests"]["memory"],
        json!("512Mi")
    );
}

#[test]
fn a_preference_fills_only_what_the_vm_leaves_unset() {
    let pref = preference(json!({
        "devices": {"preferredDiskBus": "virtio", "preferredInterfaceModel": "virtio",
                    "preferredDiskDedicatedIoThread": true, "preferredInterfaceMasquerade": {}},
        "machine": {"preferredMachineType": "q35"},
        "preferredTerminationGracePeriodSeconds": 30,
        "features": {"preferredSmm": {}},
        "firmware": {"preferredUseEfi": true},
        "annotations": {"a": "from-preference"}
    }));
    let mut spec = vmi(json!({
        "domain": {"devices": {
            "disks": [{"name": "root"}, {"name": "data", "disk": {"bus": "sata"}},
                      {"name": "cd", "cdrom": {}}],
            "interfaces": [{"name": "default"}]
        }},
        "networks": [{"name": "default", "pod": {}}],
        "terminationGracePeriodSeconds": 5
    }));
    let mut annotations = BTreeMap::from([("a".to_string(), "mine".to_string())]);
    apply(
        "spec",
        Some(&u1_small()),
        Some(&pref),
        &mut spec,
        &mut annotations,
    )
    .unwrap();
    let spec = serde_json::to_value(spec).unwrap();
    let disks = &spec["domain"]["devices"]["disks"];
    assert_eq!(disks[0]["disk"]["bus"], "virtio");
    assert_eq!(disks[0]["dedicatedIOThread"], true);
    assert_eq!(disks[1]["disk"]["bus"], "sata");
    assert!(disks[1].get("dedicatedIOThread").is_none());
    assert!(disks[2].get("disk").is_none());
    let iface = &spec["domain"]["devices"]["interfaces"][0];
    assert_eq!(iface["model"], "virtio");
    assert_eq!(iface["masquerade"], json!({}));
    assert_eq!(spec["domain"]["machine"]["type"], "q35");
    assert_eq!(spec["domain"]["features"]["smm"], json!({}));
    assert_eq!(spec["domain"]["firmware"]["bootloader"]["efi"], json!({}));
    assert_eq!(spec["terminationGracePeriodSeconds"], 5);
    assert_eq!(annotations["a"], "mine");
}

#[test]
fn requirements_beyond_the_instancetype_are_refused_with_kubevirts_messages() {
    let pref = preference(json!({"requirements": {"cpu": {"guest": 4}}}));
    let err = check(
        Some(&u1_small()),
        &pref,
        &vmi(json!({"domain": {"devices": {}}})),
    )
    .unwrap_err();
    assert_eq!(err.field, "spec.instancetype");
    assert_eq!(
        err.to_string(),
        "failure checking preference requirements: insufficient CPU resources of 2 vCPU provided by instance type, preference requires 4 vCPU"
    );
    let pref = preference(json!({"requirements": {"memory": {"guest": "4Gi"}}}));
    let err = check(
        Some(&u1_small()),
        &pref,
        &vmi(json!({"domain": {"devices": {}}})),
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "insufficient Memory resources of 2Gi provided by instance type, preference requires 4Gi"
    );
    let no_it = vmi(json!({"domain": {"cpu": {"sockets": 1}, "devices": {}}}));
    let pref = preference(json!({"requirements": {"cpu": {"guest": 2}}}));
    let err = check(None, &pref, &no_it).unwrap_err();
    assert_eq!(err.field, "spec.template.spec.domain.cpu.sockets");
    assert_eq!(
        err.message,
        "insufficient CPU resources of 1 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as sockets"
    );
    let enough =
        preference(json!({"requirements": {"cpu": {"guest": 2}, "memory": {"guest": "2Gi"}}}));
    assert!(
        check(
            Some(&u1_small()),
            &enough,
            &vmi(json!({"domain": {"devices": {}}}))
        )
        .is_ok()
    );
}

#[test]
fn a_spread_must_divide_the_vcpus() {
    let it = instancetype(json!({"cpu": {"guest": 3}, "memory": {"guest": "1Gi"}}));
    let pref = preference(json!({"cpu": {"preferredCPUTopology": "spread"}}));
    assert_eq!(
        check_spread(&it, Some(&pref)).unwrap_err(),
        "3 vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2 provided by the preference"
    );
    assert!(check_spread(&u1_small(), Some(&pref)).is_ok());
}

#[test]
fn matcher_kinds_are_read_as_kubevirt_reads_them() {
    let it = Family::Instancetype;
    assert_eq!(it.scope(None), Ok(Scope::Cluster));
    assert_eq!(
        it.scope(Some("VirtualMachineInstancetype")),
        Ok(Scope::Namespaced)
    );
    assert_eq!(
        it.scope(Some("virtualmachineclusterinstancetypes")),
        Ok(Scope::Cluster)
    );
    assert_eq!(
        it.scope(Some("Pod")),
        Err("got unexpected kind in InstancetypeMatcher: Pod".to_string())
    );
}
