//! Validation of VirtualMachines and VirtualMachineInstances as virt-api's webhook does it,
//! for the rules the platform relies on: run strategy, template shape, disks matched to
//! volumes, interfaces matched to networks, cloud-init data, and DataVolume templates.

use std::collections::HashMap;

use api::kubevirt::vm::{RunStrategy, VirtualMachine};
use api::kubevirt::vmi::{
    CloudInitSource, VirtualMachineInstance, VirtualMachineInstanceSpec, Volume,
};
use api::validation::{FieldPath, Problem, ValidationError, ValidationResult, join};

use crate::cdi::validate::validate_data_volume_spec;
use crate::kubevirt::access_credentials::validate_access_credentials;

fn err(field: FieldPath, problem: Problem) -> ValidationResult {
    Err(ValidationError::new(field, problem))
}

/// Validates a VirtualMachine given as JSON, so that a `runStrategy` outside the known values
/// is reported against its field rather than as a parse error; then parses and validates it.
pub fn validate_virtual_machine_json(value: &serde_json::Value) -> ValidationResult {
    let spec_path = FieldPath::new("spec");
    if let Some(strategy) = value.pointer("/spec/runStrategy") {
        let known = strategy.as_str().and_then(RunStrategy::parse);
        if known.is_none() {
            return err(
                spec_path.child("runStrategy"),
                Problem::Unsupported {
                    value: strategy
                        .as_str()
                        .map_or_else(|| strategy.to_string(), str::to_owned),
                    supported: join(&RunStrategy::ALL),
                },
            );
        }
    }
    let vm: VirtualMachine = serde_json::from_value(value.clone()).map_err(|e| {
        ValidationError::new(
            FieldPath::new(""),
            Problem::Invalid(format!("not a VirtualMachine: {e}")),
        )
    })?;
    validate_virtual_machine(&vm)
}

/// Validates a VirtualMachine.
pub fn validate_virtual_machine(vm: &VirtualMachine) -> ValidationResult {
    let spec_path = FieldPath::new("spec");
    let spec = &vm.spec;
    if spec.running.is_some() && spec.run_strategy.is_some() {
        return err(
            spec_path.child("running"),
            Problem::Conflict {
                other: spec_path.child("runStrategy").to_string(),
            },
        );
    }
    let template_path = spec_path.child("template");
    let Some(template) = &spec.template else {
        return err(template_path, Problem::Required);
    };
    let Some(vmi_spec) = &template.spec else {
        return err(template_path.child("spec"), Problem::Required);
    };

    let dvt_path = spec_path.child("dataVolumeTemplates");
    let mut dv_names: HashMap<&str, usize> = HashMap::new();
    for (i, dvt) in spec.data_volume_templates.iter().flatten().enumerate() {
        let p = dvt_path.index(i);
        let name = dvt
            .metadata
            .as_ref()
            .and_then(|m| m.name.as_deref())
            .unwrap_or_default();
        if name.is_empty() {
            return err(p.child("metadata").child("name"), Problem::Required);
        }
        if let Some(first) = dv_names.insert(name, i) {
            return err(
                p.child("metadata").child("name"),
                Problem::Duplicate {
                    value: name.to_owned(),
                    first: dvt_path
                        .index(first)
                        .child("metadata")
                        .child("name")
                        .to_string(),
                },
            );
        }
        validate_data_volume_spec(&dvt.spec, &p.child("spec"))?;
    }

    validate_instance_spec(vmi_spec, &template_path.child("spec"))
}

/// Validates a VirtualMachineInstance.
pub fn validate_virtual_machine_instance(vmi: &VirtualMachineInstance) -> ValidationResult {
    validate_instance_spec(&vmi.spec, &FieldPath::new("spec"))
}

