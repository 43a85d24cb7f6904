//! The VMI fields the API types keep but the launcher does not model: each is either the
//! business of another component (scheduling, probes: the pod's, not QEMU's), harmless at
//! its default value, or refused by its path so nothing is silently dropped.

use api::common::Extra;
use api::kubevirt::VirtualMachineInstanceSpec;
use api::kubevirt::vmi::Volume;
use api::validation::FieldPath;
use serde_json::Value;

use super::DomainError;

/// Spec fields that shape the launcher pod or its scheduling, not the domain.
const POD_LEVEL: &[&str] = &[
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "schedulerName",
    "priorityClassName",
    "dnsPolicy",
    "dnsConfig",
    "subdomain",
    "readinessProbe",
    "livenessProbe",
];

/// Refuses every field of `spec` that neither the domain builder nor another component
/// acts on.
pub fn refuse_unmodelled(spec: &VirtualMachineInstanceSpec) -> Result<(), DomainError> {
    let root = FieldPath::new("spec");
    check_names(spec, &root)?;
    check(&root, &spec.extra, |name, value| {
        POD_LEVEL.contains(&name)
            || (name == "startStrategy" && value.as_str() == Some("Paused"))
            || (name == "architecture" && value.as_str() == Some("amd64"))
    })?;
    let domain = root.child("domain");
    let d = &spec.domain;
    check(&domain, &d.extra, |name, value| {
        name == "clock" && is_utc_clock(value)
    })?;
    if let Some(resources) = &d.resources {
        check(&domain.child("resources"), &resources.extra, |name, _| {
            name == "overcommitGuestOverhead"
        })?;
    }
    if let Some(cpu) = &d.cpu {
        check(&domain.child("cpu"), &cpu.extra, |name, value| {
            name == "maxSockets" || is_off(value)
        })?;
    }
    if let Some(memory) = &d.memory {
        check(&domain.child("memory"), &memory.extra, |_, _| false)?;
    }
    if let Some(firmware) = &d.firmware {
        let path = domain.child("firmware");
        check(&path, &firmware.extra, |_, _| false)?;
        if let Some(bootloader) = &firmware.bootloader {
            let path = path.child("bootloader");
            check(&path, &bootloader.extra, |_, _| false)?;
            if let Some(bios) = &bootloader.bios {
                check(&path.child("bios"), &bios.extra, |_, _| false)?;
            }
            if let Some(efi) = &bootloader.efi {
                check(&path.child("efi"), &efi.extra, |_, _| false)?;
            }
        }
    }
    if let Some(features) = &d.features {
        let path = domain.child("features");
        check(&path, &features.extra, |_, _| false)?;
        for (name, state) in [
            ("acpi", &features.acpi),
            ("apic", &features.apic),
            ("smm", &features.smm),
        ] {
            if let Some(state) = state {
                check(&path.child(name), &state.extra, |_, _| false)?;
            }
        }
    }
    let devices = domain.child("devices");
    check(&devices, &d.devices.extra, |name, value| {
        // Switches whose default (off) is what the domain does anyway.
        matches!(
            name,
            "useVirtioTransitional"
                | "disableHotplug"
                | "networkInterfaceMultiqueue"
                | "blockMultiQueue"
                | "autoattachVSOCK"
                | "autoattachInputDevice"
        ) && is_off(value)
    })?;
    for (i, disk) in d.devices.disks.iter().flatten().enumerate() {
        let path = devices.child("disks").index(i);
        check(&path, &disk.extra, |name, value| match name {
            // A tag only names the disk for hotplug and metadata.
            "tag" => true,
            "dedicatedIOThread" | "shareable" => is_off(value),
            "io" | "errorPolicy" => value.is_string(),
            _ => false,
        })?;
        for (kind, target) in [
            ("disk", &disk.disk),
            ("cdrom", &disk.cdrom),
            ("lun", &disk.lun),
        ] {
            if let Some(target) = target {
                check(&path.child(kind), &target.extra, |name, value| {
                    name == "tray" && value.as_str() == Some("closed")
                })?;
            }
        }
    }
    for (i, iface) in d.devices.interfaces.iter().flatten().enumerate() {
        let path = devices.child("interfaces").index(i);
        check(&path, &iface.extra, |name, value| {
            name == "tag" || (name == "state" && value.as_str() == Some("up"))
        })?;
    }
    if let Some(watchdog) = &d.devices.watchdog {
        check(&devices.child("watchdog"), &watchdog.extra, |_, _| false)?;
    }
    if let Some(rng) = &d.devices.rng {
        check(&devices.child("rng"), &rng.extra, |_, _| false)?;
    }
    for (i, volume) in spec.volumes.iter().flatten().enumerate() {
        let path = root.child("volumes").index(i);
        check(&path, &volume.extra, |_, _| false)?;
        refuse_volume_options(volume, &path)?;
    }
    for (i, network) in spec.networks.iter().flatten().enumerate() {
        if network.multus.as_ref().and_then(|m| m.default) == Some(true) {
            return Err(DomainError::unsupported(
                &root
                    .child("networks")
                    .index(i)
                    .child("multus")
                    .child("default"),
                "a Multus network as the default network is not supported",
            ));
        }
    }
    Ok(())
}

