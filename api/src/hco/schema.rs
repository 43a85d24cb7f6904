//! The HyperConverged CRD: the typed spec's schema, plus the fields this crate keeps
//! untyped but upstream's CRD constrains, with upstream's bounds, patterns and CEL rules
//! (`x-kubernetes-validations`, HCO's v1beta1 markers), so the API server refuses what
//! kube-apiserver refuses with HCO's CRD and in HCO's words.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::HyperConverged;

/// The CRD of HyperConverged.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(HyperConverged::crd()).expect("a CRD serializes");
    for version in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
        let spec = &mut version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        if let Some(properties) = spec["properties"].as_object_mut() {
            properties.insert("resourceRequirements".into(), resource_requirements());
            properties.insert("kubeMacPoolConfiguration".into(), kube_mac_pool());
            properties.insert("mediatedDevicesConfiguration".into(), mediated_devices());
        }
    }
    serde_json::from_value(crd).expect("the CRD with upstream's constraints deserializes")
}

fn rule(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message})
}

/// `spec.resourceRequirements`: the allocation ratio at least 1; the other fields (the
/// storage workloads' resources, the automatic CPU limit selector) kept as they come.
fn resource_requirements() -> Value {
    json!({
        "description": "ResourceRequirements describes the resource requirements for the operand workloads.",
        "type": "object",
        "properties": {
            "vmiCPUAllocationRatio": {
                "description": "VmiCPUAllocationRatio defines, for each requested virtual CPU, how much physical CPU to request per VMI from the hosting node: a VMI's pod requests vCPUs/ratio. Defaults to 10.",
                "type": "integer",
                "minimum": 1,
            },
        },
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [rule(
            "!has(self.vmiCPUAllocationRatio) || self.vmiCPUAllocationRatio > 0",
            "vmiCPUAllocationRatio must be greater than 0",
        )],
    })
}

/// `spec.kubeMacPoolConfiguration`: the MAC range, both ends or neither.
fn kube_mac_pool() -> Value {
    let mac = |which: &str| {
        json!({
            "description": format!("{which} of the kubemacpool range, as AA:BB:CC:DD:EE:FF."),
            "type": "string",
            "pattern": "^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$",
        })
    };
    json!({
        "description": "KubeMacPoolConfiguration holds kubemacpool MAC address range configuration.",
        "type": "object",
        "properties": {"rangeStart": mac("The first MAC address"), "rangeEnd": mac("The last MAC address")},
        "x-kubernetes-validations": [rule(
            "(has(self.rangeStart) && has(self.rangeEnd)) || (!has(self.rangeStart) && !has(self.rangeEnd))",
            "both rangeStart and rangeEnd must be configured together, or both omitted",
        )],
    })
}

/// `spec.mediatedDevicesConfiguration`: a non-empty type list, cluster-wide and per node.
fn mediated_devices() -> Value {
    let types = |what: &str| json!({"description": what, "type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"});
    let non_empty = "(has(self.mediatedDeviceTypes) && size(self.mediatedDeviceTypes)>0) || (has(self.mediatedDevicesTypes) && size(self.mediatedDevicesTypes)>0)";
    json!({
        "description": "MediatedDevicesConfiguration holds information about MDEV types to be defined on nodes, if available.",
        "type": "object",
        "properties": {
            "mediatedDeviceTypes": types("The MDEV types to create on every node."),
            "mediatedDevicesTypes": types("Deprecated: use mediatedDeviceTypes."),
            "nodeMediatedDeviceTypes": {
                "description": "MDEV types for the nodes a selector picks, instead of the cluster-wide ones.",
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["nodeSelector"],
                    "properties": {
                        "mediatedDeviceTypes": types("The MDEV types to create on these nodes."),
                        "mediatedDevicesTypes": types("Deprecated: use mediatedDeviceTypes."),
                        "nodeSelector": {
                            "description": "The labels a node must have for these types.",
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        },
                    },
                    "x-kubernetes-validations": [rule(
                        non_empty,
                        "for nodeMediatedDeviceTypes a non-empty mediatedDeviceTypes or mediatedDevicesTypes(deprecated) is required",
                    )],
                },
            },
        },
        "x-kubernetes-validations": [rule(
            non_empty,
            "for mediatedDevicesConfiguration a non-empty mediatedDeviceTypes or mediatedDevicesTypes(deprecated) is required",
        )],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_untyped_fields_carry_upstream_rules() {
        let crd = serde_json::to_value(crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let ratio = &spec["properties"]["resourceRequirements"];
        assert_eq!(
            ratio["properties"]["vmiCPUAllocationRatio"]["minimum"].as_f64(),
            Some(1.0)
        );
        assert_eq!(
            ratio["x-kubernetes-validations"][0]["message"],
            "vmiCPUAllocationRatio must be greater than 0"
        );
        let pool = &spec["properties"]["kubeMacPoolConfiguration"];
        assert!(
            pool["x-kubernetes-validations"][0]["rule"]
                .as_str()
                .unwrap()
                .contains("rangeEnd")
        );
        // The typed fields are still there.
        assert!(spec["properties"]["infra"].is_object());
    }
}