/// Validates an instance spec at `path` (`spec` of a VMI, `spec.template.spec` of a VM).
pub fn validate_instance_spec(
    spec: &VirtualMachineInstanceSpec,
    path: &FieldPath,
) -> ValidationResult {
    let devices_path = path.child("domain").child("devices");
    let networks_path = path.child("networks");
    let volumes = validate_volumes(spec, &path.child("volumes"))?;
    validate_disks(spec, &devices_path.child("disks"), &volumes)?;
    let networks = validate_networks(spec, &networks_path)?;
    let interfaces = validate_interfaces(spec, &devices_path.child("interfaces"), &networks)?;
    check_every_network_has_an_interface(spec, &networks_path, &interfaces)?;
    validate_access_credentials(spec, &path.child("accessCredentials"))
}

/// Names seen so far in a list, each with its index: a second use of a name is a
/// duplicate of the first.
type NameIndex<'a> = HashMap<&'a str, usize>;

/// Volumes: unique names, one source each, valid cloud-init; the volume names, for the
/// disks to find.
fn validate_volumes<'a>(
    spec: &'a VirtualMachineInstanceSpec,
    volumes_path: &FieldPath,
) -> Result<NameIndex<'a>, ValidationError> {
    let mut volumes: NameIndex<'a> = HashMap::new();
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        let p = volumes_path.index(i);
        if volume.name.is_empty() {
            return Err(ValidationError::new(p.child("name"), Problem::Required));
        }
        if let Some(first) = volumes.insert(&volume.name, i) {
            return Err(ValidationError::new(
                p.child("name"),
                Problem::Duplicate {
                    value: volume.name.clone(),
                    first: volumes_path.index(first).child("name").to_string(),
                },
            ));
        }
        validate_volume_source(volume, &p)?;
    }
    Ok(volumes)
}

/// One volume's source: exactly one, with what that source requires.
fn validate_volume_source(volume: &Volume, p: &FieldPath) -> ValidationResult {
    let kinds = volume.source_kinds();
    match kinds.len() {
        0 => {
            return err(
                p.clone(),
                Problem::Invalid(
                    "a volume needs a source such as dataVolume or containerDisk".into(),
                ),
            );
        }
        1 => {}
        _ => {
            let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
            return err(
                p.clone(),
                Problem::Invalid(format!("a volume has one source, found {}", join(&kinds))),
            );
        }
    }
    if let Some(ci) = &volume.cloud_init_no_cloud {
        validate_cloud_init(ci, &p.child("cloudInitNoCloud"))?;
    }
    if let Some(ci) = &volume.cloud_init_config_drive {
        validate_cloud_init(ci, &p.child("cloudInitConfigDrive"))?;
    }
    if let Some(cd) = &volume.container_disk
        && cd.image.is_empty()
    {
        return err(p.child("containerDisk").child("image"), Problem::Required);
    }
    if let Some(dv) = &volume.data_volume
        && dv.name.is_empty()
    {
        return err(p.child("dataVolume").child("name"), Problem::Required);
    }
    if let Some(pvc) = &volume.persistent_volume_claim
        && pvc.claim_name.is_empty()
    {
        return err(
            p.child("persistentVolumeClaim").child("claimName"),
            Problem::Required,
        );
    }
    Ok(())
}

/// Disks: unique names, each backed by a volume, one target each, boot orders from 1.
fn validate_disks(
    spec: &VirtualMachineInstanceSpec,
    disks_path: &FieldPath,
    volumes: &NameIndex<'_>,
) -> ValidationResult {
    let mut disks: HashMap<&str, usize> = HashMap::new();
    for (i, disk) in spec.domain.devices.disks.iter().flatten().enumerate() {
        let p = disks_path.index(i);
        if let Some(first) = disks.insert(&disk.name, i) {
            return err(
                p.child("name"),
                Problem::Duplicate {
                    value: disk.name.clone(),
                    first: disks_path.index(first).child("name").to_string(),
                },
            );
        }
        if !volumes.contains_key(disk.name.as_str()) {
            return err(
                p.child("name"),
                Problem::Invalid(format!("no volume named {:?} backs this disk", disk.name)),
            );
        }
        let targets: Vec<&str> = [
            ("disk", disk.disk.is_some()),
            ("cdrom", disk.cdrom.is_some()),
            ("lun", disk.lun.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, set)| set.then_some(n))
        .collect();
        if targets.len() > 1 {
            return err(
                p,
                Problem::MoreThanOneOf {
                    options: join(&["disk", "cdrom", "lun"]),
                    set: join(&targets),
                },
            );
        }
        if disk.boot_order == Some(0) {
            return err(
                p.child("bootOrder"),
                Problem::Invalid("bootOrder starts at 1".into()),
            );
        }
    }
    Ok(())
}

