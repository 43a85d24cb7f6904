//! HCO's CLI download: the Service `hyperconverged-cluster-cli-download` (port 8080, as
//! HCO's `cliDownload` operand makes it) in front of the server that hands out `virtctl`.
//! Upstream the server is a Deployment of the install bundle; on one machine HCO stands for
//! the bundle and runs it as a pod of `ferrovirt cli-download`. Both are owned by the HC, so
//! they go with it.

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

/// The download server as a pod of this platform's own image.
pub fn server_pod(hc: &Value) -> Value {
    let mut metadata = metadata(hc);
    metadata["labels"]["name"] = json!(NAME);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [{
                "name": "server",
                "image": "ferrovirt",
                "args": ["cli-download"],
                "ports": [{"containerPort": PORT, "name": "http", "protocol": "TCP"}],
            }],
            "restartPolicy": "Always",
        },
    })
}

/// Applies the Service and the server pod (server-side apply: what else fills them in,
/// such as the node, is kept).
pub async fn ensure(client: &Client, hc: &Value) -> Result<(), kube::Error> {
    let namespace = hc["metadata"]["namespace"].as_str().unwrap_or_default();
    let params = PatchParams::apply(MANAGER).force();
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), namespace);
    services
        .patch(NAME, &params, &Patch::Apply(service(hc)))
        .await?;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), namespace);
    if pods.get_opt(NAME).await?.is_none() {
        pods.patch(NAME, &params, &Patch::Apply(server_pod(hc)))
            .await?;
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
}
