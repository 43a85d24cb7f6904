//! virt-operator's review of an update to a KubeVirt CR (`kubevirt-update-validator`,
//! `pkg/virt-operator/webhooks` of v1.7.0, the release HCO's mapping pairs with): the checks
//! that need nothing but the old and new object, with its words, and the warnings it gives;
//! and the workloads whose dry-run creation judges a changed placement ([`placement_probes`]),
//! whose refusals the caller passes back in as causes.

use std::time::Duration;

use serde_json::{Value, json};

use api::kubevirt::feature_gates;

/// The review of an update: its warnings, and the causes of a refusal (none: admitted).
#[derive(Debug, Default, PartialEq)]
pub struct Review {
    pub warnings: Vec<String>,
    pub causes: Vec<String>,
}

impl Review {
    /// The refusal's message, every cause joined as KubeVirt joins them, if there is one.
    pub fn refusal(&self) -> Option<String> {
        (!self.causes.is_empty()).then(|| self.causes.join(", "))
    }
}

/// A workload virt-operator creates with `dryRun=All` in the CR's namespace, so that the API
/// server judges a changed placement as it would judge the components carrying it.
#[derive(Debug, PartialEq)]
pub struct PlacementProbe {
    /// `deployments` (the infra placement, virt-api's and virt-controller's) or
    /// `daemonsets` (the workloads placement, virt-handler's), of group `apps`.
    pub plural: &'static str,
    pub workload: Value,
}

/// The probes of an update: one for each of `infra` and `workloads` that changed and
/// carries a `nodePlacement`.
pub fn placement_probes(new: &Value, old: &Value) -> Vec<PlacementProbe> {
    let namespace = &new["metadata"]["namespace"];
    [
        ("infra", "Deployment", "deployments"),
        ("workloads", "DaemonSet", "daemonsets"),
    ]
    .into_iter()
    .filter(|(field, ..)| new["spec"][field] != old["spec"][field])
    .filter_map(|(field, kind, plural)| {
        let placement = new["spec"][field]["nodePlacement"].as_object()?;
        let mut workload = json!({
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": {"name": "placement-validation-webhook", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {"kubevirt.io/choose-me": ""}},
                "template": {
                    "metadata": {"labels": {"kubevirt.io/choose-me": ""}},
                    "spec": {"containers": [
                        {"name": "placement-verification-pod", "image": "test.only:latest"},
                    ]},
                },
            },
        });
        if kind == "Deployment" {
            workload["spec"]["replicas"] = json!(1);
        }
        let pod = &mut workload["spec"]["template"]["spec"];
        for key in ["nodeSelector", "affinity", "tolerations"] {
            if let Some(value) = placement.get(key).filter(|v| !v.is_null()) {
                pod[key] = value.clone();
            }
        }
        Some(PlacementProbe { plural, workload })
    })
    .collect()
}

/// Reviews the KubeVirt CR `new` replacing `old`; `placement_causes` are the refusals of
/// its [`placement_probes`], which take their place among the causes as in virt-operator.
pub fn review_update(new: &Value, old: &Value, placement_causes: &[String]) -> Review {
    let (spec, old_spec) = (&new["spec"], &old["spec"]);
    let config = &spec["configuration"];
    let old_config = &old_spec["configuration"];
    let mut causes = Vec::new();
    causes.extend(customize_components(&spec["customizeComponents"]));
    causes.extend(certificates(
        &spec["certificateRotateStrategy"]["selfSigned"],
    ));
    causes.extend(headroom(&config["additionalGuestMemoryOverheadRatio"]));
    if config["tlsConfiguration"] != old_config["tlsConfiguration"] {
        causes.extend(tls(&config["tlsConfiguration"]));
    }
    causes.extend(placement_causes.iter().cloned());
    if config["seccompConfiguration"] != old_config["seccompConfiguration"] {
        causes.extend(seccomp(&config["seccompConfiguration"]));
    }
    if spec["infra"]["replicas"].as_u64() == Some(0) {
        causes.push("infra replica count can't be 0".into());
    }
    let gates_changed = gates_changed(old_config, config);
    Review {
        warnings: warnings(config, gates_changed),
        causes,
    }
}

/// Whether the update sets a developer configuration whose feature gates differ from
/// before (removing the whole configuration, or adding one without gates, changes nothing
/// to warn about).
fn gates_changed(old: &Value, new: &Value) -> bool {
    let (old, new) = (
        &old["developerConfiguration"],
        &new["developerConfiguration"],
    );
    let gates = |dev: &Value| dev["featureGates"].as_array().cloned().unwrap_or_default();
    if new.is_null() {
        return false;
    }
    if old.is_null() {
        return !gates(new).is_empty();
    }
    gates(old) != gates(new)
}

