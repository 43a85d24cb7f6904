//! The operators' own manifests, `deploy/DIR/operator.yaml`, generated from what each
//! operator is: its namespace, and for each of its workloads the service account, the
//! permissions (cluster-wide and in its namespace), the command and ports; plus the
//! objects only it has (a webhook's Service and configuration). Every workload is a
//! Deployment of this one image with the same hardening, so that part is written once
//! here rather than once per file, and each operator's permissions sit in one table with
//! the reason for each rule beside it.
//!
//! `cargo run -p ferrovirt-operators --bin hco-bundle` writes them (and `deploy/hco/` from
//! them); a test keeps the committed files current.

mod cdi;
mod hco;
mod hpp;
mod network;
mod ssp;
mod virt;

use serde_json::{Map, Value, json};

use super::manifests::DEFAULT_IMAGE;

/// One RBAC rule.
pub struct Rule {
    groups: &'static [&'static str],
    resources: &'static [&'static str],
    names: &'static [&'static str],
    verbs: &'static [&'static str],
}

impl Rule {
    pub const fn new(
        groups: &'static [&'static str],
        resources: &'static [&'static str],
        verbs: &'static [&'static str],
    ) -> Rule {
        Rule {
            groups,
            resources,
            names: &[],
            verbs,
        }
    }

    /// A rule for the objects named `names` only.
    pub const fn named(
        groups: &'static [&'static str],
        resources: &'static [&'static str],
        names: &'static [&'static str],
        verbs: &'static [&'static str],
    ) -> Rule {
        Rule {
            groups,
            resources,
            names,
            verbs,
        }
    }

    fn to_json(&self) -> Value {
        let mut rule = Map::new();
        rule.insert("apiGroups".into(), json!(self.groups));
        rule.insert("resources".into(), json!(self.resources));
        if !self.names.is_empty() {
            rule.insert("resourceNames".into(), json!(self.names));
        }
        rule.insert("verbs".into(), json!(self.verbs));
        Value::Object(rule)
    }
}

/// Every verb of an object an operator keeps.
pub const ALL: &[&str] = &[
    "get", "list", "watch", "create", "patch", "update", "delete",
];

/// The roles and bindings of what an operator deploys. `escalate` and `bind` let it create
/// roles that grant what it does not hold itself.
pub const GRANTS_ROLES: Rule = Rule::new(
    &["rbac.authorization.k8s.io"],
    &[
        "clusterroles",
        "clusterrolebindings",
        "roles",
        "rolebindings",
    ],
    &[
        "get", "list", "watch", "create", "patch", "update", "delete", "escalate", "bind",
    ],
);

/// The webhook configurations of what an operator deploys (recreated when gone; their
/// servers keep their caBundles).
pub const REGISTERS_WEBHOOKS: Rule = Rule::new(
    &["admissionregistration.k8s.io"],
    &[
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    ],
    &["get", "list", "watch", "create", "delete"],
);

/// The APIServices of what an operator deploys.
pub const REGISTERS_APIS: Rule = Rule::new(
    &["apiregistration.k8s.io"],
    &["apiservices"],
    &["get", "list", "watch", "create", "delete"],
);

/// A Deployment of this image running one `ferrovirt` command under its own account.
pub struct Workload {
    /// The Deployment's, its container's and its service account's name, and its `name`
    /// label unless `selector` says otherwise.
    pub name: &'static str,
    /// The service account, when it is not named as the Deployment is.
    pub account: Option<&'static str>,
    /// The pods' labels that select them (`name: NAME` when empty).
    pub selector: &'static [(&'static str, &'static str)],
    /// The `ferrovirt` subcommand.
    pub command: &'static str,
    /// Its named container ports.
    pub ports: &'static [(&'static str, i32)],
    /// Variables set to the pod's namespace besides `POD_NAMESPACE`.
    pub namespace_env: &'static [&'static str],
    /// Whether it deploys pods of this image (given as `FERROVIRT_IMAGE`).
    pub deploys_image: bool,
    pub cluster_rules: &'static [Rule],
    /// Its rules in its own namespace.
    pub namespace_rules: &'static [Rule],
    /// Objects of its own (a Service, a webhook configuration), before its Deployment.
    pub objects: fn(namespace: &str) -> Vec<Value>,
}

/// A ValidatingWebhookConfiguration of `webhooks`.
pub fn validating_configuration(name: &str, labels: Option<Value>, webhooks: Vec<Value>) -> Value {
    let mut configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    });
    if let Some(labels) = labels {
        configuration["metadata"]["labels"] = labels;
    }
    configuration
}

/// `Workload::objects` of a workload that has none.
pub fn no_objects(_: &str) -> Vec<Value> {
    Vec::new()
}

/// One operator's `deploy/DIR/operator.yaml`.
pub struct OperatorManifest {
    /// Its directory under `deploy/`.
    pub dir: &'static str,
    /// The file's opening comment: what the operator does and how it is installed.
    pub about: &'static str,
    pub namespace: &'static str,
    /// Whether its namespace admits privileged pods (what it deploys runs so).
    pub privileged: bool,
    /// Namespaces it needs that it does not make itself.
    pub other_namespaces: &'static [&'static str],
    pub workloads: &'static [Workload],
}

/// Every operator's manifests.
pub fn all() -> [&'static OperatorManifest; 6] {
    [
        &virt::MANIFEST,
        &cdi::MANIFEST,
        &hpp::MANIFEST,
        &hco::MANIFEST,
        &ssp::MANIFEST,
        &network::MANIFEST,
    ]
}

impl OperatorManifest {
    /// Its path relative to `deploy/`.
    pub fn path(&self) -> String {
        format!("{}/operator.yaml", self.dir)
    }

