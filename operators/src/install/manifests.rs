//! An operator's install strategy as a set of manifests of `deploy/`, compiled in. What
//! `kubectl apply -f deploy/DIR/` installs by hand and what the operator deploys for its CR
//! are then the same manifests and cannot drift apart; the tests that run the components
//! under those service accounts cover both. The operator renders them for its namespace and
//! its image, and labels each object as its own.

use serde_json::{Value, json};

/// The image the manifests name.
pub const DEFAULT_IMAGE: &str = "quay.io/ferrovirt/ferrovirt:latest";
/// The label an operator marks what it created with.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// The manifests of one operator.
pub struct Manifests {
    /// The files, in the order they are applied (accounts and roles before workloads).
    pub files: &'static [(&'static str, &'static str)],
    /// The namespace the files are written for.
    pub namespace: &'static str,
    /// The operator: the value of the managed-by label.
    pub managed_by: &'static str,
}

impl Manifests {
    /// The objects to deploy in `namespace`, running `image`. The namespace itself is not
    /// one of them: it exists before the operator acts.
    pub fn render(&self, namespace: &str, image: &str) -> Vec<Value> {
        self.files
            .iter()
            .flat_map(|(file, text)| parse(file, text))
            .filter(|object| object["kind"] != "Namespace")
            .map(|mut object| {
                retarget(&mut object, self.namespace, namespace, image);
                object["metadata"]["labels"][MANAGED_BY_LABEL] = json!(self.managed_by);
                object
            })
            .collect()
    }
}

/// The documents of a manifest file written for namespace `from` (a standalone operator's
/// `deploy/DIR/operator.yaml`), moved to namespace `to`: that Namespace left out, every
/// reference to it moved, the images kept. `deploy/hco/` is made of these.
pub fn moved(file: &str, text: &str, from: &str, to: &str) -> Vec<Value> {
    parse(file, text)
        .into_iter()
        .filter(|object| !(object["kind"] == "Namespace" && object["metadata"]["name"] == from))
        .map(|mut object| {
            retarget(&mut object, from, to, DEFAULT_IMAGE);
            object
        })
        .collect()
}

/// Places the Deployments and DaemonSets `names` among `objects` where `placement` (a
/// NodePlacement: `nodeSelector`, `affinity`, `tolerations`) asks, as each operator places
/// its components by its CR's infra or workloads placement; a field the placement leaves out
/// stays as the manifest has it.
pub fn place(objects: &mut [Value], names: &[&str], placement: &Value) {
    let placed = |object: &&mut Value| {
        matches!(object["kind"].as_str(), Some("Deployment" | "DaemonSet"))
            && object["metadata"]["name"]
                .as_str()
                .is_some_and(|name| names.contains(&name))
    };
    for object in objects.iter_mut().filter(placed) {
        let spec = &mut object["spec"]["template"]["spec"];
        for field in ["nodeSelector", "affinity", "tolerations"] {
            if let Some(value) = placement.get(field).filter(|v| !v.is_null()) {
                spec[field] = value.clone();
            }
        }
    }
}

/// The objects of one compiled-in file. A unit test renders every set, so a failure here
/// is a build of broken manifests.
fn parse(file: &str, text: &str) -> Vec<Value> {
    text.split("\n---\n")
        .filter(|document| document.lines().any(|l| l.starts_with("kind:")))
        .map(|document| {
            serde_saphyr::from_str::<Value>(document)
                .unwrap_or_else(|err| panic!("deploy manifest {file} does not parse: {err}"))
        })
        .collect()
}

/// Moves every reference to the manifests' namespace `from` (an object's own, a binding's
/// subjects, a webhook's or APIService's service) to `to`, and every mention of
/// [`DEFAULT_IMAGE`] (containers, environment values) to `image`. Other namespaces (kube-system's) and images (CSI sidecars)
/// are kept.
fn retarget(value: &mut Value, from: &str, to: &str, image: &str) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                match (key.as_str(), &field) {
                    ("namespace", Value::String(ns)) if ns == from => *field = json!(to),
                    // Containers' images, and env values naming the image for the pods
                    // a component starts (FERROVIRT_IMAGE).
                    ("image" | "value", Value::String(current)) if current == DEFAULT_IMAGE => {
                        *field = json!(image);
                    }
                    _ => retarget(field, from, to, image),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| retarget(item, from, to, image)),
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

    use crate::install::virt_operator::STRATEGY;

    #[test]
    fn the_components_move_to_the_crs_namespace_and_the_operators_image() {
        let objects = STRATEGY.render("virt-ns", "registry.example/fv:1");
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
    fn placement_reaches_the_named_workloads_only() {
        let mut objects = STRATEGY.render("kubevirt", DEFAULT_IMAGE);
        let placement = json!({"nodeSelector": {"role": "infra"},
                               "tolerations": [{"key": "infra", "operator": "Exists"}]});
        place(&mut objects, &["virt-api", "virt-controller"], &placement);
        let spec =
            |kind: &str, name: &str| find(&objects, kind, name)["spec"]["template"]["spec"].clone();
        assert_eq!(
            spec("Deployment", "virt-api")["nodeSelector"],
            json!({"role": "infra"})
        );
        assert_eq!(
            spec("Deployment", "virt-controller")["tolerations"][0]["key"],
            "infra"
        );
        assert_ne!(
            spec("DaemonSet", "virt-handler")["nodeSelector"],
            json!({"role": "infra"})
        );
    }

    #[test]
    fn every_object_is_labelled_and_the_namespace_is_not_deployed() {
        let objects = STRATEGY.render("kubevirt", DEFAULT_IMAGE);
        assert!(objects.len() > 10, "{} objects", objects.len());
        assert!(objects.iter().all(|o| o["kind"] != "Namespace"));
        assert!(
            objects
                .iter()
                .all(|o| o["metadata"]["labels"][MANAGED_BY_LABEL] == "virt-operator")
        );
        let keys: std::collections::BTreeSet<_> = objects.iter().map(object_key).collect();
        assert_eq!(keys.len(), objects.len(), "no object twice");
        // Accounts come before the workloads that run as them.
        let position = |kind: &str| objects.iter().position(|o| o["kind"] == kind);
        assert!(position("ServiceAccount") < position("Deployment"));
    }
}