fn warnings(config: &Value, gates_changed: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    if gates_changed {
        let gates = config["developerConfiguration"]["featureGates"].as_array();
        warnings.extend(
            gates
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter_map(feature_gates::warning),
        );
    }
    let mdev = &config["mediatedDevicesConfiguration"];
    let deprecated = |path: &str| format!("{path} is deprecated, use mediatedDeviceTypes");
    if !mdev["mediatedDevicesTypes"].is_null() {
        warnings.push(deprecated(
            "spec.configuration.mediatedDevicesConfiguration.mediatedDevicesTypes",
        ));
    }
    let per_node = mdev["nodeMediatedDeviceTypes"].as_array();
    for (i, node) in per_node.into_iter().flatten().enumerate() {
        if !node["mediatedDevicesTypes"].is_null() {
            warnings.push(deprecated(&format!(
                "spec.configuration.mediatedDevicesConfiguration.nodeMediatedDeviceTypes[{i}].mediatedDevicesTypes"
            )));
        }
    }
    if !config["architectureConfiguration"]["ppc64le"].is_null() {
        warnings.push(
            "spec.configuration.architectureConfiguration.ppc64le is deprecated and no longer supported."
                .into(),
        );
    }
    warnings
}

fn customize_components(customization: &Value) -> Vec<String> {
    let patches = customization["patches"].as_array();
    patches
        .into_iter()
        .flatten()
        .filter_map(|patch| patch["patch"].as_str())
        .filter(|text| serde_json::from_str::<Value>(text).is_err())
        .map(|text| format!("patch {text:?} is not valid JSON"))
        .collect()
}

/// A Go duration of the self-signed configuration (`metav1.Duration`), if set.
fn duration(value: &Value, path: &str) -> Result<Option<Duration>, String> {
    let Some(text) = value.as_str() else {
        return Ok(None);
    };
    api::go_duration::parse(text)
        .map(Some)
        .ok_or_else(|| format!("{path}: invalid duration {text:?}"))
}

/// The certificate lifetimes: the deprecated intervals and the `ca`/`server` blocks are not
/// mixed, renewal comes before expiry, and no certificate outlives its CA. Unset values are
/// virt-operator's defaults (a CA of 7 days, certificates of 1 day, renewed at 20% left).
fn certificates(self_signed: &Value) -> Vec<String> {
    if self_signed.is_null() {
        return Vec::new();
    }
    let mut causes = Vec::new();
    let deprecated = [
        "caRotateInterval",
        "certRotateInterval",
        "caOverlapInterval",
    ]
    .iter()
    .any(|f| !self_signed[*f].is_null());
    let current = !self_signed["ca"].is_null() || !self_signed["server"].is_null();
    if deprecated && current {
        causes.push("caRotateInterval, certRotateInterval and caOverlapInterval are deprecated and conflict with CertConfig defined rotation parameters".into());
    }
    let field = |deprecated: &str, block: &str, name: &str| {
        let path = "spec.certificateRotateStrategy.selfSigned";
        match duration(&self_signed[deprecated], &format!("{path}.{deprecated}"))? {
            Some(d) => Ok(Some(d)),
            None => duration(&self_signed[block][name], &format!("{path}.{block}.{name}")),
        }
    };
    let lifetimes = (|| -> Result<_, String> {
        const DAY: Duration = Duration::from_secs(24 * 3600);
        let ca = field("caRotateInterval", "ca", "duration")?.unwrap_or(7 * DAY);
        let ca_renew = field("caOverlapInterval", "ca", "renewBefore")?.unwrap_or(ca / 5);
        let cert = field("certRotateInterval", "server", "duration")?.unwrap_or(DAY);
        let cert_renew = duration(
            &self_signed["server"]["renewBefore"],
            "spec.certificateRotateStrategy.selfSigned.server.renewBefore",
        )?
        .unwrap_or(cert / 5);
        Ok((ca, ca_renew, cert, cert_renew))
    })();
    let (ca, ca_renew, cert, cert_renew) = match lifetimes {
        Ok(lifetimes) => lifetimes,
        Err(cause) => {
            causes.push(cause);
            return causes;
        }
    };
    if ca < ca_renew {
        causes.push("CA RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.ca.duration < spec.certificateRotationStrategy.selfSigned.ca.renewBefore)".into());
    }
    if cert < cert_renew {
        causes.push("Cert RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.server.duration < spec.certificateRotationStrategy.selfSigned.server.renewBefore)".into());
    }
    if cert > ca {
        causes.push("Certificate duration cannot exceed CA (spec.certificateRotationStrategy.selfSigned.server.duration > spec.certificateRotationStrategy.selfSigned.ca.duration)".into());
    }
    causes
}

