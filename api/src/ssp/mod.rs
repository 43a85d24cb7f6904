//! ssp.kubevirt.io SSP: scheduling, scale and performance add-ons (common VM templates, the
//! template validator, the VNC token service). v1beta3 is stored; the deprecated v1beta2 is
//! served too ([`v1beta2`]), and as upstream's CRD says (strategy `None`) an object moves
//! between the two by its `apiVersion` alone, each version keeping the fields it declares.

pub mod v1beta2;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cdi::DataImportCronSpec;
use crate::common::{NodePlacement, OperatorCondition};

/// The API group.
pub const GROUP: &str = "ssp.kubevirt.io";
/// The annotation that pauses the operator on an SSP (`"true"`).
pub const OPERATOR_PAUSED_ANNOTATION: &str = "kubevirt.io/operator.paused";

/// SSP's `status.phase` values (the controller-lifecycle-operator-sdk phases).
pub mod phase {
    /// Operands are being deployed.
    pub const DEPLOYING: &str = "Deploying";
    /// Every operand is deployed.
    pub const DEPLOYED: &str = "Deployed";
    /// The SSP is being deleted and its operands removed.
    pub const DELETING: &str = "Deleting";
    /// The operands are removed.
    pub const DELETED: &str = "Deleted";
}

/// The desired state of the SSP add-ons.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ssp.kubevirt.io",
    version = "v1beta3",
    kind = "SSP",
    plural = "ssps",
    namespaced,
    status = "SspStatus",
    derive = "PartialEq",
    doc = "SSP is the Schema for the ssps API",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase")
)]
#[serde(rename_all = "camelCase")]
pub struct SspSpec {
    /// Where common templates are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_templates: Option<CommonTemplates>,
    /// Replicas and placement of the template validator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_validator: Option<TemplateValidator>,
    /// The TLS settings of the operands' servers (OpenShift's `TLSSecurityProfile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_security_profile: Option<crate::common::TlsSecurityProfile>,
    /// The service that issues VNC tokens for VMs (vm-console-proxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_generation_service: Option<TokenGenerationService>,
    /// The node architectures of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Cluster>,
    /// Whether templates, DataSources and DataImportCrons are deployed per architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_multiple_architectures: Option<bool>,
}

/// How many template validator pods run, and where.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateValidator {
    /// How many validator pods run (two when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 2))]
    pub replicas: Option<i32>,
    /// The nodes the validator pods may run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<NodePlacement>,
}

/// The VNC token service's switch.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenGenerationService {
    /// Whether the service is deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// The architectures of a cluster's nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// The architectures of the nodes VMs run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_architectures: Option<Vec<String>>,
    /// The architectures of the control plane's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_architectures: Option<Vec<String>>,
}

/// The deprecation warning upstream's CRD gives for v1beta2.
pub const V1BETA2_DEPRECATION_WARNING: &str = "SSP v1beta2 is deprecated and will not be updated with new functionality. It will stop being served in the next version.";

/// The CRD of SSP: v1beta3 stored, v1beta2 served (deprecated), strategy `None`, `spec`
/// optional, as upstream's.
pub fn crd() -> CustomResourceDefinition {
    let crd = kube::core::crd::merge_crds(vec![SSP::crd(), v1beta2::SSP::crd()], "v1beta3")
        .expect("the versions of one kind merge");
    let crd = crate::crd_versions::deprecated(crd, "v1beta2", V1BETA2_DEPRECATION_WARNING);
    crate::crd_versions::spec_optional(crate::crd_versions::conversion_none(crd))
}

/// Where common templates are created.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonTemplates {
    /// The namespace of the templates.
    pub namespace: String,
    /// DataImportCrons kept for golden images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_import_cron_templates: Option<Vec<DataImportCronTemplate>>,
}

/// A DataImportCron the SSP operator keeps: a name (required) and, optionally, a namespace
/// (the golden images namespace when none is given), labels and annotations, and the spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataImportCronTemplate {
    /// Name, namespace, labels and annotations of the DataImportCron.
    #[serde(default)]
    #[schemars(schema_with = "crate::common::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// The DataImportCron's spec.
    pub spec: DataImportCronSpec,
}

/// The observed state of the SSP add-ons.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SspStatus {
    /// `Deploying`, `Deployed`, `Deleting`, `Deleted`, `Error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Available, Progressing, Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<OperatorCondition>>,
    /// The version of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The version being deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// The version last fully deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_version: Option<String>,
    /// Whether the operator noticed the paused annotation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// The latest generation observed by the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Why an SSP is refused, in ssp-operator's webhook words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SspError {
    /// Only one SSP may exist in a cluster.
    #[error("creation failed, an SSP CR already exists in namespace {namespace}: {name}")]
    AlreadyExists {
        /// The namespace of the SSP that exists.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `spec.commonTemplates.namespace` is missing (the CRD of ssp-operator requires it).
    #[error("spec.commonTemplates.namespace: Required value")]
    MissingTemplatesNamespace,
    /// A dataImportCronTemplate has no `metadata.name`.
    #[error("dataImportCronTemplates validation error: missing name in DataImportCronTemplate")]
    MissingCronName,
    /// A dataImportCronTemplate has no `spec.managedDataSource`.
    #[error(
        "dataImportCronTemplates validation error: missing managedDataSource in DataImportCronTemplate {0}"
    )]
    MissingManagedDataSource(String),
}

