use serde_json::{Value, json};

use super::*;

fn preset(name: &str, selector: Value, domain: Value) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstancePreset",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"selector": selector, "domain": domain}})
}

fn vmi(labels: Value, domain: Value) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "vmi1", "namespace": "default", "labels": labels},
           "spec": {"domain": domain}})
}

fn small() -> Value {
    preset(
        "small",
        json!({"matchLabels": {"kubevirt.io/size": "small"}}),
        json!({"devices": {}, "resources": {"requests": {"memory": "64M"}}, "cpu": {"cores": 2}}),
    )
}

fn annotation(vmi: &Value, preset: &str) -> Value {
    vmi["metadata"]["annotations"][format!("virtualmachinepreset.kubevirt.io/{preset}")].clone()
}

#[test]
fn a_matching_preset_fills_in_what_the_vmi_leaves_out_and_is_recorded() {
    let mut target = vmi(json!({"kubevirt.io/size": "small"}), json!({"devices": {}}));
    let warnings = apply_presets(&mut target, &[small()]).unwrap();
    assert_eq!(
        target["spec"]["domain"]["resources"]["requests"]["memory"],
        "64M"
    );
    assert_eq!(target["spec"]["domain"]["cpu"]["cores"], 2);
    assert_eq!(annotation(&target, "small"), "kubevirt.io/v1");
    assert_eq!(warnings, [DEPRECATION_WARNING]);
}

#[test]
fn a_preset_whose_selector_does_not_select_the_vmi_is_not_applied() {
    let mut target = vmi(json!({"kubevirt.io/size": "large"}), json!({"devices": {}}));
    let warnings = apply_presets(&mut target, &[small()]).unwrap();
    assert!(target["spec"]["domain"]["cpu"].is_null());
    assert!(target["metadata"]["annotations"].is_null());
    assert!(warnings.is_empty());
}

#[test]
fn an_excluded_vmi_gets_no_preset() {
    let mut target = vmi(json!({"kubevirt.io/size": "small"}), json!({"devices": {}}));
    target["metadata"]["annotations"] = json!({EXCLUSION_ANNOTATION: "true"});
    apply_presets(&mut target, &[small()]).unwrap();
    assert!(target["spec"]["domain"]["cpu"].is_null());
    assert!(annotation(&target, "small").is_null());
}

#[test]
fn a_conflict_with_the_vmi_keeps_the_vmis_value_and_gives_the_rest() {
    let domain = json!({"devices": {}, "cpu": {"cores": 4}});
    let mut target = vmi(json!({"kubevirt.io/size": "small"}), domain);
    apply_presets(&mut target, &[small()]).unwrap();
    assert_eq!(
        target["spec"]["domain"]["cpu"]["cores"], 4,
        "the VMI's own value stays"
    );
    assert_eq!(
        target["spec"]["domain"]["resources"]["requests"]["memory"],
        "64M"
    );
    assert_eq!(
        annotation(&target, "small"),
        "kubevirt.io/v1",
        "it gave the memory"
    );
}

#[test]
fn a_preset_that_gives_nothing_is_not_recorded() {
    let domain = json!({"devices": {}, "cpu": {"cores": 4},
                        "resources": {"requests": {"memory": "128M"}}});
    let mut target = vmi(json!({"kubevirt.io/size": "small"}), domain);
    let warnings = apply_presets(&mut target, &[small()]).unwrap();
    assert_eq!(
        target["spec"]["domain"]["resources"]["requests"]["memory"],
        "128M"
    );
    assert!(annotation(&target, "small").is_null());
    assert!(warnings.is_empty());
}

#[test]
fn a_preset_equal_to_the_vmi_is_recorded() {
    let domain = json!({"devices": {}, "cpu": {"cores": 2}});
    let mut target = vmi(json!({"kubevirt.io/size": "small"}), domain);
    let only_cpu = preset(
        "cpu",
        json!({"matchLabels": {"kubevirt.io/size": "small"}}),
        json!({"devices": {}, "cpu": {"cores": 2}}),
    );
    apply_presets(&mut target, &[only_cpu]).unwrap();
    assert_eq!(annotation(&target, "cpu"), "kubevirt.io/v1");
}

#[test]
fn presets_conflicting_with_one_another_refuse_the_vmi() {
    let other = preset(
        "other",
        json!({}),
        json!({"devices": {}, "resources": {"requests": {"memory": "128M"}}, "cpu": {"cores": 4}}),
    );
    let mut target = vmi(json!({"kubevirt.io/size": "small"}), json!({"devices": {}}));
    let refusal = apply_presets(&mut target, &[small(), other]).unwrap_err();
    assert_eq!(refusal.code, 422);
    assert_eq!(
        refusal.message,
        "VirtualMachinePresets cannot be applied due to conflicts: presets 'other' and 'small' conflict: [spec.resources.requests[memory]: 128M != 64M, spec.cpu: {\"cores\":4} != {\"cores\":2}]"
    );
}

#[test]
fn clocks_give_their_offset_then_their_timers() {
    let clocked = preset(
        "clock",
        json!({}),
        json!({"devices": {}, "clock": {"utc": {}, "timer": {"hpet": {"present": false}}}}),
    );
    let mut bare = vmi(json!({}), json!({"devices": {}}));
    apply_presets(&mut bare, std::slice::from_ref(&clocked)).unwrap();
    assert_eq!(
        bare["spec"]["domain"]["clock"],
        json!({"utc": {}, "timer": {"hpet": {"present": false}}})
    );
    let mut local = vmi(
        json!({}),
        json!({"devices": {}, "clock": {"timezone": "Europe/Paris"}}),
    );
    apply_presets(&mut local, &[clocked]).unwrap();
    assert_eq!(local["spec"]["domain"]["clock"]["timezone"], "Europe/Paris");
    assert_eq!(
        local["spec"]["domain"]["clock"]["timer"]["hpet"]["present"],
        false
    );
    assert_eq!(
        annotation(&local, "clock"),
        "kubevirt.io/v1",
        "the timers were given"
    );
}

#[test]
fn quantities_compare_by_amount() {
    let mut target = vmi(
        json!({"kubevirt.io/size": "small"}),
        json!({"devices": {}, "resources": {"requests": {"memory": "64000k"}}}),
    );
    apply_presets(&mut target, &[small()]).unwrap();
    assert_eq!(annotation(&target, "small"), "kubevirt.io/v1");
}

#[test]
fn the_upstream_example_preset_gives_nothing_upstream_merges() {
    // vmi-preset-small.yaml sets memory.guest, which upstream's merge does not give.
    let example = preset(
        "vmi-preset-small",
        json!({"matchLabels": {"kubevirt.io/vmPreset": "vmi-preset-small"}}),
        json!({"devices": {}, "memory": {"guest": "128Mi"}, "resources": {}}),
    );
    let mut target = vmi(
        json!({"kubevirt.io/vmPreset": "vmi-preset-small"}),
        json!({"devices": {}}),
    );
    let warnings = apply_presets(&mut target, &[example]).unwrap();
    assert!(target["spec"]["domain"]["memory"].is_null());
    assert!(warnings.is_empty());
}

#[test]
fn a_preset_without_a_domain_is_refused() {
    let mut bare = small();
    bare["spec"].as_object_mut().unwrap().remove("domain");
    assert_eq!(
        validate_preset(&bare).unwrap_err().message,
        "missing domain."
    );
    assert!(validate_preset(&small()).is_ok());
}
