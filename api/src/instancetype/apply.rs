//! An instancetype applied to an instance spec, as KubeVirt's `pkg/instancetype/apply` does:
//! every field the instancetype sets is copied in, and a field the VM sets too is a
//! conflict (the VM's value is never overwritten). Conflicts are collected over all fields;
//! with any, nothing of the preference is applied.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::preference_apply::apply_preference;
use super::{VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec};
use crate::kubevirt::vmi::{Cpu, Memory, ResourceRequirements, VirtualMachineInstanceSpec};
use crate::quantity::quantity_bytes;

/// The fields where a VM and its instancetype both set a value, as paths from the object's
/// root (`spec.template.spec.domain.cpu.sockets` on a VM, `spec.domain.cpu.sockets` on an
/// instance).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conflicts(pub Vec<String>);

impl fmt::Display for Conflicts {
    /// KubeVirt's admission message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "VM field(s) {} conflicts with selected instance type",
            self.0.join(", ")
        )
    }
}

impl std::error::Error for Conflicts {}

impl Conflicts {
    /// KubeVirt's message when the VM controller cannot make the instance.
    pub fn instance_message(&self) -> String {
        format!(
            "VMI conflicts with instancetype spec in fields: [{}]",
            self.0.join(", ")
        )
    }
}

/// Applies `instancetype`, then `preference`, to `spec` (an instance's spec, or a VM
/// template's) and `annotations` (that object's). `base` is the path of `spec` in
/// conflicts (`spec` for an instance, `spec.template.spec` for a VM).
pub fn apply(
    base: &str,
    instancetype: Option<&VirtualMachineInstancetypeSpec>,
    preference: Option<&VirtualMachinePreferenceSpec>,
    spec: &mut VirtualMachineInstanceSpec,
    annotations: &mut BTreeMap<String, String>,
) -> Result<(), Conflicts> {
    if let Some(it) = instancetype {
        let mut found = Vec::new();
        let at = |field: &str| format!("{base}.{field}");
        apply_scheduling(it, spec, &mut found, &at);
        apply_cpu(it, preference, spec, &mut found, &at);
        apply_memory(it, spec, &mut found, &at);
        apply_domain_extras(it, spec, &mut found, &at);
        apply_annotations(it.annotations.as_ref(), annotations, &mut found);
        if !found.is_empty() {
            return Err(Conflicts(found));
        }
    }
    if let Some(pref) = preference {
        apply_preference(pref, spec, annotations);
    }
    Ok(())
}

fn apply_scheduling(
    it: &VirtualMachineInstancetypeSpec,
    spec: &mut VirtualMachineInstanceSpec,
    found: &mut Vec<String>,
    at: &dyn Fn(&str) -> String,
) {
    if let Some(selector) = &it.node_selector {
        if spec.node_selector.is_some() {
            found.push(at("nodeSelector"));
        } else {
            spec.node_selector = Some(selector.clone());
        }
    }
    if let Some(scheduler) = it.scheduler_name.as_ref().filter(|s| !s.is_empty()) {
        if spec.scheduler_name.as_ref().is_some_and(|s| !s.is_empty()) {
            found.push(at("schedulerName"));
        } else {
            spec.scheduler_name = Some(scheduler.clone());
        }
    }
}

fn has_resource(resources: Option<&ResourceRequirements>, limits: bool, name: &str) -> bool {
    resources
        .and_then(|r| {
            if limits {
                r.limits.as_ref()
            } else {
                r.requests.as_ref()
            }
        })
        .is_some_and(|m| m.contains_key(name))
}

fn apply_cpu(
    it: &VirtualMachineInstancetypeSpec,
    preference: Option<&VirtualMachinePreferenceSpec>,
    spec: &mut VirtualMachineInstanceSpec,
    found: &mut Vec<String>,
    at: &dyn Fn(&str) -> String,
) {
    let before = found.len();
    let resources = spec.domain.resources.as_ref();
    if has_resource(resources, false, "cpu") {
        found.push(at("domain.resources.requests.cpu"));
    }
    if has_resource(resources, true, "cpu") {
        found.push(at("domain.resources.limits.cpu"));
    }
    let want = &it.cpu;
    let cpu = spec.domain.cpu.get_or_insert_with(Cpu::default);
    for (name, value) in [
        ("sockets", cpu.sockets),
        ("cores", cpu.cores),
        ("threads", cpu.threads),
    ] {
        if value.is_some_and(|v| v != 0) {
            found.push(at(&format!("domain.cpu.{name}")));
        }
    }
    let clash = |mine: bool, theirs: bool, name: &str, found: &mut Vec<String>| {
        if mine && theirs {
            found.push(at(&format!("domain.cpu.{name}")));
        }
    };
    clash(
        cpu.model.as_ref().is_some_and(|m| !m.is_empty()),
        want.model.as_ref().is_some_and(|m| !m.is_empty()),
        "model",
        found,
    );
    clash(
        cpu.dedicated_cpu_placement == Some(true),
        want.dedicated_cpu_placement.is_some(),
        "dedicatedCPUPlacement",
        found,
    );
    clash(
        cpu.isolate_emulator_thread == Some(true),
        want.isolate_emulator_thread.is_some(),
        "isolateEmulatorThread",
        found,
    );
    clash(cpu.numa.is_some(), want.numa.is_some(), "numa", found);
    clash(
        cpu.realtime.is_some(),
        want.realtime.is_some(),
        "realtime",
        found,
    );
    if found.len() > before {
        return;
    }
    if cpu.model.as_ref().is_none_or(|m| m.is_empty()) && want.model.is_some() {
        cpu.model = want.model.clone();
    }
    if want.dedicated_cpu_placement.is_some() {
        cpu.dedicated_cpu_placement = want.dedicated_cpu_placement;
    }
    if want.isolate_emulator_thread.is_some() {
        cpu.isolate_emulator_thread = want.isolate_emulator_thread;
    }
    if cpu.numa.is_none() {
        cpu.numa = want.numa.clone();
    }
    if cpu.realtime.is_none() {
        cpu.realtime = want.realtime.clone();
    }
    if want.max_sockets.is_some() {
        cpu.max_sockets = want.max_sockets;
    }
    let topology = super::topology::Topology::of(want.guest, preference);
    cpu.sockets = Some(topology.sockets);
    cpu.cores = Some(topology.cores);
    cpu.threads = Some(topology.threads);
}

