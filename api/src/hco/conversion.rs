//! HyperConverged between `hco.kubevirt.io/v1beta1` and `v1`, as HCO's conversion webhook
//! converts it. v1 (the storage version) groups v1beta1's flat spec into sections
//! (`virtualization`, `storage`, `networking`, `workloadSources`, `security`,
//! `deployment`), turns the feature gates into a list of `{name, state}`, and gives three
//! deprecated gates fields of their own. What v1beta1 cannot say rides along in annotation
//! [`V1_ONLY_FIELDS_ANNOTATION`], so a v1beta1 client that reads and writes back loses
//! nothing. Fields only v1beta1 has (deprecated, ignored by HCO) do not survive the way up.
//!
//! Written on JSON rather than typed structs: both versions carry large parts (KubeVirt's
//! migration settings, CDI's overhead, TLS profiles) this crate keeps as they come, and the
//! conversion moves those subtrees whole.
//!
//! One difference from upstream HEAD: `videoConfig` is still a (beta) gate here, since the
//! KubeVirt this platform follows gates the video device (upstream's is GA and dropped it).

use serde_json::{Map, Value, json};

/// The annotation a v1beta1 object keeps v1's fields in.
pub const V1_ONLY_FIELDS_ANNOTATION: &str = "hco.kubevirt.io/v1-only-fields";

/// The API versions.
pub const V1: &str = "hco.kubevirt.io/v1";
pub const V1BETA1: &str = "hco.kubevirt.io/v1beta1";

/// Why an object cannot be converted.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConversionError {
    #[error("unable to parse the {V1_ONLY_FIELDS_ANNOTATION} annotation: {0}")]
    Annotation(String),
    #[error("cannot convert a HyperConverged from {from:?} to {to:?}")]
    Versions { from: String, to: String },
}

/// The kind converted.
pub const KIND: &str = "HyperConverged";

/// [`convert`] as a conversion webhook answers: the object, or the message of its failure.
pub fn webhook(object: &Value, api_version: &str) -> Result<Value, String> {
    convert(object, api_version).map_err(|err| err.to_string())
}

/// `object` (a HyperConverged of either version) at `api_version`.
pub fn convert(object: &Value, api_version: &str) -> Result<Value, ConversionError> {
    let from = object["apiVersion"].as_str().unwrap_or_default();
    match (from, api_version) {
        (from, to) if from == to => Ok(object.clone()),
        (V1BETA1, V1) => to_v1(object),
        (V1, V1BETA1) => Ok(to_v1beta1(object)),
        (from, to) => Err(ConversionError::Versions {
            from: from.to_owned(),
            to: to.to_owned(),
        }),
    }
}

/// Spec fields that only move: (v1beta1 path, v1 path), dotted.
const MOVED: &[(&str, &str)] = &[
    ("liveMigrationConfig", "virtualization.liveMigrationConfig"),
    (
        "permittedHostDevices",
        "virtualization.permittedHostDevices",
    ),
    ("evictionStrategy", "virtualization.evictionStrategy"),
    (
        "higherWorkloadDensity",
        "virtualization.higherWorkloadDensity",
    ),
    ("ksmConfiguration", "virtualization.ksmConfiguration"),
    (
        "changedBlockTrackingLabelSelectors",
        "virtualization.changedBlockTrackingLabelSelectors",
    ),
    (
        "liveUpdateConfiguration",
        "virtualization.liveUpdateConfiguration",
    ),
    (
        "roleAggregationStrategy",
        "virtualization.roleAggregationStrategy",
    ),
    (
        "workloadUpdateStrategy",
        "virtualization.workloadUpdateStrategy",
    ),
    (
        "resourceRequirements.vmiCPUAllocationRatio",
        "virtualization.vmiCPUAllocationRatio",
    ),
    (
        "resourceRequirements.autoCPULimitNamespaceLabelSelector",
        "virtualization.autoCPULimitNamespaceLabelSelector",
    ),
    (
        "resourceRequirements.storageWorkloads",
        "storage.workloadResourceRequirements",
    ),
    (
        "scratchSpaceStorageClass",
        "storage.scratchSpaceStorageClass",
    ),
    ("vmStateStorageClass", "storage.vmStateStorageClass"),
    ("storageImport", "storage.storageImport"),
    ("filesystemOverhead", "storage.filesystemOverhead"),
    (
        "kubeSecondaryDNSNameServerIP",
        "networking.kubeSecondaryDNSNameServerIP",
    ),
    (
        "kubeMacPoolConfiguration",
        "networking.kubeMacPoolConfiguration",
    ),
    ("networkBinding", "networking.networkBinding"),
    (
        "commonTemplatesNamespace",
        "workloadSources.commonTemplatesNamespace",
    ),
    (
        "commonBootImageNamespace",
        "workloadSources.commonBootImageNamespace",
    ),
    (
        "enableCommonBootImageImport",
        "workloadSources.enableCommonBootImageImport",
    ),
    ("instancetypeConfig", "workloadSources.instancetypeConfig"),
    // v1beta1 really spells this one with a capital C.
    (
        "CommonInstancetypesDeployment",
        "workloadSources.commonInstancetypesDeployment",
    ),
    ("certConfig", "security.certConfig"),
    ("tlsSecurityProfile", "security.tlsSecurityProfile"),
    ("uninstallStrategy", "deployment.uninstallStrategy"),
    ("logVerbosityConfig", "deployment.logVerbosityConfig"),
    ("deployVmConsoleProxy", "deployment.deployVmConsoleProxy"),
    ("infra.nodePlacement", "deployment.nodePlacements.infra"),
    (
        "workloads.nodePlacement",
        "deployment.nodePlacements.workload",
    ),
    (
        "enableApplicationAwareQuota",
        "deployment.applicationAwareConfig.enable",
    ),
    (
        "defaultCPUModel",
        "virtualization.virtualMachineOptions.defaultCPUModel",
    ),
    (
        "defaultRuntimeClass",
        "virtualization.virtualMachineOptions.defaultRuntimeClass",
    ),
];