/// Names become file names and QEMU ids: letters, digits, `-`, `_` and `.`, beginning with
/// a letter or digit, at most 63 characters.
fn check_names(spec: &VirtualMachineInstanceSpec, root: &FieldPath) -> Result<(), DomainError> {
    let devices = root.child("domain").child("devices");
    let mut named: Vec<(FieldPath, &str)> = Vec::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        named.push((root.child("volumes").index(i).child("name"), &v.name));
    }
    for (i, d) in spec.domain.devices.disks.iter().flatten().enumerate() {
        named.push((devices.child("disks").index(i).child("name"), &d.name));
    }
    for (i, n) in spec.domain.devices.interfaces.iter().flatten().enumerate() {
        named.push((devices.child("interfaces").index(i).child("name"), &n.name));
    }
    for (i, n) in spec.domain.devices.inputs.iter().flatten().enumerate() {
        named.push((devices.child("inputs").index(i).child("name"), &n.name));
    }
    if let Some(w) = &spec.domain.devices.watchdog {
        named.push((devices.child("watchdog").child("name"), &w.name));
    }
    for (path, name) in named {
        let ok = name.len() <= 63
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !ok {
            return Err(DomainError::unsupported(
                &path,
                format!(
                    "{name:?} is not a valid name: letters, digits, '-', '_' and '.', beginning \
                     with a letter or digit, at most 63 characters"
                ),
            ));
        }
    }
    Ok(())
}

/// Volume options with no meaning here: hotplug, shared host disks, a containerDisk's
/// custom path or pull secret.
fn refuse_volume_options(volume: &Volume, path: &FieldPath) -> Result<(), DomainError> {
    let hotplug = |source: &str| {
        Err(DomainError::unsupported(
            &path.child(source).child("hotpluggable"),
            "hotplug is not supported",
        ))
    };
    if volume.data_volume.as_ref().and_then(|d| d.hotpluggable) == Some(true) {
        return hotplug("dataVolume");
    }
    if volume
        .persistent_volume_claim
        .as_ref()
        .and_then(|p| p.hotpluggable)
        == Some(true)
    {
        return hotplug("persistentVolumeClaim");
    }
    if volume.host_disk.as_ref().and_then(|h| h.shared) == Some(true) {
        return Err(DomainError::unsupported(
            &path.child("hostDisk").child("shared"),
            "shared host disks are not supported",
        ));
    }
    if let Some(cd) = &volume.container_disk {
        let cpath = path.child("containerDisk");
        if cd
            .path
            .as_deref()
            .is_some_and(|p| !p.is_empty() && p.trim_end_matches('/') != "/disk")
        {
            return Err(DomainError::unsupported(
                &cpath.child("path"),
                "only the image's /disk directory is read (CDI's containerDisk layout)",
            ));
        }
        if cd.image_pull_secret.is_some() {
            return Err(DomainError::unsupported(
                &cpath.child("imagePullSecret"),
                "pull secrets are not supported yet; use an anonymous or insecure registry",
            ));
        }
    }
    Ok(())
}

