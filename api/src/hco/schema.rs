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
        with_allocation_ratio(virtualization);
        virtualization["properties"]["obsoleteCPUModels"] = cpu_model_set();
        virtualization["properties"]["permittedHostDevices"] = permitted_host_devices();
        properties["networking"]["properties"]["kubeMacPoolConfiguration"] = kube_mac_pool();
        with_defaults(spec, V1_DEFAULTS);
        with_enums(spec, ENUMS, |(_, v1, _)| v1);
    });
    let v1beta1 = with_rules(HyperConverged::crd(), |spec| {
        with_allocation_ratio(&mut spec["properties"]["resourceRequirements"]);
        if let Some(properties) = spec["properties"].as_object_mut() {
            properties.insert("kubeMacPoolConfiguration".into(), kube_mac_pool());
            properties.insert("mediatedDevicesConfiguration".into(), mediated_devices());
            properties.insert("obsoleteCPUs".into(), obsolete_cpus());
            properties.insert("permittedHostDevices".into(), permitted_host_devices());
        }
        with_defaults(spec, V1BETA1_DEFAULTS);
        with_enums(spec, ENUMS, |(v1beta1, _, _)| v1beta1);
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
        let root = &mut version["schema"]["openAPIV3Schema"];
        // Upstream's root requires nothing, `spec` included.
        if let Some(root) = root.as_object_mut() {
            root.remove("required");
        }
        rules(&mut root["properties"]["spec"]);
        with_enums(
            &mut root["properties"]["status"],
            STATUS_ENUMS,
            |(path, _, _)| path,
        );
    }
    serde_json::from_value(crd).expect("the CRD with upstream's constraints deserializes")
}

/// `spec`'s schema with each of `defaults` (a path under `spec`, `""` for `spec` itself,
/// and the value as JSON) set as the `default` of its node, as upstream's markers set
/// them; a node the typed schema leaves out is declared, typed as its default is, and an
/// object so declared keeps what it does not declare.
fn with_defaults(spec: &mut Value, defaults: &[(&str, &str)]) {
    for (path, default) in defaults {
        let default: Value = serde_json::from_str(default).expect("a default is JSON");
        let fields: Vec<&str> = path.split('.').filter(|f| !f.is_empty()).collect();
        let mut node = &mut *spec;
        for (i, field) in fields.iter().enumerate() {
            let declared = if i + 1 == fields.len() {
                declared_as(&default)
            } else {
                declared_as(&json!({}))
            };
            if !node["properties"].is_object() {
                node["properties"] = json!({});
            }
            node = node["properties"]
                .as_object_mut()
                .expect("properties is an object")
                .entry(*field)
                .or_insert(declared);
        }
        node["default"] = default;
    }
}

/// A string field upstream limits to a list: (v1beta1 path, v1 path, the values); paths
/// under `spec` (or `status`), dotted, `[]` stepping into a list's items.
type Enum = (&'static str, &'static str, &'static [&'static str]);

/// The string fields of the spec upstream limits to a list.
const ENUMS: &[Enum] = &[
    (
        "applicationAwareConfig.vmiCalcConfigName",
        "deployment.applicationAwareConfig.vmiCalcConfigName",
        &[
            "VmiPodUsage",
            "VirtualResources",
            "DedicatedVirtualResources",
            "IgnoreVmiCalculator",
            "GuestEffectiveResources",
        ],
    ),
    (
        "uninstallStrategy",
        "deployment.uninstallStrategy",
        &["RemoveWorkloads", "BlockUninstallIfWorkloadsExist"],
    ),
    (
        "evictionStrategy",
        "virtualization.evictionStrategy",
        &["None", "LiveMigrate", "LiveMigrateIfPossible", "External"],
    ),
    (
        "hypervisors[].name",
        "virtualization.hypervisors[].name",
        &["kvm", "hyperv-direct"],
    ),
    (
        "roleAggregationStrategy",
        "virtualization.roleAggregationStrategy",
        &["AggregateToDefault", "Manual"],
    ),
    (
        "tuningPolicy",
        "virtualization.tuningPolicy",
        &["annotation", "highBurst"],
    ),
    (
        "instancetypeConfig.referencePolicy",
        "workloadSources.instancetypeConfig.referencePolicy",
        &["reference", "expand", "expandAll"],
    ),
];

