//! Where upstream's schema of each kind and version we serve is published, and the list of
//! every kind upstream serves.

use std::path::Path;

use serde_json::Value;

use super::flat::{Flat, flatten};

const KUBEVIRT: &str = "kubevirt-v1.6.6.swagger.json";
const CDI: &str = "cdi-v1.66.0.swagger.json";
const CDI_OPERATOR: &str = "hco-bundle-containerized-data-importer00.crd.yaml";
const HCO: &str = "hco-bundle-hco00.crd.yaml";
const HPP: &str = "hco-bundle-hostpath-provisioner00.crd.yaml";
const CNAO: &str = "hco-bundle-cluster-network-addons00.crd.yaml";
const SSP: &str = "hco-bundle-scheduling-scale-performance00.crd.yaml";
const TEKTON: &str = "tekton-v1.15.0-crds";
const TEKTON_TASK: &str = "tekton-v1.15.0-crds/300-task.yaml";
const TEKTON_TASKRUN: &str = "tekton-v1.15.0-crds/300-taskrun.yaml";
const TEKTON_PIPELINE: &str = "tekton-v1.15.0-crds/300-pipeline.yaml";
const TEKTON_PIPELINERUN: &str = "tekton-v1.15.0-crds/300-pipelinerun.yaml";

/// A published schema: a swagger definition, or a served version of a CRD HCO ships.
pub enum From {
    Swagger {
        file: &'static str,
        definition: &'static str,
    },
    Bundle {
        file: &'static str,
    },
    /// An upstream CRD kept in this repository (`api/tests/upstream-api/<file>`), for
    /// operators whose CRD the shared published files do not have.
    KeptCrd {
        file: &'static str,
    },
}

/// One kind at one version and where upstream publishes its schema.
pub struct Source {
    pub group: &'static str,
    pub kind: &'static str,
    pub version: &'static str,
    pub from: From,
}

const fn swagger(
    group: &'static str,
    kind: &'static str,
    version: &'static str,
    file: &'static str,
    definition: &'static str,
) -> Source {
    Source {
        group,
        kind,
        version,
        from: From::Swagger { file, definition },
    }
}

const fn bundle(
    group: &'static str,
    kind: &'static str,
    version: &'static str,
    file: &'static str,
) -> Source {
    Source {
        group,
        kind,
        version,
        from: From::Bundle { file },
    }
}