    /// Its objects, in the order they are applied.
    pub fn objects(&self) -> Vec<Value> {
        let mut objects = vec![self.own_namespace()];
        objects.extend(self.other_namespaces.iter().map(
            |name| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        ));
        for workload in self.workloads {
            objects.extend(workload.objects_in(self.namespace));
        }
        objects
    }

    fn own_namespace(&self) -> Value {
        let mut namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}});
        if self.privileged {
            // Pod Security admission: what the operator deploys runs privileged here.
            namespace["metadata"]["labels"] =
                json!({"pod-security.kubernetes.io/enforce": "privileged"});
        }
        namespace
    }

    /// The file's text.
    pub fn render(&self) -> Result<String, serde_saphyr::SerializeError> {
        let mut text = String::new();
        for line in self.about.lines() {
            text.push_str(format!("# {line}").trim_end());
            text.push('\n');
        }
        text.push_str(&format!(
            "# Generated by `{}`: change operators/src/install/operator_manifests/, not this file.\n",
            super::hco_bundle::REGENERATE
        ));
        for (i, object) in self.objects().iter().enumerate() {
            if i > 0 {
                text.push_str("---\n");
            }
            text.push_str(&serde_saphyr::to_string(object)?);
        }
        Ok(text)
    }
}

impl Workload {
    fn account(&self) -> &'static str {
        self.account.unwrap_or(self.name)
    }

    fn labels(&self) -> Value {
        if self.selector.is_empty() {
            return json!({"name": self.name});
        }
        let labels: Map<String, Value> = self
            .selector
            .iter()
            .map(|(k, v)| ((*k).to_string(), json!(v)))
            .collect();
        Value::Object(labels)
    }

    fn objects_in(&self, namespace: &str) -> Vec<Value> {
        let account = self.account();
        let subject = json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]);
        let mut objects = vec![json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace},
        })];
        if !self.cluster_rules.is_empty() {
            objects.push(role("ClusterRole", account, None, self.cluster_rules));
            objects.push(binding("ClusterRole", account, None, &subject));
        }
        if !self.namespace_rules.is_empty() {
            objects.push(role("Role", account, Some(namespace), self.namespace_rules));
            objects.push(binding("Role", account, Some(namespace), &subject));
        }
        objects.extend((self.objects)(namespace));
        objects.push(self.deployment(namespace));
        objects
    }

    fn deployment(&self, namespace: &str) -> Value {
        let mut labels = self.labels();
        let selector = labels.clone();
        labels["app.kubernetes.io/part-of"] = json!("ferrovirt");
        let mut env = vec![namespace_env("POD_NAMESPACE")];
        env.extend(self.namespace_env.iter().map(|name| namespace_env(name)));
        if self.deploys_image {
            // What it deploys runs this image: keep the two the same.
            env.push(json!({"name": "FERROVIRT_IMAGE", "value": DEFAULT_IMAGE}));
        }
        env.push(json!({"name": "RUST_LOG", "value": "info"}));
        let mut container = json!({
            "name": self.name,
            "image": DEFAULT_IMAGE,
            "args": [self.command],
            "env": env,
            "resources": {
                "requests": {"cpu": "10m", "memory": "32Mi"},
                "limits": {"memory": "128Mi"},
            },
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"]},
            },
        });
        if !self.ports.is_empty() {
            container["ports"] = self
                .ports
                .iter()
                .map(|(name, port)| json!({"name": name, "containerPort": port}))
                .collect();
        }
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.name, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": self.account(),
                        "securityContext": {
                            "runAsNonRoot": true,
                            "runAsUser": 107,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [container],
                    },
                },
            },
        })
    }
}

fn namespace_env(name: &str) -> Value {
    json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})
}

fn role(kind: &str, name: &str, namespace: Option<&str>, rules: &[Rule]) -> Value {
    let mut metadata = json!({"name": name});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata,
        "rules": rules.iter().map(Rule::to_json).collect::<Vec<_>>(),
    })
}

fn binding(role_kind: &str, name: &str, namespace: Option<&str>, subjects: &Value) -> Value {
    let mut metadata = json!({"name": name});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": format!("{role_kind}Binding"),
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": subjects,
    })
}

/// One webhook of a ValidatingWebhookConfiguration, served at `path` of Service
/// `service` in `namespace`, for `operations` on `resources` of `group`/`version`.
pub fn validating_webhook(
    name: &str,
    (namespace, service, path): (&str, &str, &str),
    (group, version, resources): (&str, &str, &[&str]),
    operations: &[&str],
    timeout: Option<u32>,
) -> Value {
    let mut webhook = json!({
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "clientConfig": {"service": {"name": service, "namespace": namespace, "path": path}},
        "rules": [{
            "apiGroups": [group],
            "apiVersions": [version],
            "operations": operations,
            "resources": resources,
        }],
    });
    if let Some(timeout) = timeout {
        webhook["timeoutSeconds"] = json!(timeout);
    }
    webhook
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_runs_under_its_own_bound_account() {
        for manifest in all() {
            let objects = manifest.objects();
            let find = |kind: &str, name: &str| {
                objects
                    .iter()
                    .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            };
            for deployment in objects.iter().filter(|o| o["kind"] == "Deployment") {
                let pod = &deployment["spec"]["template"];
                let account = pod["spec"]["serviceAccountName"].as_str().expect("account");
                assert!(find("ServiceAccount", account).is_some(), "{account}");
                let binding = find("ClusterRoleBinding", account).expect("bound");
                assert_eq!(binding["subjects"][0]["namespace"], manifest.namespace);
                let selector = deployment["spec"]["selector"]["matchLabels"]
                    .as_object()
                    .expect("selector");
                for (key, value) in selector {
                    assert_eq!(&pod["metadata"]["labels"][key], value, "{}", manifest.dir);
                }
            }
        }
    }
}
