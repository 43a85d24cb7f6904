//! ssp.kubevirt.io/v1beta2 SSP, deprecated upstream and served for the clients that still
//! write it: v1beta3's fields but the node architectures, and four fields ssp-operator
//! ignores (common instance types, the Tekton operands and the old feature gates), which
//! v1beta3 does not keep.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CommonTemplates, SspStatus, TemplateValidator, TokenGenerationService};

/// The desired state of the SSP add-ons, as v1beta2 says it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ssp.kubevirt.io",
    version = "v1beta2",
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
    /// Ignored (deprecated): where common instance types came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_instancetypes: Option<CommonInstancetypes>,
    /// Ignored (deprecated): the Tekton pipelines operand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tekton_pipelines: Option<TektonNamespace>,
    /// Ignored (deprecated): the Tekton tasks operand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tekton_tasks: Option<TektonNamespace>,
    /// Ignored (deprecated): the old feature gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<FeatureGates>,
}

/// Ignored (deprecated): a Kustomize target common instance types were deployed from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonInstancetypes {
    /// The target's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Ignored (deprecated): the namespace of a Tekton operand.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TektonNamespace {
    /// The operand's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Ignored (deprecated): v1beta2's feature gates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureGates {
    /// Ignored: Tekton task resources are no longer deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_tekton_task_resources: Option<bool>,
    /// Ignored: `tokenGenerationService` deploys vm-console-proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_vm_console_proxy: Option<bool>,
    /// Ignored: instance types are no longer deployed by SSP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_common_instancetypes: Option<bool>,
}
