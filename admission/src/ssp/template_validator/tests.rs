//! `review_vm` and the template checks end to end, with upstream's messages.

use serde_json::{Value, json};

use super::*;

const GIB: i64 = 1024 * 1024 * 1024;

/// A VM with `rules` as its own annotation.
fn vm_with(rules: Value, domain: Value) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {
            "name": "vm", "namespace": "team",
            "annotations": {VALIDATIONS_ANNOTATION: rules.to_string()},
        },
        "spec": {"template": {"spec": {"domain": domain}}},
    })
}

fn memory_rule(min: i64) -> Value {
    json!([{
        "name": "minimal-required-memory",
        "path": "jsonpath::.spec.domain.memory.guest",
        "rule": "integer",
        "message": "This VM requires more memory.",
        "min": min,
    }])
}

fn domain_with_memory(guest: &str) -> Value {
    json!({"memory": {"guest": guest}, "devices": {}})
}

fn messages(verdict: &Verdict) -> Vec<&str> {
    verdict.denials.iter().map(|d| d.message.as_str()).collect()
}

/// The Windows rules of common-templates: disks on virtio (a warning), sata or scsi; CD-ROMs
/// on sata, each only where such a device exists.
fn windows_rules() -> Value {
    json!([
        {"name": "windows-virtio-bus", "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus",
         "valid": "jsonpath::.spec.domain.devices.disks[*].disk.bus", "rule": "enum",
         "message": "virtio disk bus type has better performance, install virtio drivers in VM and change bus type",
         "values": ["virtio"], "justWarning": true},
        {"name": "windows-disk-bus", "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus",
         "valid": "jsonpath::.spec.domain.devices.disks[*].disk.bus", "rule": "enum",
         "message": "disk bus has to be either virtio or sata or scsi",
         "values": ["virtio", "sata", "scsi"]},
        {"name": "windows-cd-bus", "path": "jsonpath::.spec.domain.devices.disks[*].cdrom.bus",
         "valid": "jsonpath::.spec.domain.devices.disks[*].cdrom.bus", "rule": "enum",
         "message": "cd bus has to be sata", "values": ["sata"]},
    ])
}

fn disks(disks: Value) -> Value {
    json!({"devices": {"disks": disks}})
}

#[test]
fn too_little_memory_is_refused_with_the_rules_message() {
    let vm = vm_with(memory_rule(2 * GIB), domain_with_memory("1Gi"));
    let verdict = review_vm(&vm, None);
    assert!(!verdict.allowed());
    assert_eq!(
        verdict.denials,
        vec![Denial {
            field: ".spec.domain.memory.guest".into(),
            message:
                "This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]"
                    .into(),
        }]
    );
    assert_eq!(verdict.code(), Some(422));
    assert_eq!(
        verdict.status(),
        Some(json!({
            "message": "This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]",
            "reason": "Invalid",
            "code": 422,
            "details": {"causes": [{
                "reason": "FieldValueInvalid",
                "field": ".spec.domain.memory.guest",
                "message": "This VM requires more memory.: value 1073741824 is lower than minimum [2147483648]",
            }]},
        }))
    );
}

#[test]
fn integer_bounds_are_inclusive() {
    let rule = |min: i64, max: i64| {
        json!([{"name": "m", "path": "jsonpath::.spec.domain.memory.guest", "rule": "integer",
                "message": "memory", "min": min, "max": max}])
    };
    let review =
        |rules: Value, guest: &str| review_vm(&vm_with(rules, domain_with_memory(guest)), None);
    assert!(review(rule(2 * GIB, 4 * GIB), "2Gi").allowed());
    assert!(review(rule(2 * GIB, 4 * GIB), "4Gi").allowed());
    assert!(review(rule(2 * GIB, 4 * GIB), "4096Mi").allowed());
    let over = review(rule(2 * GIB, 4 * GIB), "4294967297");
    assert_eq!(
        messages(&over),
        ["memory: value 4294967297 is higher than maximum [4294967296]"]
    );
    let under = review(rule(2 * GIB, 4 * GIB), "2147483647");
    assert_eq!(
        messages(&under),
        ["memory: value 2147483647 is lower than minimum [2147483648]"]
    );
    // Decimal quantities and plain numbers are integers too.
    assert!(review(rule(2_000_000_000, 2_000_000_000), "2G").allowed());
}

