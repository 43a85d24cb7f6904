//! Multus's part on this machine: a pod's secondary networks (the
//! `k8s.v1.cni.cncf.io/networks` annotation) resolved to the Linux bridges their
//! NetworkAttachmentDefinitions name, and handed to the pod's process.
//!
//! Pods here are processes in the machine's own network namespace, so there is no pod
//! interface for a CNI plugin to create: the launcher puts the VM's tap on the node bridge
//! itself. It is told which bridge each pod interface (KubeVirt's `pod<hash>` names) would
//! have been attached to.

use api::network_attachment::{NETWORKS_ANNOTATION, NetworkAttachmentDefinition, NetworkSelection};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, ResourceExt};

/// The environment variable of a pod's bridges: `INTERFACE=BRIDGE` pairs, comma-separated.
pub const POD_BRIDGES_ENV: &str = "FERROVIRT_POD_BRIDGES";

/// Why a pod's secondary networks cannot be attached (the kubelet's
/// FailedCreatePodSandBox).
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("annotation {NETWORKS_ANNOTATION}: {0}")]
    Annotation(String),
    #[error(
        "network-attachment-definitions.k8s.cni.cncf.io \"{name}\" not found in namespace {namespace}"
    )]
    NotFound { namespace: String, name: String },
    #[error("NetworkAttachmentDefinition {namespace}/{name}: {problem}")]
    Unusable {
        namespace: String,
        name: String,
        problem: String,
    },
    #[error("reading NetworkAttachmentDefinition {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

/// The networks a pod's annotation selects, in order; none without the annotation. Like
/// Multus, a plain comma-separated list of names (`br1,other/br2`) is taken as well.
pub fn selections(pod: &Pod) -> Result<Vec<NetworkSelection>, NetworkError> {
    let Some(text) = pod.annotations().get(NETWORKS_ANNOTATION) else {
        return Ok(Vec::new());
    };
    let namespace = pod.namespace().unwrap_or_default();
    let text = text.trim();
    let mut selections: Vec<NetworkSelection> = if text.starts_with('[') {
        serde_json::from_str(text).map_err(|e| NetworkError::Annotation(e.to_string()))?
    } else {
        text.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| {
                let (namespace, name) = n.split_once('/').unwrap_or(("", n));
                NetworkSelection {
                    name: name.to_owned(),
                    namespace: namespace.to_owned(),
                    ..Default::default()
                }
            })
            .collect()
    };
    for (index, selection) in selections.iter_mut().enumerate() {
        if selection.name.is_empty() {
            return Err(NetworkError::Annotation(format!(
                "element {index} has no name"
            )));
        }
        if selection.namespace.is_empty() {
            selection.namespace = namespace.clone();
        }
        if selection.interface.is_empty() {
            // Multus's default names for unnamed attachments.
            selection.interface = format!("net{}", index + 1);
        }
    }
    Ok(selections)
}

/// The bridge of each of the pod's secondary networks, by pod interface.
pub async fn pod_bridges(
    client: &Client,
    pod: &Pod,
) -> Result<Vec<(String, String)>, NetworkError> {
    let mut bridges = Vec::new();
    for selection in selections(pod)? {
        let NetworkSelection {
            name,
            namespace,
            interface,
            ..
        } = selection;
        let nad = Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), &namespace)
            .get_opt(&name)
            .await
            .map_err(|source| NetworkError::Kube {
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?
            .ok_or_else(|| NetworkError::NotFound {
                namespace: namespace.clone(),
                name: name.clone(),
            })?;
        let bridge = nad.linux_bridge().map_err(|e| NetworkError::Unusable {
            namespace,
            name,
            problem: e.to_string(),
        })?;
        bridges.push((interface, bridge));
    }
    Ok(bridges)
}

/// The value of [`POD_BRIDGES_ENV`] for `bridges`.
pub fn env_value(bridges: &[(String, String)]) -> String {
    bridges
        .iter()
        .map(|(interface, bridge)| format!("{interface}={bridge}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(annotation: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns",
                         "annotations": {NETWORKS_ANNOTATION: annotation}},
        }))
        .unwrap()
    }

    #[test]
    fn kubevirts_annotation_is_read_with_its_interface_names() {
        let got = selections(&pod(
            r#"[{"name":"br1","namespace":"ns","interface":"pod16477688c0e"},{"name":"br2"}]"#,
        ))
        .unwrap();
        assert_eq!(got[0].interface, "pod16477688c0e");
        assert_eq!(
            (got[1].namespace.as_str(), got[1].interface.as_str()),
            ("ns", "net2")
        );
    }

    #[test]
    fn a_list_of_names_is_read_as_multus_reads_it() {
        let got = selections(&pod("br1, other/br2")).unwrap();
        let names: Vec<(&str, &str)> = got
            .iter()
            .map(|s| (s.namespace.as_str(), s.name.as_str()))
            .collect();
        assert_eq!(names, [("ns", "br1"), ("other", "br2")]);
    }

    #[test]
    fn a_malformed_annotation_is_named() {
        let err = selections(&pod("[{")).unwrap_err();
        assert!(err.to_string().contains(NETWORKS_ANNOTATION), "{err}");
        assert_eq!(
            env_value(&[("a".into(), "br1".into()), ("b".into(), "br2".into())]),
            "a=br1,b=br2"
        );
    }
}
