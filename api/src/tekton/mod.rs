//! Tekton Pipelines' API (`tekton.dev`, v1.15): Task, TaskRun, Pipeline and PipelineRun,
//! served by `ferrovirt up` for the KubeVirt tekton tasks (issue 42). v1 is stored; v1beta1
//! is served too and converted ([`conversion`]). On a cluster Tekton installs these CRDs
//! itself, so they are not among the deployed ones ([`crate::crds::deployed`]).
//!
//! Field names, optionality and the schema follow Tekton's `pkg/apis/pipeline/v1` and its
//! published CRDs, including where those keep a field unchecked (embedded specs, volumes,
//! parameter values).

pub mod conversion;
pub mod params;
pub mod pipeline;
pub mod pipelinerun;
pub mod pod_template;
pub mod refs;
pub mod results;
pub mod run_status;
mod schema;
pub mod steps;
pub mod task;
pub mod taskrun;
pub mod v1beta1;
pub mod when;
pub mod workspaces;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceSubresourceStatus, CustomResourceSubresources,
};
use kube::CustomResourceExt;

pub use params::{Param, ParamSpec, ParamValue};
pub use pipeline::{Pipeline, PipelineSpec, PipelineTask};
pub use pipelinerun::{PipelineRun, PipelineRunSpec, PipelineRunStatus};
pub use refs::{PipelineRef, TaskRef};
pub use steps::{Sidecar, Step, StepTemplate};
pub use task::{Task, TaskSpec};
pub use taskrun::{TaskRun, TaskRunSpec, TaskRunStatus};

/// The API group.
pub const GROUP: &str = "tekton.dev";
/// The storage version.
pub const V1: &str = "tekton.dev/v1";
/// The older version, served and converted.
pub const V1BETA1: &str = "tekton.dev/v1beta1";
/// Tekton's `default-timeout-minutes`: a run that names no timeout gets an hour, which its
/// webhook writes into the run and its controller enforces.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60 * 60);
/// The label Tekton's webhook puts on every TaskRun and PipelineRun.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY: &str = "tekton-pipelines";
/// The namespace and name of the Service of Tekton's conversion webhook, which the CRDs
/// name as Tekton's do; the embedded API server converts in process instead.
const WEBHOOK_SERVICE: (&str, &str) = ("tekton-pipelines", "tekton-pipelines-webhook");

/// The four CRDs, each serving v1 (stored) and v1beta1.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        both_versions(vec![Task::crd(), v1beta1::Task::crd()]),
        both_versions(vec![TaskRun::crd(), v1beta1::TaskRun::crd()]),
        both_versions(vec![Pipeline::crd(), v1beta1::Pipeline::crd()]),
        both_versions(vec![PipelineRun::crd(), v1beta1::PipelineRun::crd()]),
    ]
}

/// One CRD of both versions, stored at v1, converted by Tekton's webhook, with a status
/// subresource (upstream's Task and Pipeline have one though they declare no status) and
/// `spec` optional, as upstream's.
fn both_versions(versions: Vec<CustomResourceDefinition>) -> CustomResourceDefinition {
    let mut crd =
        kube::core::crd::merge_crds(versions, "v1").expect("the versions of one kind merge");
    for version in &mut crd.spec.versions {
        version
            .subresources
            .get_or_insert_with(CustomResourceSubresources::default)
            .status
            .get_or_insert(CustomResourceSubresourceStatus(serde_json::json!({})));
    }
    crd.spec.conversion = Some(
        serde_json::from_value(serde_json::json!({
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"service": {
                    "namespace": WEBHOOK_SERVICE.0,
                    "name": WEBHOOK_SERVICE.1,
                }},
                "conversionReviewVersions": ["v1beta1", "v1"],
            },
        }))
        .expect("the conversion stanza deserializes"),
    );
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            let mut json = serde_json::to_value(&*schema).expect("a schema serializes");
            schema::optional_referent_names(&mut json);
            *schema = serde_json::from_value(json).expect("a schema deserializes");
        }
    }
    crate::crd_versions::spec_optional(crd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(kind: &str) -> CustomResourceDefinition {
        crds()
            .into_iter()
            .find(|crd| crd.spec.names.kind == kind)
            .expect("the kind has a CRD")
    }

    #[test]
    fn every_kind_is_stored_at_v1_served_at_both_and_converted_by_webhook() {
        for crd in crds() {
            let versions: Vec<(&str, bool)> = crd
                .spec
                .versions
                .iter()
                .map(|v| (v.name.as_str(), v.storage))
                .collect();
            assert_eq!(versions, [("v1", true), ("v1beta1", false)]);
            assert!(crd.spec.versions.iter().all(|v| v.served));
            let conversion = crd.spec.conversion.as_ref().expect("a conversion");
            assert_eq!(conversion.strategy, "Webhook");
            assert_eq!(
                crd.spec.names.categories,
                Some(vec!["tekton".into(), "tekton-pipelines".into()])
            );
            assert!(
                crd.spec
                    .versions
                    .iter()
                    .all(|v| v.subresources.as_ref().is_some_and(|s| s.status.is_some()))
            );
        }
    }

    #[test]
    fn the_runs_have_upstreams_short_names_and_columns() {
        for (kind, short) in [("TaskRun", ["tr", "trs"]), ("PipelineRun", ["pr", "prs"])] {
            let crd = find(kind);
            assert_eq!(
                crd.spec.names.short_names,
                Some(short.map(String::from).to_vec())
            );
            for version in &crd.spec.versions {
                let columns: Vec<(&str, &str, &str)> = version
                    .additional_printer_columns
                    .iter()
                    .flatten()
                    .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
                    .collect();
                assert_eq!(
                    columns,
                    [
                        (
                            "Succeeded",
                            "string",
                            ".status.conditions[?(@.type==\"Succeeded\")].status"
                        ),
                        (
                            "Reason",
                            "string",
                            ".status.conditions[?(@.type==\"Succeeded\")].reason"
                        ),
                        ("StartTime", "date", ".status.startTime"),
                        ("CompletionTime", "date", ".status.completionTime"),
                    ]
                );
            }
        }
        assert_eq!(find("Task").spec.names.short_names, None);
    }

    #[test]
    fn a_task_run_reads_and_writes_back_as_given() {
        let text = serde_json::json!({
            "apiVersion": V1, "kind": "TaskRun", "metadata": {"name": "t"},
            "spec": {"taskRef": {"name": "build", "kind": "Task"},
                     "params": [{"name": "a", "value": ["x"]}, {"name": "b", "value": "y"}],
                     "stepSpecs": [{"name": "s", "computeResources": {"limits": {"cpu": "1"}}}]},
            "status": {"podName": "", "results": [{"name": "r", "type": "object",
                                                    "value": {"k": "v"}}],
                       "steps": [{"name": "s", "container": "step-s",
                                  "terminated": {"exitCode": 0}}]},
        });
        let run: TaskRun = serde_json::from_value(text.clone()).expect("a TaskRun");
        let step = &run.status.as_ref().unwrap().steps.as_ref().unwrap()[0];
        assert_eq!(step.state.terminated.as_ref().map(|t| t.exit_code), Some(0));
        assert_eq!(serde_json::to_value(&run).unwrap(), text);
    }
}
