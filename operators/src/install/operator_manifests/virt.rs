//! virt-operator's manifests.

use serde_json::{Value, json};

use super::{
    ALL, GRANTS_ROLES, OperatorManifest, REGISTERS_APIS, REGISTERS_WEBHOOKS, Rule, Workload,
    validating_configuration, validating_webhook,
};

pub static MANIFEST: OperatorManifest = OperatorManifest {
    dir: "virt-operator",
    about: "virt-operator (`ferrovirt virt-operator`): the oldest KubeVirt CR, in any namespace,
deploys virt-api, virt-controller and virt-handler (the manifests of deploy/virt/,
compiled into the operator) into its own namespace with this image, and reports them in
its status. As upstream's, it serves the KubeVirt CR's uninstall guard
(BlockUninstallIfWorkloadsExist) and update review behind Service
kubevirt-operator-webhook, keeping its CA (Secret kubevirt-operator-webhook-ca, made by
the first replica) in ValidatingWebhookConfiguration virt-operator-validator. Apply
deploy/crds first, then this, then a KubeVirt CR:
  kubectl apply -f deploy/crds/ -f deploy/virt-operator/
  kubectl apply -n kubevirt -f kubevirt-cr.yaml    # upstream's, unchanged",
    namespace: "kubevirt",
    // virt-handler runs privileged.
    privileged: true,
    other_namespaces: &[],
    workloads: &[Workload {
        name: "virt-operator",
        account: Some("kubevirt-operator"),
        selector: &[("kubevirt.io", "virt-operator")],
        command: "virt-operator",
        ports: &[("webhooks", 8444)],
        namespace_env: &[],
        deploys_image: true,
        cluster_rules: CLUSTER_RULES,
        namespace_rules: &[
            // The CA of the webhooks' serving certificate.
            Rule::new(&[""], &["secrets"], &["create"]),
            Rule::named(
                &[""],
                &["secrets"],
                &["kubevirt-operator-webhook-ca"],
                &["get"],
            ),
        ],
        objects: webhook,
    }],
};

/// What the operator deploys and watches (the roles of what it deploys among it).
const CLUSTER_RULES: &[Rule] = &[
    Rule::new(
        &["kubevirt.io"],
        &["kubevirts"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(
        &["kubevirt.io"],
        &["kubevirts/status"],
        &["get", "patch", "update"],
    ),
    Rule::new(&[""], &["serviceaccounts", "services"], ALL),
    Rule::new(&["apps"], &["deployments", "daemonsets"], ALL),
    GRANTS_ROLES,
    REGISTERS_APIS,
    REGISTERS_WEBHOOKS,
    // Its own webhooks: their caBundle, and the workloads that block an uninstall.
    Rule::named(
        &["admissionregistration.k8s.io"],
        &["validatingwebhookconfigurations"],
        &["virt-operator-validator"],
        &["patch"],
    ),
    Rule::new(
        &["kubevirt.io"],
        &[
            "virtualmachineinstances",
            "virtualmachines",
            "virtualmachineinstancereplicasets",
        ],
        &["list"],
    ),
    // common-instancetypes: created, kept as the bundle says, deleted when disabled.
    Rule::new(
        &["instancetype.kubevirt.io"],
        &[
            "virtualmachineclusterinstancetypes",
            "virtualmachineclusterpreferences",
        ],
        &["get", "list", "watch", "create", "update", "delete"],
    ),
];

/// The operator's webhook: Service kubevirt-operator-webhook and the configuration that
/// sends it the KubeVirt CR's deletions (refused, with BlockUninstallIfWorkloadsExist,
/// while VMIs, VMs or VMI replica sets exist) and updates.
fn webhook(namespace: &str) -> Vec<Value> {
    let service = (namespace, "kubevirt-operator-webhook", "");
    let kubevirts = ("kubevirt.io", "v1", &["kubevirts"][..]);
    vec![
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service.1, "namespace": namespace, "labels": {"kubevirt.io": ""}},
            "spec": {
                "selector": {"kubevirt.io": "virt-operator"},
                "ports": [{"name": "webhooks", "port": 443, "targetPort": "webhooks"}],
            },
        }),
        validating_configuration(
            "virt-operator-validator",
            Some(json!({"kubevirt.io": ""})),
            vec![
                validating_webhook(
                    "kubevirt-validator.kubevirt.io",
                    (service.0, service.1, "/kubevirt-validate-delete"),
                    kubevirts,
                    &["DELETE"],
                    Some(10),
                ),
                validating_webhook(
                    "kubevirt-update-validator.kubevirt.io",
                    (service.0, service.1, "/kubevirt-validate-update"),
                    kubevirts,
                    &["UPDATE"],
                    Some(10),
                ),
            ],
        ),
    ]
}
