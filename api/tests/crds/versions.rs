//! The versions each CRD serves, which one is stored, which are deprecated and in what
//! words, and the root's required fields, as upstream's CRDs say; the versions upstream
//! converts by `apiVersion` alone (strategy `None`) share one schema here, SSP's two keep
//! their own fields.

use std::path::PathBuf;

use serde_json::Value;

const KUBEVIRT_V1ALPHA3: &str =
    "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release.";
const SSP_V1BETA2: &str = "SSP v1beta2 is deprecated and will not be updated with new functionality. It will stop being served in the next version.";

/// A served version: (name, stored, deprecation warning).
type Served = (&'static str, bool, Option<&'static str>);

/// Upstream's versions of each kind, the bundle CRD that says so (none for the VM and VMI,
/// which virt-operator serves as it serves the KubeVirt CR), and whether upstream requires
/// `spec`.
const UPSTREAM: &[(&str, Option<&str>, &[Served], bool)] = &[
    (
        "VirtualMachine",
        None,
        &[
            ("v1", true, None),
            ("v1alpha3", false, Some(KUBEVIRT_V1ALPHA3)),
        ],
        true,
    ),
    (
        "VirtualMachineInstance",
        None,
        &[
            ("v1", true, None),
            ("v1alpha3", false, Some(KUBEVIRT_V1ALPHA3)),
        ],
        true,
    ),
    (
        "KubeVirt",
        Some("hco-bundle-kubevirt00.crd.yaml"),
        &[
            ("v1", true, None),
            ("v1alpha3", false, Some(KUBEVIRT_V1ALPHA3)),
        ],
        true,
    ),
    (
        "CDI",
        Some("hco-bundle-containerized-data-importer00.crd.yaml"),
        &[("v1alpha1", false, None), ("v1beta1", true, None)],
        true,
    ),
    (
        "NetworkAddonsConfig",
        Some("hco-bundle-cluster-network-addons00.crd.yaml"),
        &[("v1", true, None), ("v1alpha1", false, None)],
        false,
    ),
    (
        "SSP",
        Some("hco-bundle-scheduling-scale-performance00.crd.yaml"),
        &[
            ("v1beta2", false, Some(SSP_V1BETA2)),
            ("v1beta3", true, None),
        ],
        false,
    ),
    (
        "HostPathProvisioner",
        Some("hco-bundle-hostpath-provisioner00.crd.yaml"),
        &[("v1beta1", true, None)],
        false,
    ),
];

fn ours(kind: &str) -> Value {
    let crd = api::crds::all()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD of {kind}"));
    serde_json::to_value(crd).expect("a CRD serializes")
}

/// (name, stored, deprecation warning) of each version of `crd`, sorted by name.
fn served(crd: &Value) -> Vec<(String, bool, Option<String>)> {
    let mut versions: Vec<_> = crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter(|v| v["served"] == true)
        .map(|v| {
            let warning = v["deprecationWarning"].as_str().map(str::to_owned);
            assert_eq!(
                v["deprecated"] == true,
                warning.is_some(),
                "a deprecated version warns: {}",
                v["name"]
            );
            let name = v["name"].as_str().expect("a name").to_owned();
            (name, v["storage"] == true, warning)
        })
        .collect();
    versions.sort();
    versions
}

fn expected(versions: &[Served]) -> Vec<(String, bool, Option<String>)> {
    let mut versions: Vec<_> = versions
        .iter()
        .map(|(n, s, w)| (n.to_string(), *s, w.map(str::to_owned)))
        .collect();
    versions.sort();
    versions
}

fn schema<'a>(crd: &'a Value, version: &str) -> &'a Value {
    crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == version))
        .map(|v| &v["schema"]["openAPIV3Schema"])
        .unwrap_or_else(|| panic!("no version {version}"))
}