/// Checks an SSP's spec as ssp-operator's webhook does on create and update.
pub fn validate_spec(spec: &SspSpec) -> Result<(), SspError> {
    let common = spec
        .common_templates
        .as_ref()
        .filter(|c| !c.namespace.is_empty())
        .ok_or(SspError::MissingTemplatesNamespace)?;
    let templates = common
        .data_import_cron_templates
        .as_deref()
        .unwrap_or_default();
    for template in templates {
        let name = template.metadata.name.as_deref().unwrap_or_default();
        if name.is_empty() {
            return Err(SspError::MissingCronName);
        }
        if template.spec.managed_data_source.is_empty() {
            return Err(SspError::MissingManagedDataSource(name.to_owned()));
        }
    }
    Ok(())
}

/// Checks a new SSP: its spec, and that no other SSP exists (`existing` are the SSPs
/// stored, as `(namespace, name)`).
pub fn validate_create(spec: &SspSpec, existing: &[(String, String)]) -> Result<(), SspError> {
    if let Some((namespace, name)) = existing.first() {
        return Err(SspError::AlreadyExists {
            namespace: namespace.clone(),
            name: name.clone(),
        });
    }
    validate_spec(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(crons: serde_json::Value) -> SspSpec {
        serde_json::from_value(json!({
            "commonTemplates": {"namespace": "openshift", "dataImportCronTemplates": crons},
        }))
        .expect("an SSP spec")
    }

    fn cron(name: Option<&str>, source: &str) -> serde_json::Value {
        json!({
            "metadata": {"name": name},
            "spec": {"schedule": "0 0 * * *", "managedDataSource": source,
                     "template": {"spec": {"storage": {}}}},
        })
    }

    #[test]
    fn cron_templates_need_a_name_and_a_data_source() {
        assert_eq!(
            validate_spec(&spec(json!([cron(Some("a"), "fedora")]))),
            Ok(())
        );
        assert_eq!(
            validate_spec(&spec(json!([cron(None, "fedora")])))
                .unwrap_err()
                .to_string(),
            "dataImportCronTemplates validation error: missing name in DataImportCronTemplate"
        );
        assert_eq!(
            validate_spec(&spec(json!([cron(Some("a"), "")]))),
            Err(SspError::MissingManagedDataSource("a".into()))
        );
    }

    #[test]
    fn the_templates_namespace_is_required() {
        let spec: SspSpec = serde_json::from_value(json!({})).expect("an empty spec");
        assert_eq!(
            validate_spec(&spec).unwrap_err().to_string(),
            "spec.commonTemplates.namespace: Required value"
        );
    }

    /// Every field upstream's SSP schema has beside the boot sources, in upstream's shape.
    fn full_ssp(api_version: &str) -> serde_json::Value {
        let mut ssp = json!({
            "apiVersion": api_version,
            "kind": "SSP",
            "metadata": {"name": "ssp-kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged"},
            "spec": {
                "commonTemplates": {"namespace": "openshift"},
                "templateValidator": {
                    "replicas": 2,
                    "placement": {
                        "nodeSelector": {"node-role.kubernetes.io/infra": ""},
                        "tolerations": [{"key": "infra", "operator": "Equal", "value": "reserved",
                                         "effect": "NoSchedule"}],
                        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 50,
                            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                "labelSelector": {"matchLabels": {"kubevirt.io": "virt-template-validator"}}},
                        }]}},
                    },
                },
                "tlsSecurityProfile": {"type": "Intermediate", "intermediate": {}},
                "tokenGenerationService": {"enabled": true},
            },
            "status": {
                "phase": "Deployed",
                "conditions": [{
                    "type": "Available",
                    "status": "True",
                    "reason": "Available",
                    "message": "All SSP resources are available",
                    "lastHeartbeatTime": "2024-05-01T10:00:00Z",
                    "lastTransitionTime": "2024-05-01T09:00:00Z",
                }],
                "operatorVersion": "v0.24.0",
                "targetVersion": "v0.24.0",
                "observedVersion": "v0.24.0",
                "paused": true,
                "observedGeneration": 3,
            },
        });
        if api_version.ends_with("v1beta3") {
            ssp["spec"]["cluster"] = json!({"workloadArchitectures": ["amd64", "arm64"],
                                            "controlPlaneArchitectures": ["amd64"]});
            ssp["spec"]["enableMultipleArchitectures"] = json!(true);
        }
        ssp
    }

    #[test]
    fn an_upstream_shaped_ssp_round_trips_unchanged_at_both_versions() {
        let v1beta3 = full_ssp("ssp.kubevirt.io/v1beta3");
        let typed: SSP = serde_json::from_value(v1beta3.clone()).expect("a v1beta3 SSP");
        assert_eq!(serde_json::to_value(&typed).expect("serializes"), v1beta3);
        let validator = typed.spec.template_validator.expect("templateValidator");
        assert_eq!(validator.replicas, Some(2));
        let placement = validator.placement.expect("placement");
        assert_eq!(
            placement.tolerations.expect("tolerations")[0]
                .key
                .as_deref(),
            Some("infra")
        );
        let status = typed.status.expect("status");
        assert!(status.paused);
        assert_eq!(status.observed_generation, Some(3));

        let v1beta2 = full_ssp("ssp.kubevirt.io/v1beta2");
        let typed: v1beta2::SSP = serde_json::from_value(v1beta2.clone()).expect("a v1beta2 SSP");
        assert_eq!(serde_json::to_value(&typed).expect("serializes"), v1beta2);
    }

    #[test]
    fn a_second_ssp_is_refused() {
        let existing = [("kubevirt-hyperconverged".to_owned(), "ssp".to_owned())];
        assert_eq!(
            validate_create(&spec(json!([])), &existing)
                .unwrap_err()
                .to_string(),
            "creation failed, an SSP CR already exists in namespace kubevirt-hyperconverged: ssp"
        );
        assert_eq!(validate_create(&spec(json!([])), &[]), Ok(()));
    }
}