/// Lists that move only when they have items.
const MOVED_IF_ANY: &[(&str, &str)] = &[
    ("obsoleteCPUs.cpuModels", "virtualization.obsoleteCPUModels"),
    ("hypervisors", "virtualization.hypervisors"),
    (
        "dataImportCronTemplates",
        "workloadSources.dataImportCronTemplates",
    ),
];

/// Objects whose fields move with them (v1beta1 path, v1 path, the fields).
const MOVED_FIELDS: &[(&str, &str, &[&str])] = &[
    (
        "virtualMachineOptions",
        "virtualization.virtualMachineOptions",
        &["disableFreePageReporting", "disableSerialConsoleLog"],
    ),
    (
        "applicationAwareConfig",
        "deployment.applicationAwareConfig",
        &[
            "vmiCalcConfigName",
            "namespaceSelector",
            "allowApplicationAwareClusterResourceQuota",
        ],
    ),
];

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    /// On unless the list disables it.
    Beta,
    /// Off unless the list enables it.
    Alpha,
}

/// The gates with a v1beta1 field of the same name, and their phases.
const GATES: &[(&str, Phase)] = &[
    ("decentralizedLiveMigration", Phase::Beta),
    ("declarativeHotplugVolumes", Phase::Beta),
    ("videoConfig", Phase::Beta),
    ("alignCPUs", Phase::Alpha),
    ("containerPathVolumes", Phase::Alpha),
    ("deployKubeSecondaryDNS", Phase::Alpha),
    ("downwardMetrics", Phase::Alpha),
    ("incrementalBackup", Phase::Alpha),
    ("objectGraph", Phase::Alpha),
];

/// Deprecated v1beta1 gates that v1 made fields: (gate, v1 path, whether the field is the
/// gate's negation, the annotation key that keeps the field).
const GRADUATED: &[(&str, &str, bool, &str)] = &[
    (
        "disableMDevConfiguration",
        "virtualization.mediatedDevicesConfiguration.enabled",
        true,
        "mdevConfigEnable",
    ),
    (
        "persistentReservation",
        "storage.persistentReservationConfiguration.enabled",
        false,
        "persistentReservationEnabled",
    ),
    (
        "enableMultiArchBootImageImport",
        "workloadSources.enableMultiArchBootImageImport",
        false,
        "multiArchEnabled",
    ),
];

/// v1-only fields kept in the annotation besides the graduated gates: (key, v1 path).
const V1_ONLY: &[(&str, &str)] = &[
    (
        "deployNetworkResourcesInjector",
        "deployment.deployNetworkResourcesInjector",
    ),
    ("observability", "observability"),
];

