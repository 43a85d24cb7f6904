//! The CDI operator's kinds (cdi.kubevirt.io/v1beta1, cluster-scoped): `CDI`, which installs
//! and configures CDI, and `CDIConfig`, the effective configuration the controllers read.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::storageprofile::CdiCloneStrategy;
use crate::common::{NodePlacement, OperatorCondition};
// The same shapes as KubeVirt's: a certificate's lifetime and renewal, and a patch of a
// deployed object (the operator SDK's, which both embed).
pub use crate::kubevirt::kubevirt::{CertConfig, CustomizeComponentsPatch};

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
    #[schemars(extend("enum" = ["Always", "IfNotPresent", "Never"]))]
    pub image_pull_policy: Option<String>,
    /// What deleting the CR does while DataVolumes exist: `RemoveWorkloads` or
    /// `BlockUninstallIfWorkloadsExist` (the deletion is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["RemoveWorkloads", "BlockUninstallIfWorkloadsExist"]))]
    pub uninstall_strategy: Option<String>,
    /// Placement and replicas of the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<ComponentConfig>,
    /// Placement of importer, upload and clone pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<NodePlacement>,
    /// Patches and extra flags applied to the components the operator deploys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customize_components: Option<CustomizeComponents>,
    /// Force a clone method regardless of StorageProfiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_strategy_override: Option<CdiCloneStrategy>,
    /// Initial CDIConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<CdiConfigSpec>,
    /// Lifetimes and renewal of the certificates CDI issues for itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config: Option<CdiCertConfig>,
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

/// Lifetimes of the certificates CDI's operator issues: its CA, the serving certificates it
/// signs and the client certificates its components present to each other.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CdiCertConfig {
    /// The CA; a certificate it replaces stays in the trust bundle until it expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CertConfig>,
    /// The serving certificates, replaced when renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<CertConfig>,
    /// The client certificates, replaced when renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<CertConfig>,
}

/// Changes to the objects CDI's operator deploys: patches of them and extra command line
/// flags of its components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomizeComponents {
    /// Patches of deployed objects, applied in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub patches: Option<Vec<CustomizeComponentsPatch>>,
    /// Extra command line flags, by component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<ComponentFlags>,
}

/// Extra command line flags of CDI's components (flag name to value).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentFlags {
    /// cdi-apiserver's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<BTreeMap<String, String>>,
    /// cdi-deployment's (the controller's) flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<BTreeMap<String, String>>,
    /// cdi-uploadproxy's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_proxy: Option<BTreeMap<String, String>>,
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
}

/// Default filesystem overhead when none is configured.
pub const DEFAULT_FILESYSTEM_OVERHEAD: &str = "0.06";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn round_trip<T: serde::de::DeserializeOwned + Serialize>(value: &Value) -> Value {
        let typed: T = serde_json::from_value(value.clone()).expect("reads as the type");
        serde_json::to_value(&typed).expect("serializes")
    }

    /// A CDI CR setting every field upstream's schema has, in upstream's shape.
    fn full_cdi() -> Value {
        let rotation =
            |duration: &str, renew: &str| json!({"duration": duration, "renewBefore": renew});
        json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "CDI",
            "metadata": {"name": "cdi"},
            "spec": {
                "imagePullPolicy": "IfNotPresent",
                "uninstallStrategy": "BlockUninstallIfWorkloadsExist",
                "infra": {
                    "nodeSelector": {"node-role.kubernetes.io/infra": ""},
                    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        ]}],
                    }}},
                    "deploymentReplicas": 1,
                    "apiServerReplicas": 2,
                    "uploadProxyReplicas": 1,
                },
                "workload": {"nodeSelector": {"kubernetes.io/os": "linux"}},
                "customizeComponents": {
                    "patches": [{
                        "resourceType": "Deployment",
                        "resourceName": "cdi-deployment",
                        "patch": r#"{"metadata":{"annotations":{"patched":"yes"}}}"#,
                        "type": "strategic",
                    }],
                    "flags": {
                        "api": {"v": "4"},
                        "controller": {"v": "3"},
                        "uploadProxy": {"v": "2"},
                    },
                },
                "cloneStrategyOverride": "snapshot",
                "config": {"featureGates": ["HonorWaitForFirstConsumer"]},
                "certConfig": {
                    "ca": rotation("48h0m0s", "24h0m0s"),
                    "server": rotation("24h0m0s", "12h0m0s"),
                    "client": rotation("24h0m0s", "12h0m0s"),
                },
                "priorityClass": "kubevirt-cluster-critical",
            },
            "status": {
                "phase": "Deployed",
                "conditions": [{
                    "type": "Available",
                    "status": "True",
                    "reason": "Completed",
                    "message": "Deployment Completed",
                    "lastHeartbeatTime": "2024-05-01T10:00:00Z",
                    "lastTransitionTime": "2024-05-01T09:00:00Z",
                }],
                "operatorVersion": "v1.66.0",
                "targetVersion": "v1.66.0",
                "observedVersion": "v1.66.0",
            },
        })
    }

    #[test]
    fn an_upstream_shaped_cdi_round_trips_unchanged() {
        let cdi = full_cdi();
        assert_eq!(round_trip::<CDI>(&cdi), cdi);
        let typed: CDI = serde_json::from_value(cdi).expect("a CDI");
        let certs = typed.spec.cert_config.expect("certConfig");
        let client = certs.client.expect("client");
        assert_eq!(client.renew_before.as_deref(), Some("12h0m0s"));
        let customize = typed
            .spec
            .customize_components
            .expect("customizeComponents");
        let flags = customize.flags.expect("flags");
        assert_eq!(flags.upload_proxy.expect("uploadProxy")["v"], "2");
        assert_eq!(customize.patches.expect("patches")[0].type_, "strategic");
    }

    #[test]
    fn an_upstream_shaped_cdi_config_status_round_trips_unchanged() {
        let config = json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "CDIConfig",
            "metadata": {"name": "config"},
            "spec": {"uploadProxyURLOverride": "https://upload.example.com"},
            "status": {
                "uploadProxyURL": "https://upload.example.com",
                "uploadProxyCA": "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n",
                "importProxy": {
                    "HTTPProxy": "http://proxy.local:3128",
                    "HTTPSProxy": "",
                    "noProxy": ".cluster.local",
                    "trustedCAProxy": "",
                },
                "scratchSpaceStorageClass": "hostpath-csi",
                "defaultPodResourceRequirements": {
                    "limits": {"cpu": "750m", "memory": "600M"},
                    "requests": {"cpu": "100m", "memory": "60M"},
                },
                "filesystemOverhead": {
                    "global": "0.06",
                    "storageClass": {"hostpath-csi": "0.1"},
                },
                "preallocation": false,
                "imagePullSecrets": [{"name": "registry-pull"}],
            },
        });
        assert_eq!(round_trip::<CDIConfig>(&config), config);
    }
}