/// Refuses each entry of `extra` that `accepted(name, value)` does not accept.
fn check(
    path: &FieldPath,
    extra: &Extra,
    accepted: impl Fn(&str, &Value) -> bool,
) -> Result<(), DomainError> {
    match extra.iter().find(|(name, value)| !accepted(name, value)) {
        None => Ok(()),
        Some((name, _)) => Err(DomainError::unsupported(
            &path.child(name),
            "not supported by this launcher",
        )),
    }
}

/// `false`, `null` or `{enabled: false}`.
fn is_off(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => true,
        Value::Object(map) => map.get("enabled") == Some(&Value::Bool(false)),
        _ => false,
    }
}

/// `clock: {utc: {}}` with no offset and no timers: what QEMU's `-rtc base=utc` does.
fn is_utc_clock(value: &Value) -> bool {
    let Some(clock) = value.as_object() else {
        return false;
    };
    clock.keys().all(|k| k == "utc")
        && clock
            .get("utc")
            .and_then(Value::as_object)
            .is_some_and(|utc| {
                utc.get("offsetSeconds")
                    .is_none_or(|o| o.as_i64() == Some(0))
            })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(value: Value) -> VirtualMachineInstanceSpec {
        serde_json::from_value(value).expect("spec")
    }

    fn refused(value: Value) -> String {
        match refuse_unmodelled(&spec(value)) {
            Err(DomainError::Unsupported { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn unknown_fields_are_refused_by_path() {
        assert_eq!(
            refused(json!({"domain": {"devices": {"tpm": {}}}})),
            "spec.domain.devices.tpm"
        );
        assert_eq!(
            refused(json!({"domain": {"devices": {"disks": [
                {"name": "a", "disk": {"bus": "virtio", "pciAddress": "0000:81:01.0"}}
            ]}}})),
            "spec.domain.devices.disks[0].disk.pciAddress"
        );
        assert_eq!(
            refused(
                json!({"domain": {"memory": {"hugepages": {"pageSize": "2Mi"}}, "devices": {}}})
            ),
            "spec.domain.memory.hugepages"
        );
        assert_eq!(
            refused(json!({"domain": {"features": {"hyperv": {}}, "devices": {}}})),
            "spec.domain.features.hyperv"
        );
        assert_eq!(
            refused(json!({"domain": {"devices": {}}, "startStrategy": "Other"})),
            "spec.startStrategy"
        );
        assert_eq!(
            refused(json!({"domain": {"clock": {"timezone": "Europe/Rome"}, "devices": {}}})),
            "spec.domain.clock"
        );
        assert_eq!(
            refused(json!({"domain": {"devices": {}}, "volumes": [
                {"name": "a", "dataVolume": {"name": "dv", "hotpluggable": true}}
            ]})),
            "spec.volumes[0].dataVolume.hotpluggable"
        );
        assert_eq!(
            refused(json!({"domain": {"devices": {}}, "volumes": [
                {"name": "a", "containerDisk": {"image": "i", "path": "/custom/disk.img"}}
            ]})),
            "spec.volumes[0].containerDisk.path"
        );
        assert_eq!(
            refused(json!({"domain": {"devices": {}}, "volumes": [
                {"name": "../../etc", "emptyDisk": {"capacity": "1Gi"}}
            ]})),
            "spec.volumes[0].name"
        );
        assert_eq!(
            refused(json!({"domain": {"devices": {}}, "architecture": "arm64"})),
            "spec.architecture"
        );
        assert_eq!(
            refused(json!({"domain": {"devices": {}}, "networks": [
                {"name": "a", "multus": {"networkName": "n", "default": true}}
            ]})),
            "spec.networks[0].multus.default"
        );
    }

    #[test]
    fn pod_level_fields_and_defaults_pass() {
        let ok = spec(json!({
            "tolerations": [{"key": "a"}],
            "affinity": {},
            "startStrategy": "Paused",
            "domain": {
                "clock": {"utc": {}},
                "cpu": {"dedicatedCpuPlacement": false},
                "devices": {
                    "useVirtioTransitional": false,
                    "disks": [{"name": "a", "tag": "x", "disk": {}}],
                    "interfaces": [{"name": "default", "masquerade": {}, "state": "up"}]
                }
            },
            "volumes": [{"name": "a", "emptyDisk": {"capacity": "1Gi"}}]
        }));
        assert_eq!(refuse_unmodelled(&ok), Ok(()));
    }
}
