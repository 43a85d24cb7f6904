//! The KubeVirt operator kind (kubevirt.io/v1 `KubeVirt`): installs KubeVirt and carries its
//! cluster-wide configuration, typed as upstream's `v1.KubeVirtSpec` and `v1.KubeVirtStatus`
//! (the `configuration` tree is in [`super::kubevirt_config`]).

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::kubevirt_config::KubeVirtConfiguration;
use crate::common::NodePlacement;

/// The desired state of the KubeVirt installation.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "KubeVirt",
    namespaced,
    status = "KubeVirtStatus",
    shortname = "kv",
    shortname = "kvs",
    category = "all",
    derive = "PartialEq",
    doc = "KubeVirt represents the object deploying all KubeVirt resources",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase")
)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtSpec {
    /// How KubeVirt's certificates are issued and rotated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_rotate_strategy: Option<KubeVirtCertificateRotateStrategy>,
    /// Cluster-wide configuration (feature gates, migrations, network, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<KubeVirtConfiguration>,
    /// Patches and flags applied to the deployed components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customize_components: Option<CustomizeComponents>,
    /// When to pull component images: `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Secrets the component pods pull their images with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<crate::common::PullSecretReference>>,
    /// The registry component images come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_registry: Option<String>,
    /// The tag of the component images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tag: Option<String>,
    /// Placement and replicas of the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<ComponentConfig>,
    /// The service account Prometheus scrapes with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor_account: Option<String>,
    /// The namespace Prometheus runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor_namespace: Option<String>,
    /// The component label put on KubeVirt's objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_component: Option<String>,
    /// The product name label put on KubeVirt's objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_name: Option<String>,
    /// The product version label put on KubeVirt's objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_version: Option<String>,
    /// The namespace the ServiceMonitor goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_monitor_namespace: Option<String>,
    /// The port the synchronization controller listens on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronization_port: Option<String>,
    /// What removing the CR does while workloads exist: `RemoveWorkloads` or
    /// `BlockUninstallIfWorkloadsExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall_strategy: Option<String>,
    /// How running VMIs move to a new KubeVirt version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_update_strategy: Option<KubeVirtWorkloadUpdateStrategy>,
    /// Placement of virt-handler and VM pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<ComponentConfig>,
}

/// How KubeVirt's certificates are issued and rotated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtCertificateRotateStrategy {
    /// Certificates signed by a CA virt-operator keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_signed: Option<KubeVirtSelfSignConfiguration>,
}

/// Lifetimes of the self-signed CA and the certificates it signs (Go durations).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtSelfSignConfiguration {
    /// The CA's lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CertConfig>,
    /// Deprecated: how long the old and new CA are both trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_overlap_interval: Option<String>,
    /// Deprecated: the CA's lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_rotate_interval: Option<String>,
    /// Deprecated: the certificates' lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_rotate_interval: Option<String>,
    /// The server certificates' lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<CertConfig>,
}

/// A certificate's lifetime and when it is renewed (Go durations).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertConfig {
    /// How long it is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// How long before expiry it is renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before: Option<String>,
}

/// Changes to the objects virt-operator deploys.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomizeComponents {
    /// Extra command line flags of the components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<ComponentFlags>,
    /// Patches of deployed objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub patches: Option<Vec<CustomizeComponentsPatch>>,
}

/// Command line flags by component (flag name to value).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentFlags {
    /// virt-api's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<BTreeMap<String, String>>,
    /// virt-controller's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<BTreeMap<String, String>>,
    /// virt-handler's flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<BTreeMap<String, String>>,
}

/// A patch of one deployed object (the operator SDK's shape, which KubeVirt and CDI share).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomizeComponentsPatch {
    /// The patch document.
    pub patch: String,
    /// The object's name (`*` for all of its kind).
    #[schemars(length(min = 1))]
    pub resource_name: String,
    /// The object's kind, such as `Deployment`.
    #[schemars(length(min = 1))]
    pub resource_type: String,
    /// The patch type: `json`, `merge` or `strategic`.
    #[serde(rename = "type")]
    pub type_: String,
}

/// Placement and replicas of a group of components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentConfig {
    /// Where the pods may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_placement: Option<NodePlacement>,
    /// Replicas of the control plane deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// How running VMIs move to a new KubeVirt version.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtWorkloadUpdateStrategy {
    /// Time between eviction batches (a Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_eviction_interval: Option<String>,
    /// VMIs evicted per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_eviction_size: Option<i32>,
    /// `LiveMigrate` and/or `Evict`, in order of preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_update_methods: Option<Vec<String>>,
}

/// The observed state of the KubeVirt installation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtStatus {
    /// Available, Progressing, Degraded, Created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<KubeVirtCondition>>,
    /// The architecture VMIs that name none get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_architecture: Option<String>,
    /// The generations of the objects virt-operator deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generations: Option<Vec<GenerationStatus>>,
    /// The deployment configuration in place (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_deployment_config: Option<String>,
    /// The ID of the deployment configuration in place.
    #[serde(
        default,
        rename = "observedDeploymentID",
        skip_serializing_if = "Option::is_none"
    )]
    pub observed_deployment_id: Option<String>,
    /// The CR generation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The registry deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_kube_virt_registry: Option<String>,
    /// The version deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_kube_virt_version: Option<String>,
    /// The version of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_version: Option<String>,
    /// VMIs still running on an older version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outdated_virtual_machine_instance_workloads: Option<i32>,
    /// `Deploying`, `Deployed`, `Deleting` or `Deleted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Addresses of the synchronization controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronization_addresses: Option<Vec<String>>,
    /// The deployment configuration being rolled out (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_deployment_config: Option<String>,
    /// The ID of the deployment configuration being rolled out.
    #[serde(
        default,
        rename = "targetDeploymentID",
        skip_serializing_if = "Option::is_none"
    )]
    pub target_deployment_id: Option<String>,
    /// The registry being rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_kube_virt_registry: Option<String>,
    /// The version being rolled out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_kube_virt_version: Option<String>,
}

/// The generation of one object virt-operator deployed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenerationStatus {
    /// The object's API group.
    pub group: String,
    /// A hash of the object's last applied content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// The object's generation last seen.
    pub last_generation: i64,
    /// The object's name.
    pub name: String,
    /// The object's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's resource (plural).
    pub resource: String,
}

/// A condition of the KubeVirt installation, in virt-operator's shape: it is probed
/// (`lastProbeTime`), where the operator SDK's conditions of CDI, HPP and SSP carry a
/// heartbeat.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtCondition {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A machine-readable reason for the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When virt-operator last checked the condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Phases of the KubeVirt installation.
pub mod phase {
    /// Components are being deployed.
    pub const DEPLOYING: &str = "Deploying";
    /// All components are deployed.
    pub const DEPLOYED: &str = "Deployed";
    /// Components are being removed.
    pub const DELETING: &str = "Deleting";
    /// All components are removed.
    pub const DELETED: &str = "Deleted";
}