#[test]
fn a_missing_optional_field_counts_as_zero() {
    // No memory at all: upstream reads the reference VM's zero quantity.
    let vm = vm_with(memory_rule(GIB), json!({"devices": {}}));
    assert_eq!(
        messages(&review_vm(&vm, None)),
        ["This VM requires more memory.: value 0 is lower than minimum [1073741824]"]
    );
}

#[test]
fn every_value_of_a_list_is_checked_in_upstreams_words() {
    let rules = json!([{"name": "boot", "path": "jsonpath::.spec.domain.devices.disks[*].bootOrder",
                        "rule": "integer", "message": "boot order", "min": 1, "max": 8}]);
    let vm = vm_with(
        rules,
        disks(json!([
            {"name": "a", "bootOrder": 1}, {"name": "b", "bootOrder": 10}, {"name": "c", "bootOrder": 0},
        ])),
    );
    assert_eq!(
        messages(&review_vm(&vm, None)),
        ["boot order: , value 10 is higher than maximum [8], value 0 is lower than minimum [1]"]
    );
}

#[test]
fn bounds_may_be_paths() {
    let rules = json!([{"name": "cores", "path": "jsonpath::.spec.domain.cpu.cores", "rule": "integer",
                        "message": "cores", "max": "jsonpath::.spec.domain.cpu.sockets"}]);
    let ok = vm_with(rules.clone(), json!({"cpu": {"cores": 2, "sockets": 2}}));
    assert!(review_vm(&ok, None).allowed());
    let refused = vm_with(rules, json!({"cpu": {"cores": 4, "sockets": 2}}));
    assert_eq!(
        messages(&review_vm(&refused, None)),
        ["cores: value 4 is higher than maximum [2]"]
    );
}

#[test]
fn cpu_topology_is_defaulted_before_the_rules_see_it() {
    let rules = json!([{"name": "cores", "path": "jsonpath::.spec.domain.cpu.cores", "rule": "integer",
                        "message": "This VM requires more cores.", "min": 1}]);
    let vm = vm_with(rules, json!({"cpu": {"sockets": 2}}));
    assert!(review_vm(&vm, None).allowed());
}

#[test]
fn string_rules_bound_lengths() {
    let rule = |min: i64, max: i64| {
        json!([{"name": "machine", "path": "jsonpath::.spec.domain.machine.type", "rule": "string",
                "message": "machine type", "minLength": min, "maxLength": max}])
    };
    let vm = |rules| vm_with(rules, json!({"machine": {"type": "q35"}}));
    assert!(review_vm(&vm(rule(3, 3)), None).allowed());
    assert_eq!(
        messages(&review_vm(&vm(rule(4, 10)), None)),
        ["machine type: Lengths of some strings are not in interval [4, 10]"]
    );
    let open_ended = json!([{"name": "m", "path": "jsonpath::.spec.domain.machine.type",
                             "rule": "string", "message": "short", "maxLength": 2}]);
    assert_eq!(
        messages(&review_vm(&vm(open_ended), None)),
        ["short: Lengths of some strings are not in interval [N/A, 2]"]
    );
}

#[test]
fn enum_rules_need_every_value_allowed() {
    let rules = json!([{"name": "bus", "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus",
                        "rule": "enum", "message": "disk bus", "values": ["virtio", "sata"]}]);
    let ok = vm_with(
        rules.clone(),
        disks(json!([{"name": "a", "disk": {"bus": "sata"}}])),
    );
    assert!(review_vm(&ok, None).allowed());
    let refused = vm_with(
        rules,
        disks(
            json!([{"name": "a", "disk": {"bus": "virtio"}}, {"name": "b", "disk": {"bus": "scsi"}}]),
        ),
    );
    assert_eq!(
        messages(&review_vm(&refused, None)),
        ["disk bus: Some of [virtio, scsi] are not in [virtio, sata]"]
    );
}