fn spec_required(crd: &Value, version: &str) -> bool {
    schema(crd, version)["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|f| f == "spec"))
}

#[test]
fn each_kind_serves_and_stores_the_versions_upstream_does() {
    for (kind, _, versions, requires_spec) in UPSTREAM {
        let crd = ours(kind);
        assert_eq!(served(&crd), expected(versions), "{kind}");
        for (version, ..) in *versions {
            assert_eq!(
                spec_required(&crd, version),
                *requires_spec,
                "{kind} {version}: spec required"
            );
        }
    }
}

/// The bundle CRDs HCO ships, where this machine has them.
fn bundle(file: &str) -> Option<Value> {
    let dir = std::env::var_os("FERROVIRT_UPSTREAM_API")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/upstream-api")
        });
    let text = std::fs::read_to_string(dir.join(file)).ok()?;
    Some(serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}")))
}

#[test]
fn the_table_of_versions_is_upstreams() {
    for (kind, file, versions, requires_spec) in UPSTREAM {
        let Some(upstream) = file.and_then(bundle) else {
            continue;
        };
        assert_eq!(upstream["spec"]["names"]["kind"], *kind);
        assert_eq!(served(&upstream), expected(versions), "{kind}");
        for (version, ..) in *versions {
            assert_eq!(spec_required(&upstream, version), *requires_spec, "{kind}");
        }
        let strategy = upstream["spec"]["conversion"]["strategy"].as_str();
        assert!(
            matches!(strategy, None | Some("None")),
            "{kind}: {strategy:?}"
        );
    }
}

#[test]
fn versions_converted_by_api_version_alone_share_one_schema() {
    for (kind, _, versions, _) in UPSTREAM {
        if *kind == "SSP" {
            continue;
        }
        let crd = ours(kind);
        let strategy = crd["spec"]["conversion"]["strategy"].as_str();
        assert!(
            matches!(strategy, None | Some("None")),
            "{kind}: {strategy:?}"
        );
        let first = schema(&crd, versions[0].0);
        for (version, ..) in &versions[1..] {
            assert_eq!(schema(&crd, version), first, "{kind} {version}");
        }
    }
}

#[test]
fn ssp_versions_declare_their_own_fields() {
    let crd = ours("SSP");
    assert_eq!(crd["spec"]["conversion"]["strategy"], "None");
    let fields = |version: &str| -> Vec<String> {
        let spec = &schema(&crd, version)["properties"]["spec"];
        assert!(
            spec["x-kubernetes-preserve-unknown-fields"].is_null(),
            "{version}: an unknown field is pruned"
        );
        let mut names: Vec<String> = spec["properties"]
            .as_object()
            .expect("spec's properties")
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    };
    let upstream = bundle("hco-bundle-scheduling-scale-performance00.crd.yaml");
    for version in ["v1beta2", "v1beta3"] {
        let ours = fields(version);
        let only = if version == "v1beta2" {
            ["featureGates", "tektonPipelines"]
        } else {
            ["cluster", "enableMultipleArchitectures"]
        };
        for field in only {
            assert!(ours.contains(&field.to_owned()), "{version} has {field}");
        }
        if let Some(upstream) = &upstream {
            let spec = &schema(upstream, version)["properties"]["spec"]["properties"];
            let mut names: Vec<String> = spec
                .as_object()
                .expect("properties")
                .keys()
                .cloned()
                .collect();
            names.sort();
            assert_eq!(ours, names, "SSP {version}'s spec fields");
        }
    }
    assert_ne!(fields("v1beta2"), fields("v1beta3"));
}

#[test]
fn pull_secret_names_may_be_left_out_as_upstream_allows() {
    for kind in ["CDI", "CDIConfig"] {
        let crd = ours(kind);
        let version = crd["spec"]["versions"][0]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        let spec = &schema(&crd, &version)["properties"]["spec"];
        let secrets = if kind == "CDI" {
            &spec["properties"]["config"]["properties"]["imagePullSecrets"]
        } else {
            &spec["properties"]["imagePullSecrets"]
        };
        let item = &secrets["items"];
        assert_eq!(item["properties"]["name"]["type"], "string", "{kind}");
        assert!(item["required"].is_null(), "{kind}: {item}");
        let parsed: api::cdi::CdiConfigSpec =
            serde_json::from_value(serde_json::json!({"imagePullSecrets": [{}]}))
                .expect("a nameless pull secret reads");
        assert_eq!(parsed.image_pull_secrets.expect("secrets")[0].name, "");
    }
}
