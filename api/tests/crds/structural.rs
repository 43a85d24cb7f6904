//! Every generated CRD schema must be a structural schema, as the API server requires, and
//! carry the names, scope, subresources and printer columns of upstream.

use api::crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// Collects the structural-schema violations under `s` at `path`.
fn check(s: &JSONSchemaProps, path: &str, problems: &mut Vec<String>) {
    let preserve = s.x_kubernetes_preserve_unknown_fields == Some(true);
    let int_or_string = s.x_kubernetes_int_or_string == Some(true);
    if s.type_.as_deref().is_none_or(str::is_empty) && !preserve && !int_or_string {
        problems.push(format!("{path}: no type"));
    }
    const FORMATS: [&str; 10] = [
        "int32",
        "int64",
        "float",
        "double",
        "byte",
        "date",
        "date-time",
        "password",
        "uri",
        "uuid",
    ];
    if let Some(format) = s.format.as_deref()
        && !FORMATS.contains(&format)
    {
        problems.push(format!(
            "{path}: format {format:?} is not one Kubernetes knows"
        ));
    }
    if s.ref_path.is_some() {
        problems.push(format!("{path}: $ref is not allowed"));
    }
    for (name, list) in [
        ("allOf", &s.all_of),
        ("anyOf", &s.any_of),
        ("oneOf", &s.one_of),
    ] {
        for (i, sub) in list.iter().flatten().enumerate() {
            if sub.type_.is_some() || sub.nullable.is_some() || sub.default.is_some() {
                problems.push(format!(
                    "{path}.{name}[{i}]: type/nullable/default inside {name}"
                ));
            }
        }
    }
    if s.properties.as_ref().is_some_and(|p| !p.is_empty()) && s.additional_properties.is_some() {
        problems.push(format!(
            "{path}: properties and additionalProperties together"
        ));
    }
    // An object without properties is allowed: like upstream's `blank: {}`, it keeps no
    // fields. Untyped JSON (`serde_json::Value` without a schema) is caught as "no type".
    if s.type_.as_deref() == Some("array") {
        match &s.items {
            Some(JSONSchemaPropsOrArray::Schema(items)) => {
                check(items, &format!("{path}[]"), problems)
            }
            _ => problems.push(format!("{path}: array without a single items schema")),
        }
    }
    for (name, prop) in s.properties.iter().flatten() {
        check(prop, &format!("{path}.{name}"), problems);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(additional)) = &s.additional_properties {
        check(additional, &format!("{path}.*"), problems);
    }
}

fn find(kind: &str) -> CustomResourceDefinition {
    crds::all()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"))
}

