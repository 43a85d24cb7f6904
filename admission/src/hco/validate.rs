//! The hco-webhook's checks of a HyperConverged that need nothing but the object (HCO v1.16's
//! `pkg/webhooks/validator`): `certConfig`, the namespace on create, the
//! `dataImportCronTemplates`' enable annotation, a custom `tlsSecurityProfile`, the mediated
//! device lists and node placement; and its warnings for deprecated feature gates and (from
//! v1.17) the `highBurst` tuning policy. Unlike v1.16, a warning does not end the review:
//! every check runs and warnings go with the answer whatever it is, as HCO does since v1.18.
//!
//! The dry-run updates of the operands need the API server and live where the webhook runs.

use std::time::Duration;

use serde_json::Value;

/// The namespace HCO runs in, the only one a HyperConverged may be created in.
pub const OPERATOR_NAMESPACE: &str = "kubevirt-hyperconverged";

/// Why a HyperConverged is refused, in the hco-webhook's words.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HyperConvergedError {
    #[error("invalid namespace for v1beta1.HyperConverged - please use the {0} namespace")]
    Namespace(String),
    #[error("{0}: value is too small")]
    CertDurationTooSmall(&'static str),
    #[error("{0}: invalid duration {1:?}")]
    CertDurationMalformed(&'static str, String),
    #[error("spec.certConfig.{0}: duration is smaller than renewBefore")]
    CertRenewsAfterExpiry(&'static str),
    #[error("spec.certConfig: ca.duration is smaller than server.duration")]
    CaShorterThanServer,
    #[error(
        "the dataimportcrontemplate.kubevirt.io/enable annotation of a dataImportCronTemplate must be either \"true\" or \"false\""
    )]
    CronEnableAnnotation,
    #[error("dataImportCronTemplate spec is empty for an enabled DataImportCronTemplate")]
    CronSpecEmpty,
    #[error("invalid value for spec.tlsSecurityProfile.custom.minTLSVersion")]
    MinTlsVersion,
    #[error(
        "http2: TLSConfig.CipherSuites is missing an HTTP/2-required AES_128_GCM_SHA256 cipher (need at least one of ECDHE-RSA-AES128-GCM-SHA256 or ECDHE-ECDSA-AES128-GCM-SHA256)"
    )]
    Http2CipherMissing,
    #[error("custom ciphers cannot be selected when minTLSVersion is VersionTLS13")]
    CiphersWithTls13,
    #[error("mediatedDevicesTypes is deprecated, please use mediatedDeviceTypes instead")]
    MediatedDeviceTypes,
    #[error("invalid {0} node placement affinity: {1}")]
    Affinity(&'static str, String),
}

/// HCO's shortest certificate duration or renewal window.
const MINIMAL_CERT_DURATION: Duration = Duration::from_secs(10 * 60);

/// Gates HCO ignores and warns about.
const IGNORED_GATES: [&str; 4] = [
    "withHostPassthroughCPU",
    "deployTektonTaskResources",
    "nonRoot",
    "enableManagedTenantQuota",
];

/// Gates that became fields of the spec of the same name.
const MOVED_GATES: [&str; 3] = [
    "enableApplicationAwareQuota",
    "enableCommonBootImageImport",
    "deployVmConsoleProxy",
];

/// The checks of a create in `namespace` (the request's, which the body may leave out):
/// `certConfig`, the namespace, then the rest of the spec's.
pub fn review_create(hc: &Value, namespace: &str) -> Result<Vec<String>, HyperConvergedError> {
    check_cert_config(&hc["spec"]["certConfig"])?;
    if namespace != OPERATOR_NAMESPACE {
        return Err(HyperConvergedError::Namespace(OPERATOR_NAMESPACE.into()));
    }
    review_spec(&hc["spec"], None)
}

/// The checks of an update (`old` the stored object).
pub fn review_update(hc: &Value, old: &Value) -> Result<Vec<String>, HyperConvergedError> {
    review_spec(&hc["spec"], Some(&old["spec"]))
}

/// Whether an update changes what HCO acts on (the spec or the annotations).
pub fn changes_anything(hc: &Value, old: &Value) -> bool {
    hc["spec"] != old["spec"] || hc["metadata"]["annotations"] != old["metadata"]["annotations"]
}

fn review_spec(spec: &Value, old: Option<&Value>) -> Result<Vec<String>, HyperConvergedError> {
    let warnings = warnings(spec, old);
    check_cert_config(&spec["certConfig"])?;
    check_cron_templates(&spec["dataImportCronTemplates"])?;
    check_tls_profile(&spec["tlsSecurityProfile"])?;
    check_mediated_devices(&spec["mediatedDevicesConfiguration"])?;
    check_affinity("workloads", &spec["workloads"])?;
    check_affinity("infra", &spec["infra"])?;
    Ok(warnings)
}

