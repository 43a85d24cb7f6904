//! What a HyperConverged asks of each operand, as HCO renders it: the KubeVirt, CDI,
//! NetworkAddonsConfig and SSP objects with HCO's opinionated defaults and its mapping of
//! the HC spec. Pure functions of the HC, so the mapping is tested without a server.

use serde_json::{Map, Value, json};

use super::hardware;

/// The only HyperConverged HCO reconciles.
pub const HYPERCONVERGED_NAME: &str = "kubevirt-hyperconverged";
/// The value of the `app` label on everything HCO creates (the HC's name).
const APP_LABEL: &str = "app";
/// Where HCO deploys the common templates unless the HC says otherwise.
pub const DEFAULT_COMMON_TEMPLATES_NAMESPACE: &str = "openshift";
/// The NetworkAddonsConfig CNAO reconciles.
pub const NETWORK_ADDONS_NAME: &str = "cluster";

/// KubeVirt feature gates HCO always turns on.
const MANDATORY_KUBEVIRT_GATES: [&str; 6] = [
    "CPUManager",
    "Snapshot",
    "ExpandDisks",
    "HostDevices",
    "VMExport",
    "KubevirtSeccompProfile",
];
/// Turned on because SSP is deployed with them.
const SSP_KUBEVIRT_GATES: [&str; 2] = ["WithHostModelCPU", "HypervStrictCheck"];
/// CDI feature gates HCO always turns on.
const CDI_GATES: [&str; 3] = [
    "HonorWaitForFirstConsumer",
    "DataVolumeClaimAdoption",
    "WebhookPvcRendering",
];

/// An HC feature gate exposed as a KubeVirt feature gate: (HC field, default, KubeVirt gate).
const EXPOSED_KUBEVIRT_GATES: [(&str, bool, &str); 7] = [
    ("downwardMetrics", false, "DownwardMetrics"),
    ("persistentReservation", false, "PersistentReservation"),
    ("alignCPUs", false, "AlignCPUs"),
    ("videoConfig", true, "VideoConfig"),
    ("objectGraph", false, "ObjectGraph"),
    (
        "decentralizedLiveMigration",
        true,
        "DecentralizedLiveMigration",
    ),
    ("containerPathVolumes", false, "ContainerPathVolumes"),
];

/// The operand names of an HC (HCO prefixes its own name).
pub fn kubevirt_name(hc_name: &str) -> String {
    format!("kubevirt-{hc_name}")
}

pub fn cdi_name(hc_name: &str) -> String {
    format!("cdi-{hc_name}")
}

pub fn ssp_name(hc_name: &str) -> String {
    format!("ssp-{hc_name}")
}

/// The labels HCO puts on an operand of `component` (`compute`, `storage`, `network`,
/// `schedule`).
pub fn labels(hc_name: &str, component: &str) -> Value {
    json!({
        APP_LABEL: hc_name,
        "app.kubernetes.io/managed-by": "hco-operator",
        "app.kubernetes.io/part-of": "hyperconverged-cluster",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/version": crate::install::cnao::VERSION,
    })
}

fn spec(hc: &Value) -> &Value {
    &hc["spec"]
}

fn gate(hc: &Value, name: &str, default: bool) -> bool {
    spec(hc)["featureGates"][name].as_bool().unwrap_or(default)
}

/// The KubeVirt feature gates an HC turns on, in HCO's order.
pub fn kubevirt_feature_gates(hc: &Value) -> Vec<String> {
    let mut gates: Vec<String> = MANDATORY_KUBEVIRT_GATES
        .iter()
        .chain(SSP_KUBEVIRT_GATES.iter())
        .map(|g| (*g).to_owned())
        .collect();
    for (field, default, kubevirt_gate) in EXPOSED_KUBEVIRT_GATES {
        if gate(hc, field, default) {
            gates.push(kubevirt_gate.to_owned());
        }
    }
    if gate(hc, "declarativeHotplugVolumes", true) {
        gates.push("DeclarativeHotplugVolumes".to_owned());
    } else {
        gates.push("HotplugVolumes".to_owned());
    }
    if gate(hc, "incrementalBackup", false) {
        gates.extend(["IncrementalBackup".to_owned(), "UtilityVolumes".to_owned()]);
    }
    gates
}