/// The pinned releases (KubeVirt v1.6.6, CDI v1.66.0) where their swagger has the kind;
/// HCO's bundled CRDs for the operator kinds and the versions the swaggers do not list;
/// Tekton v1.15.0's release CRDs for its kinds.
/// KubeVirt serves `v1alpha3` with `v1`'s schema (one Go type, no conversion), so both
/// versions are held against the `v1` definitions.
pub const SOURCES: &[Source] = &[
    swagger(
        "cdi.kubevirt.io",
        "DataVolume",
        "v1beta1",
        CDI,
        "v1beta1.DataVolume",
    ),
    swagger(
        "cdi.kubevirt.io",
        "DataSource",
        "v1beta1",
        CDI,
        "v1beta1.DataSource",
    ),
    swagger(
        "cdi.kubevirt.io",
        "DataImportCron",
        "v1beta1",
        CDI,
        "v1beta1.DataImportCron",
    ),
    swagger("cdi.kubevirt.io", "CDI", "v1beta1", CDI, "v1beta1.CDI"),
    bundle("cdi.kubevirt.io", "CDI", "v1alpha1", CDI_OPERATOR),
    swagger(
        "cdi.kubevirt.io",
        "CDIConfig",
        "v1beta1",
        CDI,
        "v1beta1.CDIConfig",
    ),
    swagger(
        "upload.cdi.kubevirt.io",
        "UploadTokenRequest",
        "v1beta1",
        CDI,
        "v1beta1.UploadTokenRequest",
    ),
    swagger(
        "kubevirt.io",
        "VirtualMachine",
        "v1",
        KUBEVIRT,
        "v1.VirtualMachine",
    ),
    swagger(
        "kubevirt.io",
        "VirtualMachine",
        "v1alpha3",
        KUBEVIRT,
        "v1.VirtualMachine",
    ),
    swagger(
        "kubevirt.io",
        "VirtualMachineInstance",
        "v1",
        KUBEVIRT,
        "v1.VirtualMachineInstance",
    ),
    swagger(
        "kubevirt.io",
        "VirtualMachineInstance",
        "v1alpha3",
        KUBEVIRT,
        "v1.VirtualMachineInstance",
    ),
    swagger(
        "kubevirt.io",
        "VirtualMachineInstanceReplicaSet",
        "v1",
        KUBEVIRT,
        "v1.VirtualMachineInstanceReplicaSet",
    ),
    swagger(
        "kubevirt.io",
        "VirtualMachineInstanceReplicaSet",
        "v1alpha3",
        KUBEVIRT,
        "v1.VirtualMachineInstanceReplicaSet",
    ),
    swagger(
        "pool.kubevirt.io",
        "VirtualMachinePool",
        "v1alpha1",
        KUBEVIRT,
        "v1alpha1.VirtualMachinePool",
    ),
    swagger(
        "kubevirt.io",
        "VirtualMachineInstancePreset",
        "v1",
        KUBEVIRT,
        "v1.VirtualMachineInstancePreset",
    ),
    swagger(
        "kubevirt.io",
        "VirtualMachineInstancePreset",
        "v1alpha3",
        KUBEVIRT,
        "v1.VirtualMachineInstancePreset",
    ),
    swagger("kubevirt.io", "KubeVirt", "v1", KUBEVIRT, "v1.KubeVirt"),
    swagger(
        "instancetype.kubevirt.io",
        "VirtualMachineInstancetype",
        "v1beta1",
        KUBEVIRT,
        "v1beta1.VirtualMachineInstancetype",
    ),
    swagger(
        "instancetype.kubevirt.io",
        "VirtualMachineClusterInstancetype",
        "v1beta1",
        KUBEVIRT,
        "v1beta1.VirtualMachineClusterInstancetype",
    ),
    swagger(
        "instancetype.kubevirt.io",
        "VirtualMachinePreference",
        "v1beta1",
        KUBEVIRT,
        "v1beta1.VirtualMachinePreference",
    ),
    swagger(
        "instancetype.kubevirt.io",
        "VirtualMachineClusterPreference",
        "v1beta1",
        KUBEVIRT,
        "v1beta1.VirtualMachineClusterPreference",
    ),
    swagger(
        "kubevirt.io",
        "KubeVirt",
        "v1alpha3",
        KUBEVIRT,
        "v1.KubeVirt",
    ),
    bundle(
        "hostpathprovisioner.kubevirt.io",
        "HostPathProvisioner",
        "v1beta1",
        HPP,
    ),
    bundle("hco.kubevirt.io", "HyperConverged", "v1", HCO),
    bundle("hco.kubevirt.io", "HyperConverged", "v1beta1", HCO),
    bundle(
        "networkaddonsoperator.network.kubevirt.io",
        "NetworkAddonsConfig",
        "v1",
        CNAO,
    ),
    bundle(
        "networkaddonsoperator.network.kubevirt.io",
        "NetworkAddonsConfig",
        "v1alpha1",
        CNAO,
    ),
    bundle("ssp.kubevirt.io", "SSP", "v1beta2", SSP),
    bundle("ssp.kubevirt.io", "SSP", "v1beta3", SSP),
    bundle("tekton.dev", "Task", "v1", TEKTON_TASK),
    bundle("tekton.dev", "Task", "v1beta1", TEKTON_TASK),
    bundle("tekton.dev", "TaskRun", "v1", TEKTON_TASKRUN),
    bundle("tekton.dev", "TaskRun", "v1beta1", TEKTON_TASKRUN),
    bundle("tekton.dev", "Pipeline", "v1", TEKTON_PIPELINE),
    bundle("tekton.dev", "Pipeline", "v1beta1", TEKTON_PIPELINE),
    bundle("tekton.dev", "PipelineRun", "v1", TEKTON_PIPELINERUN),
    bundle("tekton.dev", "PipelineRun", "v1beta1", TEKTON_PIPELINERUN),
];

/// tekton-tasks-operator's CRD (config/crd/bases at its last commit, 094b373, after v0.5.0).
const TEKTON_TASKS_OPERATOR: &str =
    "tekton-tasks-operator/tektontasks.kubevirt.io_tektontasks.yaml";

/// Every source: the published ones, then those kept here.
pub fn all_sources() -> impl Iterator<Item = &'static Source> {
    SOURCES.iter().chain(KEPT_CRD_SOURCES)
}

/// Operator kinds whose upstream CRD is kept in this repository.
pub const KEPT_CRD_SOURCES: &[Source] = &[Source {
    group: "tektontasks.kubevirt.io",
    kind: "TektonTasks",
    version: "v1alpha1",
    from: From::KeptCrd {
        file: TEKTON_TASKS_OPERATOR,
    },
}];

