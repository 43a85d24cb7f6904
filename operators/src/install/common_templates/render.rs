//! One common template as kubevirt/common-templates renders it: the Template's labels and
//! annotations, its parameters, and the VirtualMachine it creates from a DataSource.

use serde_json::{Map, Value, json};

use super::flavor::Variant;
use super::os::OperatingSystem;
use super::{ARCHITECTURE, BUNDLE_VERSION};

/// The paths a user interface may edit (`template.kubevirt.io/editable`).
const EDITABLE: &str = "/objects[0].spec.template.spec.domain.cpu.sockets
/objects[0].spec.template.spec.domain.cpu.cores
/objects[0].spec.template.spec.domain.cpu.threads
/objects[0].spec.template.spec.domain.memory.guest
/objects[0].spec.template.spec.domain.devices.disks
/objects[0].spec.template.spec.volumes
/objects[0].spec.template.spec.networks
";

/// The Template of `os` in `variant`, without a namespace.
pub fn template(os: &OperatingSystem, variant: &Variant) -> Value {
    let name = variant.template_name(os.os);
    json!({
        "apiVersion": api::template::API_VERSION,
        "kind": api::template::KIND,
        "metadata": {
            "name": name,
            "annotations": annotations(os),
            "labels": labels(os, variant),
        },
        "objects": [virtual_machine(os, variant, &name)],
        "parameters": parameters(os),
    })
}

fn annotations(os: &OperatingSystem) -> Map<String, Value> {
    let mut annotations = Map::new();
    let mut put = |key: &str, value: String| {
        annotations.insert(key.to_string(), Value::String(value));
    };
    put("openshift.io/display-name", os.display_name.into());
    put("description", os.description.into());
    put("tags", os.tags.into());
    put("iconClass", format!("icon-{}", os.icon));
    put("openshift.io/provider-display-name", "KubeVirt".into());
    put(
        "openshift.io/documentation-url",
        "https://github.com/kubevirt/common-templates".into(),
    );
    put(
        "openshift.io/support-url",
        "https://github.com/kubevirt/common-templates/issues".into(),
    );
    put("template.openshift.io/bindable", "false".into());
    put("template.kubevirt.io/version", "v1alpha1".into());
    put("defaults.template.kubevirt.io/disk", "rootdisk".into());
    if !os.container_disks.is_empty() {
        put(
            "template.kubevirt.io/containerdisks",
            lines(os.container_disks),
        );
    }
    if !os.images.is_empty() {
        put("template.kubevirt.io/images", lines(os.images));
    }
    put("template.kubevirt.io/editable", EDITABLE.into());
    for version in os.versions {
        put(
            &format!("name.os.template.kubevirt.io/{version}"),
            os.version_name.into(),
        );
    }
    annotations
}

/// A YAML literal block's value: one entry a line, each ended by a newline.
fn lines(entries: &[&str]) -> String {
    entries.iter().map(|entry| format!("{entry}\n")).collect()
}

fn labels(os: &OperatingSystem, variant: &Variant) -> Map<String, Value> {
    let mut labels = Map::new();
    let mut put = |key: String, value: &str| {
        labels.insert(key, Value::String(value.to_string()));
    };
    for version in os.versions {
        put(format!("os.template.kubevirt.io/{version}"), "true");
    }
    put(
        format!("workload.template.kubevirt.io/{}", variant.workload.name()),
        "true",
    );
    put(
        format!("flavor.template.kubevirt.io/{}", variant.flavor.name()),
        "true",
    );
    put("template.kubevirt.io/type".into(), "base");
    put("template.kubevirt.io/version".into(), BUNDLE_VERSION);
    if variant.default {
        put("template.kubevirt.io/default-os-variant".into(), "true");
    }
    put("template.kubevirt.io/architecture".into(), ARCHITECTURE);
    labels
}

fn parameters(os: &OperatingSystem) -> Value {
    json!([
        {"description": "VM name", "from": format!("{}-[a-z0-9]{{16}}", os.os), "generate": "expression", "name": "NAME"},
        {"name": "DATA_SOURCE_NAME", "description": "Name of the DataSource to clone", "value": os.os},
        {"name": "DATA_SOURCE_NAMESPACE", "description": "Namespace of the DataSource", "value": "kubevirt-os-images"},
        {
            "description": format!("Randomized password for the cloud-init user {}", os.cloud_user),
            "from": "[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}",
            "generate": "expression",
            "name": "CLOUD_USER_PASSWORD"
        }
    ])
}