/// `RemoveWorkloads` only when asked; HCO blocks uninstalling otherwise.
fn uninstall_strategy(hc: &Value) -> &'static str {
    match spec(hc)["uninstallStrategy"].as_str() {
        Some("RemoveWorkloads") => "RemoveWorkloads",
        _ => "BlockUninstallIfWorkloadsExist",
    }
}

/// Copies `key` from `from` into `to` when present.
fn copy(to: &mut Map<String, Value>, key: &str, from: &Value) {
    if let Some(value) = from.get(key).filter(|v| !v.is_null()) {
        to.insert(key.to_owned(), value.clone());
    }
}

/// An HC placement (`infra`/`workloads`) as KubeVirt's ComponentConfig.
fn kubevirt_placement(placement: &Value) -> Option<Value> {
    let node_placement = placement.get("nodePlacement").filter(|p| !p.is_null())?;
    Some(json!({"nodePlacement": node_placement}))
}

/// The KubeVirt CR of `hc`: masquerade as the default interface, HCO's feature gates, its
/// live-migration and workload-update settings, obsolete CPU models and permitted host
/// devices ([`hardware`]), emulation when `use_emulation`.
pub fn kubevirt(hc: &Value, use_emulation: bool) -> Value {
    let hc_spec = spec(hc);
    let mut developer = Map::new();
    developer.insert("featureGates".into(), json!(kubevirt_feature_gates(hc)));
    developer.insert("diskVerification".into(), json!({"memoryLimit": "2G"}));
    if use_emulation {
        developer.insert("useEmulation".into(), json!(true));
    }
    if let Some(percent) = hc_spec["higherWorkloadDensity"]["memoryOvercommitPercentage"].as_i64() {
        developer.insert("memoryOvercommit".into(), json!(percent));
    }
    if let Some(ratio) = hc_spec["resourceRequirements"]["vmiCPUAllocationRatio"].as_i64() {
        developer.insert("cpuAllocationRatio".into(), json!(ratio));
    }
    let mut configuration = Map::new();
    configuration.insert("developerConfiguration".into(), Value::Object(developer));
    let auto_cpu_limit = &hc_spec["resourceRequirements"]["autoCPULimitNamespaceLabelSelector"];
    if auto_cpu_limit.is_object() {
        configuration.insert(
            "autoCPULimitNamespaceLabelSelector".into(),
            auto_cpu_limit.clone(),
        );
    }
    configuration.insert(
        "network".into(),
        json!({"defaultNetworkInterface": "masquerade"}),
    );
    let migration = &hc_spec["liveMigrationConfig"];
    if migration.is_object() {
        configuration.insert("migrations".into(), migration.clone());
    }
    if let Some(devices) = hardware::permitted_host_devices(hc_spec) {
        configuration.insert("permittedHostDevices".into(), devices);
    }
    configuration.insert(
        "obsoleteCPUModels".into(),
        hardware::obsolete_cpu_models(hc_spec),
    );
    copy(&mut configuration, "evictionStrategy", hc_spec);
    // v1beta1 spells it with a capital C; unset leaves KubeVirt's default (deployed).
    if let Some(deployment) = hc_spec
        .get("CommonInstancetypesDeployment")
        .filter(|v| !v.is_null())
    {
        configuration.insert("commonInstancetypesDeployment".into(), deployment.clone());
    }
    if let Some(instancetype) = hc_spec.get("instancetypeConfig").filter(|v| !v.is_null()) {
        configuration.insert("instancetype".into(), instancetype.clone());
    }
    configuration.insert(
        "seccompConfiguration".into(),
        json!({"virtualMachineInstanceProfile": {"customProfile": {"localhostProfile": "kubevirt/kubevirt.json"}}}),
    );
    configuration.insert("vmRolloutStrategy".into(), json!("LiveUpdate"));
    let mut kv_spec = Map::new();
    kv_spec.insert("uninstallStrategy".into(), json!(uninstall_strategy(hc)));
    kv_spec.insert("configuration".into(), Value::Object(configuration));
    kv_spec.insert(
        "certificateRotateStrategy".into(),
        certificate_rotation(hc_spec),
    );
    kv_spec.insert(
        "workloadUpdateStrategy".into(),
        hc_spec["workloadUpdateStrategy"].clone(),
    );
    kv_spec.insert("productName".into(), json!("kubevirt-hyperconverged"));
    kv_spec.insert("productComponent".into(), json!("compute"));
    for (hc_key, kv_key) in [("infra", "infra"), ("workloads", "workloads")] {
        if let Some(placement) = kubevirt_placement(&hc_spec[hc_key]) {
            kv_spec.insert(kv_key.into(), placement);
        }
    }
    if kv_spec["workloadUpdateStrategy"].is_null() {
        kv_spec.remove("workloadUpdateStrategy");
    }
    json!({"spec": kv_spec})
}