fn get<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(value, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

fn put(value: &mut Value, path: &str, field: Value) {
    let target = path.split('.').fold(value, |v, key| {
        if !v.is_object() {
            *v = json!({});
        }
        &mut v[key]
    });
    *target = field;
}

/// Moves every field of `MOVED*` from `from` to `to`; `up` says which side is v1beta1.
fn move_fields(from: &Value, to: &mut Value, up: bool) {
    let pick = |(beta, v1): (&'static str, &'static str)| if up { (beta, v1) } else { (v1, beta) };
    for &pair in MOVED {
        let (source, target) = pick(pair);
        if let Some(field) = get(from, source) {
            put(to, target, field.clone());
        }
    }
    for &pair in MOVED_IF_ANY {
        let (source, target) = pick(pair);
        if let Some(items) =
            get(from, source).filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        {
            put(to, target, items.clone());
        }
    }
    for &(beta, v1, fields) in MOVED_FIELDS {
        let (source, target) = pick((beta, v1));
        let Some(object) = get(from, source) else {
            continue;
        };
        let mut moved = get(to, target).cloned().unwrap_or_else(|| json!({}));
        for field in fields {
            if let Some(value) = object.get(*field).filter(|v| !v.is_null()) {
                moved[*field] = value.clone();
            }
        }
        put(to, target, moved);
    }
}

/// The mediated devices, without the spellings v1 dropped (up) or the `enabled` v1beta1
/// has no field for (down).
fn mediated_devices(from: &Value, up: bool) -> Option<Value> {
    let config = get(
        from,
        if up {
            "mediatedDevicesConfiguration"
        } else {
            "virtualization.mediatedDevicesConfiguration"
        },
    )?;
    let mut out = json!({});
    if let Some(types) = get(config, "mediatedDeviceTypes") {
        out["mediatedDeviceTypes"] = types.clone();
    }
    if let Some(nodes) = config["nodeMediatedDeviceTypes"].as_array() {
        let nodes: Vec<Value> = nodes
            .iter()
            .map(|node| {
                json!({"nodeSelector": node["nodeSelector"], "mediatedDeviceTypes": node["mediatedDeviceTypes"]})
            })
            .collect();
        out["nodeMediatedDeviceTypes"] = json!(nodes);
    }
    Some(out)
}

fn gate_index(list: &[Value], name: &str) -> Option<usize> {
    list.iter().position(|gate| {
        gate["name"]
            .as_str()
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
    })
}

/// Whether a list entry turns its gate on (a missing state is `Enabled`).
fn entry_enabled(entry: &Value) -> bool {
    entry["state"].as_str() != Some("Disabled")
}

fn state(on: bool) -> &'static str {
    if on { "Enabled" } else { "Disabled" }
}

/// Sets the gate `name` in `list` explicitly, keeping an entry's spelling.
fn set_gate(list: &mut Vec<Value>, name: &str, on: bool) {
    match gate_index(list, name) {
        Some(index) => list[index]["state"] = json!(state(on)),
        None => list.push(json!({"name": name, "state": state(on)})),
    }
}

/// A v1beta1 HyperConverged as v1.
pub fn to_v1(beta: &Value) -> Result<Value, ConversionError> {
    let mut out = beta.clone();
    out["apiVersion"] = json!(V1);
    let kept = take_annotation(&mut out)?;
    let from = &beta["spec"];
    let mut spec = json!({});
    for &(key, path) in V1_ONLY {
        if let Some(value) = kept.get(key).filter(|v| !v.is_null()) {
            put(&mut spec, path, value.clone());
        }
    }
    for &(_, path, _, key) in GRADUATED {
        if let Some(value) = kept.get(key).filter(|v| !v.is_null()) {
            put(&mut spec, path, value.clone());
        }
    }
    move_fields(from, &mut spec, true);
    if let Some(mdev) = mediated_devices(from, true) {
        let mut merged = get(&spec, "virtualization.mediatedDevicesConfiguration")
            .cloned()
            .unwrap_or_else(|| json!({}));
        merge_into(&mut merged, mdev);
        put(
            &mut spec,
            "virtualization.mediatedDevicesConfiguration",
            merged,
        );
    }
    if from["tuningPolicy"] == "annotation" {
        put(
            &mut spec,
            "virtualization.tuningPolicy",
            json!("annotation"),
        );
    }
    let mut gates: Vec<Value> = kept["featureGates"].as_array().cloned().unwrap_or_default();
    gates_up(&from["featureGates"], &mut gates, &mut spec);
    if !gates.is_empty() {
        spec["featureGates"] = json!(gates);
    }
    out["spec"] = spec;
    Ok(out)
}

