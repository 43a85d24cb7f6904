//! The add-ons' workloads on a cluster. For `spec.kubeMacPool`, kubemacpool's manager with its
//! account, role, Service and webhook configuration (`deploy/network/kubemacpool.yaml`,
//! compiled in) go to the operand namespace with the operator's image, owned by the config so
//! that deleting it takes them along; without it they are removed. Their Deployments'
//! progress is read as CNAO's status manager reads it. On `ferrovirt up` the add-ons run
//! in-process and none of this is deployed.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Api, Client};
use serde_json::json;

use super::FIELD_MANAGER;
use crate::install::deployer;
use crate::install::manifests::Manifests;

/// kubemacpool's objects, as CNAO renders them for the MAC pool.
pub const KUBEMACPOOL: Manifests = Manifests {
    files: &[(
        "kubemacpool.yaml",
        include_str!("../../../../deploy/network/kubemacpool.yaml"),
    )],
    namespace: super::OPERAND_NAMESPACE,
    managed_by: FIELD_MANAGER,
};

/// kubemacpool's manager, the Deployment whose progress the status follows.
pub const KUBEMACPOOL_MANAGER: &str = "kubemacpool-mac-controller-manager";

/// Why the Deployment `namespace/name` does not count as deployed yet, in CNAO's words;
/// `None` once it is available and up to date.
pub fn deployment_progress(
    namespace: &str,
    name: &str,
    observed: Option<&Deployment>,
) -> Option<String> {
    let key = format!("{namespace}/{name}");
    let Some(deployment) = observed else {
        return Some(format!(
            "Deployment {key:?} is not yet scheduled on any nodes"
        ));
    };
    let status = deployment.status.clone().unwrap_or_default();
    let generation = deployment.metadata.generation.unwrap_or(0);
    let observed_generation = status.observed_generation.unwrap_or(0);
    match (
        status.unavailable_replicas.unwrap_or(0),
        status.available_replicas.unwrap_or(0),
    ) {
        (unavailable, _) if unavailable > 0 => Some(format!(
            "Deployment {key:?} is not available (awaiting {unavailable} nodes)"
        )),
        (_, 0) => Some(format!(
            "Deployment {key:?} is not yet scheduled on any nodes"
        )),
        _ if observed_generation < generation => Some(format!(
            "Deployment {key:?} update is being processed (generation {generation}, observed generation {observed_generation})"
        )),
        _ => None,
    }
}

/// Deploys kubemacpool in `namespace` running `image` when `wanted`, owned by `owner`, and
/// says what is still progressing; removes it otherwise.
pub async fn sync_kubemacpool(
    client: &Client,
    namespace: &str,
    image: &str,
    owner: Option<&OwnerReference>,
    wanted: bool,
) -> Result<Vec<String>, kube::Error> {
    let mut objects = KUBEMACPOOL.render(namespace, image);
    if !wanted {
        deployer::remove_all(client, &objects).await?;
        return Ok(Vec::new());
    }
    if let Some(owner) = owner {
        for object in &mut objects {
            object["metadata"]["ownerReferences"] = json!([owner]);
        }
    }
    deployer::ensure_all(client, FIELD_MANAGER, &objects).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let manager = deployments.get_opt(KUBEMACPOOL_MANAGER).await?;
    Ok(
        deployment_progress(namespace, KUBEMACPOOL_MANAGER, manager.as_ref())
            .into_iter()
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentStatus;

    fn deployment(generation: i64, status: DeploymentStatus) -> Deployment {
        let mut deployment = Deployment::default();
        deployment.metadata.generation = Some(generation);
        deployment.status = Some(status);
        deployment
    }

    #[test]
    fn a_deployment_is_progressing_until_available_and_observed() {
        let progress = |d: Option<&Deployment>| deployment_progress("ns", "kmp", d);
        assert_eq!(
            progress(None).as_deref(),
            Some(r#"Deployment "ns/kmp" is not yet scheduled on any nodes"#)
        );
        let starting = deployment(1, DeploymentStatus::default());
        assert_eq!(
            progress(Some(&starting)).as_deref(),
            Some(r#"Deployment "ns/kmp" is not yet scheduled on any nodes"#)
        );
        let waiting = deployment(
            1,
            DeploymentStatus {
                unavailable_replicas: Some(1),
                available_replicas: Some(1),
                ..Default::default()
            },
        );
        assert_eq!(
            progress(Some(&waiting)).as_deref(),
            Some(r#"Deployment "ns/kmp" is not available (awaiting 1 nodes)"#)
        );
        let stale = deployment(
            3,
            DeploymentStatus {
                available_replicas: Some(1),
                observed_generation: Some(2),
                ..Default::default()
            },
        );
        assert_eq!(
            progress(Some(&stale)).as_deref(),
            Some(
                r#"Deployment "ns/kmp" update is being processed (generation 3, observed generation 2)"#
            )
        );
        let ready = deployment(
            3,
            DeploymentStatus {
                available_replicas: Some(1),
                observed_generation: Some(3),
                ..Default::default()
            },
        );
        assert_eq!(progress(Some(&ready)), None);
    }

    #[test]
    fn kubemacpool_renders_into_the_operand_namespace_with_the_image() {
        let objects = KUBEMACPOOL.render("kubevirt-hyperconverged", "registry.example/fv:1");
        let find = |kind: &str, name: &str| {
            objects
                .iter()
                .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("{kind} {name}"))
        };
        let manager = find("Deployment", KUBEMACPOOL_MANAGER);
        assert_eq!(manager["metadata"]["namespace"], "kubevirt-hyperconverged");
        let container = &manager["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "registry.example/fv:1");
        assert_eq!(container["args"][0], "macpool");
        let webhook = find(
            "MutatingWebhookConfiguration",
            crate::macpool::WEBHOOK_CONFIGURATION,
        );
        let service = &webhook["webhooks"][0]["clientConfig"]["service"];
        assert_eq!(service["namespace"], "kubevirt-hyperconverged");
        assert_eq!(service["name"], crate::macpool::WEBHOOK_SERVICE);
        assert_eq!(
            webhook["webhooks"][0]["name"],
            crate::macpool::VM_WEBHOOK,
            "the name kubemacpool reads its opt mode from"
        );
    }
}