/// The same for the status, alike at both versions.
const STATUS_ENUMS: &[Enum] = &[
    ("conditions[].status", "", &["True", "False", "Unknown"]),
    (
        "dataImportCronTemplates[].status.conditions[].status",
        "",
        &["True", "False", "Unknown"],
    ),
];

/// `schema` with each of `enums` (its path as `path_of` picks it) limited to its values.
fn with_enums(schema: &mut Value, enums: &[Enum], path_of: fn(&Enum) -> &'static str) {
    for field in enums {
        let path = path_of(field);
        let node = path.split('.').try_fold(&mut *schema, |node, step| {
            let (name, items) = match step.strip_suffix("[]") {
                Some(name) => (name, true),
                None => (step, false),
            };
            let child = node.get_mut("properties")?.get_mut(name)?;
            if items {
                child.get_mut("items")
            } else {
                Some(child)
            }
        });
        let node = node.unwrap_or_else(|| panic!("{path}: an enum's field is declared"));
        node["enum"] = json!(field.2);
    }
}

/// The schema of a field the typed schema leaves out, declared for its default `value`.
fn declared_as(value: &Value) -> Value {
    match value {
        Value::Object(_) => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        Value::Array(_) => json!({"type": "array", "items": {"type": "string"}}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Number(n) if n.is_f64() => json!({"type": "number"}),
        Value::Number(_) => json!({"type": "integer"}),
        _ => json!({"type": "string"}),
    }
}

/// Upstream's `default` markers of the v1 spec: (path under `spec`, the value as JSON).
const V1_DEFAULTS: &[(&str, &str)] = &[
    (
        "",
        r#"{"deployment":{"applicationAwareConfig":{"enable":false},"deployNetworkResourcesInjector":true,"deployVmConsoleProxy":false,"uninstallStrategy":"BlockUninstallIfWorkloadsExist"},"security":{"certConfig":{"ca":{"duration":"48h0m0s","renewBefore":"24h0m0s"},"server":{"duration":"24h0m0s","renewBefore":"12h0m0s"}}},"virtualization":{"liveMigrationConfig":{"allowAutoConverge":false,"allowPostCopy":false,"completionTimeoutPerGiB":20,"parallelMigrationsPerCluster":5,"parallelOutboundMigrationsPerNode":1,"progressTimeout":150},"virtualMachineOptions":{"disableFreePageReporting":false,"disableSerialConsoleLog":false},"vmiCPUAllocationRatio":10},"workloadSources":{"enableCommonBootImageImport":true}}"#,
    ),
    (
        "deployment",
        r#"{"applicationAwareConfig":{"enable":false},"deployNetworkResourcesInjector":true,"deployVmConsoleProxy":false,"uninstallStrategy":"BlockUninstallIfWorkloadsExist"}"#,
    ),
    (
        "deployment.applicationAwareConfig.allowApplicationAwareClusterResourceQuota",
        r#"false"#,
    ),
    ("deployment.applicationAwareConfig.enable", r#"false"#),
    (
        "deployment.applicationAwareConfig.vmiCalcConfigName",
        r#""DedicatedVirtualResources""#,
    ),
    ("deployment.deployNetworkResourcesInjector", r#"true"#),
    ("deployment.deployVmConsoleProxy", r#"false"#),
    (
        "deployment.uninstallStrategy",
        r#""BlockUninstallIfWorkloadsExist""#,
    ),
    (
        "security",
        r#"{"certConfig":{"ca":{"duration":"48h0m0s","renewBefore":"24h0m0s"},"server":{"duration":"24h0m0s","renewBefore":"12h0m0s"}}}"#,
    ),
    (
        "security.certConfig",
        r#"{"ca":{"duration":"48h0m0s","renewBefore":"24h0m0s"},"server":{"duration":"24h0m0s","renewBefore":"12h0m0s"}}"#,
    ),
    (
        "security.certConfig.ca",
        r#"{"duration":"48h0m0s","renewBefore":"24h0m0s"}"#,
    ),
    ("security.certConfig.ca.duration", r#""48h0m0s""#),
    ("security.certConfig.ca.renewBefore", r#""24h0m0s""#),
    (
        "security.certConfig.server",
        r#"{"duration":"24h0m0s","renewBefore":"12h0m0s"}"#,
    ),
    ("security.certConfig.server.duration", r#""24h0m0s""#),
    ("security.certConfig.server.renewBefore", r#""12h0m0s""#),
    (
        "virtualization",
        r#"{"liveMigrationConfig":{"allowAutoConverge":false,"allowPostCopy":false,"allowWorkloadDisruption":false,"completionTimeoutPerGiB":20,"parallelMigrationsPerCluster":5,"parallelOutboundMigrationsPerNode":1,"progressTimeout":150},"virtualMachineOptions":{"disableFreePageReporting":false,"disableSerialConsoleLog":false},"vmiCPUAllocationRatio":10}"#,
    ),
    (
        "virtualization.higherWorkloadDensity",
        r#"{"memoryOvercommitPercentage":100}"#,
    ),
    (
        "virtualization.higherWorkloadDensity.memoryOvercommitPercentage",
        r#"100"#,
    ),
    (
        "virtualization.liveMigrationConfig",
        r#"{"allowAutoConverge":false,"allowPostCopy":false,"allowWorkloadDisruption":false,"completionTimeoutPerGiB":20,"parallelMigrationsPerCluster":5,"parallelOutboundMigrationsPerNode":1,"progressTimeout":150}"#,
    ),
    (
        "virtualization.liveMigrationConfig.allowAutoConverge",
        r#"false"#,
    ),
    (
        "virtualization.liveMigrationConfig.allowPostCopy",
        r#"false"#,
    ),
    (
        "virtualization.liveMigrationConfig.allowWorkloadDisruption",
        r#"false"#,
    ),
    (
        "virtualization.liveMigrationConfig.completionTimeoutPerGiB",
        r#"20"#,
    ),
    (
        "virtualization.liveMigrationConfig.parallelMigrationsPerCluster",
        r#"5"#,
    ),
    (
        "virtualization.liveMigrationConfig.parallelOutboundMigrationsPerNode",
        r#"1"#,
    ),
    (
        "virtualization.liveMigrationConfig.progressTimeout",
        r#"150"#,
    ),
    (
        "virtualization.virtualMachineOptions",
        r#"{"disableFreePageReporting":false,"disableSerialConsoleLog":false}"#,
    ),
    (
        "virtualization.virtualMachineOptions.disableFreePageReporting",
        r#"false"#,
    ),
    (
        "virtualization.virtualMachineOptions.disableSerialConsoleLog",
        r#"false"#,
    ),
    ("virtualization.vmiCPUAllocationRatio", r#"10"#),
    (
        "virtualization.workloadUpdateStrategy",
        r#"{"batchEvictionInterval":"1m0s","batchEvictionSize":10,"workloadUpdateMethods":["LiveMigrate"]}"#,
    ),
    (
        "virtualization.workloadUpdateStrategy.batchEvictionInterval",
        r#""1m0s""#,
    ),
    (
        "virtualization.workloadUpdateStrategy.batchEvictionSize",
        r#"10"#,
    ),
    (
        "virtualization.workloadUpdateStrategy.workloadUpdateMethods",
        r#"["LiveMigrate"]"#,
    ),
    ("workloadSources.enableCommonBootImageImport", r#"true"#),
];

/// Upstream's `default` markers of the v1beta1 spec: (path under `spec`, the value as JSON).
const V1BETA1_DEFAULTS: &[(&str, &str)] = &[
    (
        "",
        r#"{"certConfig":{"ca":{"duration":"48h0m0s","renewBefore":"24h0m0s"},"server":{"duration":"24h0m0s","renewBefore":"12h0m0s"}},"deployVmConsoleProxy":false,"enableApplicationAwareQuota":false,"enableCommonBootImageImport":true,"featureGates":{"containerPathVolumes":false,"decentralizedLiveMigration":true,"declarativeHotplugVolumes":true,"deployKubeSecondaryDNS":false,"downwardMetrics":false,"incrementalBackup":false,"objectGraph":false},"liveMigrationConfig":{"allowAutoConverge":false,"allowPostCopy":false,"completionTimeoutPerGiB":20,"parallelMigrationsPerCluster":5,"parallelOutboundMigrationsPerNode":1,"progressTimeout":150},"resourceRequirements":{"vmiCPUAllocationRatio":10},"uninstallStrategy":"BlockUninstallIfWorkloadsExist","virtualMachineOptions":{"disableFreePageReporting":false,"disableSerialConsoleLog":false}}"#,
    ),
    (
        "applicationAwareConfig.allowApplicationAwareClusterResourceQuota",
        r#"false"#,
    ),
    (
        "applicationAwareConfig.vmiCalcConfigName",
        r#""DedicatedVirtualResources""#,
    ),
    (
        "certConfig",
        r#"{"ca":{"duration":"48h0m0s","renewBefore":"24h0m0s"},"server":{"duration":"24h0m0s","renewBefore":"12h0m0s"}}"#,
    ),
    (
        "certConfig.ca",
        r#"{"duration":"48h0m0s","renewBefore":"24h0m0s"}"#,
    ),
    ("certConfig.ca.duration", r#""48h0m0s""#),
    ("certConfig.ca.renewBefore", r#""24h0m0s""#),
    (
        "certConfig.server",
        r#"{"duration":"24h0m0s","renewBefore":"12h0m0s"}"#,
    ),
    ("certConfig.server.duration", r#""24h0m0s""#),
    ("certConfig.server.renewBefore", r#""12h0m0s""#),
    ("deployVmConsoleProxy", r#"false"#),
    ("enableApplicationAwareQuota", r#"false"#),
    ("enableCommonBootImageImport", r#"true"#),
    (
        "featureGates",
        r#"{"containerPathVolumes":false,"decentralizedLiveMigration":true,"declarativeHotplugVolumes":true,"deployKubeSecondaryDNS":false,"downwardMetrics":false,"incrementalBackup":false,"objectGraph":false}"#,
    ),
    ("featureGates.alignCPUs", r#"false"#),
    ("featureGates.containerPathVolumes", r#"false"#),
    ("featureGates.decentralizedLiveMigration", r#"true"#),
    ("featureGates.declarativeHotplugVolumes", r#"true"#),
    ("featureGates.deployKubeSecondaryDNS", r#"false"#),
    ("featureGates.downwardMetrics", r#"false"#),
    ("featureGates.incrementalBackup", r#"false"#),
    ("featureGates.objectGraph", r#"false"#),
    (
        "higherWorkloadDensity",
        r#"{"memoryOvercommitPercentage":100}"#,
    ),
    ("higherWorkloadDensity.memoryOvercommitPercentage", r#"100"#),
    (
        "liveMigrationConfig",
        r#"{"allowAutoConverge":false,"allowPostCopy":false,"completionTimeoutPerGiB":20,"parallelMigrationsPerCluster":5,"parallelOutboundMigrationsPerNode":1,"progressTimeout":150}"#,
    ),
    ("liveMigrationConfig.allowAutoConverge", r#"false"#),
    ("liveMigrationConfig.allowPostCopy", r#"false"#),
    ("liveMigrationConfig.allowWorkloadDisruption", r#"false"#),
    ("liveMigrationConfig.completionTimeoutPerGiB", r#"20"#),
    ("liveMigrationConfig.parallelMigrationsPerCluster", r#"5"#),
    (
        "liveMigrationConfig.parallelOutboundMigrationsPerNode",
        r#"1"#,
    ),
    ("liveMigrationConfig.progressTimeout", r#"150"#),
    ("resourceRequirements", r#"{"vmiCPUAllocationRatio":10}"#),
    ("resourceRequirements.vmiCPUAllocationRatio", r#"10"#),
    ("uninstallStrategy", r#""BlockUninstallIfWorkloadsExist""#),
    (
        "virtualMachineOptions",
        r#"{"disableFreePageReporting":false,"disableSerialConsoleLog":false}"#,
    ),
    ("virtualMachineOptions.disableFreePageReporting", r#"false"#),
    ("virtualMachineOptions.disableSerialConsoleLog", r#"false"#),
    (
        "workloadUpdateStrategy",
        r#"{"batchEvictionInterval":"1m0s","batchEvictionSize":10,"workloadUpdateMethods":["LiveMigrate"]}"#,
    ),
    ("workloadUpdateStrategy.batchEvictionInterval", r#""1m0s""#),
    ("workloadUpdateStrategy.batchEvictionSize", r#"10"#),
    (
        "workloadUpdateStrategy.workloadUpdateMethods",
        r#"["LiveMigrate"]"#,
    ),
];
fn rule(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message})
}

/// The object holding `vmiCPUAllocationRatio` (v1beta1's `spec.resourceRequirements`, v1's
/// `spec.virtualization`) with upstream's bound on the ratio and its rule.
fn with_allocation_ratio(holder: &mut Value) {
    holder["properties"]["vmiCPUAllocationRatio"] = allocation_ratio();
    holder["x-kubernetes-validations"] = json!([allocation_ratio_rule()]);
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

/// The CPU models HCO adds to its own list of obsolete ones (v1's
/// `virtualization.obsoleteCPUModels`, v1beta1's `obsoleteCPUs.cpuModels`).
fn cpu_model_set() -> Value {
    json!({
        "description": "CPU models marked obsolete, besides the ones HCO always marks.",
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-list-type": "set",
    })
}

/// v1beta1's `spec.obsoleteCPUs`; `minCPUModel` is accepted and ignored, as upstream.
fn obsolete_cpus() -> Value {
    json!({
        "description": "CPU models VMs are not scheduled for.",
        "type": "object",
        "properties": {
            "cpuModels": cpu_model_set(),
            "minCPUModel": {"description": "Deprecated and ignored.", "type": "string"},
        },
    })
}

/// `permittedHostDevices` (v1beta1's, and v1's under `virtualization`): PCI, mediated and
/// USB devices, each list keyed by its selector or name as upstream keys it.
fn permitted_host_devices() -> Value {
    let flag = |what: &str| json!({"description": what, "type": "boolean"});
    let text = |what: &str| json!({"description": what, "type": "string"});
    let keyed_list = |key: &str, item: Value| json!({"type": "array", "items": item, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]});
    let device = |selector: Option<(&str, &str)>| {
        let mut properties = json!({
            "resourceName": text("The name of the resource the device is requested by."),
            "externalResourceProvider": flag("Whether a device plugin outside KubeVirt serves it."),
            "disabled": flag("Leaves the device out of KubeVirt's list."),
        });
        let mut required = vec!["resourceName"];
        if let Some((name, what)) = selector {
            properties[name] = text(what);
            required.insert(0, name);
        }
        json!({"type": "object", "properties": properties, "required": required})
    };
    let mut usb = device(None);
    usb["properties"]["selectors"] = json!({
        "description": "The vendor and product IDs the device matches.",
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": {
            "type": "object",
            "required": ["product", "vendor"],
            "properties": {"vendor": text("The USB vendor ID."), "product": text("The USB product ID.")},
        },
    });
    json!({
        "description": "The host devices VMs may be given.",
        "type": "object",
        "properties": {
            "pciHostDevices": keyed_list("pciDeviceSelector", device(Some(("pciDeviceSelector", "The PCI vendor and device IDs, vendor:device.")))),
            "mediatedDevices": keyed_list("mdevNameSelector", device(Some(("mdevNameSelector", "The name of the mediated device type.")))),
            "usbHostDevices": keyed_list("resourceName", usb),
        },
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

    #[test]
    fn obsolete_cpus_and_host_devices_are_typed_at_both_versions() {
        let crd = serde_json::to_value(crd()).unwrap();
        let spec = |i: usize| {
            crd["spec"]["versions"][i]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
        };
        let v1 = spec(0)["properties"]["virtualization"]["properties"].clone();
        let beta = spec(1)["properties"].clone();
        assert_eq!(v1["obsoleteCPUModels"]["x-kubernetes-list-type"], "set");
        let cpus = &beta["obsoleteCPUs"]["properties"];
        assert_eq!(cpus["cpuModels"]["items"]["type"], "string");
        assert_eq!(cpus["minCPUModel"]["type"], "string");
        for devices in [&v1["permittedHostDevices"], &beta["permittedHostDevices"]] {
            let pci = &devices["properties"]["pciHostDevices"];
            assert_eq!(
                pci["x-kubernetes-list-map-keys"],
                json!(["pciDeviceSelector"])
            );
            assert_eq!(
                pci["items"]["required"],
                json!(["pciDeviceSelector", "resourceName"])
            );
            assert!(
                pci["items"]["properties"]
                    .get("pciVendorSelector")
                    .is_none()
            );
            let usb = &devices["properties"]["usbHostDevices"]["items"];
            assert_eq!(usb["required"], json!(["resourceName"]));
            assert_eq!(usb["properties"]["disabled"]["type"], "boolean");
            assert_eq!(
                usb["properties"]["selectors"]["items"]["required"],
                json!(["product", "vendor"])
            );
            let mdev = &devices["properties"]["mediatedDevices"];
            assert_eq!(
                mdev["x-kubernetes-list-map-keys"],
                json!(["mdevNameSelector"])
            );
        }
    }

    #[test]
    fn upstream_enums_limit_their_fields_at_both_versions() {
        let crd = serde_json::to_value(crd()).unwrap();
        let root = |i: usize| crd["spec"]["versions"][i]["schema"]["openAPIV3Schema"].clone();
        let (v1, beta) = (root(0), root(1));
        let strategy = |root: &Value, path: &[&str]| {
            let mut node = &root["properties"]["spec"];
            for field in path {
                node = &node["properties"][*field];
            }
            node["enum"].clone()
        };
        let values = json!(["RemoveWorkloads", "BlockUninstallIfWorkloadsExist"]);
        assert_eq!(strategy(&beta, &["uninstallStrategy"]), values);
        assert_eq!(strategy(&v1, &["deployment", "uninstallStrategy"]), values);
        let name = &v1["properties"]["spec"]["properties"]["virtualization"]["properties"]["hypervisors"]
            ["items"]["properties"]["name"];
        assert_eq!(name["enum"], json!(["kvm", "hyperv-direct"]));
        for root in [&v1, &beta] {
            let condition = &root["properties"]["status"]["properties"]["conditions"]["items"];
            assert_eq!(
                condition["properties"]["status"]["enum"],
                json!(["True", "False", "Unknown"])
            );
        }
    }

    #[test]
    fn upstream_defaults_sit_on_their_nodes_without_losing_the_typed_ones() {
        let crd = serde_json::to_value(crd()).unwrap();
        let spec = |i: usize| {
            crd["spec"]["versions"][i]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
        };
        let v1 = spec(0);
        let ratio = &v1["properties"]["virtualization"]["properties"]["vmiCPUAllocationRatio"];
        // Upstream's bound is kept beside its default.
        assert_eq!(ratio["default"], 10);
        assert_eq!(ratio["minimum"].as_f64(), Some(1.0));
        let migration = &v1["properties"]["virtualization"]["properties"]["liveMigrationConfig"];
        assert!(
            migration
                .get("x-kubernetes-preserve-unknown-fields")
                .is_none()
        );
        assert_eq!(
            migration["properties"]["completionTimeoutPerGiB"]["type"],
            "integer"
        );
        assert_eq!(
            v1["default"]["deployment"]["deployNetworkResourcesInjector"],
            true
        );
        let beta = spec(1);
        let gates = &beta["properties"]["featureGates"];
        assert_eq!(gates["default"]["declarativeHotplugVolumes"], true);
        assert_eq!(gates["properties"]["alignCPUs"]["default"], false);
        let methods =
            &beta["properties"]["workloadUpdateStrategy"]["properties"]["workloadUpdateMethods"];
        assert_eq!(methods["default"], json!(["LiveMigrate"]));
        assert_eq!(methods["items"]["type"], "string");
    }
}