fn apply_memory(
    it: &VirtualMachineInstancetypeSpec,
    spec: &mut VirtualMachineInstanceSpec,
    found: &mut Vec<String>,
    at: &dyn Fn(&str) -> String,
) {
    let resources = spec.domain.resources.as_ref();
    // Only the first of these is reported, as upstream.
    if spec.domain.memory.is_some() {
        found.push(at("domain.memory"));
        return;
    }
    if has_resource(resources, false, "memory") {
        found.push(at("domain.resources.requests.memory"));
        return;
    }
    if has_resource(resources, true, "memory") {
        found.push(at("domain.resources.limits.memory"));
        return;
    }
    let want = &it.memory;
    spec.domain.memory = Some(Memory {
        guest: Some(want.guest.clone()),
        hugepages: want.hugepages.clone(),
        max_guest: want.max_guest.clone(),
    });
    let percent = want.overcommit_percent.unwrap_or(0);
    if percent > 0
        && let Some(bytes) = quantity_bytes(&want.guest)
    {
        // Upstream computes this in float32; the same arithmetic gives the same request.
        let requested = (bytes as f32 * (1.0 - percent as f32 / 100.0)) as u64;
        spec.domain
            .resources
            .get_or_insert_with(ResourceRequirements::default)
            .requests
            .get_or_insert_with(BTreeMap::new)
            .insert("memory".into(), Quantity(binary_quantity(requested)));
    }
}

/// `bytes` as Kubernetes prints a binary quantity: the largest suffix that divides it.
fn binary_quantity(bytes: u64) -> String {
    for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if bytes != 0 && bytes % (1u64 << shift) == 0 {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

fn apply_domain_extras(
    it: &VirtualMachineInstancetypeSpec,
    spec: &mut VirtualMachineInstanceSpec,
    found: &mut Vec<String>,
    at: &dyn Fn(&str) -> String,
) {
    let domain = &mut spec.domain;
    if let Some(policy) = &it.io_threads_policy {
        if domain.io_threads_policy.is_some() {
            found.push(at("domain.ioThreadsPolicy"));
        } else {
            domain.io_threads_policy = Some(policy.clone());
        }
    }
    if let Some(security) = &it.launch_security {
        if domain.launch_security.is_some() {
            found.push(at("domain.launchSecurity"));
        } else {
            domain.launch_security = Some(security.clone());
        }
    }
    if let Some(gpus) = it.gpus.as_ref().filter(|g| !g.is_empty()) {
        if domain.devices.gpus.as_ref().is_some_and(|g| !g.is_empty()) {
            found.push(at("domain.devices.gpus"));
        } else {
            domain.devices.gpus = Some(gpus.clone());
        }
    }
    if let Some(devices) = it.host_devices.as_ref().filter(|d| !d.is_empty()) {
        if domain
            .devices
            .host_devices
            .as_ref()
            .is_some_and(|d| !d.is_empty())
        {
            found.push(at("domain.devices.hostDevices"));
        } else {
            domain.devices.host_devices = Some(devices.clone());
        }
    }
}

/// The instancetype's annotations: a key the object has with another value is a conflict
/// (its path is `annotations.KEY`, not under the spec, as upstream writes it).
fn apply_annotations(
    wanted: Option<&BTreeMap<String, String>>,
    annotations: &mut BTreeMap<String, String>,
    found: &mut Vec<String>,
) {
    for (key, value) in wanted.into_iter().flatten() {
        match annotations.get(key) {
            Some(existing) if existing != value => found.push(format!("annotations.{key}")),
            Some(_) => {}
            None => {
                annotations.insert(key.clone(), value.clone());
            }
        }
    }
}
