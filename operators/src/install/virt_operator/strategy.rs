//! virt-operator's install strategy: the objects of `deploy/virt/`, compiled in. What
//! `kubectl apply -f deploy/virt/` installs by hand and what the operator deploys for a
//! KubeVirt CR are the same manifests, so the two cannot drift apart; the RBAC test that
//! runs the components under these service accounts covers both. The operator renders
//! them for the KubeVirt CR's namespace and for its own image, and labels each as its own.

use std::sync::LazyLock;

use serde_json::{Value, json};

/// The manifests, in the order they are applied (accounts and roles before workloads).
const MANIFESTS: [(&str, &str); 4] = [
    (
        "rbac.yaml",
        include_str!("../../../../deploy/virt/rbac.yaml"),
    ),
    (
        "virt-api.yaml",
        include_str!("../../../../deploy/virt/virt-api.yaml"),
    ),
    (
        "virt-controller.yaml",
        include_str!("../../../../deploy/virt/virt-controller.yaml"),
    ),
    (
        "virt-handler.yaml",
        include_str!("../../../../deploy/virt/virt-handler.yaml"),
    ),
];

/// The namespace the manifests are written for.
const MANIFEST_NAMESPACE: &str = "kubevirt";
/// The image the manifests name.
pub const DEFAULT_IMAGE: &str = "quay.io/ferrovirt/ferrovirt:latest";
/// The label virt-operator marks what it created with.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "virt-operator";

/// The manifests' objects, parsed once. They are part of the binary, and a unit test
/// parses them, so a failure here is a build of broken manifests.
static OBJECTS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    MANIFESTS
        .iter()
        .flat_map(|(file, text)| {
            text.split("\n---\n")
                .filter(|document| document.lines().any(|l| l.starts_with("kind:")))
                .map(move |document| {
                    serde_saphyr::from_str::<Value>(document)
                        .unwrap_or_else(|err| panic!("deploy/virt/{file} does not parse: {err}"))
                })
        })
        // The namespace is the KubeVirt CR's own; it exists before the operator acts.
        .filter(|object| object["kind"] != "Namespace")
        .collect()
});

/// The objects virt-operator deploys for a KubeVirt CR in `namespace`, running `image`.
pub fn install_strategy(namespace: &str, image: &str) -> Vec<Value> {
    OBJECTS
        .iter()
        .map(|object| {
            let mut object = object.clone();
            retarget(&mut object, namespace, image);
            object["metadata"]["labels"][MANAGED_BY_LABEL] = json!(MANAGED_BY);
            object
        })
        .collect()
}

/// Moves every reference to the manifests' namespace (an object's own, a binding's
/// subjects, a webhook's or APIService's service) to `namespace`, and every container to
/// `image`. Other namespaces (kube-system's authentication reader) are kept.
fn retarget(value: &mut Value, namespace: &str, image: &str) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                match (key.as_str(), &field) {
                    ("namespace", Value::String(ns)) if ns == MANIFEST_NAMESPACE => {
                        *field = json!(namespace);
                    }
                    ("image", Value::String(current)) if current == DEFAULT_IMAGE => {
                        *field = json!(image);
                    }
                    _ => retarget(field, namespace, image),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| retarget(item, namespace, image)),
        _ => {}
    }
}

/// The key an object is known by: kind, namespace and name.
pub fn object_key(object: &Value) -> (String, String, String) {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    (
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name} is in the strategy"))
    }

    #[test]
    fn the_components_move_to_the_crs_namespace_and_the_operators_image() {
        let objects = install_strategy("virt-ns", "registry.example/fv:1");
        for (kind, name) in [
            ("Deployment", "virt-api"),
            ("Deployment", "virt-controller"),
            ("DaemonSet", "virt-handler"),
        ] {
            let workload = find(&objects, kind, name);
            assert_eq!(workload["metadata"]["namespace"], "virt-ns");
            let containers = workload["spec"]["template"]["spec"]["containers"]
                .as_array()
                .expect("containers");
            assert!(
                containers
                    .iter()
                    .all(|c| c["image"] == "registry.example/fv:1")
            );
        }
        let binding = find(&objects, "ClusterRoleBinding", "kubevirt-controller");
        assert_eq!(binding["subjects"][0]["namespace"], "virt-ns");
        let service = find(&objects, "APIService", "v1.subresources.kubevirt.io");
        assert_eq!(service["spec"]["service"]["namespace"], "virt-ns");
        let webhooks = find(&objects, "MutatingWebhookConfiguration", "virt-api-mutator");
        assert_eq!(
            webhooks["webhooks"][0]["clientConfig"]["service"]["namespace"],
            "virt-ns"
        );
        // kube-system's authentication reader stays where kube-apiserver keeps it.
        let reader = find(&objects, "RoleBinding", "kubevirt-apiserver-auth-reader");
        assert_eq!(reader["metadata"]["namespace"], "kube-system");
        assert_eq!(reader["subjects"][0]["namespace"], "virt-ns");
    }

    #[test]
    fn every_object_is_labelled_and_the_namespace_is_not_deployed() {
        let objects = install_strategy("kubevirt", DEFAULT_IMAGE);
        assert!(objects.len() > 10, "{} objects", objects.len());
        assert!(objects.iter().all(|o| o["kind"] != "Namespace"));
        assert!(
            objects
                .iter()
                .all(|o| o["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY)
        );
        let keys: std::collections::BTreeSet<_> = objects.iter().map(object_key).collect();
        assert_eq!(keys.len(), objects.len(), "no object twice");
        // Accounts come before the workloads that run as them.
        let position = |kind: &str| objects.iter().position(|o| o["kind"] == kind);
        assert!(position("ServiceAccount") < position("Deployment"));
    }
}
