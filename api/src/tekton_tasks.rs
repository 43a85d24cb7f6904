//! tektontasks.kubevirt.io/v1alpha1 TektonTasks, the CR of kubevirt/tekton-tasks-operator:
//! whether the KubeVirt Tekton tasks (and their service accounts, ClusterRoles and
//! RoleBindings) are deployed, and into which namespaces. Its status is the operator SDK's
//! (phase, Available/Progressing/Degraded, versions) with `paused` and `observedGeneration`,
//! the same shape as SSP's.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "tektontasks.kubevirt.io";
/// The annotation that pauses the operator on a CR (`"true"`).
pub const OPERATOR_PAUSED_ANNOTATION: &str = "kubevirt.io/operator.paused";

/// The status of a TektonTasks: the operator SDK's, as SSP's.
pub type TektonTasksStatus = crate::ssp::SspStatus;

/// What the tekton-tasks operator deploys and where.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tektontasks.kubevirt.io",
    version = "v1alpha1",
    kind = "TektonTasks",
    plural = "tektontasks",
    singular = "tektontasks",
    namespaced,
    status = "TektonTasksStatus",
    derive = "PartialEq",
    doc = "TektonTasks is the Schema for the tektontasks API"
)]
#[serde(rename_all = "camelCase")]
pub struct TektonTasksSpec {
    /// Where the example pipelines go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipelines: Option<Namespace>,
    /// Where the tasks go (the CR's namespace when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Namespace>,
    /// What is deployed at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<FeatureGates>,
}

/// The namespace of a group of resources.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Namespace {
    /// The namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The operator's feature gates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureGates {
    /// Deploy the tasks and their RBAC (nothing is deployed while it is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_tekton_task_resources: Option<bool>,
}

impl TektonTasks {
    /// Whether the task resources are to be deployed.
    pub fn deploys_task_resources(&self) -> bool {
        self.spec
            .feature_gates
            .as_ref()
            .and_then(|g| g.deploy_tekton_task_resources)
            .unwrap_or(false)
    }

    /// The namespace of the tasks: `spec.tasks.namespace`, else the CR's own.
    pub fn tasks_namespace(&self) -> String {
        self.spec
            .tasks
            .as_ref()
            .and_then(|t| t.namespace.clone())
            .filter(|n| !n.is_empty())
            .or_else(|| self.metadata.namespace.clone())
            .unwrap_or_default()
    }

    /// The namespace of the tasks' service accounts and role bindings: the CR's own, as
    /// tekton-tasks-operator puts them (the tasks may be elsewhere).
    pub fn service_accounts_namespace(&self) -> String {
        self.metadata.namespace.clone().unwrap_or_default()
    }
}

/// The CRD, as tekton-tasks-operator ships it (status subresource, no printer columns).
pub fn crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    crate::crd_versions::spec_optional(TektonTasks::crd())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstream_sample_round_trips_and_names_its_namespaces() {
        let sample = json!({
            "apiVersion": "tektontasks.kubevirt.io/v1alpha1", "kind": "TektonTasks",
            "metadata": {"name": "tektontasks-sample", "namespace": "kubevirt"},
            "spec": {
                "featureGates": {"deployTektonTaskResources": true},
                "pipelines": {"namespace": "pipelines"},
                "tasks": {"namespace": "tasks"},
            },
        });
        let tt: TektonTasks = serde_json::from_value(sample.clone()).unwrap();
        assert!(tt.deploys_task_resources());
        assert_eq!(tt.tasks_namespace(), "tasks");
        assert_eq!(tt.service_accounts_namespace(), "kubevirt");
        assert_eq!(serde_json::to_value(&tt).unwrap(), sample);
        let bare: TektonTasks = serde_json::from_value(json!({
            "apiVersion": "tektontasks.kubevirt.io/v1alpha1", "kind": "TektonTasks",
            "metadata": {"name": "t", "namespace": "kubevirt"}, "spec": {},
        }))
        .unwrap();
        assert!(!bare.deploys_task_resources());
        assert_eq!(bare.tasks_namespace(), "kubevirt");
    }
}
