//! The HyperConverged CRD: the typed spec's schema, plus the fields this crate keeps
//! untyped but upstream's CRD constrains, with upstream's bounds, patterns and CEL rules
//! (`x-kubernetes-validations`, HCO's v1beta1 markers), so the API server refuses what
//! kube-apiserver refuses with HCO's CRD and in HCO's words.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use super::HyperConverged;

/// The CRD of HyperConverged: v1 stored, v1beta1 served too, converted by HCO's webhook.
pub fn crd() -> CustomResourceDefinition {
    let v1 = with_rules(super::v1::HyperConverged::crd(), |spec| {
        let properties = &mut spec["properties"];
        let virtualization = &mut properties["virtualization"];
        virtualization["properties"]["vmiCPUAllocationRatio"] = allocation_ratio();
        virtualization["x-kubernetes-validations"] = json!([allocation_ratio_rule()]);
        properties["networking"]["properties"]["kubeMacPoolConfiguration"] = kube_mac_pool();
    });
    let v1beta1 = with_rules(HyperConverged::crd(), |spec| {
        if let Some(properties) = spec["properties"].as_object_mut() {
            properties.insert("resourceRequirements".into(), resource_requirements());
            properties.insert("kubeMacPoolConfiguration".into(), kube_mac_pool());
            properties.insert("mediatedDevicesConfiguration".into(), mediated_devices());
        }
    });
    let mut crd = kube::core::crd::merge_crds(vec![v1, v1beta1], "v1")
        .expect("the versions of one kind merge");
    crd.spec.conversion =
        Some(serde_json::from_value(conversion()).expect("the conversion stanza deserializes"));
    crd
}

/// The webhook that converts between the versions: HCO's, at `/convert`.
fn conversion() -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"service": {
                "namespace": CONVERSION_SERVICE.0,
                "name": CONVERSION_SERVICE.1,
                "path": CONVERSION_PATH,
                "port": 443,
            }},
            "conversionReviewVersions": ["v1", "v1beta1"],
        },
    })
}

/// The path HCO's webhook converts at.
pub const CONVERSION_PATH: &str = "/convert";
/// The namespace and name of the Service in front of HCO's webhook.
pub const CONVERSION_SERVICE: (&str, &str) = (
    "kubevirt-hyperconverged",
    "hyperconverged-cluster-webhook-service",
);

/// `crd` (of one version) with `rules` applied to its spec's schema.
fn with_rules(
    crd: CustomResourceDefinition,
    rules: impl Fn(&mut Value),
) -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(crd).expect("a CRD serializes");
    for version in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
        rules(&mut version["schema"]["openAPIV3Schema"]["properties"]["spec"]);
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
        "properties": {"vmiCPUAllocationRatio": allocation_ratio()},
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [allocation_ratio_rule()],
    })
}

fn allocation_ratio() -> Value {
    json!({
        "description": "VmiCPUAllocationRatio defines, for each requested virtual CPU, how much physical CPU to request per VMI from the hosting node: a VMI's pod requests vCPUs/ratio. Defaults to 10.",
        "type": "integer",
        "minimum": 1,
    })
}

fn allocation_ratio_rule() -> Value {
    rule(
        "!has(self.vmiCPUAllocationRatio) || self.vmiCPUAllocationRatio > 0",
        "vmiCPUAllocationRatio must be greater than 0",
    )
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
        assert_eq!(crd["spec"]["versions"][0]["name"], "v1");
        assert_eq!(crd["spec"]["versions"][0]["storage"], true);
        assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");
        let v1 = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            v1["properties"]["virtualization"]["x-kubernetes-validations"][0]["message"],
            "vmiCPUAllocationRatio must be greater than 0"
        );
        assert!(
            v1["properties"]["featureGates"]["x-kubernetes-validations"][0]["rule"].is_string()
        );
        assert_eq!(crd["spec"]["versions"][1]["name"], "v1beta1");
        let spec = &crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"];
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
