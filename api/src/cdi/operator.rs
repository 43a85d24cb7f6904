//! The CDI operator's kinds (cdi.kubevirt.io/v1beta1, cluster-scoped): `CDI`, which installs
//! and configures CDI, and `CDIConfig`, the effective configuration the controllers read.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::storageprofile::CdiCloneStrategy;
use crate::common::{Extra, NodePlacement, OperatorCondition};

/// The desired state of the CDI installation.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "CDI",
    plural = "cdis",
    status = "OperatorStatus",
    shortname = "cdi",
    shortname = "cdis",
    derive = "PartialEq",
    doc = "CDI is the CDI Operator CRD",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase")
)]
#[serde(rename_all = "camelCase")]
pub struct CdiSpec {
    /// When to pull component images: `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// What uninstalling does: `RemoveWorkloads` or `BlockUninstallIfWorkloadsExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall_strategy: Option<String>,
    /// Placement and replicas of the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<ComponentConfig>,
    /// Placement of importer, upload and clone pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<NodePlacement>,
    /// Patches and flags applied to the deployed components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub customize_components: Option<serde_json::Value>,
    /// Force a clone method regardless of StorageProfiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_strategy_override: Option<CdiCloneStrategy>,
    /// Initial CDIConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<CdiConfigSpec>,
    /// Certificate lifetimes (`ca`, `server`, `client` with `duration`, `renewBefore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::common::nullable_preserve_unknown_object")]
    pub cert_config: Option<serde_json::Value>,
    /// Priority class of the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
}

/// Placement and replica counts of CDI's control plane.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentConfig {
    /// Where the pods may run.
    #[serde(flatten)]
    pub placement: NodePlacement,
    /// Replicas of cdi-deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_replicas: Option<i32>,
    /// Replicas of cdi-apiserver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_replicas: Option<i32>,
    /// Replicas of cdi-uploadproxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_proxy_replicas: Option<i32>,
}

/// The status of an operator-managed installation (controller-lifecycle-operator-sdk).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// `Deploying`, `Deployed`, `Deleting`, `Deleted`, `Error` or `Upgrading`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Available, Progressing and Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<OperatorCondition>>,
    /// The version of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// The version being deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// The version deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_version: Option<String>,
}

/// The configuration CDI's controllers use.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "CDIConfig",
    plural = "cdiconfigs",
    status = "CdiConfigStatus",
    derive = "PartialEq",
    doc = "CDIConfig provides a user configuration for CDI"
)]
#[serde(rename_all = "camelCase")]
pub struct CdiConfigSpec {
    /// The upload proxy URL handed to clients instead of the detected one.
    #[serde(
        default,
        rename = "uploadProxyURLOverride",
        skip_serializing_if = "Option::is_none"
    )]
    pub upload_proxy_url_override: Option<String>,
    /// Proxy settings of importer pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_proxy: Option<ImportProxy>,
    /// The storage class of scratch volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_space_storage_class: Option<String>,
    /// Resources of CDI's worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_resource_requirements: Option<ResourceRequirements>,
    /// Enabled feature gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<Vec<String>>,
    /// Space reserved on filesystem volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem_overhead: Option<FilesystemOverhead>,
    /// Default preallocation of DataVolumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocation: Option<bool>,
    /// Registries reached without TLS verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_registries: Option<Vec<String>>,
    /// Seconds after completion before a DataVolume may be collected (deprecated).
    #[serde(
        default,
        rename = "dataVolumeTTLSeconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub data_volume_ttl_seconds: Option<i32>,
    /// The cluster TLS profile applied to CDI's servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_security_profile: Option<crate::common::TlsSecurityProfile>,
    /// Pull secrets of CDI's worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<crate::common::PullSecretReference>>,
    /// Log verbosity of CDI's components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_verbosity: Option<i32>,
    /// Whether the webhook that completes PVC specs from StorageProfiles is on: `Enabled`
    /// (when unset) or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_pvc_rendering: Option<String>,
}

/// Proxy settings of importer pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportProxy {
    /// Proxy URL for http requests.
    #[serde(default, rename = "HTTPProxy", skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<String>,
    /// Proxy URL for https requests.
    #[serde(
        default,
        rename = "HTTPSProxy",
        skip_serializing_if = "Option::is_none"
    )]
    pub https_proxy: Option<String>,
    /// Hosts and CIDRs reached without the proxy, comma separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<String>,
    /// A ConfigMap with the proxy's CA bundle.
    #[serde(
        default,
        rename = "trustedCAProxy",
        skip_serializing_if = "Option::is_none"
    )]
    pub trusted_ca_proxy: Option<String>,
}

/// Fractions of a filesystem volume reserved for filesystem overhead, such as `"0.06"`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FilesystemOverhead {
    /// The default fraction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<String>,
    /// Fractions per storage class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<BTreeMap<String, String>>,
}

/// The configuration in effect.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CdiConfigStatus {
    /// The upload proxy URL clients use.
    #[serde(
        default,
        rename = "uploadProxyURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub upload_proxy_url: Option<String>,
    /// The upload proxy's CA certificate.
    #[serde(
        default,
        rename = "uploadProxyCA",
        skip_serializing_if = "Option::is_none"
    )]
    pub upload_proxy_ca: Option<String>,
    /// Proxy settings of importer pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_proxy: Option<ImportProxy>,
    /// The storage class of scratch volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_space_storage_class: Option<String>,
    /// Resources of CDI's worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_pod_resource_requirements: Option<ResourceRequirements>,
    /// Space reserved on filesystem volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem_overhead: Option<FilesystemOverhead>,
    /// Default preallocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocation: Option<bool>,
    /// Pull secrets of CDI's worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<crate::common::PullSecretReference>>,
    /// Fields this version does not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Default filesystem overhead when none is configured.
pub const DEFAULT_FILESYSTEM_OVERHEAD: &str = "0.06";