fn warnings(spec: &Value, old: Option<&Value>) -> Vec<String> {
    let gates = &spec["featureGates"];
    let mut warnings: Vec<String> = IGNORED_GATES
        .iter()
        .filter(|gate| !gates[**gate].is_null())
        .map(|gate| {
            format!(
                "spec.featureGates.{gate} is deprecated and ignored. It will be removed in a future version;"
            )
        })
        .collect();
    for gate in MOVED_GATES {
        let before = old.map(|old| &old["featureGates"][gate]);
        let newly_set = !gates[gate].is_null() && before.is_none_or(|b| *b != gates[gate]);
        if newly_set {
            // "will removed" is HCO's wording.
            warnings.push(format!(
                "spec.featureGates.{gate} is deprecated and ignored. It will removed in a future version; use spec.{gate} instead"
            ));
        }
    }
    if spec["tuningPolicy"] == "highBurst" {
        warnings.push(
            "spec.tuningPolicy: the highBurst profile is deprecated as of v1.16.0 and will be removed in a future release"
                .into(),
        );
    }
    warnings
}

/// A `certConfig` duration, with the default HCO's CRD gives an absent one.
fn cert_duration(
    cert_config: &Value,
    (part, field, key): (&str, &str, &'static str),
) -> Result<Duration, HyperConvergedError> {
    let default = api::hco::default_cert_duration(part, field);
    let text = cert_config[part][field].as_str().unwrap_or(default);
    // A negative duration is too small: it reads as zero.
    api::go_duration::parse(text)
        .ok_or_else(|| HyperConvergedError::CertDurationMalformed(key, text.to_owned()))
}

fn check_cert_config(cert_config: &Value) -> Result<(), HyperConvergedError> {
    let ca = cert_duration(
        cert_config,
        ("ca", "duration", "spec.certConfig.ca.duration"),
    )?;
    let ca_renew = cert_duration(
        cert_config,
        ("ca", "renewBefore", "spec.certConfig.ca.renewBefore"),
    )?;
    let server = cert_duration(
        cert_config,
        ("server", "duration", "spec.certConfig.server.duration"),
    )?;
    let server_renew = cert_duration(
        cert_config,
        (
            "server",
            "renewBefore",
            "spec.certConfig.server.renewBefore",
        ),
    )?;
    let all = [
        ("spec.certConfig.ca.duration", ca),
        ("spec.certConfig.ca.renewBefore", ca_renew),
        ("spec.certConfig.server.duration", server),
        ("spec.certConfig.server.renewBefore", server_renew),
    ];
    if let Some((key, _)) = all.iter().find(|(_, d)| *d < MINIMAL_CERT_DURATION) {
        return Err(HyperConvergedError::CertDurationTooSmall(key));
    }
    if ca < ca_renew {
        return Err(HyperConvergedError::CertRenewsAfterExpiry("ca"));
    }
    if server < server_renew {
        return Err(HyperConvergedError::CertRenewsAfterExpiry("server"));
    }
    if ca < server {
        return Err(HyperConvergedError::CaShorterThanServer);
    }
    Ok(())
}

fn check_cron_templates(templates: &Value) -> Result<(), HyperConvergedError> {
    for template in templates.as_array().into_iter().flatten() {
        let enable =
            &template["metadata"]["annotations"]["dataimportcrontemplate.kubevirt.io/enable"];
        let enabled = match enable.as_str().map(str::to_ascii_lowercase).as_deref() {
            None if enable.is_null() => true,
            Some("true") => true,
            Some("false") => false,
            _ => return Err(HyperConvergedError::CronEnableAnnotation),
        };
        // v1.16 refuses a missing spec only; an empty one is CDI's to judge.
        if enabled && template["spec"].is_null() {
            return Err(HyperConvergedError::CronSpecEmpty);
        }
    }
    Ok(())
}

fn check_tls_profile(profile: &Value) -> Result<(), HyperConvergedError> {
    let custom = &profile["custom"];
    if custom.is_null() {
        return Ok(());
    }
    let min = custom["minTLSVersion"].as_str().unwrap_or_default();
    let Some(rank) = [
        "VersionTLS10",
        "VersionTLS11",
        "VersionTLS12",
        "VersionTLS13",
    ]
    .iter()
    .position(|v| *v == min) else {
        return Err(HyperConvergedError::MinTlsVersion);
    };
    let ciphers: Vec<&str> = custom["ciphers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let tls13 = rank == 3;
    let http2_cipher = ciphers
        .iter()
        .any(|c| *c == "ECDHE-RSA-AES128-GCM-SHA256" || *c == "ECDHE-ECDSA-AES128-GCM-SHA256");
    if !tls13 && !http2_cipher {
        return Err(HyperConvergedError::Http2CipherMissing);
    }
    if tls13 && !ciphers.is_empty() {
        return Err(HyperConvergedError::CiphersWithTls13);
    }
    Ok(())
}

fn check_mediated_devices(config: &Value) -> Result<(), HyperConvergedError> {
    let conflicting = |scope: &Value| {
        let old = scope["mediatedDevicesTypes"]
            .as_array()
            .filter(|a| !a.is_empty());
        let new = scope["mediatedDeviceTypes"]
            .as_array()
            .filter(|a| !a.is_empty());
        matches!((old, new), (Some(old), Some(new)) if old != new)
    };
    let nodes = config["nodeMediatedDeviceTypes"].as_array();
    if conflicting(config) || nodes.into_iter().flatten().any(conflicting) {
        return Err(HyperConvergedError::MediatedDeviceTypes);
    }
    Ok(())
}

/// The required node affinity must be a valid node selector.
fn check_affinity(which: &'static str, config: &Value) -> Result<(), HyperConvergedError> {
    let required = &config["nodePlacement"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    if required.is_null() {
        return Ok(());
    }
    let invalid = |reason: String| HyperConvergedError::Affinity(which, reason);
    for term in required["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let requirements = term["matchExpressions"].as_array().into_iter().flatten();
        for requirement in requirements {
            check_node_requirement(requirement).map_err(invalid)?;
        }
    }
    Ok(())
}

/// A node selector requirement as `nodeaffinity.NewNodeSelector` parses it.
fn check_node_requirement(requirement: &Value) -> Result<(), String> {
    let key = requirement["key"].as_str().unwrap_or_default();
    let operator = requirement["operator"].as_str().unwrap_or_default();
    let values = requirement["values"].as_array().map_or(0, Vec::len);
    let wanted_values = match operator {
        "In" | "NotIn" => values > 0,
        "Exists" | "DoesNotExist" => values == 0,
        "Gt" | "Lt" => values == 1,
        other => return Err(format!("\"{other}\" is not a valid node selector operator")),
    };
    if key.is_empty() {
        return Err("key: Invalid value: \"\": name part must be non-empty".into());
    }
    if !wanted_values {
        return Err(format!(
            "values: Invalid value: {values}: wrong number of values for operator {operator}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hc(spec: Value) -> Value {
        json!({"metadata": {"name": "kubevirt-hyperconverged", "namespace": OPERATOR_NAMESPACE}, "spec": spec})
    }

    fn review(hc: &Value) -> Result<Vec<String>, HyperConvergedError> {
        review_create(hc, OPERATOR_NAMESPACE)
    }

    fn refused(spec: Value) -> String {
        review(&hc(spec)).unwrap_err().to_string()
    }

    #[test]
    fn the_example_spec_passes_without_warnings() {
        let spec = json!({
            "certConfig": {"ca": {"duration": "48h0m0s", "renewBefore": "24h0m0s"},
                           "server": {"duration": "24h0m0s", "renewBefore": "12h0m0s"}},
            "featureGates": {"downwardMetrics": false},
            "uninstallStrategy": "BlockUninstallIfWorkloadsExist",
        });
        assert_eq!(review(&hc(spec)), Ok(Vec::new()));
        assert_eq!(review(&hc(json!({}))), Ok(Vec::new()));
    }

    #[test]
    fn another_namespace_is_refused() {
        assert_eq!(
            review_create(&hc(json!({})), "default")
                .unwrap_err()
                .to_string(),
            "invalid namespace for v1beta1.HyperConverged - please use the kubevirt-hyperconverged namespace"
        );
    }

    #[test]
    fn cert_config_is_checked_as_hco_does() {
        assert_eq!(
            refused(json!({"certConfig": {"server": {"renewBefore": "5m"}}})),
            "spec.certConfig.server.renewBefore: value is too small"
        );
        assert_eq!(
            refused(json!({"certConfig": {"ca": {"duration": "20h", "renewBefore": "21h"}}})),
            "spec.certConfig.ca: duration is smaller than renewBefore"
        );
        assert_eq!(
            refused(json!({"certConfig": {"server": {"duration": "11h"}}})),
            "spec.certConfig.server: duration is smaller than renewBefore"
        );
        assert_eq!(
            refused(json!({"certConfig": {"ca": {"duration": "23h", "renewBefore": "1h"}}})),
            "spec.certConfig: ca.duration is smaller than server.duration"
        );
        for not_go in ["two days", "48 hours", "PT48H", "48h 30m", ".h", ""] {
            assert_eq!(
                refused(json!({"certConfig": {"ca": {"duration": not_go}}})),
                format!("spec.certConfig.ca.duration: invalid duration {not_go:?}")
            );
        }
        let go = json!({"certConfig": {"ca": {"duration": "49.5h", "renewBefore": "1h30m0.5s"}}});
        assert!(review(&hc(go)).is_ok());
    }

    #[test]
    fn cron_templates_need_a_spec_when_enabled() {
        let template = |annotation: Value, spec: Value| {
            json!({"dataImportCronTemplates": [{
                "metadata": {"name": "x", "annotations": {"dataimportcrontemplate.kubevirt.io/enable": annotation}},
                "spec": spec}]})
        };
        assert_eq!(
            refused(template(json!("yes"), json!({"schedule": "1 * * * *"}))),
            "the dataimportcrontemplate.kubevirt.io/enable annotation of a dataImportCronTemplate must be either \"true\" or \"false\""
        );
        assert_eq!(
            refused(template(json!("TRUE"), Value::Null)),
            "dataImportCronTemplate spec is empty for an enabled DataImportCronTemplate"
        );
        assert!(review(&hc(template(json!("false"), Value::Null))).is_ok());
        assert!(review(&hc(template(json!("true"), json!({})))).is_ok());
    }

    #[test]
    fn custom_tls_profiles_are_checked() {
        let custom = |min: &str, ciphers: Value| json!({"tlsSecurityProfile": {"type": "Custom", "custom": {"minTLSVersion": min, "ciphers": ciphers}}});
        assert_eq!(
            refused(custom("VersionTLS14", json!([]))),
            "invalid value for spec.tlsSecurityProfile.custom.minTLSVersion"
        );
        assert!(refused(custom("VersionTLS12", json!(["AES128-SHA"]))).starts_with("http2:"));
        assert_eq!(
            refused(custom("VersionTLS13", json!(["TLS_AES_128_GCM_SHA256"]))),
            "custom ciphers cannot be selected when minTLSVersion is VersionTLS13"
        );
        assert!(
            review(&hc(custom(
                "VersionTLS12",
                json!(["ECDHE-RSA-AES128-GCM-SHA256"])
            )))
            .is_ok()
        );
        assert!(review(&hc(custom("VersionTLS13", Value::Null))).is_ok());
    }

    #[test]
    fn two_different_mediated_device_lists_are_refused() {
        let config = json!({"mediatedDevicesConfiguration": {"nodeMediatedDeviceTypes": [
            {"nodeSelector": {"a": "b"}, "mediatedDevicesTypes": ["nvidia-1"], "mediatedDeviceTypes": ["nvidia-2"]}]}});
        assert_eq!(
            refused(config),
            "mediatedDevicesTypes is deprecated, please use mediatedDeviceTypes instead"
        );
        let same = json!({"mediatedDevicesConfiguration": {"mediatedDevicesTypes": ["a"], "mediatedDeviceTypes": ["a"]}});
        assert!(review(&hc(same)).is_ok());
    }

    #[test]
    fn a_bad_required_affinity_is_refused() {
        let spec = json!({"infra": {"nodePlacement": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}}}});
        assert_eq!(
            refused(spec),
            "invalid infra node placement affinity: \"Near\" is not a valid node selector operator"
        );
    }

    #[test]
    fn deprecated_gates_warn_and_moved_ones_only_when_they_change() {
        let spec = json!({"featureGates": {"nonRoot": true, "deployVmConsoleProxy": true}, "tuningPolicy": "highBurst"});
        let warnings = review(&hc(spec.clone())).expect("allowed");
        assert_eq!(
            warnings,
            [
                "spec.featureGates.nonRoot is deprecated and ignored. It will be removed in a future version;",
                "spec.featureGates.deployVmConsoleProxy is deprecated and ignored. It will removed in a future version; use spec.deployVmConsoleProxy instead",
                "spec.tuningPolicy: the highBurst profile is deprecated as of v1.16.0 and will be removed in a future release",
            ]
        );
        let again = review_update(&hc(spec.clone()), &hc(spec)).expect("allowed");
        assert_eq!(again.len(), 2, "the moved gate did not change: {again:?}");
    }

    #[test]
    fn an_update_changes_anything_only_in_spec_or_annotations() {
        let old = hc(json!({"featureGates": {}}));
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(!changes_anything(&relabelled, &old));
        let mut annotated = old.clone();
        annotated["metadata"]["annotations"] = json!({"a": "b"});
        assert!(changes_anything(&annotated, &old));
    }
}
