//! The validating webhooks of the four kinds (KubeVirt's `pkg/instancetype/webhooks` and
//! `preference/webhooks`): what the schema cannot say about an instancetype's memory and a
//! preference's CPU topology; a deprecated topology name is a warning.

use api::instancetype::topology::TOPOLOGIES;
use api::instancetype::{VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec};
use serde_json::Value;

use crate::Refusal;

/// The webhook names, per plural.
pub fn webhook_name(plural: &str) -> String {
    format!(
        "{}-validator.instancetype.kubevirt.io",
        plural.trim_end_matches('s')
    )
}

fn spec_of<T: serde::de::DeserializeOwned>(object: &Value) -> Result<T, Refusal> {
    serde_json::from_value(object.get("spec").cloned().unwrap_or(Value::Null))
        .map_err(|e| Refusal::new(422, format!("spec: {e}")))
}

/// An instancetype (either kind).
pub fn validate_instancetype(object: &Value) -> Result<Vec<String>, Refusal> {
    let spec: VirtualMachineInstancetypeSpec = spec_of(object)?;
    let memory = &spec.memory;
    let percent = memory.overcommit_percent.unwrap_or(0);
    if percent > 100 {
        return Err(Refusal::new(
            422,
            format!(
                "spec.memory.overcommitPercent '{percent}': must be in range between 0 and 100."
            ),
        ));
    }
    if percent != 0 && memory.hugepages.is_some() {
        return Err(Refusal::new(
            422,
            "spec.memory.overcommitPercent and spec.memory.hugepages should not be requested together.",
        ));
    }
    Ok(Vec::new())
}

/// A preference (either kind).
pub fn validate_preference(object: &Value) -> Result<Vec<String>, Refusal> {
    let spec: VirtualMachinePreferenceSpec = spec_of(object)?;
    let Some(cpu) = &spec.cpu else {
        return Ok(Vec::new());
    };
    let mut warnings = Vec::new();
    if let Some(topology) = &cpu.preferred_cpu_topology {
        if !TOPOLOGIES.contains(&topology.as_str()) {
            return Err(Refusal::new(
                422,
                format!("unknown preferredCPUTopology {topology}"),
            ));
        }
        if let Some(current) = topology.strip_prefix("prefer") {
            warnings.push(format!(
                "PreferredCPUTopology {topology} is deprecated for removal in a future release, please use {} instead",
                current.to_lowercase()
            ));
        }
    }
    if let Some(options) = &cpu.spread_options {
        let across = options.across.as_deref().unwrap_or("SocketsCores");
        if !["SocketsCores", "CoresThreads", "SocketsCoresThreads"].contains(&across) {
            return Err(Refusal::new(
                422,
                format!("across {across} is not supported"),
            ));
        }
        if across == "CoresThreads" && options.ratio.is_some_and(|r| r != 2) {
            return Err(Refusal::new(
                422,
                "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads",
            ));
        }
    }
    Ok(warnings)
}