#[test]
fn every_schema_is_structural() {
    let mut problems = Vec::new();
    for crd in crds::all() {
        for version in &crd.spec.versions {
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref());
            match schema {
                Some(schema) => check(schema, &crd.spec.names.kind, &mut problems),
                None => problems.push(format!("{}: no schema", crd.spec.names.kind)),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checker_catches_violations() {
    let mut problems = Vec::new();
    let bad = JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some([("x".to_owned(), JSONSchemaProps::default())].into()),
        ..Default::default()
    };
    check(&bad, "t", &mut problems);
    assert_eq!(problems, vec!["t.x: no type".to_owned()]);
}

#[test]
fn scopes_and_short_names_follow_upstream() {
    let expect = [
        ("DataVolume", "Namespaced", vec!["dv", "dvs"]),
        ("DataSource", "Namespaced", vec!["das"]),
        ("DataImportCron", "Namespaced", vec!["dic", "dics"]),
        ("CDI", "Cluster", vec!["cdi", "cdis"]),
        ("CDIConfig", "Cluster", vec![]),
        ("StorageProfile", "Cluster", vec![]),
        ("UploadTokenRequest", "Namespaced", vec![]),
        ("HostPathProvisioner", "Cluster", vec![]),
        ("VirtualMachine", "Namespaced", vec!["vm", "vms"]),
        ("VirtualMachineInstance", "Namespaced", vec!["vmi", "vmis"]),
        (
            "VirtualMachineInstancePreset",
            "Namespaced",
            vec!["vmipreset", "vmipresets"],
        ),
        ("KubeVirt", "Namespaced", vec!["kv", "kvs"]),
        (
            "VirtualMachineInstanceReplicaSet",
            "Namespaced",
            vec!["vmirs", "vmirss"],
        ),
        (
            "VirtualMachinePool",
            "Namespaced",
            vec!["vmpool", "vmpools"],
        ),
        ("HyperConverged", "Namespaced", vec!["hco", "hcos"]),
        ("SSP", "Namespaced", vec![]),
        ("NetworkAddonsConfig", "Cluster", vec![]),
        ("TektonTasks", "Namespaced", vec![]),
        ("Task", "Namespaced", vec![]),
        ("TaskRun", "Namespaced", vec!["tr", "trs"]),
        ("Pipeline", "Namespaced", vec![]),
        ("PipelineRun", "Namespaced", vec!["pr", "prs"]),
        (
            "VirtualMachineInstancetype",
            "Namespaced",
            vec!["vminstancetype", "vminstancetypes", "vmf", "vmfs"],
        ),
        (
            "VirtualMachineClusterInstancetype",
            "Cluster",
            vec![
                "vmclusterinstancetype",
                "vmclusterinstancetypes",
                "vmcf",
                "vmcfs",
            ],
        ),
        (
            "VirtualMachinePreference",
            "Namespaced",
            vec!["vmpref", "vmprefs", "vmp", "vmps"],
        ),
        (
            "VirtualMachineClusterPreference",
            "Cluster",
            vec!["vmcp", "vmcps"],
        ),
    ];
    // And the Network Plumbing Working Group's NetworkAttachmentDefinition and OpenShift's
    // Template, checked below.
    assert_eq!(crds::all().len(), expect.len() + 2);
    for (kind, scope, short) in expect {
        let crd = find(kind);
        assert_eq!(crd.spec.scope, scope, "{kind}");
        let got = crd.spec.names.short_names.clone().unwrap_or_default();
        assert_eq!(got, short, "{kind}");
        let version = &crd.spec.versions[0];
        // Upstream's instancetypes, preferences and presets have no status.
        let has_status = !kind.contains("Instancetype")
            && !kind.contains("Preference")
            && kind != "VirtualMachineInstancePreset";
        assert_eq!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            has_status,
            "{kind}: status subresource"
        );
    }
    assert_eq!(find("CDIConfig").spec.names.plural, "cdiconfigs");
    assert_eq!(find("SSP").spec.names.plural, "ssps");
    assert_eq!(find("SSP").spec.versions[0].name, "v1beta3");
    // As upstream's CRD: namespaced, `net-attach-def`, no status.
    let nad = find("NetworkAttachmentDefinition");
    assert_eq!(nad.spec.scope, "Namespaced");
    assert_eq!(nad.spec.names.plural, "network-attachment-definitions");
    assert_eq!(
        nad.spec.names.short_names.as_deref(),
        Some(&["net-attach-def".to_owned()][..])
    );
    assert!(nad.spec.versions[0].subresources.is_none());
    // OpenShift serves Templates itself: namespaced, no short names, no status.
    let template = find("Template");
    assert_eq!(template.spec.scope, "Namespaced");
    assert_eq!(template.spec.names.plural, "templates");
    assert!(template.spec.names.short_names.is_none());
    assert!(template.spec.versions[0].subresources.is_none());
}

#[test]
fn data_volume_printer_columns_follow_upstream() {
    let crd = find("DataVolume");
    let columns: Vec<(String, String, String)> = crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.type_.clone(), c.json_path.clone()))
        .collect();
    let expect = [
        ("Phase", "string", ".status.phase"),
        ("Progress", "string", ".status.progress"),
        ("Restarts", "integer", ".status.restartCount"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ];
    let expect: Vec<(String, String, String)> = expect
        .iter()
        .map(|(a, b, c)| ((*a).into(), (*b).into(), (*c).into()))
        .collect();
    assert_eq!(columns, expect);
}

#[test]
fn data_volume_phases_are_upstream_strings() {
    let crd = find("DataVolume");
    let phase = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("status"))
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("phase"))
        .and_then(|p| p.enum_.clone())
        .unwrap_or_default();
    let phases: Vec<String> = phase
        .iter()
        .filter_map(|v| v.0.as_str().map(str::to_owned))
        .collect();
    for p in [
        "Pending",
        "PVCBound",
        "ImportScheduled",
        "ImportInProgress",
        "CloneScheduled",
        "CloneInProgress",
        "SnapshotForSmartCloneInProgress",
        "CloneFromSnapshotSourceInProgress",
        "SmartClonePVCInProgress",
        "CSICloneInProgress",
        "ExpansionInProgress",
        "NamespaceTransferInProgress",
        "PrepClaimInProgress",
        "RebindInProgress",
        "UploadScheduled",
        "UploadReady",
        "WaitForFirstConsumer",
        "PendingPopulation",
        "Succeeded",
        "Failed",
        "Paused",
        "Unknown",
    ] {
        assert!(phases.contains(&p.to_owned()), "missing phase {p}");
    }
}

#[test]
fn committed_yaml_parses_back_into_the_same_crd() {
    for crd in crds::all() {
        let yaml = crds::to_yaml(&crd).unwrap_or_default();
        let back: CustomResourceDefinition = serde_saphyr::from_str(&yaml)
            .unwrap_or_else(|e| panic!("{}: {e}", crds::file_name(&crd)));
        assert_eq!(back, crd, "{}", crds::file_name(&crd));
    }
}