/// HCO's certConfig as KubeVirt's self-signed rotation settings.
fn certificate_rotation(hc_spec: &Value) -> Value {
    let cert = &hc_spec["certConfig"];
    let field = |part: &str, key: &str| {
        let default = api::hco::default_cert_duration(part, key);
        cert[part][key].as_str().unwrap_or(default).to_owned()
    };
    json!({"selfSigned": {
        "ca": {"duration": field("ca", "duration"), "renewBefore": field("ca", "renewBefore")},
        "server": {"duration": field("server", "duration"), "renewBefore": field("server", "renewBefore")},
    }})
}

/// The CDI CR of `hc`: HCO's CDI feature gates, its import settings, uninstall strategy.
pub fn cdi(hc: &Value) -> Value {
    let hc_spec = spec(hc);
    let mut config = Map::new();
    config.insert("featureGates".into(), json!(CDI_GATES));
    if let Some(registries) = hc_spec["storageImport"]["insecureRegistries"].as_array() {
        config.insert("insecureRegistries".into(), json!(registries));
    }
    copy(&mut config, "filesystemOverhead", hc_spec);
    copy(&mut config, "scratchSpaceStorageClass", hc_spec);
    if let Some(resources) = hc_spec["resourceRequirements"].get("storageWorkloads") {
        config.insert("podResourceRequirements".into(), resources.clone());
    }
    let mut cdi_spec = Map::new();
    cdi_spec.insert("uninstallStrategy".into(), json!(uninstall_strategy(hc)));
    cdi_spec.insert("config".into(), Value::Object(config));
    cdi_spec.insert("certConfig".into(), cdi_cert_config(hc_spec));
    if let Some(placement) = hc_spec["infra"]
        .get("nodePlacement")
        .filter(|p| !p.is_null())
    {
        // CDI's infra holds the placement inline, beside its replica counts.
        cdi_spec.insert("infra".into(), placement.clone());
    }
    if let Some(placement) = hc_spec["workloads"]
        .get("nodePlacement")
        .filter(|p| !p.is_null())
    {
        cdi_spec.insert("workload".into(), placement.clone());
    }
    json!({"spec": cdi_spec})
}

fn cdi_cert_config(hc_spec: &Value) -> Value {
    let rotation = certificate_rotation(hc_spec);
    rotation["selfSigned"].clone()
}

/// The NetworkAddonsConfig of `hc`: Multus, the Linux bridge and the MAC pool.
pub fn network_addons(hc: &Value) -> Value {
    let hc_spec = spec(hc);
    let mut mac_pool = Map::new();
    let pool = &hc_spec["kubeMacPoolConfiguration"];
    copy(&mut mac_pool, "rangeStart", pool);
    copy(&mut mac_pool, "rangeEnd", pool);
    json!({"spec": {
        "multus": {},
        "linuxBridge": {},
        "kubeMacPool": mac_pool,
        "imagePullPolicy": "IfNotPresent",
    }})
}

