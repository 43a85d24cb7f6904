//! HCO's manifests: the operator and its webhook.

use serde_json::{Value, json};

use super::{
    ALL, OperatorManifest, Rule, Workload, no_objects, validating_configuration, validating_webhook,
};

pub static MANIFEST: OperatorManifest = OperatorManifest {
    dir: "hco-operator",
    about: "HCO (`ferrovirt hco-operator`): the HyperConverged `kubevirt-hyperconverged` of this
namespace becomes the KubeVirt, CDI, NetworkAddonsConfig and SSP CRs with HCO's defaults,
which virt-operator, cdi-operator, the network operator and the SSP operator act on; HCO
aggregates their conditions into the HC's. It also runs the CLI download server, a
Deployment of this image. Its webhook (`ferrovirt hco-webhook`) checks the HC and, while
workloads exist, refuses to delete it with the words of the KubeVirt and CDI CRs' own
uninstall guards (which virt-operator and CDI's webhook serve). deploy/hco/ installs it
with the other operators:
  kubectl apply -f deploy/hco/
  kubectl apply -n kubevirt-hyperconverged -f hco.cr.yaml    # upstream's, unchanged",
    namespace: "kubevirt-hyperconverged",
    // virt-handler and the CSI driver run privileged here.
    privileged: true,
    // The common templates' namespace, which OpenShift has. (The golden images'
    // namespace, kubevirt-os-images, is the SSP operator's: it makes it and removes it.)
    other_namespaces: &["openshift"],
    workloads: &[
        Workload {
            name: "hyperconverged-cluster-operator",
            account: None,
            selector: &[],
            command: "hco-operator",
            ports: &[],
            namespace_env: &[],
            // The CLI download server.
            deploys_image: true,
            cluster_rules: OPERATOR_RULES,
            namespace_rules: &[],
            objects: no_objects,
        },
        Workload {
            name: "hyperconverged-cluster-webhook",
            account: None,
            selector: &[],
            command: "hco-webhook",
            ports: &[("webhook", 8443)],
            namespace_env: &[],
            deploys_image: false,
            cluster_rules: WEBHOOK_RULES,
            // The webhook's serving CA, kept in a Secret so every replica serves under one
            // bundle.
            namespace_rules: &[
                Rule::new(&[""], &["secrets"], &["create"]),
                Rule::named(&[""], &["secrets"], &["hco-webhook-ca"], &["get"]),
            ],
            objects: webhook,
        },
    ],
};

const OPERATOR_RULES: &[Rule] = &[
    Rule::new(
        &["hco.kubevirt.io"],
        &["hyperconvergeds"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(
        &["hco.kubevirt.io"],
        &["hyperconvergeds/status"],
        &["get", "patch", "update"],
    ),
    // Owner references that block the HC's deletion need this where they are enforced.
    Rule::new(
        &["hco.kubevirt.io"],
        &["hyperconvergeds/finalizers"],
        &["update"],
    ),
    // The operands.
    Rule::new(&["kubevirt.io"], &["kubevirts"], ALL),
    Rule::new(&["cdi.kubevirt.io"], &["cdis"], ALL),
    Rule::new(
        &["networkaddonsoperator.network.kubevirt.io"],
        &["networkaddonsconfigs"],
        ALL,
    ),
    Rule::new(&["ssp.kubevirt.io"], &["ssps"], ALL),
    Rule::new(&["tektontasks.kubevirt.io"], &["tektontasks"], ALL),
    // The CLI download Service and server.
    Rule::new(&[""], &["services"], &["get", "create", "patch", "update"]),
    Rule::new(
        &["apps"],
        &["deployments"],
        &["get", "create", "patch", "update"],
    ),
];

/// What the webhook reads, dry-run-updates (the operands, with the spec an HC update would
/// give them) and keeps (its CA in its configuration and in the HyperConverged CRD's
/// conversion webhook, which it serves at /convert).
const WEBHOOK_RULES: &[Rule] = &[
    Rule::new(&["kubevirt.io"], &["kubevirts"], &["get", "update"]),
    Rule::new(&["cdi.kubevirt.io"], &["cdis"], &["get", "update"]),
    Rule::new(
        &["networkaddonsoperator.network.kubevirt.io"],
        &["networkaddonsconfigs"],
        &["get", "update"],
    ),
    Rule::new(&["ssp.kubevirt.io"], &["ssps"], &["get", "update"]),
    Rule::new(
        &["tektontasks.kubevirt.io"],
        &["tektontasks"],
        &["get", "update"],
    ),
    Rule::new(
        &["kubevirt.io"],
        &[
            "virtualmachines",
            "virtualmachineinstances",
            "virtualmachineinstancereplicasets",
        ],
        &["list"],
    ),
    Rule::new(&["cdi.kubevirt.io"], &["datavolumes"], &["list"]),
    Rule::named(
        &["admissionregistration.k8s.io"],
        &["validatingwebhookconfigurations"],
        &["validate-hco.kubevirt.io"],
        &["get", "patch"],
    ),
    Rule::named(
        &["apiextensions.k8s.io"],
        &["customresourcedefinitions"],
        &["hyperconvergeds.hco.kubevirt.io"],
        &["get", "patch"],
    ),
];

/// The webhook's Service and configuration. It writes its CA (Secret hco-webhook-ca,
/// shared by its replicas) into the caBundle when it starts, and back within 10 s when it
/// goes missing.
fn webhook(namespace: &str) -> Vec<Value> {
    let service = api::hco::schema::CONVERSION_SERVICE.1;
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service, "namespace": namespace},
            "spec": {
                "selector": {"name": "hyperconverged-cluster-webhook"},
                "ports": [{"name": "webhook", "port": 443, "targetPort": 8443}],
            },
        }),
        validating_configuration(
            "validate-hco.kubevirt.io",
            None,
            vec![validating_webhook(
                "validate-hco.kubevirt.io",
                (
                    namespace,
                    service,
                    "/validate-hco-kubevirt-io-v1beta1-hyperconverged",
                ),
                ("hco.kubevirt.io", "v1beta1", &["hyperconvergeds"]),
                &["CREATE", "UPDATE", "DELETE"],
                Some(30),
            )],
        ),
    ]
}
