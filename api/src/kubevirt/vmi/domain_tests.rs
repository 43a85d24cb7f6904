//! The domain but its devices, every field upstream declares: read, written back unchanged,
//! and declared by the VirtualMachineInstance CRD's schema.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::DomainSpec;
use crate::kubevirt::VirtualMachineInstance;

/// A domain with every field of upstream's DomainSpec but the devices set.
fn every_field() -> Value {
    let on = json!({"enabled": true});
    json!({
        "resources": {
            "requests": {"memory": "1Gi", "cpu": "500m"},
            "limits": {"memory": "2Gi", "cpu": "2"},
            "overcommitGuestOverhead": true,
        },
        "cpu": {
            "cores": 2, "sockets": 1, "maxSockets": 4, "threads": 1,
            "model": "host-passthrough",
            "features": [{"name": "vmx", "policy": "require"}, {"name": "pcid"}],
            "dedicatedCpuPlacement": true,
            "isolateEmulatorThread": true,
            "numa": {"guestMappingPassthrough": {}},
            "realtime": {"mask": "0-1"},
        },
        "memory": {"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}, "maxGuest": "4Gi"},
        "machine": {"type": "q35"},
        "firmware": {
            "uuid": "5d307ca9-b3ef-428c-8861-06e72d69f223",
            "serial": "e4686d2c",
            "bootloader": {"bios": {"useSerial": true}, "efi": {"secureBoot": false, "persistent": true}},
            "kernelBoot": {
                "kernelArgs": "console=ttyS0",
                "container": {
                    "image": "quay.io/k/kernel:1", "imagePullSecret": "pull",
                    "imagePullPolicy": "IfNotPresent",
                    "kernelPath": "/boot/vmlinuz", "initrdPath": "/boot/initrd",
                },
            },
            "acpi": {"slicNameRef": "slic", "msdmNameRef": "msdm"},
        },
        "clock": {
            "utc": {"offsetSeconds": -3600},
            "timezone": "Europe/Rome",
            "timer": {
                "hpet": {"tickPolicy": "delay", "present": false},
                "kvm": {"present": true},
                "pit": {"tickPolicy": "catchup", "present": true},
                "rtc": {"tickPolicy": "catchup", "present": true, "track": "guest"},
                "hyperv": {"present": true},
            },
        },
        "features": {
            "acpi": {}, "apic": {"enabled": true, "endOfInterrupt": false},
            "smm": on, "pvspinlock": {"enabled": false},
            "hyperv": {
                "relaxed": on, "vapic": on, "spinlocks": {"enabled": true, "spinlocks": 8191},
                "vpindex": on, "runtime": on, "synic": on,
                "synictimer": {"enabled": true, "direct": on},
                "reset": on, "vendorid": {"enabled": true, "vendorid": "ferrovirt"},
                "frequencies": on, "reenlightenment": on, "tlbflush": on, "ipi": on, "evmcs": on,
            },
            "hypervPassthrough": {"enabled": false},
            "kvm": {"hidden": true},
        },
        "chassis": {"manufacturer": "m", "version": "v", "serial": "s", "asset": "a", "sku": "k"},
        "devices": {},
        "ioThreadsPolicy": "supplementalPool",
        "ioThreads": {"supplementalPoolThreadCount": 4},
        "launchSecurity": {"sev": {
            "policy": {"encryptedState": true}, "attestation": {},
            "session": "c2Vzc2lvbg==", "dhCert": "Y2VydA==",
        }},
    })
}

#[test]
fn every_domain_field_round_trips() {
    let sent = every_field();
    let domain: DomainSpec = serde_json::from_value(sent.clone()).expect("the domain reads");
    assert_eq!(domain.cpu.as_ref().and_then(|c| c.max_sockets), Some(4));
    assert_eq!(
        serde_json::to_value(&domain).expect("the domain writes"),
        sent
    );
}

/// The paths below `path` of every field in `value` that `schema` does not declare (or only
/// keeps as unknown).
fn undeclared(schema: &Value, value: &Value, path: &str, found: &mut Vec<String>) {
    let fields = match value {
        Value::Object(fields) => fields,
        Value::Array(items) => {
            for item in items {
                undeclared(&schema["items"], item, &format!("{path}[]"), found);
            }
            return;
        }
        _ => return,
    };
    let map = schema.get("additionalProperties").filter(|a| a.is_object());
    for (name, inner) in fields {
        let path = format!("{path}.{name}");
        match schema["properties"].get(name).or(map) {
            Some(child) if child["x-kubernetes-preserve-unknown-fields"] != true => {
                undeclared(child, inner, &path, found);
            }
            _ => found.push(path),
        }
    }
}

/// The schema of `spec.domain` in the VirtualMachineInstance CRD.
fn domain_schema() -> Value {
    let crd = serde_json::to_value(VirtualMachineInstance::crd()).expect("the CRD writes");
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["domain"].clone()
}

#[test]
fn the_crd_schema_declares_every_domain_field() {
    let schema = domain_schema();
    assert!(schema.is_object(), "the CRD has spec.domain");
    let mut found = Vec::new();
    undeclared(&schema, &every_field(), "spec.domain", &mut found);
    assert_eq!(
        found,
        Vec::<String>::new(),
        "fields the schema does not declare"
    );
}

#[test]
fn a_misspelt_domain_field_is_not_declared() {
    let schema = domain_schema();
    let mut found = Vec::new();
    let typo = json!({"cpu": {"dedicatedCPUPlacement": true}, "clock": {"utc": {"offset": 1}}});
    undeclared(&schema, &typo, "spec.domain", &mut found);
    assert_eq!(
        found,
        [
            "spec.domain.clock.utc.offset",
            "spec.domain.cpu.dedicatedCPUPlacement"
        ]
    );
}