/// Networks: unique names, pod or multus; the network names, for the interfaces to find.
fn validate_networks<'a>(
    spec: &'a VirtualMachineInstanceSpec,
    networks_path: &FieldPath,
) -> Result<NameIndex<'a>, ValidationError> {
    let mut networks: NameIndex<'a> = HashMap::new();
    for (i, network) in spec.networks.iter().flatten().enumerate() {
        let p = networks_path.index(i);
        if network.name.is_empty() {
            return Err(ValidationError::new(p.child("name"), Problem::Required));
        }
        if let Some(first) = networks.insert(&network.name, i) {
            return Err(ValidationError::new(
                p.child("name"),
                Problem::Duplicate {
                    value: network.name.clone(),
                    first: networks_path.index(first).child("name").to_string(),
                },
            ));
        }
        if network.pod.is_some() && network.multus.is_some() {
            return Err(ValidationError::new(
                p.child("pod"),
                Problem::Conflict {
                    other: p.child("multus").to_string(),
                },
            ));
        }
    }
    Ok(networks)
}

/// Interfaces: unique names, each on a network, one binding each, a valid MAC; the
/// interface names, for the networks to be matched one to one.
fn validate_interfaces<'a>(
    spec: &'a VirtualMachineInstanceSpec,
    interfaces_path: &FieldPath,
    networks: &NameIndex<'_>,
) -> Result<NameIndex<'a>, ValidationError> {
    let mut interfaces: NameIndex<'a> = HashMap::new();
    for (i, iface) in spec.domain.devices.interfaces.iter().flatten().enumerate() {
        let p = interfaces_path.index(i);
        if let Some(first) = interfaces.insert(&iface.name, i) {
            return Err(ValidationError::new(
                p.child("name"),
                Problem::Duplicate {
                    value: iface.name.clone(),
                    first: interfaces_path.index(first).child("name").to_string(),
                },
            ));
        }
        if !networks.contains_key(iface.name.as_str()) {
            return Err(ValidationError::new(
                p.child("name"),
                Problem::Invalid(format!(
                    "no network named {:?} for this interface",
                    iface.name
                )),
            ));
        }
        let methods = iface.binding_methods();
        if methods.len() > 1 {
            return Err(ValidationError::new(
                p,
                Problem::MoreThanOneOf {
                    options: join(&[
                        "bridge",
                        "masquerade",
                        "sriov",
                        "binding",
                        "slirp",
                        "passt",
                        "macvtap",
                    ]),
                    set: join(&methods),
                },
            ));
        }
        if let Some(mac) = iface.mac_address.as_deref()
            && !is_mac_address(mac)
        {
            return Err(ValidationError::new(
                p.child("macAddress"),
                Problem::Invalid(format!(
                    "{mac:?} is not a MAC address like 02:00:00:00:00:01"
                )),
            ));
        }
    }
    Ok(interfaces)
}

/// Every network is used by an interface.
fn check_every_network_has_an_interface(
    spec: &VirtualMachineInstanceSpec,
    networks_path: &FieldPath,
    interfaces: &NameIndex<'_>,
) -> ValidationResult {
    for (i, network) in spec.networks.iter().flatten().enumerate() {
        if !interfaces.contains_key(network.name.as_str()) {
            return err(
                networks_path.index(i).child("name"),
                Problem::Invalid(format!("no interface uses network {:?}", network.name)),
            );
        }
    }
    Ok(())
}

