//! `ferrovirt virt-handler`: KubeVirt's virt-handler on a cluster node, as the DaemonSet in
//! `deploy/virt/` runs it. It follows the VMIs of its node through their launchers' control
//! sockets (found in the kubelet's directory of each launcher pod), and serves, over mutual
//! TLS, the subresources only the node can answer (pause, the guest agent, console, VNC,
//! port-forward) for virt-api to forward. It publishes its address on its Node.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use api::kubevirt::pod_contract::KUBELET_SOCKETS_DIR;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tower::ServiceExt;
use virt::handler::{Handler, Launchers, SocketDirOf};
use virt::subresources::to_handler::{HANDLER_ADDRESS_ANNOTATION, HANDLER_SERVER_NAME};

use crate::kubevirt::certs;

#[derive(clap::Args)]
pub struct VirtHandlerArgs {
    /// This node's name.
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// Address to serve virt-api's requests on.
    #[arg(long, default_value = "0.0.0.0:8186")]
    listen: SocketAddr,
    /// The address virt-api reaches this server at (the pod's IP), with --listen's port.
    #[arg(long, env = "POD_IP")]
    advertise_address: IpAddr,
    /// Where a launcher pod's `sockets` emptyDir is on this node, `{uid}` standing for the
    /// pod's UID.
    #[arg(long, default_value = KUBELET_SOCKETS_DIR)]
    pod_sockets_dir: String,
    /// The namespace of the CA Secret shared with virt-api.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubevirt")]
    namespace: String,
}

pub async fn run(args: VirtHandlerArgs) -> anyhow::Result<()> {
    if !args.pod_sockets_dir.contains("{uid}") {
        bail!(
            "--pod-sockets-dir {:?} has no {{uid}} for the pod's UID",
            args.pod_sockets_dir
        );
    }
    let client = crate::cluster::component_client().await?;
    let ca = certs::shared_ca(&client, &args.namespace).await?;
    let identity = certs::server_identity(&ca, &[HANDLER_SERVER_NAME.to_owned()])?;
    let tls = uploadproxy::tls::server_config(&identity, Some(certs::trusting(&ca)?))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let advertised = SocketAddr::new(args.advertise_address, listener.local_addr()?.port());
    let launchers = Launchers::new(client.clone(), sockets_dir_of(args.pod_sockets_dir));
    let router = virt::subresources::node_router(virt::subresources::Subresources {
        client: client.clone(),
        launchers: launchers.clone(),
    });
    let server = uploadproxy::tls::serve(listener, tls, move |request, peer| {
        // The CA issues certificates to virt-handlers too: only virt-api's may call.
        let from_virt_api = peer.common_name.as_deref() == Some(certs::API_CLIENT_NAME);
        let answer = router.clone().oneshot(request);
        async move {
            if !from_virt_api {
                let mut refused = axum::response::Response::new(axum::body::Body::from(
                    "only virt-api may call virt-handler",
                ));
                *refused.status_mut() = hyper::StatusCode::FORBIDDEN;
                return refused;
            }
            match answer.await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    });
    publish_address(&client, &args.node_name, advertised).await?;
    eprintln!(
        "virt-handler of node {} on https://{advertised}",
        args.node_name
    );
    let handler = Handler {
        client,
        node: args.node_name,
        launchers,
    };
    tokio::select! {
        () = handler.run() => bail!("the watch of the node's VMIs ended"),
        ended = server => bail!("the server stopped: {ended:?}"),
    }
}

/// The directory of a launcher pod's sockets, from the `{uid}` template.
fn sockets_dir_of(template: String) -> SocketDirOf {
    Arc::new(move |pod: &Pod| {
        PathBuf::from(template.replace("{uid}", &pod.uid().unwrap_or_default()))
    })
}

/// Writes this server's address on the Node, where virt-api looks for it.
async fn publish_address(
    client: &kube::Client,
    node: &str,
    address: SocketAddr,
) -> anyhow::Result<()> {
    let patch =
        json!({"metadata": {"annotations": {HANDLER_ADDRESS_ANNOTATION: address.to_string()}}});
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("publishing the handler's address on Node {node}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sockets_dir_is_the_template_with_the_pod_uid() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"uid": "1234"}})).expect("a pod");
        let dir = sockets_dir_of(KUBELET_SOCKETS_DIR.to_owned())(&pod);
        assert_eq!(
            dir,
            PathBuf::from("/var/lib/kubelet/pods/1234/volumes/kubernetes.io~empty-dir/sockets")
        );
    }
}
