//! The devices, every field upstream declares: read, written back unchanged, and declared by
//! the VirtualMachineInstance CRD's schema.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::{Devices, Disk, Interface};
use crate::kubevirt::VirtualMachineInstance;

/// Disks with every field of upstream's Disk and of its three targets.
fn every_disk_field() -> Value {
    json!([
        {
            "name": "root",
            "disk": {"bus": "virtio", "readonly": false, "pciAddress": "0000:81:01.0"},
            "bootOrder": 1, "serial": "root-1", "cache": "none", "io": "native",
            "errorPolicy": "report", "dedicatedIOThread": true, "shareable": false,
            "tag": "boot",
            "blockSize": {"custom": {"logical": 512, "physical": 4096}},
        },
        {
            "name": "iso",
            "cdrom": {"bus": "sata", "readonly": true, "tray": "closed"},
            "blockSize": {"matchVolume": {"enabled": true}},
        },
        {"name": "shared", "lun": {"bus": "scsi", "readonly": false, "reservation": true}},
    ])
}

/// Interfaces with every binding and every other field of upstream's Interface.
fn every_interface_field() -> Value {
    json!([
        {
            "name": "default", "model": "virtio", "macAddress": "02:00:00:00:00:01",
            "masquerade": {},
            "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
            "bootOrder": 2, "pciAddress": "0000:81:00.1", "acpiIndex": 1, "state": "up",
            "tag": "front",
            "dhcpOptions": {
                "bootFileName": "pxelinux.0", "tftpServerName": "tftp.example",
                "ntpServers": ["10.0.0.1"],
                "privateOptions": [{"option": 240, "value": "extra"}],
            },
        },
        {"name": "br", "bridge": {}, "state": "down"},
        {"name": "vf", "sriov": {}},
        {"name": "user", "slirp": {}},
        {"name": "pst", "passt": {}},
        {"name": "tap", "macvtap": {}},
        {"name": "plug", "binding": {"name": "managedtap"}, "state": "absent"},
    ])
}

/// Devices with every field of upstream's Devices set.
fn every_field() -> Value {
    json!({
        "disks": every_disk_field(),
        "interfaces": every_interface_field(),
        "autoattachPodInterface": false,
        "autoattachGraphicsDevice": false,
        "autoattachSerialConsole": true,
        "autoattachMemBalloon": false,
        "autoattachInputDevice": true,
        "autoattachVSOCK": true,
        "logSerialConsole": false,
        "blockMultiQueue": true,
        "networkInterfaceMultiqueue": true,
        "useVirtioTransitional": false,
        "disableHotplug": true,
        "rng": {},
        "inputs": [{"name": "tablet", "type": "tablet", "bus": "virtio"}],
        "watchdog": {"name": "wd", "i6300esb": {"action": "poweroff"}, "diag288": {"action": "reset"}},
        "gpus": [
            {"name": "gpu0", "deviceName": "nvidia.com/GP102GL", "tag": "g",
             "virtualGPUOptions": {"display": {"enabled": true, "ramFB": {"enabled": false}}}},
            {"name": "gpu1", "claimName": "gpus", "requestName": "one"},
        ],
        "hostDevices": [
            {"name": "nic", "deviceName": "intel.com/qat", "tag": "h"},
            {"name": "dra", "claimName": "devices", "requestName": "fpga"},
        ],
        "filesystems": [{"name": "share", "virtiofs": {}}],
        "sound": {"name": "audio", "model": "ac97"},
        "tpm": {"enabled": true, "persistent": true},
        "video": {"type": "virtio"},
        "panicDevices": [{"model": "pvpanic"}],
        "clientPassthrough": {},
        "downwardMetrics": {},
    })
}

#[test]
fn every_device_field_round_trips() {
    let sent = every_field();
    let devices: Devices = serde_json::from_value(sent.clone()).expect("the devices read");
    assert_eq!(
        devices.gpus.as_ref().map(Vec::len),
        Some(2),
        "the GPUs are typed"
    );
    assert_eq!(serde_json::to_value(&devices).expect("they write"), sent);
}

#[test]
fn each_interface_names_its_binding() {
    let interfaces: Vec<Interface> =
        serde_json::from_value(every_interface_field()).expect("the interfaces read");
    let methods: Vec<Vec<&str>> = interfaces.iter().map(Interface::binding_methods).collect();
    assert_eq!(
        methods,
        [
            ["masquerade"],
            ["bridge"],
            ["sriov"],
            ["slirp"],
            ["passt"],
            ["macvtap"],
            ["binding"]
        ]
    );
    assert_eq!(
        interfaces[6].binding.as_ref().map(|b| b.name.as_str()),
        Some("managedtap")
    );
}

#[test]
fn each_disk_names_its_target() {
    let disks: Vec<Disk> = serde_json::from_value(every_disk_field()).expect("the disks read");
    let targets: Vec<(&str, Option<&str>, bool)> = disks
        .iter()
        .map(Disk::attached_target)
        .map(|t| (t.kind, t.bus, t.readonly))
        .collect();
    assert_eq!(
        targets,
        [
            ("disk", Some("virtio"), false),
            ("cdrom", Some("sata"), true),
            ("lun", Some("scsi"), false)
        ]
    );
    let bare = Disk {
        name: "d".into(),
        ..Default::default()
    };
    assert_eq!(bare.attached_target().kind, "disk");
    assert_eq!(disks[0].io.as_deref(), Some("native"));
    assert_eq!(disks[0].error_policy.as_deref(), Some("report"));
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
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        found.push(format!("{path} (kept unknown)"));
    }
    let map = schema.get("additionalProperties").filter(|a| a.is_object());
    for (name, inner) in fields {
        let path = format!("{path}.{name}");
        match schema["properties"].get(name).or(map) {
            Some(child) => undeclared(child, inner, &path, found),
            None => found.push(path),
        }
    }
}

fn devices_schema() -> Value {
    let crd = serde_json::to_value(VirtualMachineInstance::crd()).expect("the CRD writes");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["domain"]["properties"]["devices"]
        .clone()
}

#[test]
fn the_crd_schema_declares_every_device_field() {
    let schema = devices_schema();
    assert!(schema.is_object(), "the CRD has spec.domain.devices");
    let mut found = Vec::new();
    undeclared(&schema, &every_field(), "devices", &mut found);
    assert_eq!(
        found,
        Vec::<String>::new(),
        "fields the schema does not declare"
    );
}

#[test]
fn a_misspelt_device_field_is_not_declared() {
    let schema = devices_schema();
    let typo = json!({
        "autoattachVsock": true,
        "disks": [{"name": "d", "cdrom": {"pciAddress": "0000:00:01.0"}}],
        "interfaces": [{"name": "i", "masquerade": {"ports": []}}],
    });
    let mut found = Vec::new();
    undeclared(&schema, &typo, "devices", &mut found);
    assert_eq!(
        found,
        [
            "devices.autoattachVsock",
            "devices.disks[].cdrom.pciAddress",
            "devices.interfaces[].masquerade.ports"
        ]
    );
}
