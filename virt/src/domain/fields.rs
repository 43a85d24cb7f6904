//! The VMI fields the API types keep but the launcher does not model: each is either the
//! business of another component (scheduling, probes: the pod's, not QEMU's), harmless at
//! its default value, or refused by its path so nothing is silently dropped.

use api::common::Extra;
use api::kubevirt::VirtualMachineInstanceSpec;
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
    "evictionStrategy",
    "architecture",
];

/// Refuses every field of `spec` that neither the domain builder nor another component
/// acts on.
pub fn refuse_unmodelled(spec: &VirtualMachineInstanceSpec) -> Result<(), DomainError> {
    let root = FieldPath::new("spec");
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
        check(&root.child("volumes").index(i), &volume.extra, |_, _| false)?;
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
