//! The VMI fields the launcher and the other components act on, as one table of field
//! paths; every other field present in a spec is refused by its path, so nothing is
//! silently dropped. The spec is read as its JSON, so the table does not depend on how the
//! API types are shaped: a field the types learn is refused here until the table lists it.

use std::collections::BTreeSet;

use api::kubevirt::VirtualMachineInstanceSpec;
use api::validation::FieldPath;
use serde_json::{Map, Value, json};

use super::DomainError;

/// How a field in [`MODELLED`] is accepted.
#[derive(Clone, Copy)]
enum Accept {
    /// The field and everything under it: the business of the pod or the scheduler.
    Subtree,
    /// The field; what is under it is checked against the table on its own.
    Field,
    /// The field and everything under it, when its value passes the test.
    If(fn(&Value) -> bool),
    /// The field, when its value passes the test; what is under it is checked on its own.
    FieldIf(fn(&Value) -> bool),
    /// The field, when it equals its sibling of this name.
    SameAs(&'static str),
}

use Accept::{Field, FieldIf, If, SameAs, Subtree};

/// Every field of a VMI spec that something here acts on, by its path from `spec` with list
/// indices written `[]`. A field that is neither listed nor the parent of a listed one is
/// refused.
const MODELLED: &[(&str, Accept)] = &[
    // The launcher pod and its scheduling, not the domain.
    ("affinity", Subtree),
    ("tolerations", Subtree),
    ("topologySpreadConstraints", Subtree),
    ("schedulerName", Subtree),
    ("priorityClassName", Subtree),
    ("dnsPolicy", Subtree),
    ("dnsConfig", Subtree),
    ("subdomain", Subtree),
    ("readinessProbe", Subtree),
    ("livenessProbe", Subtree),
    ("nodeSelector", Subtree),
    ("terminationGracePeriodSeconds", Field),
    ("hostname", Field),
    // SSH keys for the cloud-init metadata or through the guest agent; passwords through the
    // guest agent (`launcher::agent_credentials`).
    (
        "accessCredentials[].sshPublicKey.source.secret.secretName",
        Field,
    ),
    (
        "accessCredentials[].sshPublicKey.propagationMethod.qemuGuestAgent",
        Subtree,
    ),
    ("accessCredentials[].userPassword", Subtree),
    (
        "accessCredentials[].sshPublicKey.propagationMethod.noCloud",
        Subtree,
    ),
    (
        "accessCredentials[].sshPublicKey.propagationMethod.configDrive",
        Subtree,
    ),
    ("startStrategy", If(|v| v == "Paused")),
    ("architecture", If(|v| v == "amd64")),
    // What a node drain does to the VM: the drain's business, not the domain's. KubeVirt runs a
    // VMI that asks to be live-migrated but cannot be (LiveMigratable=False), as here.
    (
        "evictionStrategy",
        If(|v| {
            v.as_str().is_some_and(|s| {
                matches!(
                    s,
                    "None" | "LiveMigrate" | "LiveMigrateIfPossible" | "External"
                )
            })
        }),
    ),
    // The machine.
    ("domain.resources.requests", Subtree),
    ("domain.resources.limits", Subtree),
    ("domain.resources.overcommitGuestOverhead", Field),
    ("domain.cpu.cores", Field),
    ("domain.cpu.sockets", Field),
    ("domain.cpu.threads", Field),
    ("domain.cpu.model", Field),
    ("domain.cpu.maxSockets", Field),
    ("domain.cpu.dedicatedCpuPlacement", If(is_off)),
    ("domain.cpu.isolateEmulatorThread", If(is_off)),
    ("domain.memory.guest", Field),
    ("domain.machine.type", Field),
    // QEMU's `-rtc base=utc`: a UTC clock without an offset or timers.
    ("domain.clock", FieldIf(|v| v.get("utc").is_some())),
    ("domain.clock.utc", Field),
    ("domain.clock.utc.offsetSeconds", If(|v| v == 0)),
    ("domain.firmware.uuid", Field),
    ("domain.firmware.serial", Field),
    ("domain.firmware.bootloader.bios.useSerial", Field),
    ("domain.firmware.bootloader.efi.secureBoot", Field),
    ("domain.firmware.bootloader.efi.persistent", Field),
    ("domain.features.acpi.enabled", Field),
    ("domain.features.apic.enabled", Field),
    ("domain.features.smm.enabled", Field),
    // Devices; switches whose default (off) is what the domain does anyway.
    ("domain.devices.autoattachPodInterface", Field),
    ("domain.devices.autoattachGraphicsDevice", Field),
    ("domain.devices.autoattachSerialConsole", Field),
    ("domain.devices.autoattachMemBalloon", Field),
    ("domain.devices.useVirtioTransitional", If(is_off)),
    ("domain.devices.disableHotplug", If(is_off)),
    ("domain.devices.networkInterfaceMultiqueue", If(is_off)),
    ("domain.devices.blockMultiQueue", If(is_off)),
    ("domain.devices.autoattachVSOCK", If(is_off)),
    ("domain.devices.autoattachInputDevice", If(is_off)),
    ("domain.devices.rng", Field),
    ("domain.devices.inputs[].name", Field),
    ("domain.devices.inputs[].type", Field),
    ("domain.devices.inputs[].bus", Field),
    ("domain.devices.watchdog.name", Field),
    ("domain.devices.watchdog.i6300esb.action", Field),
    ("domain.devices.disks[].name", Field),
    ("domain.devices.disks[].disk.bus", Field),
    ("domain.devices.disks[].disk.readonly", Field),
    ("domain.devices.disks[].cdrom.bus", Field),
    ("domain.devices.disks[].cdrom.readonly", Field),
    ("domain.devices.disks[].cdrom.tray", If(|v| v == "closed")),
    ("domain.devices.disks[].lun.bus", Field),
    ("domain.devices.disks[].lun.readonly", Field),
    ("domain.devices.disks[].bootOrder", Field),
    ("domain.devices.disks[].serial", Field),
    ("domain.devices.disks[].cache", Field),
    // A tag only names the disk for hotplug and metadata.
    ("domain.devices.disks[].tag", Field),
    ("domain.devices.disks[].io", If(Value::is_string)),
    ("domain.devices.disks[].errorPolicy", If(Value::is_string)),
    ("domain.devices.disks[].dedicatedIOThread", If(is_off)),
    ("domain.devices.disks[].shareable", If(is_off)),
    ("domain.devices.interfaces[].name", Field),
    ("domain.devices.interfaces[].model", Field),
    ("domain.devices.interfaces[].macAddress", Field),
    ("domain.devices.interfaces[].bridge", Field),
    ("domain.devices.interfaces[].masquerade", Field),
    // A port's name is only a label.
    ("domain.devices.interfaces[].ports[].name", Field),
    ("domain.devices.interfaces[].ports[].protocol", Field),
    ("domain.devices.interfaces[].ports[].port", Field),
    ("domain.devices.interfaces[].bootOrder", Field),
    ("domain.devices.interfaces[].tag", Field),
    ("domain.devices.interfaces[].state", If(|v| v == "up")),
    // Networks.
    ("networks[].name", Field),
    ("networks[].pod.vmNetworkCIDR", Field),
    ("networks[].pod.vmIPv6NetworkCIDR", Field),
    ("networks[].multus.networkName", Field),
    ("networks[].multus.default", If(is_off)),
    // Volumes.
    ("volumes[].name", Field),
    ("volumes[].containerDisk.image", Field),
    ("volumes[].containerDisk.imagePullPolicy", Field),
    ("volumes[].containerDisk.path", If(is_disk_directory)),
    ("volumes[].cloudInitNoCloud.userData", Field),
    ("volumes[].cloudInitNoCloud.userDataBase64", Field),
    ("volumes[].cloudInitNoCloud.secretRef.name", Field),
    ("volumes[].cloudInitNoCloud.networkData", Field),
    ("volumes[].cloudInitNoCloud.networkDataBase64", Field),
    // The launcher pod mounts only `secretRef`'s Secret.
    (
        "volumes[].cloudInitNoCloud.networkDataSecretRef",
        SameAs("secretRef"),
    ),
    ("volumes[].cloudInitConfigDrive.userData", Field),
    ("volumes[].cloudInitConfigDrive.userDataBase64", Field),
    ("volumes[].cloudInitConfigDrive.secretRef.name", Field),
    ("volumes[].cloudInitConfigDrive.networkData", Field),
    ("volumes[].cloudInitConfigDrive.networkDataBase64", Field),
    (
        "volumes[].cloudInitConfigDrive.networkDataSecretRef",
        SameAs("secretRef"),
    ),
    ("volumes[].dataVolume.name", Field),
    ("volumes[].dataVolume.hotpluggable", If(is_off)),
    ("volumes[].persistentVolumeClaim.claimName", Field),
    ("volumes[].persistentVolumeClaim.readOnly", Field),
    ("volumes[].persistentVolumeClaim.hotpluggable", If(is_off)),
    ("volumes[].emptyDisk.capacity", Field),
    ("volumes[].ephemeral.persistentVolumeClaim.claimName", Field),
    // The claim is read-only under the overlay either way.
    (
        "volumes[].ephemeral.persistentVolumeClaim.readOnly",
        If(Value::is_boolean),
    ),
    ("volumes[].hostDisk.path", Field),
    ("volumes[].hostDisk.type", Field),
    ("volumes[].hostDisk.capacity", Field),
    ("volumes[].hostDisk.shared", If(is_off)),
    ("volumes[].configMap.name", Field),
    ("volumes[].configMap.optional", Field),
    ("volumes[].configMap.volumeLabel", Field),
    ("volumes[].secret.secretName", Field),
    ("volumes[].secret.optional", Field),
    ("volumes[].secret.volumeLabel", Field),
    // The launcher pod runs as its namespace's default account.
    (
        "volumes[].serviceAccount.serviceAccountName",
        If(|v| v == "default"),
    ),
    ("volumes[].downwardAPI.volumeLabel", Field),
];

/// Refuses every field of `spec` that neither the domain builder nor another component
/// acts on.
pub fn refuse_unmodelled(spec: &VirtualMachineInstanceSpec) -> Result<(), DomainError> {
    refuse_unmodelled_noting(spec, &mut BTreeSet::new())
}

/// [`refuse_unmodelled`], noting in `seen` each pattern of [`MODELLED`] a field matched.
fn refuse_unmodelled_noting(
    spec: &VirtualMachineInstanceSpec,
    seen: &mut BTreeSet<&'static str>,
) -> Result<(), DomainError> {
    let root = FieldPath::new("spec");
    let value = serde_json::to_value(spec)
        .map_err(|e| DomainError::unsupported(&root, format!("cannot be read: {e}")))?;
    check_names(&value, &root)?;
    for (i, volume) in list(&value, &["volumes"]).iter().enumerate() {
        refuse_volume_options(volume, &root.child("volumes").index(i))?;
    }
    for (i, network) in list(&value, &["networks"]).iter().enumerate() {
        if network.pointer("/multus/default") == Some(&Value::Bool(true)) {
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
    let baseline = defaults();
    let mut walk = Walk { seen };
    walk.fields(&value, "", &root, Some(&baseline))
}

/// What the types write for a spec that gives nothing, with one element in each list the
/// launcher reads (less the names it had to give): a value equal to it was not given.
fn defaults() -> Value {
    let minimal = json!({
        "domain": {"devices": {
            "disks": [{"name": "a"}],
            "interfaces": [{"name": "a"}],
            "inputs": [{"name": "a", "type": "tablet"}]
        }},
        "volumes": [{"name": "a"}],
        "networks": [{"name": "a"}]
    });
    [minimal, json!({"domain": {"devices": {}}})]
        .into_iter()
        .find_map(|given| {
            let spec: VirtualMachineInstanceSpec = serde_json::from_value(given.clone()).ok()?;
            let mut written = serde_json::to_value(spec).ok()?;
            forget_given(&mut written, &given);
            Some(written)
        })
        .unwrap_or(Value::Null)
}

/// Removes from `written` the values `given` gave, leaving what the types added.
fn forget_given(written: &mut Value, given: &Value) {
    match (written, given) {
        (Value::Object(written), Value::Object(given)) => {
            for (name, value) in given {
                match value {
                    Value::Object(_) | Value::Array(_) => {
                        if let Some(w) = written.get_mut(name) {
                            forget_given(w, value);
                        }
                    }
                    _ => {
                        written.remove(name);
                    }
                }
            }
        }
        (Value::Array(written), Value::Array(given)) => {
            for (w, g) in written.iter_mut().zip(given) {
                forget_given(w, g);
            }
        }
        _ => {}
    }
}

/// A walk of a spec's JSON against [`MODELLED`].
struct Walk<'a> {
    seen: &'a mut BTreeSet<&'static str>,
}

impl Walk<'_> {
    /// Checks each field of `value` at `pattern` (`path` with indices as `[]`); `baseline`
    /// is what the types write there when nothing is given.
    fn fields(
        &mut self,
        value: &Value,
        pattern: &str,
        path: &FieldPath,
        baseline: Option<&Value>,
    ) -> Result<(), DomainError> {
        match value {
            Value::Object(map) => {
                for (name, field) in map {
                    let at = match pattern {
                        "" => name.clone(),
                        _ => format!("{pattern}.{name}"),
                    };
                    let base = baseline.and_then(|b| b.get(name));
                    self.field(field, map, &at, &path.child(name), base)?;
                }
                Ok(())
            }
            Value::Array(items) => {
                let at = format!("{pattern}[]");
                let base = baseline.and_then(|b| b.get(0));
                for (i, item) in items.iter().enumerate() {
                    self.fields(item, &at, &path.index(i), base)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Checks the field `value` of `parent`, then what is under it.
    fn field(
        &mut self,
        value: &Value,
        parent: &Map<String, Value>,
        pattern: &str,
        path: &FieldPath,
        baseline: Option<&Value>,
    ) -> Result<(), DomainError> {
        if value.is_null() || baseline == Some(value) {
            return Ok(());
        }
        let refused = || DomainError::unsupported(path, "not supported by this launcher");
        let Some((listed, accept)) = MODELLED.iter().find(|(p, _)| *p == pattern) else {
            if is_parent_of_listed(pattern) {
                return self.fields(value, pattern, path, baseline);
            }
            return Err(refused());
        };
        let (accepted, descend) = match *accept {
            Subtree => (true, false),
            Field => (true, true),
            If(test) => (test(value), false),
            FieldIf(test) => (test(value), true),
            SameAs(sibling) => (parent.get(sibling) == Some(value), false),
        };
        if !accepted {
            return Err(refused());
        }
        self.seen.insert(listed);
        if descend {
            self.fields(value, pattern, path, baseline)?;
        }
        Ok(())
    }
}

/// Whether some pattern of [`MODELLED`] lies under `pattern`.
fn is_parent_of_listed(pattern: &str) -> bool {
    MODELLED.iter().any(|(p, _)| {
        p.strip_prefix(pattern)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    })
}

/// The list at `keys` in `value`, empty when there is none.
fn list<'v>(value: &'v Value, keys: &[&str]) -> &'v [Value] {
    keys.iter()
        .try_fold(value, |v, k| v.get(k))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Names become file names and QEMU ids: letters, digits, `-`, `_` and `.`, beginning with
/// a letter or digit, at most 63 characters.
fn check_names(spec: &Value, root: &FieldPath) -> Result<(), DomainError> {
    let devices = root.child("domain").child("devices");
    let mut named: Vec<(FieldPath, &Value)> = Vec::new();
    let mut each = |keys: &[&str], path: FieldPath| {
        for (i, item) in list(spec, keys).iter().enumerate() {
            named.push((path.index(i).child("name"), item));
        }
    };
    each(&["volumes"], root.child("volumes"));
    each(&["domain", "devices", "disks"], devices.child("disks"));
    each(
        &["domain", "devices", "interfaces"],
        devices.child("interfaces"),
    );
    each(&["domain", "devices", "inputs"], devices.child("inputs"));
    if let Some(watchdog) = spec.pointer("/domain/devices/watchdog") {
        named.push((devices.child("watchdog").child("name"), watchdog));
    }
    for (path, item) in named {
        let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
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
fn refuse_volume_options(volume: &Value, path: &FieldPath) -> Result<(), DomainError> {
    let set = |source: &str, option: &str| {
        volume.get(source).and_then(|s| s.get(option)) == Some(&Value::Bool(true))
    };
    for source in ["dataVolume", "persistentVolumeClaim"] {
        if set(source, "hotpluggable") {
            return Err(DomainError::unsupported(
                &path.child(source).child("hotpluggable"),
                "hotplug is not supported",
            ));
        }
    }
    if set("hostDisk", "shared") {
        return Err(DomainError::unsupported(
            &path.child("hostDisk").child("shared"),
            "shared host disks are not supported",
        ));
    }
    if let Some(cd) = volume.get("containerDisk") {
        let cpath = path.child("containerDisk");
        if cd.get("path").is_some_and(|p| !is_disk_directory(p)) {
            return Err(DomainError::unsupported(
                &cpath.child("path"),
                "only the image's /disk directory is read (CDI's containerDisk layout)",
            ));
        }
        if cd.get("imagePullSecret").is_some_and(|s| !s.is_null()) {
            return Err(DomainError::unsupported(
                &cpath.child("imagePullSecret"),
                "pull secrets are not supported yet; use an anonymous or insecure registry",
            ));
        }
    }
    Ok(())
}

/// A containerDisk `path` that names the image's `/disk` directory (or nothing).
fn is_disk_directory(path: &Value) -> bool {
    match path {
        Value::Null => true,
        Value::String(p) => p.is_empty() || p.trim_end_matches('/') == "/disk",
        _ => false,
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

    #[test]
    fn fields_the_types_carry_but_nothing_acts_on_are_refused_by_path() {
        for (extra, path) in [
            (
                json!({"domain": {"devices": {"tpm": {"persistent": true}}}}),
                "spec.domain.devices.tpm",
            ),
            (
                json!({"domain": {"features": {"hyperv": {"relaxed": {}}}, "devices": {}}}),
                "spec.domain.features.hyperv",
            ),
            (
                json!({"domain": {"clock": {"utc": {}, "timer": {"hpet": {"present": false}}},
                                  "devices": {}}}),
                "spec.domain.clock.timer",
            ),
            (
                json!({"domain": {"clock": {"utc": {"offsetSeconds": 60}}, "devices": {}}}),
                "spec.domain.clock.utc.offsetSeconds",
            ),
            (
                json!({"domain": {"devices": {}}, "evictionStrategy": "Sideways"}),
                "spec.evictionStrategy",
            ),
            (
                json!({"domain": {"devices": {"interfaces": [{"name": "a", "sriov": {}}]}}}),
                "spec.domain.devices.interfaces[0].sriov",
            ),
            (
                json!({"domain": {"devices": {"disks": [
                    {"name": "a", "cdrom": {"tray": "open"}}
                ]}}}),
                "spec.domain.devices.disks[0].cdrom.tray",
            ),
            (
                json!({"domain": {"devices": {}}, "volumes": [
                    {"name": "a", "serviceAccount": {"serviceAccountName": "sa"}}
                ]}),
                "spec.volumes[0].serviceAccount.serviceAccountName",
            ),
            (
                json!({"domain": {"devices": {}}, "volumes": [
                    {"name": "a", "downwardAPI": {"fields": [{"path": "labels"}]}}
                ]}),
                "spec.volumes[0].downwardAPI.fields",
            ),
            (
                json!({"domain": {"devices": {}}, "volumes": [
                    {"name": "a", "cloudInitNoCloud": {
                        "secretRef": {"name": "user"},
                        "networkDataSecretRef": {"name": "network"}
                    }}
                ]}),
                "spec.volumes[0].cloudInitNoCloud.networkDataSecretRef",
            ),
        ] {
            assert_eq!(refused(extra), path);
        }
    }

    #[test]
    fn the_defaults_hold_nothing_a_spec_gave() {
        let defaults = defaults();
        assert_eq!(defaults.pointer("/domain/devices/inputs/0/type"), None);
        assert_eq!(defaults.pointer("/volumes/0/name"), None);
        assert!(defaults.pointer("/domain/devices").is_some());
    }

    #[test]
    fn a_parent_is_a_path_followed_by_a_field_or_an_index() {
        assert!(is_parent_of_listed("domain.devices.disks"));
        assert!(is_parent_of_listed("domain.devices.disks[]"));
        assert!(is_parent_of_listed("domain.devices.disks[].disk"));
        assert!(!is_parent_of_listed("domain.devices.disk"));
        assert!(!is_parent_of_listed("domain.devices.tpm"));
    }

    /// One spec giving every field of [`MODELLED`] a value it accepts.
    fn every_modelled_field() -> Value {
        let probe = json!({"tcpSocket": {"port": 22}});
        let mut spec = json!({
            "affinity": {"nodeAffinity": {}},
            "tolerations": [{"key": "a"}],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}
            ],
            "schedulerName": "s", "priorityClassName": "p", "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["192.0.2.1"]}, "subdomain": "sub",
            "readinessProbe": probe, "livenessProbe": probe,
            "nodeSelector": {"a": "b"}, "terminationGracePeriodSeconds": 5, "hostname": "h",
            "startStrategy": "Paused", "architecture": "amd64", "evictionStrategy": "LiveMigrate",
            "accessCredentials": [
                {"sshPublicKey": {"source": {"secret": {"secretName": "k"}},
                                  "propagationMethod": {"noCloud": {}}}},
                {"sshPublicKey": {"source": {"secret": {"secretName": "k"}},
                                  "propagationMethod": {"configDrive": {}}}},
                {"sshPublicKey": {"source": {"secret": {"secretName": "k"}},
                                  "propagationMethod": {"qemuGuestAgent": {"users": ["u"]}}}},
                {"userPassword": {"source": {"secret": {"secretName": "p"}},
                                  "propagationMethod": {"qemuGuestAgent": {}}}}
            ],
            "networks": [
                {"name": "i1", "pod": {"vmNetworkCIDR": "10.0.2.0/24",
                                       "vmIPv6NetworkCIDR": "fd10:0:2::/120"}},
                {"name": "i2", "multus": {"networkName": "n", "default": false}}
            ]
        });
        spec["domain"] = json!({
            "resources": {"requests": {"memory": "64Mi"}, "limits": {"cpu": "1"},
                          "overcommitGuestOverhead": true},
            "cpu": {"cores": 1, "sockets": 1, "threads": 1, "model": "host-model",
                    "maxSockets": 2, "dedicatedCpuPlacement": false,
                    "isolateEmulatorThread": false},
            "memory": {"guest": "64Mi"},
            "machine": {"type": "q35"},
            "clock": {"utc": {"offsetSeconds": 0}},
            "firmware": {"uuid": "u", "serial": "s", "bootloader": {
                "bios": {"useSerial": true},
                "efi": {"secureBoot": false, "persistent": true}
            }},
            "features": {"acpi": {"enabled": true}, "apic": {"enabled": true},
                         "smm": {"enabled": true}}
        });
        spec["domain"]["devices"] = every_modelled_device();
        spec["volumes"] = every_modelled_volume();
        spec
    }

    fn every_modelled_device() -> Value {
        json!({
            "autoattachPodInterface": false, "autoattachGraphicsDevice": false,
            "autoattachSerialConsole": false, "autoattachMemBalloon": false,
            "useVirtioTransitional": false, "disableHotplug": false,
            "networkInterfaceMultiqueue": false, "blockMultiQueue": false,
            "autoattachVSOCK": false, "autoattachInputDevice": false,
            "rng": {},
            "inputs": [{"name": "tablet", "type": "tablet", "bus": "usb"}],
            "watchdog": {"name": "w", "i6300esb": {"action": "poweroff"}},
            "disks": [
                {"name": "d1", "disk": {"bus": "virtio", "readonly": true},
                 "bootOrder": 1, "serial": "s", "cache": "none", "tag": "t",
                 "io": "native", "errorPolicy": "stop",
                 "dedicatedIOThread": false, "shareable": false},
                {"name": "d2", "cdrom": {"bus": "sata", "readonly": true, "tray": "closed"}},
                {"name": "d3", "lun": {"bus": "scsi", "readonly": true}}
            ],
            "interfaces": [
                {"name": "i1", "model": "virtio", "macAddress": "02:00:00:00:00:01",
                 "masquerade": {}, "bootOrder": 2, "tag": "t", "state": "up",
                 "ports": [{"name": "http", "protocol": "TCP", "port": 80}]},
                {"name": "i2", "bridge": {}}
            ]
        })
    }

    fn every_modelled_volume() -> Value {
        let cloud_init = json!({
            "userData": "#cloud-config", "userDataBase64": "I2Nsb3Vk",
            "secretRef": {"name": "s"}, "networkData": "version: 2",
            "networkDataBase64": "dmVyc2lvbjogMg==", "networkDataSecretRef": {"name": "s"}
        });
        json!([
            {"name": "v1", "containerDisk": {"image": "i", "imagePullPolicy": "Always",
                                             "path": "/disk"}},
            {"name": "v2", "cloudInitNoCloud": cloud_init},
            {"name": "v3", "cloudInitConfigDrive": cloud_init},
            {"name": "v4", "dataVolume": {"name": "dv", "hotpluggable": false}},
            {"name": "v5", "persistentVolumeClaim": {"claimName": "c", "readOnly": true,
                                                     "hotpluggable": false}},
            {"name": "v6", "emptyDisk": {"capacity": "1Gi"}},
            {"name": "v7", "ephemeral": {"persistentVolumeClaim": {"claimName": "c",
                                                                   "readOnly": true}}},
            {"name": "v8", "hostDisk": {"path": "/p", "type": "DiskOrCreate",
                                        "capacity": "1Gi", "shared": false}},
            {"name": "v9", "configMap": {"name": "m", "optional": true, "volumeLabel": "l"}},
            {"name": "v10", "secret": {"secretName": "s", "optional": true,
                                       "volumeLabel": "l"}},
            {"name": "v11", "serviceAccount": {"serviceAccountName": "default"}},
            {"name": "v12", "downwardAPI": {"volumeLabel": "l"}}
        ])
    }

    #[test]
    fn every_modelled_field_is_accepted_and_kept_by_the_types() {
        let mut seen = BTreeSet::new();
        assert_eq!(
            refuse_unmodelled_noting(&spec(every_modelled_field()), &mut seen),
            Ok(())
        );
        let unreached: Vec<&str> = MODELLED
            .iter()
            .map(|(pattern, _)| *pattern)
            .filter(|pattern| !seen.contains(pattern))
            .collect();
        assert_eq!(unreached, Vec::<&str>::new(), "patterns no field matched");
        let patterns: BTreeSet<&str> = MODELLED.iter().map(|(p, _)| *p).collect();
        assert_eq!(patterns.len(), MODELLED.len(), "a pattern listed twice");
    }
}