#[test]
fn regex_rules_search_every_value() {
    let rules = json!([{"name": "serial", "path": "jsonpath::.spec.domain.firmware.serial",
                        "rule": "regex", "message": "serial", "regex": "^[A-Z]+-[0-9]+$"}]);
    let vm = |serial: &str| vm_with(rules.clone(), json!({"firmware": {"serial": serial}}));
    assert!(review_vm(&vm("ABC-12"), None).allowed());
    assert_eq!(
        messages(&review_vm(&vm("abc"), None)),
        ["serial: Some of [abc] do not match ^[A-Z]+-[0-9]+$"]
    );
}

#[test]
fn valid_paths_gate_rules() {
    // No CD-ROM: the CD rule does not apply; virtio disks satisfy the rest.
    let vm = vm_with(
        windows_rules(),
        disks(json!([{"name": "root", "disk": {"bus": "virtio"}}])),
    );
    let verdict = review_vm(&vm, None);
    assert!(verdict.allowed(), "{verdict:?}");
    assert!(verdict.warnings.is_empty());
    // A CD-ROM on IDE does not.
    let vm = vm_with(
        windows_rules(),
        disks(
            json!([{"name": "root", "disk": {"bus": "virtio"}}, {"name": "cd", "cdrom": {"bus": "ide"}}]),
        ),
    );
    let verdict = review_vm(&vm, None);
    assert_eq!(
        messages(&verdict),
        ["cd bus has to be sata: Some of [ide] are not in [sata]"]
    );
    assert_eq!(
        verdict.denials[0].field,
        ".spec.domain.devices.disks[*].cdrom.bus"
    );
}

#[test]
fn just_warning_rules_only_warn() {
    let vm = vm_with(
        windows_rules(),
        disks(json!([{"name": "root", "disk": {"bus": "sata"}}])),
    );
    let verdict = review_vm(&vm, None);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(
        verdict.warnings,
        [
            "virtio disk bus type has better performance, install virtio drivers in VM and change bus type: Some of [sata] are not in [virtio]"
        ]
    );
    assert_eq!(verdict.status(), None);
}

#[test]
fn once_refused_the_warnings_are_listed_too() {
    // As upstream: a denial lists every unsatisfied rule, warnings included.
    let vm = vm_with(
        windows_rules(),
        disks(json!([{"name": "root", "disk": {"bus": "usb"}}])),
    );
    let verdict = review_vm(&vm, None);
    assert_eq!(
        verdict.message().as_deref(),
        Some(
            "virtio disk bus type has better performance, install virtio drivers in VM and change bus type: Some of [usb] are not in [virtio], \
             disk bus has to be either virtio or sata or scsi: Some of [usb] are not in [virtio, sata, scsi]"
        )
    );
    assert_eq!(verdict.warnings.len(), 1);
}

#[test]
fn the_skip_annotation_skips_everything() {
    let mut vm = vm_with(memory_rule(2 * GIB), domain_with_memory("1Gi"));
    vm["metadata"]["annotations"][SKIP_VALIDATIONS_ANNOTATION] = json!("");
    assert_eq!(review_vm(&vm, None), Verdict::default());
    assert_eq!(template_needed(&vm), None);
}