fn merge_into(target: &mut Value, fields: Value) {
    if let (Some(target), Value::Object(fields)) = (target.as_object_mut(), fields) {
        target.extend(fields);
    }
}

/// The v1-only fields a v1beta1 object carries, removed from it.
fn take_annotation(object: &mut Value) -> Result<Value, ConversionError> {
    let annotations = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"));
    let Some(annotations) = annotations.and_then(Value::as_object_mut) else {
        return Ok(json!({}));
    };
    let text = match annotations
        .get(V1_ONLY_FIELDS_ANNOTATION)
        .and_then(Value::as_str)
    {
        None | Some("") => return Ok(json!({})),
        Some(text) => text.to_owned(),
    };
    annotations.remove(V1_ONLY_FIELDS_ANNOTATION);
    if annotations.is_empty() {
        if let Some(metadata) = object["metadata"].as_object_mut() {
            metadata.remove("annotations");
        }
    }
    let kept: Value =
        serde_json::from_str(&text).map_err(|e| ConversionError::Annotation(e.to_string()))?;
    if !kept.is_object() {
        return Err(ConversionError::Annotation(format!(
            "{text} is not an object"
        )));
    }
    Ok(kept)
}

/// v1beta1's gate fields into v1's list (which starts as the annotation kept it) and the
/// graduated gates' fields: a gate at its default adds nothing, a null one drops its entry.
fn gates_up(beta_gates: &Value, list: &mut Vec<Value>, spec: &mut Value) {
    for &(name, phase) in GATES {
        let found = gate_index(list, name);
        match beta_gates[name].as_bool() {
            None => {
                if let Some(index) = found {
                    list.remove(index);
                }
            }
            Some(on) => {
                let differs = match found {
                    Some(index) => entry_enabled(&list[index]) != on,
                    None => on != (phase == Phase::Beta),
                };
                if differs {
                    set_gate(list, name, on);
                }
            }
        }
    }
    for &(name, path, negated, _) in GRADUATED {
        let Some(on) = beta_gates[name].as_bool() else {
            continue;
        };
        put(spec, path, json!(on != negated));
        if let Some(index) = gate_index(list, name) {
            if entry_enabled(&list[index]) != on {
                list[index]["state"] = json!(state(on));
            }
        }
    }
}

