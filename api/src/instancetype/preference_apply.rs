//! A preference applied to an instance spec, as KubeVirt's `pkg/instancetype/preference/apply`
//! does: each preferred value fills a field the VM leaves unset (ACPI and `disableHotplug`
//! are set outright, as upstream). A preference never conflicts.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{DevicePreferences, VirtualMachinePreferenceSpec};
use crate::kubevirt::vmi::{
    BiosBootloader, Bootloader, Clock, Cpu, DiskTarget, EfiBootloader, FeatureHyperv, Features,
    Firmware, InterfaceMasquerade, Machine, VirtualMachineInstanceSpec,
};

/// Fills `spec` and `annotations` from the preference.
pub fn apply_preference(
    pref: &VirtualMachinePreferenceSpec,
    spec: &mut VirtualMachineInstanceSpec,
    annotations: &mut BTreeMap<String, String>,
) {
    apply_cpu_features(pref, spec);
    if let Some(devices) = &pref.devices {
        apply_devices(devices, spec);
    }
    apply_features(pref, spec);
    apply_firmware(pref, spec);
    if let Some(machine) = pref
        .machine
        .as_ref()
        .and_then(|m| m.preferred_machine_type.as_ref())
    {
        let current = spec.domain.machine.get_or_insert_with(Machine::default);
        if current.type_.as_ref().is_none_or(|t| t.is_empty()) {
            current.type_ = Some(machine.clone());
        }
    }
    apply_clock(pref, spec);
    if spec.subdomain.as_ref().is_none_or(|s| s.is_empty()) && pref.preferred_subdomain.is_some() {
        spec.subdomain = pref.preferred_subdomain.clone();
    }
    if spec.termination_grace_period_seconds.is_none() {
        spec.termination_grace_period_seconds = pref.preferred_termination_grace_period_seconds;
    }
    for (key, value) in pref.annotations.iter().flatten() {
        annotations
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
}

fn apply_cpu_features(pref: &VirtualMachinePreferenceSpec, spec: &mut VirtualMachineInstanceSpec) {
    let Some(wanted) = pref
        .cpu
        .as_ref()
        .and_then(|c| c.preferred_cpu_features.as_ref())
    else {
        return;
    };
    // Upstream dereferences domain.cpu here without a check (a VM with a preference and
    // no instancetype nor `cpu` would crash virt-controller); it is made instead.
    let cpu = spec.domain.cpu.get_or_insert_with(Cpu::default);
    let features = cpu.features.get_or_insert_with(Vec::new);
    for feature in wanted {
        if !features.iter().any(|f| f.name == feature.name) {
            features.push(feature.clone());
        }
    }
}

fn fill<T: Clone>(field: &mut Option<T>, preferred: &Option<T>) {
    if field.is_none() {
        field.clone_from(preferred);
    }
}

fn fill_text(field: &mut Option<String>, preferred: &Option<String>) {
    if field.as_ref().is_none_or(|v| v.is_empty()) && preferred.is_some() {
        field.clone_from(preferred);
    }
}

fn apply_devices(p: &DevicePreferences, spec: &mut VirtualMachineInstanceSpec) {
    let networks = spec.networks.clone().unwrap_or_default();
    let devices = &mut spec.domain.devices;
    fill(
        &mut devices.autoattach_graphics_device,
        &p.preferred_autoattach_graphics_device,
    );
    fill(
        &mut devices.autoattach_mem_balloon,
        &p.preferred_autoattach_mem_balloon,
    );
    fill(
        &mut devices.autoattach_pod_interface,
        &p.preferred_autoattach_pod_interface,
    );
    fill(
        &mut devices.autoattach_serial_console,
        &p.preferred_autoattach_serial_console,
    );
    fill(
        &mut devices.autoattach_input_device,
        &p.preferred_autoattach_input_device,
    );
    fill(
        &mut devices.use_virtio_transitional,
        &p.preferred_use_virtio_transitional,
    );
    fill(
        &mut devices.block_multi_queue,
        &p.preferred_block_multi_queue,
    );
    fill(
        &mut devices.network_interface_multiqueue,
        &p.preferred_network_interface_multi_queue,
    );
    if p.preferred_disable_hotplug.is_some() {
        devices.disable_hotplug = p.preferred_disable_hotplug;
    }
    if let Some(sound) = devices.sound.as_mut() {
        fill_text(&mut sound.model, &p.preferred_sound_model);
    }
    fill(&mut devices.rng, &p.preferred_rng);
    fill(&mut devices.tpm, &p.preferred_tpm);
    for disk in devices.disks.iter_mut().flatten() {
        if disk.disk.is_none() && disk.cdrom.is_none() && disk.lun.is_none() {
            disk.disk = Some(DiskTarget::default());
        }
        if let Some(target) = disk.disk.as_mut() {
            fill_text(&mut target.bus, &p.preferred_disk_bus);
            let virtio = target.bus.as_deref() == Some("virtio");
            fill(&mut disk.block_size, &p.preferred_disk_block_size);
            fill_text(&mut disk.cache, &p.preferred_disk_cache);
            fill_text(&mut disk.io, &p.preferred_disk_io);
            if virtio {
                fill(
                    &mut disk.dedicated_io_thread,
                    &p.preferred_disk_dedicated_io_thread,
                );
            }
        } else if let Some(cdrom) = disk.cdrom.as_mut() {
            fill_text(&mut cdrom.bus, &p.preferred_cdrom_bus);
        } else if let Some(lun) = disk.lun.as_mut() {
            fill_text(&mut lun.bus, &p.preferred_lun_bus);
        }
    }
    for iface in devices.interfaces.iter_mut().flatten() {
        fill_text(&mut iface.model, &p.preferred_interface_model);
        let unbound = iface.bridge.is_none()
            && iface.masquerade.is_none()
            && iface.sriov.is_none()
            && iface.slirp.is_none()
            && iface.passt.is_none()
            && iface.macvtap.is_none()
            && iface.binding.is_none();
        let on_pod_network = networks
            .iter()
            .any(|n| n.name == iface.name && n.pod.is_some());
        if unbound && on_pod_network && p.preferred_interface_masquerade.is_some() {
            iface.masquerade = Some(InterfaceMasquerade::default());
        }
    }
    for input in devices.inputs.iter_mut().flatten() {
        fill_text(&mut input.bus, &p.preferred_input_bus);
        if input.type_.is_empty()
            && let Some(kind) = &p.preferred_input_type
        {
            input.type_ = kind.clone();
        }
    }
    for panic in devices.panic_devices.iter_mut().flatten() {
        fill(&mut panic.model, &p.preferred_panic_device_model);
    }
}

fn apply_features(pref: &VirtualMachinePreferenceSpec, spec: &mut VirtualMachineInstanceSpec) {
    let Some(p) = &pref.features else {
        return;
    };
    let features = spec.domain.features.get_or_insert_with(Features::default);
    if p.preferred_acpi.is_some() {
        features.acpi = p.preferred_acpi.clone();
    }
    fill(&mut features.apic, &p.preferred_apic);
    fill(&mut features.kvm, &p.preferred_kvm);
    fill(&mut features.pvspinlock, &p.preferred_pvspinlock);
    fill(&mut features.smm, &p.preferred_smm);
    if let Some(preferred) = &p.preferred_hyperv {
        let current = features.hyperv.get_or_insert_with(FeatureHyperv::default);
        *current = fill_missing_keys(current, preferred);
    }
}

/// `current` with every top-level field it leaves unset taken from `preferred` (the
/// Hyper-V enlightenments are filled one by one).
fn fill_missing_keys(current: &FeatureHyperv, preferred: &FeatureHyperv) -> FeatureHyperv {
    let (Ok(Value::Object(mut mine)), Ok(Value::Object(theirs))) = (
        serde_json::to_value(current),
        serde_json::to_value(preferred),
    ) else {
        return current.clone();
    };
    for (key, value) in theirs {
        mine.entry(key).or_insert(value);
    }
    serde_json::from_value(Value::Object(mine)).unwrap_or_else(|_| current.clone())
}

fn apply_firmware(pref: &VirtualMachinePreferenceSpec, spec: &mut VirtualMachineInstanceSpec) {
    let Some(p) = &pref.firmware else {
        return;
    };
    let firmware = spec.domain.firmware.get_or_insert_with(Firmware::default);
    let boot = firmware.bootloader.get_or_insert_with(Bootloader::default);
    if p.preferred_use_bios == Some(true) && boot.bios.is_none() && boot.efi.is_none() {
        boot.bios = Some(BiosBootloader::default());
    }
    if let Some(bios) = boot.bios.as_mut() {
        fill(&mut bios.use_serial, &p.preferred_use_bios_serial);
    }
    if boot.efi.is_none() && boot.bios.is_none() {
        if let Some(efi) = &p.preferred_efi {
            boot.efi = Some(efi.clone());
            return;
        }
        if p.preferred_use_efi == Some(true) {
            boot.efi = Some(EfiBootloader::default());
        }
    }
    if let Some(efi) = boot.efi.as_mut() {
        fill(&mut efi.secure_boot, &p.preferred_use_secure_boot);
    }
}

fn apply_clock(pref: &VirtualMachinePreferenceSpec, spec: &mut VirtualMachineInstanceSpec) {
    let Some(p) = &pref.clock else {
        return;
    };
    let clock = spec.domain.clock.get_or_insert_with(Clock::default);
    if clock.utc.is_none()
        && clock.timezone.is_none()
        && let Some(offset) = &p.preferred_clock_offset
    {
        clock.utc = offset.utc.clone();
        clock.timezone = offset.timezone.clone();
    }
    fill(&mut clock.timer, &p.preferred_timer);
}