#[test]
fn a_vm_being_deleted_is_not_checked() {
    let mut vm = vm_with(memory_rule(2 * GIB), domain_with_memory("1Gi"));
    vm["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    assert!(review_vm(&vm, None).allowed());
}

fn template(rules: Value) -> Value {
    json!({
        "apiVersion": "template.openshift.io/v1", "kind": "Template",
        "metadata": {"name": "fedora-server-small", "namespace": "openshift",
                     "labels": {TEMPLATE_TYPE_LABEL: "base"},
                     "annotations": {TEMPLATE_VALIDATIONS_ANNOTATION: rules.to_string()}},
    })
}

fn templated_vm(domain: Value) -> Value {
    json!({
        "metadata": {"name": "vm", "namespace": "team", "labels": {
            TEMPLATE_NAME_KEY: "fedora-server-small", TEMPLATE_NAMESPACE_KEY: "openshift",
        }},
        "spec": {"template": {"spec": {"domain": domain}}},
    })
}

#[test]
fn template_rules_apply_unless_the_vm_has_its_own() {
    let template = template(memory_rule(2 * GIB));
    let vm = templated_vm(domain_with_memory("1Gi"));
    assert_eq!(
        template_needed(&vm),
        Some(("openshift".to_owned(), "fedora-server-small".to_owned()))
    );
    assert!(!review_vm(&vm, Some(&template)).allowed());
    // A missing template means nothing to check.
    assert!(review_vm(&vm, None).allowed());
    // The VM's own rules win.
    let mut own = vm.clone();
    own["metadata"]["annotations"] = json!({VALIDATIONS_ANNOTATION: memory_rule(GIB).to_string()});
    assert_eq!(template_needed(&own), None);
    assert!(review_vm(&own, Some(&template)).allowed());
    // An empty annotation is no rules of its own.
    own["metadata"]["annotations"] = json!({VALIDATIONS_ANNOTATION: ""});
    assert!(!review_vm(&own, Some(&template)).allowed());
}

#[test]
fn the_template_is_named_by_labels_then_annotations() {
    let vm = |labels: Value, annotations: Value| json!({"metadata": {"labels": labels, "annotations": annotations}});
    let key = |ns: &str, name: &str| Some((ns.to_owned(), name.to_owned()));
    assert_eq!(
        template_of(&vm(
            json!({TEMPLATE_NAME_KEY: "t", TEMPLATE_NAMESPACE_KEY: "ns"}),
            json!({})
        )),
        key("ns", "t")
    );
    assert_eq!(
        template_of(&vm(
            json!({TEMPLATE_NAME_KEY: "t", TEMPLATE_NAMESPACE_OLD_KEY: "old"}),
            json!({})
        )),
        key("old", "t")
    );
    // Labels without a namespace: the annotations are asked.
    assert_eq!(
        template_of(&vm(
            json!({TEMPLATE_NAME_KEY: "t"}),
            json!({TEMPLATE_NAME_KEY: "a", TEMPLATE_NAMESPACE_KEY: "ans"})
        )),
        key("ans", "a")
    );
    assert_eq!(
        template_of(&vm(json!({TEMPLATE_NAME_KEY: "t"}), json!({}))),
        None
    );
    assert_eq!(template_of(&json!({})), None);
}

#[test]
fn rules_that_do_not_decode_refuse_with_a_bad_request() {
    let mut vm = vm_with(json!([]), json!({}));
    vm["metadata"]["annotations"][VALIDATIONS_ANNOTATION] = json!("[{\"name\": ");
    let verdict = review_vm(&vm, None);
    assert!(!verdict.allowed());
    assert_eq!(verdict.code(), Some(400));
    assert_eq!(
        verdict.status(),
        Some(json!({"message": "unexpected end of JSON input", "code": 400}))
    );
    let bad_path =
        json!([{"name": "a", "rule": "integer", "message": "m", "path": ".spec.domain"}]);
    let verdict = review_vm(&vm_with(bad_path, json!({})), None);
    assert_eq!(verdict.bad_request.as_deref(), Some("invalid JSONPath"));
}

#[test]
fn malformed_rules_fail_the_whole_review_by_name() {
    let rules = json!([
        {"name": "kind", "rule": "float", "path": "jsonpath::.spec.domain.cpu.cores", "message": "unknown kind"},
        {"name": "quiet", "rule": "integer", "path": "jsonpath::.spec.domain.cpu.cores"},
        {"name": "pathless", "rule": "integer", "message": "no path", "min": 1},
        {"name": "kind", "rule": "integer", "path": "jsonpath::.spec.domain.cpu.cores", "message": "twice", "min": 1},
        {"name": "typo", "rule": "integer", "path": "jsonpath::.spec.domain.cpu.coars", "message": "typo", "min": 1},
        {"name": "regex", "rule": "regex", "path": "jsonpath::.spec.domain.machine.type", "message": "bad regex", "regex": "(q35"},
        {"name": "fine", "rule": "integer", "path": "jsonpath::.spec.domain.cpu.cores", "message": "fine", "min": 1},
    ]);
    let verdict = review_vm(&vm_with(rules, json!({"cpu": {"cores": 2}})), None);
    let fields: Vec<&str> = verdict.denials.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            ".spec.domain.cpu.cores",
            ".spec.domain.cpu.cores",
            "",
            ".spec.domain.cpu.cores",
            ".spec.domain.cpu.coars",
            ".spec.domain.machine.type",
        ]
    );
    let messages = messages(&verdict);
    assert_eq!(messages[0], "unknown kind: unrecognized Rule type");
    assert_eq!(messages[1], ": missing required key");
    assert_eq!(messages[2], "no path: missing required key");
    assert_eq!(messages[3], "twice: duplicate Rule Name");
    assert_eq!(messages[4], "typo: invalid JSONPath");
    assert!(
        messages[5].starts_with("bad regex: error parsing regexp: ")
            && messages[5].ends_with("`(q35`"),
        "{}",
        messages[5]
    );
    assert_eq!(verdict.denials.len(), 6);
}