/// The template-validator rules of the VM: the minimal memory of the OS.
fn validations(os: &OperatingSystem) -> String {
    let rules = json!([{
        "name": "minimal-required-memory",
        "path": "jsonpath::.spec.domain.memory.guest",
        "rule": "integer",
        "message": "This VM requires more memory.",
        "min": os.minimal_memory,
    }]);
    let mut text = serde_json::to_string_pretty(&rules).unwrap_or_default();
    text.push('\n');
    text
}

fn virtual_machine(os: &OperatingSystem, variant: &Variant, template_name: &str) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {
            "name": "${NAME}",
            "labels": {
                "vm.kubevirt.io/template": template_name,
                "vm.kubevirt.io/template.version": BUNDLE_VERSION,
                "vm.kubevirt.io/template.revision": "1",
                "app": "${NAME}",
            },
            "annotations": {"vm.kubevirt.io/validations": validations(os)},
        },
        "spec": {
            "dataVolumeTemplates": [{
                "apiVersion": "cdi.kubevirt.io/v1beta1",
                "kind": "DataVolume",
                "metadata": {"name": "${NAME}"},
                "spec": {
                    "storage": {"resources": {"requests": {"storage": "30Gi"}}},
                    "sourceRef": {
                        "kind": "DataSource",
                        "name": "${DATA_SOURCE_NAME}",
                        "namespace": "${DATA_SOURCE_NAMESPACE}",
                    },
                },
            }],
            "runStrategy": "Halted",
            "template": {
                "metadata": {
                    "annotations": {
                        "vm.kubevirt.io/os": os.os,
                        "vm.kubevirt.io/workload": variant.workload.name(),
                        "vm.kubevirt.io/flavor": variant.flavor.name(),
                    },
                    "labels": {
                        "kubevirt.io/domain": "${NAME}",
                        "kubevirt.io/size": variant.flavor.name(),
                    },
                },
                "spec": vmi_spec(os, variant),
            },
        },
    })
}

fn vmi_spec(os: &OperatingSystem, variant: &Variant) -> Value {
    let user_data = format!(
        "#cloud-config\nuser: {}\npassword: ${{CLOUD_USER_PASSWORD}}\nchpasswd: {{ expire: False }}",
        os.cloud_user
    );
    json!({
        "architecture": ARCHITECTURE,
        "domain": domain(os, variant),
        "terminationGracePeriodSeconds": 180,
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [
            {"dataVolume": {"name": "${NAME}"}, "name": "rootdisk"},
            {"cloudInitNoCloud": {"userData": user_data}, "name": "cloudinitdisk"},
        ],
    })
}

fn domain(os: &OperatingSystem, variant: &Variant) -> Value {
    let sockets = variant.flavor.sockets();
    let mut cpu = json!({"sockets": sockets, "cores": 1, "threads": 1});
    let mut root_disk = json!({"disk": {"bus": "virtio"}, "name": "rootdisk"});
    let mut devices = json!({
        "rng": {},
        "interfaces": [{"masquerade": {}, "name": "default", "model": "virtio"}],
    });
    if sockets > 1 {
        devices["networkInterfaceMultiqueue"] = json!(true);
    }
    if variant.tablet {
        devices["inputs"] = json!([{"type": "tablet", "bus": "virtio", "name": "tablet"}]);
    }
    if variant.io_threads() {
        cpu["dedicatedCpuPlacement"] = json!(true);
        cpu["isolateEmulatorThread"] = json!(true);
        root_disk["dedicatedIOThread"] = json!(true);
    }
    devices["disks"] = json!([root_disk, {"disk": {"bus": "virtio"}, "name": "cloudinitdisk"}]);
    let mut domain = json!({
        "cpu": cpu,
        "memory": {"guest": variant.memory},
        "devices": devices,
    });
    if variant.io_threads() {
        domain["ioThreadsPolicy"] = json!("shared");
    }
    if os.efi {
        domain["features"] = json!({"smm": {"enabled": true}});
        domain["firmware"] = json!({"bootloader": {"efi": {}}});
    }
    domain
}