/// A v1 HyperConverged as v1beta1.
pub fn to_v1beta1(v1: &Value) -> Value {
    let mut out = v1.clone();
    out["apiVersion"] = json!(V1BETA1);
    let from = &v1["spec"];
    let mut spec = json!({});
    move_fields(from, &mut spec, false);
    if let Some(mdev) = mediated_devices(from, false) {
        spec["mediatedDevicesConfiguration"] = mdev;
    }
    if let Some(policy) = get(from, "virtualization.tuningPolicy") {
        spec["tuningPolicy"] = policy.clone();
    }
    let list: Vec<Value> = from["featureGates"].as_array().cloned().unwrap_or_default();
    let mut gates = json!({});
    for &(name, phase) in GATES {
        let on = gate_index(&list, name).map_or(phase == Phase::Beta, |i| entry_enabled(&list[i]));
        gates[name] = json!(on);
    }
    let mut kept = Map::new();
    for &(key, path) in V1_ONLY {
        if let Some(value) = get(from, path) {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    for &(name, path, negated, key) in GRADUATED {
        if let Some(on) = get(from, path).and_then(Value::as_bool) {
            gates[name] = json!(on != negated);
            kept.insert(key.to_owned(), json!(on));
        }
    }
    if !list.is_empty() {
        kept.insert("featureGates".to_owned(), json!(list));
    }
    spec["featureGates"] = gates;
    out["spec"] = spec;
    if !kept.is_empty() {
        let text = Value::Object(kept).to_string();
        out["metadata"]["annotations"][V1_ONLY_FIELDS_ANNOTATION] = json!(text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hc(api_version: &str, spec: Value) -> Value {
        json!({"apiVersion": api_version, "kind": "HyperConverged",
               "metadata": {"name": "kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged"},
               "spec": spec, "status": {"systemHealthStatus": "healthy"}})
    }

    #[test]
    fn the_flat_v1beta1_spec_moves_into_v1_sections_and_back() {
        let beta = hc(
            V1BETA1,
            json!({
                "infra": {"nodePlacement": {"nodeSelector": {"role": "infra"}}},
                "workloads": {"nodePlacement": {"nodeSelector": {"role": "worker"}}},
                "liveMigrationConfig": {"parallelMigrationsPerCluster": 5},
                "certConfig": {"ca": {"duration": "48h0m0s"}},
                "resourceRequirements": {"vmiCPUAllocationRatio": 8, "storageWorkloads": {"limits": {"cpu": "1"}}},
                "storageImport": {"insecureRegistries": ["registry.local:5000"]},
                "uninstallStrategy": "BlockUninstallIfWorkloadsExist",
                "kubeMacPoolConfiguration": {"rangeStart": "02:00:00:00:00:00", "rangeEnd": "02:00:00:00:ff:ff"},
                "CommonInstancetypesDeployment": {"enabled": false},
                "defaultCPUModel": "Haswell",
                "virtualMachineOptions": {"disableSerialConsoleLog": true},
                "obsoleteCPUs": {"cpuModels": ["486"], "minCPUModel": "Penryn"},
                "enableApplicationAwareQuota": true,
                "tuningPolicy": "annotation",
                "vddkInitImage": "quay.io/vddk:1",
            }),
        );
        let v1 = convert(&beta, V1).unwrap();
        let spec = &v1["spec"];
        assert_eq!(v1["apiVersion"], V1);
        assert_eq!(
            spec["deployment"]["nodePlacements"]["infra"]["nodeSelector"]["role"],
            "infra"
        );
        assert_eq!(
            spec["deployment"]["nodePlacements"]["workload"]["nodeSelector"]["role"],
            "worker"
        );
        assert_eq!(
            spec["virtualization"]["liveMigrationConfig"]["parallelMigrationsPerCluster"],
            5
        );
        assert_eq!(spec["virtualization"]["vmiCPUAllocationRatio"], 8);
        assert_eq!(
            spec["storage"]["workloadResourceRequirements"]["limits"]["cpu"],
            "1"
        );
        assert_eq!(
            spec["storage"]["storageImport"]["insecureRegistries"][0],
            "registry.local:5000"
        );
        assert_eq!(spec["security"]["certConfig"]["ca"]["duration"], "48h0m0s");
        assert_eq!(
            spec["networking"]["kubeMacPoolConfiguration"]["rangeEnd"],
            "02:00:00:00:ff:ff"
        );
        assert_eq!(
            spec["workloadSources"]["commonInstancetypesDeployment"]["enabled"],
            false
        );
        let options = &spec["virtualization"]["virtualMachineOptions"];
        assert_eq!(
            options,
            &json!({"defaultCPUModel": "Haswell", "disableSerialConsoleLog": true})
        );
        assert_eq!(spec["virtualization"]["obsoleteCPUModels"], json!(["486"]));
        assert_eq!(spec["deployment"]["applicationAwareConfig"]["enable"], true);
        assert_eq!(spec["virtualization"]["tuningPolicy"], "annotation");
        assert!(
            spec.get("vddkInitImage").is_none(),
            "deprecated fields are dropped"
        );
        assert_eq!(v1["status"], beta["status"]);

        let back = convert(&v1, V1BETA1).unwrap();
        let mut expected = beta["spec"].clone();
        expected.as_object_mut().unwrap().remove("vddkInitImage");
        expected["obsoleteCPUs"] = json!({"cpuModels": ["486"]});
        expected["applicationAwareConfig"] = json!({});
        for (name, phase) in GATES {
            expected["featureGates"][*name] = json!(*phase == Phase::Beta);
        }
        assert_eq!(back["spec"], expected);
        assert!(back["metadata"]["annotations"].is_null(), "{back}");
    }

    #[test]
    fn gates_at_their_defaults_add_nothing_and_others_are_listed() {
        let beta = hc(
            V1BETA1,
            json!({"featureGates": {"downwardMetrics": true, "alignCPUs": false,
                                    "decentralizedLiveMigration": false, "videoConfig": true,
                                    "nonRoot": true}}),
        );
        let v1 = convert(&beta, V1).unwrap();
        assert_eq!(
            v1["spec"]["featureGates"],
            json!([{"name": "decentralizedLiveMigration", "state": "Disabled"},
                   {"name": "downwardMetrics", "state": "Enabled"}])
        );
        let back = convert(&v1, V1BETA1).unwrap();
        let gates = &back["spec"]["featureGates"];
        assert_eq!(gates["downwardMetrics"], true);
        assert_eq!(gates["decentralizedLiveMigration"], false);
        assert_eq!(gates["videoConfig"], true);
        assert_eq!(gates["declarativeHotplugVolumes"], true);
        assert!(
            gates.get("nonRoot").is_none(),
            "discontinued gates are dropped"
        );
    }

    #[test]
    fn a_v1beta1_edit_updates_the_v1_entry_in_its_own_spelling() {
        let v1 = hc(
            V1,
            json!({"featureGates": [{"name": "DOWNWARDMETRICS"}, {"name": "somethingNew", "state": "Disabled"}]}),
        );
        let mut beta = convert(&v1, V1BETA1).unwrap();
        assert_eq!(beta["spec"]["featureGates"]["downwardMetrics"], true);
        beta["spec"]["featureGates"]["downwardMetrics"] = json!(false);
        let up = convert(&beta, V1).unwrap();
        assert_eq!(
            up["spec"]["featureGates"],
            json!([{"name": "DOWNWARDMETRICS", "state": "Disabled"},
                   {"name": "somethingNew", "state": "Disabled"}])
        );
        beta["spec"]["featureGates"]["downwardMetrics"] = Value::Null;
        let up = convert(&beta, V1).unwrap();
        assert_eq!(
            up["spec"]["featureGates"],
            json!([{"name": "somethingNew", "state": "Disabled"}]),
            "a null gate goes back to its default"
        );
    }

    #[test]
    fn v1_only_fields_survive_a_v1beta1_round_trip() {
        let v1 = hc(
            V1,
            json!({
                "deployment": {"deployNetworkResourcesInjector": false, "uninstallStrategy": "RemoveWorkloads"},
                "virtualization": {"mediatedDevicesConfiguration": {"enabled": false, "mediatedDeviceTypes": ["nvidia-222"]}},
                "storage": {"persistentReservationConfiguration": {"enabled": true}},
                "workloadSources": {"enableMultiArchBootImageImport": true},
                "observability": {"allowedAlerts": ["VirtControllerDown"]},
                "featureGates": [{"name": "template", "state": "Disabled"}],
            }),
        );
        let beta = convert(&v1, V1BETA1).unwrap();
        let gates = &beta["spec"]["featureGates"];
        assert_eq!(gates["disableMDevConfiguration"], true);
        assert_eq!(gates["persistentReservation"], true);
        assert_eq!(gates["enableMultiArchBootImageImport"], true);
        assert_eq!(
            beta["spec"]["mediatedDevicesConfiguration"],
            json!({"mediatedDeviceTypes": ["nvidia-222"]})
        );
        assert!(beta["metadata"]["annotations"][V1_ONLY_FIELDS_ANNOTATION].is_string());
        let again = convert(&beta, V1).unwrap();
        assert_eq!(again["spec"], v1["spec"]);
        assert!(again["metadata"].get("annotations").is_none(), "{again}");
        // A v1beta1 client's edit of a graduated gate wins over what the annotation kept.
        let mut edited = beta.clone();
        edited["spec"]["featureGates"]["persistentReservation"] = json!(false);
        let up = convert(&edited, V1).unwrap();
        assert_eq!(
            up["spec"]["storage"]["persistentReservationConfiguration"]["enabled"],
            false
        );
    }

    #[test]
    fn converting_twice_gives_what_converting_once_gives() {
        let beta = hc(
            V1BETA1,
            json!({"featureGates": {"alignCPUs": true, "persistentReservation": true},
                   "mediatedDevicesConfiguration": {"mediatedDevicesTypes": ["old"], "mediatedDeviceTypes": ["new"]},
                   "defaultRuntimeClass": "kata", "hypervisors": []}),
        );
        let v1 = convert(&beta, V1).unwrap();
        let v1_again = convert(&convert(&v1, V1BETA1).unwrap(), V1).unwrap();
        assert_eq!(v1_again, v1);
        let beta_once = convert(&v1, V1BETA1).unwrap();
        let beta_twice = convert(&convert(&beta_once, V1).unwrap(), V1BETA1).unwrap();
        assert_eq!(beta_twice, beta_once);
    }

    #[test]
    fn a_bad_annotation_or_version_is_named() {
        let mut beta = hc(V1BETA1, json!({}));
        beta["metadata"]["annotations"][V1_ONLY_FIELDS_ANNOTATION] = json!("{not json");
        let err = convert(&beta, V1).unwrap_err().to_string();
        assert!(
            err.starts_with("unable to parse the hco.kubevirt.io/v1-only-fields annotation"),
            "{err}"
        );
        let err = convert(&hc("hco.kubevirt.io/v2", json!({})), V1).unwrap_err();
        assert!(matches!(err, ConversionError::Versions { .. }));
    }
}