#[test]
fn a_path_that_finds_nothing_fails_the_rule() {
    let rules = json!([{"name": "bus", "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus",
                        "rule": "enum", "message": "disk bus", "values": ["virtio"]}]);
    let vm = vm_with(rules, disks(json!([])));
    assert_eq!(
        messages(&review_vm(&vm, None)),
        ["disk bus: no values were found"]
    );
}

#[test]
fn a_value_of_the_wrong_type_fails_the_rule() {
    let rules = json!([{"name": "bus", "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus",
                        "rule": "integer", "message": "bus", "min": 1}]);
    let vm = vm_with(
        rules,
        disks(json!([{"name": "a", "disk": {"bus": "virtio"}}])),
    );
    assert_eq!(
        messages(&review_vm(&vm, None)),
        ["bus: mismatching type: string, not int or resource.Quantity"]
    );
    let rules = json!([{"name": "e", "path": "jsonpath::.spec.domain.cpu.cores", "rule": "enum",
                        "message": "e", "values": ["jsonpath::.spec.domain.devices.disks[*].name"]}]);
    let vm = vm_with(
        rules,
        json!({"cpu": {"cores": 1}, "devices": {"disks": [{"name": "a"}, {"name": "b"}]}}),
    );
    assert_eq!(
        messages(&review_vm(&vm, None)),
        ["e: expected one value, found 2"]
    );
}

fn user_of(template: &str, own_rules: bool) -> Value {
    let mut vm = json!({"metadata": {"name": template.to_owned() + "-vm", "namespace": "team", "labels": {
        TEMPLATE_NAME_KEY: template, TEMPLATE_NAMESPACE_KEY: "openshift",
    }}});
    if own_rules {
        vm["metadata"]["annotations"] = json!({VALIDATIONS_ANNOTATION: "[]"});
    }
    vm
}

#[test]
fn a_common_template_with_rules_stays_while_vms_validate_against_it() {
    let template = template(memory_rule(GIB));
    let vms = [
        user_of("fedora-server-small", false),
        user_of("fedora-server-small", true),
        user_of("other", false),
    ];
    assert_eq!(
        review_template_deletion(&template, &vms),
        Some(json!({
            "message": "Template cannot be deleted, because the following VMs are referencing it for validation: team/fedora-server-small-vm",
            "reason": "Forbidden",
            "code": 403,
        }))
    );
    assert_eq!(review_template_deletion(&template, &vms[1..]), None);
    // Not a common template, or one without rules: free to go.
    let mut custom = template.clone();
    custom["metadata"]["labels"] = json!({});
    assert_eq!(review_template_deletion(&custom, &vms), None);
    let mut ruleless = template;
    ruleless["metadata"]["annotations"] = json!({});
    assert_eq!(review_template_deletion(&ruleless, &vms), None);
}
