//! HCO's CLI download: the Service `hyperconverged-cluster-cli-download` (port 8080, as
//! HCO's `cliDownload` operand makes it) in front of the server that hands out `virtctl`.
//! Upstream the server is a Deployment of the install bundle. On a cluster HCO makes that
//! Deployment, of its own image; on one machine, which has no Deployment controller, it
//! runs the server as a pod of `ferrovirt cli-download`. All are owned by the HC, so they
//! go with it.

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// The Service's name and the server's `name` label.
pub const NAME: &str = "hyperconverged-cluster-cli-download";
/// The port the Service and the server share.
const PORT: u16 = 8080;
const MANAGER: &str = "hyperconverged-cluster-operator";

fn owner(hc: &Value) -> Value {
    json!([{
        "apiVersion": hc["apiVersion"], "kind": hc["kind"],
        "name": hc["metadata"]["name"], "uid": hc["metadata"]["uid"],
        "controller": true, "blockOwnerDeletion": true,
    }])
}

fn metadata(hc: &Value) -> Value {
    json!({
        "name": NAME,
        "namespace": hc["metadata"]["namespace"],
        "labels": super::operands::labels(
            hc["metadata"]["name"].as_str().unwrap_or_default(),
            "compute",
        ),
        "ownerReferences": owner(hc),
    })
}

/// The Service HCO makes for the download server.
pub fn service(hc: &Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(hc),
        "spec": {
            "selector": {"name": NAME},
            "ports": [{"name": "http", "port": PORT, "protocol": "TCP", "targetPort": PORT}],
            "type": "ClusterIP",
        },
    })
}

/// How the download server runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Server {
    /// A pod of this binary (image `ferrovirt`), which the node agent of `ferrovirt up` runs.
    LocalPod,
    /// A Deployment of `image`, as on a cluster.
    Deployment { image: String },
}

fn pod_spec(image: &str) -> Value {
    json!({
        "containers": [{
            "name": "server",
            "image": image,
            "args": ["cli-download"],
            "ports": [{"containerPort": PORT, "name": "http", "protocol": "TCP"}],
        }],
        "restartPolicy": "Always",
    })
}

/// The download server as a pod of this platform's own binary.
pub fn server_pod(hc: &Value) -> Value {
    let mut metadata = metadata(hc);
    metadata["labels"]["name"] = json!(NAME);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec("ferrovirt")})
}

/// The download server as a Deployment of `image`, whose pods the Service selects.
pub fn server_deployment(hc: &Value, image: &str) -> Value {
    let mut pod_labels = metadata(hc)["labels"].clone();
    pod_labels["name"] = json!(NAME);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(hc),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"name": NAME}},
            "template": {"metadata": {"labels": pod_labels}, "spec": pod_spec(image)},
        },
    })
}

/// Applies the Service and the server (server-side apply: what else fills them in, such as
/// the node, is kept). A pod, which cannot be changed, is only created.
pub async fn ensure(client: &Client, hc: &Value, server: &Server) -> Result<(), kube::Error> {
    let namespace = hc["metadata"]["namespace"].as_str().unwrap_or_default();
    let params = PatchParams::apply(MANAGER).force();
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), namespace);
    services
        .patch(NAME, &params, &Patch::Apply(service(hc)))
        .await?;
    match server {
        Server::LocalPod => {
            let pods: Api<k8s_openapi::api::core::v1::Pod> =
                Api::namespaced(client.clone(), namespace);
            if pods.get_opt(NAME).await?.is_none() {
                pods.patch(NAME, &params, &Patch::Apply(server_pod(hc)))
                    .await?;
            }
        }
        Server::Deployment { image } => {
            let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
                Api::namespaced(client.clone(), namespace);
            deployments
                .patch(NAME, &params, &Patch::Apply(server_deployment(hc, image)))
                .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hc() -> Value {
        json!({"apiVersion": "hco.kubevirt.io/v1beta1", "kind": "HyperConverged",
               "metadata": {"name": "kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged", "uid": "u1"}})
    }

    #[test]
    fn the_service_selects_the_server_and_both_belong_to_the_hc() {
        let service = service(&hc());
        let pod = server_pod(&hc());
        let selector = service["spec"]["selector"].as_object().expect("selector");
        for (key, value) in selector {
            assert_eq!(pod["metadata"]["labels"][key], *value, "{key}");
        }
        assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080);
        assert_eq!(
            pod["spec"]["containers"][0]["ports"][0]["containerPort"],
            8080
        );
        for object in [&service, &pod] {
            assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "u1");
            assert_eq!(object["metadata"]["namespace"], "kubevirt-hyperconverged");
        }
        assert_eq!(pod["spec"]["containers"][0]["args"][0], "cli-download");
    }

    #[test]
    fn on_a_cluster_the_server_is_a_deployment_of_the_image_the_service_selects() {
        let deployment = server_deployment(&hc(), "registry.example/fv:1");
        let template = &deployment["spec"]["template"];
        assert_eq!(
            template["spec"]["containers"][0]["image"],
            "registry.example/fv:1"
        );
        let selector = service(&hc())["spec"]["selector"].clone();
        for (key, value) in selector.as_object().expect("selector") {
            assert_eq!(template["metadata"]["labels"][key], *value, "{key}");
            assert_eq!(deployment["spec"]["selector"]["matchLabels"][key], *value);
        }
        assert_eq!(deployment["metadata"]["ownerReferences"][0]["uid"], "u1");
    }
}