/// The SSP CR of `hc`: the common templates namespace, the boot sources HCO offers when
/// `enableCommonBootImageImport` is on (HC's `dataImportCronTemplates` win over them).
pub fn ssp(hc: &Value) -> Value {
    let hc_spec = spec(hc);
    let namespace = hc_spec["commonTemplatesNamespace"]
        .as_str()
        .unwrap_or(DEFAULT_COMMON_TEMPLATES_NAMESPACE);
    let mut common_templates = Map::new();
    common_templates.insert("namespace".into(), json!(namespace));
    if boot_image_import(hc) {
        let templates: Vec<Value> = hc_spec["dataImportCronTemplates"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !templates.is_empty() {
            common_templates.insert("dataImportCronTemplates".into(), json!(templates));
        }
    }
    json!({"spec": {
        "commonTemplates": common_templates,
        "templateValidator": {"replicas": 1},
    }})
}

/// The name of the TektonTasks CR HCO makes for the HC `hc_name`, as HCO v1.9 named it
/// (`controllers/operands/tto.go`, `NewTTOWithNameOnly`).
pub fn tekton_tasks_name(hc_name: &str) -> String {
    format!("tto-{hc_name}")
}

/// The TektonTasks CR of `hc`. HCO v1.10 and v1.11 passed these HC fields to SSP v1beta2
/// (`controllers/operands/ssp.go`): `featureGates.deployTektonTaskResources` to
/// `spec.featureGates.deployTektonTaskResources` (off unless set), `tektonPipelinesNamespace`
/// and `tektonTasksNamespace` to `spec.tektonPipelines.namespace` and
/// `spec.tektonTasks.namespace`, each the HC's namespace when unset. The SSP written here
/// is v1beta3, which has no Tekton fields, so the same mapping goes to the TektonTasks CR
/// HCO v1.9 made (`controllers/operands/tto.go`), whose `pipelines`/`tasks` namespaces and
/// feature gate are SSP v1beta2's.
pub fn tekton_tasks(hc: &Value) -> Value {
    let hc_spec = spec(hc);
    let hc_namespace = hc["metadata"]["namespace"].as_str().unwrap_or_default();
    let namespace_of = |field: &str| hc_spec[field].as_str().unwrap_or(hc_namespace).to_owned();
    let deploy = hc_spec["featureGates"]["deployTektonTaskResources"]
        .as_bool()
        .unwrap_or(false);
    json!({"spec": {
        "featureGates": {"deployTektonTaskResources": deploy},
        "pipelines": {"namespace": namespace_of("tektonPipelinesNamespace")},
        "tasks": {"namespace": namespace_of("tektonTasksNamespace")},
    }})
}

/// Whether HCO imports golden images (on by default; the feature gate of older HCs is
/// honoured when the field is unset).
fn boot_image_import(hc: &Value) -> bool {
    let hc_spec = spec(hc);
    hc_spec["enableCommonBootImageImport"]
        .as_bool()
        .or_else(|| hc_spec["featureGates"]["enableCommonBootImageImport"].as_bool())
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hc(spec: Value) -> Value {
        json!({"metadata": {"name": HYPERCONVERGED_NAME, "namespace": "kubevirt-hyperconverged"}, "spec": spec})
    }

    #[test]
    fn common_instancetypes_deployment_goes_to_the_kubevirt_cr_when_set() {
        let unset = kubevirt(&hc(json!({})), false);
        assert!(
            unset["spec"]["configuration"]
                .get("commonInstancetypesDeployment")
                .is_none()
        );
        let off = kubevirt(
            &hc(json!({"CommonInstancetypesDeployment": {"enabled": false}})),
            false,
        );
        assert_eq!(
            off["spec"]["configuration"]["commonInstancetypesDeployment"],
            json!({"enabled": false})
        );
    }

    #[test]
    fn kubevirt_gets_hco_defaults_and_masquerade() {
        let kv = kubevirt(&hc(json!({})), true);
        let config = &kv["spec"]["configuration"];
        assert_eq!(config["network"]["defaultNetworkInterface"], "masquerade");
        assert_eq!(config["developerConfiguration"]["useEmulation"], true);
        assert_eq!(
            kv["spec"]["uninstallStrategy"],
            "BlockUninstallIfWorkloadsExist"
        );
        let gates = kubevirt_feature_gates(&hc(json!({})));
        for expected in [
            "CPUManager",
            "VideoConfig",
            "DecentralizedLiveMigration",
            "DeclarativeHotplugVolumes",
        ] {
            assert!(
                gates.iter().any(|g| g == expected),
                "{expected} missing from {gates:?}"
            );
        }
        assert!(!gates.iter().any(|g| g == "DownwardMetrics"));
        assert!(!gates.iter().any(|g| g == "HotplugVolumes"));
    }

    #[test]
    fn the_resource_requirements_reach_the_kubevirt_cr() {
        let selector = json!({"matchLabels": {"autoCpuLimit": "true"}});
        let kv = kubevirt(
            &hc(json!({"resourceRequirements": {
                "vmiCPUAllocationRatio": 4, "autoCPULimitNamespaceLabelSelector": selector}})),
            false,
        );
        let config = &kv["spec"]["configuration"];
        assert_eq!(config["developerConfiguration"]["cpuAllocationRatio"], 4);
        assert_eq!(config["autoCPULimitNamespaceLabelSelector"], selector);
        let plain = kubevirt(&hc(json!({})), false);
        assert!(plain["spec"]["configuration"]["autoCPULimitNamespaceLabelSelector"].is_null());
    }

    #[test]
    fn obsolete_cpus_and_host_devices_reach_the_kubevirt_cr_in_its_shape() {
        let kv = kubevirt(
            &hc(json!({
                "obsoleteCPUs": {"cpuModels": ["Penryn"], "minCPUModel": "Haswell"},
                "permittedHostDevices": {
                    "pciHostDevices": [{"pciDeviceSelector": "10DE:1EB8", "resourceName": "nvidia.com/T4"}],
                    "usbHostDevices": [{"resourceName": "kubevirt.io/usb", "disabled": true}],
                },
            })),
            false,
        );
        let config = &kv["spec"]["configuration"];
        // Upstream HCO's getKVConfig: the HC's models join HCO's built-in ones (486 is one),
        // minCPUModel is ignored, the PCI selector is renamed, disabled devices dropped.
        assert_eq!(config["obsoleteCPUModels"]["Penryn"], true);
        assert_eq!(config["obsoleteCPUModels"]["486"], true);
        assert!(config.get("minCPUModel").is_none());
        assert_eq!(
            config["permittedHostDevices"],
            json!({"pciHostDevices": [{"pciVendorSelector": "10DE:1EB8", "resourceName": "nvidia.com/T4"}]})
        );
        let plain = kubevirt(&hc(json!({})), false);
        let plain_config = &plain["spec"]["configuration"];
        assert!(plain_config.get("permittedHostDevices").is_none());
        assert!(
            plain_config
                .get("obsoleteCPUModels")
                .is_some_and(|m| m["486"] == true)
        );
        assert!(plain_config["obsoleteCPUModels"].get("Penryn").is_none());
    }

    #[test]
    fn hc_feature_gates_map_to_kubevirt_gates() {
        let gates = kubevirt_feature_gates(&hc(json!({"featureGates": {
            "downwardMetrics": true, "videoConfig": false, "declarativeHotplugVolumes": false,
        }})));
        assert!(gates.iter().any(|g| g == "DownwardMetrics"));
        assert!(!gates.iter().any(|g| g == "VideoConfig"));
        assert!(!gates.iter().any(|g| g == "DeclarativeHotplugVolumes"));
        assert!(gates.iter().any(|g| g == "HotplugVolumes"));
    }

    #[test]
    fn remove_workloads_is_passed_on_and_anything_else_blocks() {
        let remove = hc(json!({"uninstallStrategy": "RemoveWorkloads"}));
        assert_eq!(
            kubevirt(&remove, false)["spec"]["uninstallStrategy"],
            "RemoveWorkloads"
        );
        assert_eq!(cdi(&remove)["spec"]["uninstallStrategy"], "RemoveWorkloads");
        let other = hc(json!({"uninstallStrategy": "Whatever"}));
        assert_eq!(
            cdi(&other)["spec"]["uninstallStrategy"],
            "BlockUninstallIfWorkloadsExist"
        );
    }

    #[test]
    fn cdi_takes_import_settings_and_placement() {
        let cdi = cdi(&hc(json!({
            "storageImport": {"insecureRegistries": ["registry.local:5000"]},
            "filesystemOverhead": {"global": "0.1"},
            "workloads": {"nodePlacement": {"nodeSelector": {"disk": "fast"}}},
            "infra": {"nodePlacement": {"nodeSelector": {"role": "infra"}}},
        })));
        assert_eq!(
            cdi["spec"]["infra"],
            json!({"nodeSelector": {"role": "infra"}}),
            "inline, as CDI's schema has it"
        );
        let config = &cdi["spec"]["config"];
        assert_eq!(config["insecureRegistries"], json!(["registry.local:5000"]));
        assert_eq!(config["filesystemOverhead"]["global"], "0.1");
        assert_eq!(config["featureGates"][0], "HonorWaitForFirstConsumer");
        assert_eq!(cdi["spec"]["workload"]["nodeSelector"]["disk"], "fast");
    }

    #[test]
    fn cert_config_reaches_kubevirt_and_cdi() {
        let spec = json!({"certConfig": {"ca": {"duration": "96h0m0s", "renewBefore": "48h0m0s"}}});
        let kv = kubevirt(&hc(spec.clone()), false);
        let rotation = &kv["spec"]["certificateRotateStrategy"]["selfSigned"];
        assert_eq!(rotation["ca"]["duration"], "96h0m0s");
        assert_eq!(rotation["server"]["duration"], "24h0m0s");
        assert_eq!(
            cdi(&hc(spec))["spec"]["certConfig"]["ca"]["renewBefore"],
            "48h0m0s"
        );
    }

    #[test]
    fn ssp_gets_the_templates_namespace_and_boot_sources_when_enabled() {
        let crons = json!([{"metadata": {"name": "fedora-image-cron"}, "spec": {"managedDataSource": "fedora"}}]);
        let on = ssp(&hc(json!({"dataImportCronTemplates": crons})));
        assert_eq!(on["spec"]["commonTemplates"]["namespace"], "openshift");
        assert_eq!(
            on["spec"]["commonTemplates"]["dataImportCronTemplates"],
            crons
        );
        let off = ssp(&hc(json!({
            "enableCommonBootImageImport": false,
            "dataImportCronTemplates": crons,
            "commonTemplatesNamespace": "templates",
        })));
        assert_eq!(off["spec"]["commonTemplates"]["namespace"], "templates");
        assert!(
            off["spec"]["commonTemplates"]
                .get("dataImportCronTemplates")
                .is_none()
        );
    }

    #[test]
    fn tekton_fields_of_the_hc_map_as_hco_v1_10_mapped_them() {
        let unset = tekton_tasks(&hc(json!({})));
        assert_eq!(
            unset["spec"],
            json!({
                "featureGates": {"deployTektonTaskResources": false},
                "pipelines": {"namespace": "kubevirt-hyperconverged"},
                "tasks": {"namespace": "kubevirt-hyperconverged"},
            })
        );
        let set = tekton_tasks(&hc(json!({
            "featureGates": {"deployTektonTaskResources": true},
            "tektonPipelinesNamespace": "pipelines",
            "tektonTasksNamespace": "tasks",
        })));
        assert_eq!(
            set["spec"]["featureGates"]["deployTektonTaskResources"],
            true
        );
        assert_eq!(set["spec"]["pipelines"]["namespace"], "pipelines");
        assert_eq!(set["spec"]["tasks"]["namespace"], "tasks");
        assert_eq!(
            tekton_tasks_name(HYPERCONVERGED_NAME),
            "tto-kubevirt-hyperconverged"
        );
        // What HCO writes is a TektonTasks the typed CR reads.
        let typed: api::tekton_tasks::TektonTasks = serde_json::from_value(json!({
            "apiVersion": "tektontasks.kubevirt.io/v1alpha1", "kind": "TektonTasks",
            "metadata": {"name": "tto-kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged"},
            "spec": set["spec"],
        }))
        .unwrap();
        assert!(typed.deploys_task_resources());
        assert_eq!(typed.tasks_namespace(), "tasks");
    }

    #[test]
    fn mac_pool_range_reaches_the_network_addons() {
        let nac = network_addons(&hc(json!({"kubeMacPoolConfiguration": {
            "rangeStart": "02:00:00:00:00:00", "rangeEnd": "02:00:00:00:ff:ff",
        }})));
        assert_eq!(
            nac["spec"]["kubeMacPool"]["rangeStart"],
            "02:00:00:00:00:00"
        );
        assert!(nac["spec"]["linuxBridge"].is_object());
    }

    /// What HCO builds is CNAO's typed spec exactly: every field it sets is one the
    /// NetworkAddonsConfig declares, and reads back unchanged.
    #[test]
    fn the_network_addons_spec_is_the_typed_one() {
        for hc_spec in [
            json!({}),
            json!({"kubeMacPoolConfiguration": {
                "rangeStart": "02:00:00:00:00:00", "rangeEnd": "02:00:00:00:ff:ff",
            }}),
        ] {
            let spec = network_addons(&hc(hc_spec))["spec"].clone();
            let typed: api::cnao::NetworkAddonsConfigSpec =
                serde_json::from_value(spec.clone()).expect("HCO's spec reads typed");
            assert_eq!(serde_json::to_value(&typed).unwrap(), spec);
            assert_eq!(typed.multus, Some(api::cnao::Enabled {}));
            assert_eq!(typed.linux_bridge, Some(api::cnao::Enabled {}));
            assert!(typed.kube_mac_pool.is_some());
        }
    }
}