/// Kinds we serve that no pinned upstream source describes, and why.
pub const NO_UPSTREAM: &[(&str, &str)] = &[
    (
        "StorageProfile",
        "CDI's swagger does not publish StorageProfile; its CRD is not in the pinned sources",
    ),
    (
        "NetworkAttachmentDefinition",
        "Multus' CRD (k8s.cni.cncf.io) is not in the pinned sources",
    ),
    (
        "Template",
        "OpenShift's Template (template.openshift.io) is not in the pinned sources",
    ),
];

impl Source {
    /// Upstream's schema of this kind and version, flattened, from the published files in
    /// `dir`.
    pub fn load(&self, dir: &Path) -> Flat {
        match self.from {
            From::Swagger { file, definition } => {
                let swagger = read_json(&dir.join(file));
                let definitions = &swagger["definitions"];
                assert!(
                    definitions[definition].is_object(),
                    "{file} has no {definition}"
                );
                flatten(&definitions[definition], definitions)
            }
            From::Bundle { file } | From::KeptCrd { file } => {
                let dir = match self.from {
                    From::KeptCrd { .. } => std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                        .join("tests/upstream-api"),
                    _ => dir.to_path_buf(),
                };
                let crd = read_yaml(&dir.join(file));
                let schema = crd["spec"]["versions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|v| v["name"] == self.version)
                    .map(|v| &v["schema"]["openAPIV3Schema"])
                    .unwrap_or_else(|| panic!("{file} serves no {}", self.version));
                flatten(schema, &Value::Null)
            }
        }
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `group version kind` upstream serves, one per line, sorted: the swaggers' create
/// endpoints and the served versions of every bundled and Tekton CRD.
pub fn kinds_text(dir: &Path) -> String {
    let mut kinds = Vec::new();
    for file in [KUBEVIRT, CDI] {
        kinds.extend(swagger_kinds(&read_json(&dir.join(file))));
    }
    let mut crds: Vec<_> = [
        CDI_OPERATOR,
        HCO,
        HPP,
        CNAO,
        SSP,
        "hco-bundle-kubevirt00.crd.yaml",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect();
    let tekton = std::fs::read_dir(dir.join(TEKTON)).expect("Tekton's CRDs");
    crds.extend(tekton.flatten().map(|e| e.path()));
    for path in crds {
        let crd = read_yaml(&path);
        let spec = &crd["spec"];
        for version in spec["versions"].as_array().into_iter().flatten() {
            if version["served"] == true {
                kinds.push(format!(
                    "{} {} {}",
                    spec["group"].as_str().unwrap_or_default(),
                    version["name"].as_str().unwrap_or_default(),
                    spec["names"]["kind"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    kinds.sort();
    kinds.dedup();
    kinds.iter().map(|k| format!("{k}\n")).collect()
}

/// `group version kind` of each swagger create endpoint: `POST /apis/G/V/[namespaces/{ns}/]PLURAL`
/// with a body whose definition is `vN.Kind`.
fn swagger_kinds(swagger: &Value) -> Vec<String> {
    let mut kinds = Vec::new();
    for (path, item) in swagger["paths"].as_object().into_iter().flatten() {
        let steps: Vec<&str> = path.split('/').collect();
        let (group, version) = match steps[..] {
            ["", "apis", group, version, _plural] => (group, version),
            ["", "apis", group, version, "namespaces", _, _plural] => (group, version),
            _ => continue,
        };
        let parameters = item["post"]["parameters"].as_array().into_iter().flatten();
        let body = parameters
            .chain(item["parameters"].as_array().into_iter().flatten())
            .find(|p| p["in"] == "body");
        let Some(definition) = body.and_then(|b| b["schema"]["$ref"].as_str()) else {
            continue;
        };
        let kind = definition.rsplit('.').next().unwrap_or(definition);
        kinds.push(format!("{group} {version} {kind}"));
    }
    kinds
}

/// The kept list of every `(group, version, kind)` upstream serves.
pub fn upstream_kinds(kept: &Path) -> Vec<(String, String, String)> {
    let path = kept.join("kinds.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|line| {
            let mut words = line.split(' ');
            Some((
                words.next()?.to_owned(),
                words.next()?.to_owned(),
                words.next()?.to_owned(),
            ))
        })
        .collect()
}
