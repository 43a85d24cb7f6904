//! A preference's `requirements` checked against what the VM gets (KubeVirt's
//! `pkg/instancetype/preference/requirements`), and the spread topology's divisibility
//! (`CheckSpreadCPUTopology`): the VM's admission refuses a VM that fails either.

use super::topology::{SpreadAcross, is_spread, preferred, spread_options};
use super::{VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec};
use crate::kubevirt::vmi::VirtualMachineInstanceSpec;
use crate::quantity::quantity_bytes;

/// A requirement not met: the field to blame and KubeVirt's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("failure checking preference requirements: {message}")]
pub struct Unmet {
    /// The field, from the VM's root.
    pub field: String,
    /// What is missing.
    pub message: String,
}

/// Checks the preference's requirements against the instancetype, or against the VM's own
/// template (`spec`, at `spec.template.spec`) without one. CPU is checked before memory;
/// only the first failure is told, as upstream.
pub fn check(
    instancetype: Option<&VirtualMachineInstancetypeSpec>,
    preference: &VirtualMachinePreferenceSpec,
    spec: &VirtualMachineInstanceSpec,
) -> Result<(), Unmet> {
    let Some(required) = &preference.requirements else {
        return Ok(());
    };
    if let Some(cpu) = &required.cpu {
        check_cpu(instancetype, preference, spec, cpu.guest)?;
    }
    if let Some(memory) = &required.memory {
        let needed = quantity_bytes(&memory.guest).unwrap_or(0);
        let from_vm = spec.domain.memory.as_ref().and_then(|m| m.guest.as_ref());
        let (provided, who, field) = match instancetype {
            Some(it) => (Some(&it.memory.guest), "instance type", "spec.instancetype"),
            None => (
                from_vm,
                "VirtualMachine",
                "spec.template.spec.domain.memory",
            ),
        };
        if provided.and_then(quantity_bytes).unwrap_or(0) < needed {
            let shown = provided.map_or_else(|| "0Mi".to_string(), |q| q.0.clone());
            return Err(Unmet {
                field: field.into(),
                message: format!(
                    "insufficient Memory resources of {shown} provided by {who}, preference requires {}",
                    memory.guest.0
                ),
            });
        }
    }
    Ok(())
}

fn check_cpu(
    instancetype: Option<&VirtualMachineInstancetypeSpec>,
    preference: &VirtualMachinePreferenceSpec,
    spec: &VirtualMachineInstanceSpec,
    needed: u32,
) -> Result<(), Unmet> {
    if let Some(it) = instancetype {
        if it.cpu.guest < needed {
            return Err(Unmet {
                field: "spec.instancetype".into(),
                message: format!(
                    "insufficient CPU resources of {} vCPU provided by instance type, preference requires {needed} vCPU",
                    it.cpu.guest
                ),
            });
        }
        return Ok(());
    }
    let Some(cpu) = &spec.domain.cpu else {
        return Err(Unmet {
            field: "spec.template.spec.domain.cpu".into(),
            message: format!(
                "no CPU resources provided by VirtualMachine, preference requires {needed} vCPU"
            ),
        });
    };
    let [sockets, cores, threads] = [cpu.sockets, cpu.cores, cpu.threads].map(|v| v.unwrap_or(1));
    let topology = preferred(Some(preference));
    let (provided, shown, fields): (u32, String, &[&str]) = match topology {
        "threads" | "preferThreads" => (threads, "threads".into(), &["threads"]),
        "cores" | "preferCores" => (cores, "cores".into(), &["cores"]),
        "any" | "preferAny" => (
            cores * sockets * threads,
            "cores, sockets and threads".into(),
            &["cores", "sockets", "threads"],
        ),
        t if is_spread(t) => {
            let (_, across) = spread_options(Some(preference));
            match across {
                SpreadAcross::SocketsCores => (
                    sockets * cores,
                    "SocketsCores".into(),
                    &["sockets", "cores"],
                ),
                SpreadAcross::CoresThreads => (
                    cores * threads,
                    "CoresThreads".into(),
                    &["cores", "threads"],
                ),
                SpreadAcross::SocketsCoresThreads => (
                    sockets * cores * threads,
                    "SocketsCoresThreads".into(),
                    &["sockets", "cores", "threads"],
                ),
            }
        }
        _ => (sockets, "sockets".into(), &["sockets"]),
    };
    if provided < needed {
        let field = fields
            .iter()
            .map(|f| format!("spec.template.spec.domain.cpu.{f}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Unmet {
            field,
            message: format!(
                "insufficient CPU resources of {provided} vCPU provided by VirtualMachine, preference requires {needed} vCPU provided as {shown}"
            ),
        });
    }
    Ok(())
}

/// The instancetype's vCPUs must divide as the preference's spread lays them out.
pub fn check_spread(
    instancetype: &VirtualMachineInstancetypeSpec,
    preference: Option<&VirtualMachinePreferenceSpec>,
) -> Result<(), String> {
    if !is_spread(preferred(preference)) {
        return Ok(());
    }
    let guest = instancetype.cpu.guest;
    let (ratio, across) = spread_options(preference);
    let ratio = ratio.max(1);
    match across {
        SpreadAcross::SocketsCores if guest % ratio != 0 => Err(format!(
            "{guest} vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio} provided by the preference"
        )),
        SpreadAcross::CoresThreads if guest % ratio != 0 => Err(format!(
            "{guest} vCPUs provided by the instance type are not divisible by the number of threads per core {ratio}"
        )),
        SpreadAcross::SocketsCoresThreads if guest % 2 != 0 || (guest / 2) % ratio != 0 => {
            Err(format!(
                "{guest} vCPUs provided by the instance type are not divisible by the number of threads per core 2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio}"
            ))
        }
        _ => Ok(()),
    }
}