fn validate_cloud_init(ci: &CloudInitSource, path: &FieldPath) -> ValidationResult {
    let user = [
        ("userData", ci.user_data.is_some()),
        ("userDataBase64", ci.user_data_base64.is_some()),
        ("secretRef", ci.secret_ref.is_some()),
    ];
    let network = [
        ("networkData", ci.network_data.is_some()),
        ("networkDataBase64", ci.network_data_base64.is_some()),
        ("networkDataSecretRef", ci.network_data_secret_ref.is_some()),
    ];
    for group in [&user, &network] {
        let set: Vec<&str> = group.iter().filter_map(|(n, s)| s.then_some(*n)).collect();
        if set.len() > 1 {
            let options: Vec<&str> = group.iter().map(|(n, _)| *n).collect();
            return err(
                path.clone(),
                Problem::MoreThanOneOf {
                    options: join(&options),
                    set: join(&set),
                },
            );
        }
    }
    if !user.iter().chain(network.iter()).any(|(_, s)| *s) {
        let options: Vec<&str> = user.iter().chain(network.iter()).map(|(n, _)| *n).collect();
        return err(
            path.clone(),
            Problem::NoneOf {
                options: join(&options),
            },
        );
    }
    Ok(())
}

fn is_mac_address(mac: &str) -> bool {
    let parts: Vec<&str> = mac.split([':', '-']).collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vm_json() -> serde_json::Value {
        json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "vm1"},
            "spec": {
                "runStrategy": "Always",
                "dataVolumeTemplates": [{
                    "metadata": {"name": "root"},
                    "spec": {
                        "source": {"http": {"url": "https://example.com/disk.img"}},
                        "storage": {"resources": {"requests": {"storage": "2Gi"}}}
                    }
                }],
                "template": {"spec": {
                    "domain": {"devices": {
                        "disks": [
                            {"name": "root", "disk": {"bus": "virtio"}},
                            {"name": "cloudinit", "disk": {"bus": "virtio"}}
                        ],
                        "interfaces": [{"name": "default", "masquerade": {}}]
                    }},
                    "networks": [{"name": "default", "pod": {}}],
                    "volumes": [
                        {"name": "root", "dataVolume": {"name": "root"}},
                        {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config\n"}}
                    ]
                }}
            }
        })
    }

    fn field(v: &serde_json::Value) -> String {
        validate_virtual_machine_json(v)
            .unwrap_err()
            .field
            .to_string()
    }

    #[test]
    fn a_complete_vm_is_valid() {
        assert_eq!(validate_virtual_machine_json(&vm_json()), Ok(()));
    }

    #[test]
    fn running_with_run_strategy_is_rejected() {
        let mut v = vm_json();
        v["spec"]["running"] = json!(true);
        let e = validate_virtual_machine_json(&v).unwrap_err();
        assert_eq!(e.field.as_str(), "spec.running");
        assert!(matches!(e.problem, Problem::Conflict { .. }));
    }

    #[test]
    fn unknown_run_strategy_is_rejected_against_its_field() {
        let mut v = vm_json();
        v["spec"]["runStrategy"] = json!("Sometimes");
        let e = validate_virtual_machine_json(&v).unwrap_err();
        assert_eq!(e.field.as_str(), "spec.runStrategy");
        assert!(matches!(e.problem, Problem::Unsupported { .. }));
        for ok in RunStrategy::ALL {
            v["spec"]["runStrategy"] = json!(ok);
            assert_eq!(validate_virtual_machine_json(&v), Ok(()), "{ok}");
        }
    }

    #[test]
    fn template_is_required() {
        let mut v = vm_json();
        if let Some(spec) = v["spec"].as_object_mut() {
            spec.remove("template");
        }
        assert_eq!(field(&v), "spec.template");
    }

    #[test]
    fn data_volume_templates_are_validated_as_data_volumes() {
        let mut v = vm_json();
        v["spec"]["dataVolumeTemplates"][0]["spec"]["source"]["http"]["url"] = json!("ftp://x/y");
        assert_eq!(
            field(&v),
            "spec.dataVolumeTemplates[0].spec.source.http.url"
        );
        let mut v = vm_json();
        v["spec"]["dataVolumeTemplates"][0]["metadata"] = json!({});
        assert_eq!(field(&v), "spec.dataVolumeTemplates[0].metadata.name");
    }

    #[test]
    fn disks_need_a_volume_of_the_same_name() {
        let mut v = vm_json();
        v["spec"]["template"]["spec"]["domain"]["devices"]["disks"][0]["name"] = json!("data");
        assert_eq!(field(&v), "spec.template.spec.domain.devices.disks[0].name");
    }

    #[test]
    fn a_disk_has_one_target() {
        let mut v = vm_json();
        v["spec"]["template"]["spec"]["domain"]["devices"]["disks"][0]["cdrom"] = json!({});
        let e = validate_virtual_machine_json(&v).unwrap_err();
        assert_eq!(
            e.field.as_str(),
            "spec.template.spec.domain.devices.disks[0]"
        );
        assert_eq!(
            e.problem,
            Problem::MoreThanOneOf {
                options: "disk, cdrom, lun".into(),
                set: "disk, cdrom".into()
            }
        );
    }

    #[test]
    fn duplicate_volume_names_are_rejected() {
        let mut v = vm_json();
        v["spec"]["template"]["spec"]["volumes"][1]["name"] = json!("root");
        assert_eq!(field(&v), "spec.template.spec.volumes[1].name");
    }

    #[test]
    fn interfaces_and_networks_match_one_to_one() {
        let mut v = vm_json();
        v["spec"]["template"]["spec"]["networks"][0]["name"] = json!("other");
        assert_eq!(
            field(&v),
            "spec.template.spec.domain.devices.interfaces[0].name"
        );
        let mut v = vm_json();
        if let Some(n) = v["spec"]["template"]["spec"]["networks"].as_array_mut() {
            n.push(json!({"name": "extra", "multus": {"networkName": "br"}}));
        }
        assert_eq!(field(&v), "spec.template.spec.networks[1].name");
    }

    #[test]
    fn an_interface_has_one_binding() {
        let mut v = vm_json();
        v["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["bridge"] = json!({});
        assert!(matches!(
            validate_virtual_machine_json(&v).unwrap_err().problem,
            Problem::MoreThanOneOf { .. }
        ));
    }

    #[test]
    fn mac_addresses_are_checked() {
        let mut v = vm_json();
        v["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["macAddress"] =
            json!("02:00:00:00:00:zz");
        assert_eq!(
            field(&v),
            "spec.template.spec.domain.devices.interfaces[0].macAddress"
        );
        v["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["macAddress"] =
            json!("02:00:00:00:00:0a");
        assert_eq!(validate_virtual_machine_json(&v), Ok(()));
    }

    #[test]
    fn cloud_init_needs_data_and_only_one_form_of_it() {
        let mut v = vm_json();
        v["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"] = json!({});
        assert_eq!(field(&v), "spec.template.spec.volumes[1].cloudInitNoCloud");
        v["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"] =
            json!({"userData": "a", "userDataBase64": "YQ=="});
        assert!(matches!(
            validate_virtual_machine_json(&v).unwrap_err().problem,
            Problem::MoreThanOneOf { .. }
        ));
        v["spec"]["template"]["spec"]["volumes"][1]["cloudInitNoCloud"] =
            json!({"networkData": "version: 2"});
        assert_eq!(validate_virtual_machine_json(&v), Ok(()));
    }

    #[test]
    fn a_volume_has_exactly_one_source() {
        let mut v = vm_json();
        v["spec"]["template"]["spec"]["volumes"][0]["containerDisk"] = json!({"image": "x"});
        assert_eq!(field(&v), "spec.template.spec.volumes[0]");
        v["spec"]["template"]["spec"]["volumes"][0] = json!({"name": "root"});
        assert_eq!(field(&v), "spec.template.spec.volumes[0]");
    }

    #[test]
    fn vmi_specs_are_checked_at_spec() {
        let v = vm_json();
        let mut spec: VirtualMachineInstanceSpec =
            serde_json::from_value(v["spec"]["template"]["spec"].clone()).unwrap_or_default();
        let mut vmi = VirtualMachineInstance::new("vmi", spec.clone());
        assert_eq!(validate_virtual_machine_instance(&vmi), Ok(()));
        spec.volumes = None;
        vmi.spec = spec;
        assert_eq!(
            validate_virtual_machine_instance(&vmi)
                .unwrap_err()
                .field
                .as_str(),
            "spec.domain.devices.disks[0].name"
        );
    }
}