/// `additionalGuestMemoryOverheadRatio`: a number of at least 1, read as Go's
/// `strconv.ParseFloat` reads it (no surrounding blanks; too large is out of range).
fn headroom(ratio: &Value) -> Vec<String> {
    let Some(text) = ratio.as_str() else {
        return Vec::new();
    };
    let unparsable = |why: &str| {
        vec![format!(
            "ratio provided, {text}, cannot be parsed into float: strconv.ParseFloat: parsing {text:?}: {why}"
        )]
    };
    let named_infinity = text
        .trim_start_matches(['+', '-'])
        .eq_ignore_ascii_case("inf")
        || text
            .trim_start_matches(['+', '-'])
            .eq_ignore_ascii_case("infinity");
    match text.parse::<f64>() {
        Err(_) => unparsable("invalid syntax"),
        Ok(ratio) if ratio.is_infinite() && !named_infinity => unparsable("value out of range"),
        Ok(ratio) if ratio < 1.0 => {
            vec![format!(
                "ratio provided, {text}, cannot be smaller than 1.0"
            )]
        }
        Ok(_) => Vec::new(),
    }
}

/// The cipher suites Go's TLS stack knows by name (secure and insecure), the only ones
/// KubeVirt's components can be configured with.
const GO_CIPHER_SUITES: [&str; 25] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// `tlsConfiguration`: no ciphers with TLS 1.3 (or no minimum), and only known ones.
fn tls(config: &Value) -> Vec<String> {
    if config.is_null() {
        return Vec::new();
    }
    let ciphers: Vec<&str> = config["ciphers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let min = config["minTLSVersion"].as_str().unwrap_or_default();
    if min.is_empty() || min == "VersionTLS13" {
        return if ciphers.is_empty() {
            Vec::new()
        } else {
            vec!["You cannot specify ciphers when spec.configuration.tlsConfiguration.minTLSVersion is empty or VersionTLS13".into()]
        };
    }
    ciphers
        .into_iter()
        .filter(|cipher| !GO_CIPHER_SUITES.contains(cipher))
        .map(|cipher| format!("{cipher} is not a valid cipher"))
        .collect()
}

/// `seccompConfiguration.virtualMachineInstanceProfile`: a custom profile, and one kind of
/// it.
fn seccomp(config: &Value) -> Vec<String> {
    let profile = &config["virtualMachineInstanceProfile"];
    if profile.is_null() {
        return Vec::new();
    }
    let path =
        "spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile";
    let custom = &profile["customProfile"];
    if custom.is_null() {
        return vec![format!("{path} needs to be set")];
    }
    let localhost = !custom["localhostProfile"].is_null();
    let runtime_default = custom["runtimeDefaultProfile"].as_bool() == Some(true);
    if !(localhost && runtime_default) {
        return Vec::new();
    }
    let (a, b) = (
        format!("{path}.localhostProfile"),
        format!("{path}.runtimeDefaultProfile"),
    );
    vec![
        format!("{a} cannot be set when {b} is set"),
        format!("{b} cannot be set when {a} is set"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_placement_is_probed_by_the_workload_that_carries_it() {
        let placement = json!({"nodeSelector": {"disk": "ssd"},
                               "tolerations": [{"key": "virt", "operator": "Exists"}]});
        let new = kubevirt(json!({"infra": {"nodePlacement": placement}, "workloads": {}}));
        let probes = placement_probes(&new, &kubevirt(json!({})));
        // The workloads field changed but carries no placement: nothing to probe.
        assert_eq!(probes.len(), 1);
        let probe = &probes[0];
        assert_eq!(probe.plural, "deployments");
        assert_eq!(probe.workload["kind"], "Deployment");
        assert_eq!(probe.workload["metadata"]["namespace"], "kubevirt");
        assert_eq!(probe.workload["spec"]["replicas"], 1);
        let pod = &probe.workload["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"], placement["nodeSelector"]);
        assert_eq!(pod["tolerations"], placement["tolerations"]);
        assert!(pod["affinity"].is_null());

        // Unchanged, no probe; the workloads' placement is a DaemonSet's.
        assert!(placement_probes(&new, &new).is_empty());
        let mut workloads = new.clone();
        workloads["spec"]["workloads"] = json!({"nodePlacement": placement});
        let probes = placement_probes(&workloads, &new);
        assert_eq!(probes.len(), 1);
        assert_eq!(probes[0].plural, "daemonsets");
        assert!(probes[0].workload["spec"]["replicas"].is_null());
    }

    #[test]
    fn placement_causes_come_before_the_replica_count_as_in_virt_operator() {
        let new = kubevirt(json!({"infra": {"replicas": 0}}));
        let review = review_update(&new, &kubevirt(json!({})), &["placement refused".into()]);
        assert_eq!(
            review.refusal().as_deref(),
            Some("placement refused, infra replica count can't be 0")
        );
    }

    fn kubevirt(spec: Value) -> Value {
        json!({"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
               "metadata": {"name": "kubevirt", "namespace": "kubevirt"}, "spec": spec})
    }

    fn update(spec: Value) -> Review {
        review_update(&kubevirt(spec), &kubevirt(json!({})), &[])
    }

    #[test]
    fn an_ordinary_update_passes_without_warnings() {
        let review = update(json!({
            "certificateRotateStrategy": {"selfSigned": {"ca": {"duration": "48h"},
                                                         "server": {"duration": "24h"}}},
            "configuration": {"developerConfiguration": {"featureGates": ["Snapshot"]},
                              "additionalGuestMemoryOverheadRatio": "1.5",
                              "tlsConfiguration": {"minTLSVersion": "VersionTLS12",
                                                   "ciphers": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]}},
            "infra": {"replicas": 2},
        }));
        assert_eq!(review, Review::default());
        assert_eq!(review.refusal(), None);
    }

    #[test]
    fn certificate_lifetimes_are_checked_with_virt_operators_defaults() {
        let certs = |self_signed: Value| {
            update(json!({"certificateRotateStrategy": {"selfSigned": self_signed}})).causes
        };
        assert_eq!(
            certs(json!({"server": {"duration": "200h"}})),
            [
                "Certificate duration cannot exceed CA (spec.certificateRotationStrategy.selfSigned.server.duration > spec.certificateRotationStrategy.selfSigned.ca.duration)"
            ],
            "the CA's default is 7 days"
        );
        assert_eq!(
            certs(
                json!({"ca": {"duration": "10h", "renewBefore": "11h"}, "server": {"duration": "1h"}})
            ),
            [
                "CA RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.ca.duration < spec.certificateRotationStrategy.selfSigned.ca.renewBefore)"
            ]
        );
        assert_eq!(
            certs(json!({"server": {"renewBefore": "25h"}})),
            [
                "Cert RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.server.duration < spec.certificateRotationStrategy.selfSigned.server.renewBefore)"
            ]
        );
        assert_eq!(
            certs(json!({"caRotateInterval": "48h", "ca": {"duration": "48h"}})),
            [
                "caRotateInterval, certRotateInterval and caOverlapInterval are deprecated and conflict with CertConfig defined rotation parameters"
            ]
        );
        assert_eq!(
            certs(json!({"ca": {"duration": "a week"}})),
            ["spec.certificateRotateStrategy.selfSigned.ca.duration: invalid duration \"a week\""]
        );
    }

    #[test]
    fn configuration_values_are_checked() {
        let causes = |configuration: Value| update(json!({"configuration": configuration})).causes;
        assert_eq!(
            causes(json!({"additionalGuestMemoryOverheadRatio": "0.5"})),
            ["ratio provided, 0.5, cannot be smaller than 1.0"]
        );
        assert_eq!(
            causes(json!({"additionalGuestMemoryOverheadRatio": "lots"})),
            [
                "ratio provided, lots, cannot be parsed into float: strconv.ParseFloat: parsing \"lots\": invalid syntax"
            ]
        );
        assert_eq!(
            causes(
                json!({"tlsConfiguration": {"minTLSVersion": "VersionTLS13", "ciphers": ["TLS_AES_128_GCM_SHA256"]}})
            ),
            [
                "You cannot specify ciphers when spec.configuration.tlsConfiguration.minTLSVersion is empty or VersionTLS13"
            ]
        );
        assert_eq!(
            causes(
                json!({"tlsConfiguration": {"minTLSVersion": "VersionTLS12", "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"]}})
            ),
            ["ECDHE-RSA-AES128-GCM-SHA256 is not a valid cipher"],
            "OpenSSL's names are not Go's"
        );
        assert_eq!(
            causes(json!({"seccompConfiguration": {"virtualMachineInstanceProfile": {}}})),
            [
                "spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile needs to be set"
            ]
        );
        assert_eq!(
            causes(json!({"seccompConfiguration": {"virtualMachineInstanceProfile": {"customProfile": {"localhostProfile": "p.json", "runtimeDefaultProfile": true}}}})).len(),
            2
        );
        assert_eq!(
            causes(json!({"additionalGuestMemoryOverheadRatio": "1e400"})),
            [
                "ratio provided, 1e400, cannot be parsed into float: strconv.ParseFloat: parsing \"1e400\": value out of range"
            ]
        );
        assert_eq!(
            causes(json!({"additionalGuestMemoryOverheadRatio": " 2"})).len(),
            1,
            "Go does not trim"
        );
        let patch = update(json!({"customizeComponents": {"patches": [
            {"resourceName": "virt-api", "resourceType": "Deployment", "type": "strategic", "patch": "{not json"},
            {"resourceName": "virt-api", "resourceType": "Deployment", "type": "strategic", "patch": "{}"},
        ]}}));
        assert_eq!(patch.causes, [r#"patch "{not json" is not valid JSON"#]);
        assert_eq!(
            update(json!({"infra": {"replicas": 0}})).causes,
            ["infra replica count can't be 0"]
        );
    }

    #[test]
    fn unchanged_tls_and_seccomp_are_not_judged_again() {
        let stored = kubevirt(json!({"configuration": {
            "seccompConfiguration": {"virtualMachineInstanceProfile": {}},
            "tlsConfiguration": {"minTLSVersion": "VersionTLS13", "ciphers": ["X"]},
        }}));
        assert_eq!(review_update(&stored, &stored, &[]), Review::default());
    }

    #[test]
    fn gates_past_beta_warn_only_when_the_gates_change() {
        let with_gates = |gates: Value| {
            kubevirt(json!({"configuration": {"developerConfiguration": {"featureGates": gates}}}))
        };
        let old = with_gates(json!(["Snapshot", "LiveMigration"]));
        let new = with_gates(json!(["Snapshot", "LiveMigration", "Macvtap"]));
        let review = review_update(&new, &old, &[]);
        assert!(review.causes.is_empty());
        assert_eq!(review.warnings.len(), 2, "{:?}", review.warnings);
        assert!(review.warnings[0].starts_with("feature gate LiveMigration is deprecated"));
        assert!(review.warnings[1].starts_with("Macvtap network binding is discontinued"));
        assert_eq!(
            review_update(&new, &new, &[]).warnings,
            Vec::<String>::new()
        );
    }

    #[test]
    fn deprecated_fields_warn() {
        let review = update(json!({"configuration": {
            "mediatedDevicesConfiguration": {"mediatedDevicesTypes": ["nvidia-222"],
                                             "nodeMediatedDeviceTypes": [{"mediatedDeviceTypes": []}, {"mediatedDevicesTypes": ["x"]}]},
            "architectureConfiguration": {"ppc64le": {}},
        }}));
        assert_eq!(
            review.warnings,
            [
                "spec.configuration.mediatedDevicesConfiguration.mediatedDevicesTypes is deprecated, use mediatedDeviceTypes",
                "spec.configuration.mediatedDevicesConfiguration.nodeMediatedDeviceTypes[1].mediatedDevicesTypes is deprecated, use mediatedDeviceTypes",
                "spec.configuration.architectureConfiguration.ppc64le is deprecated and no longer supported.",
            ]
        );
    }

    #[test]
    fn a_refusal_joins_every_cause() {
        let review = Review {
            warnings: Vec::new(),
            causes: (0..12).map(|i| format!("c{i}")).collect(),
        };
        assert_eq!(
            review.refusal().as_deref(),
            Some("c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11")
        );
    }

    #[test]
    fn a_new_developer_configuration_warns_only_when_it_sets_gates() {
        let old = kubevirt(json!({}));
        let empty =
            kubevirt(json!({"configuration": {"developerConfiguration": {"useEmulation": true}}}));
        assert!(review_update(&empty, &old, &[]).warnings.is_empty());
        let disabled = kubevirt(json!({"configuration": {"developerConfiguration": {
            "featureGates": ["NUMA"], "disabledFeatureGates": ["Snapshot"]}}}));
        let review = review_update(&disabled, &old, &[]);
        assert_eq!(review.warnings.len(), 1, "{:?}", review.warnings);
        assert!(review.causes.is_empty());
    }
}
