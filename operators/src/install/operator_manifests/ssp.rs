//! The SSP operator's manifests.

use serde_json::Value;

use super::{ALL, OperatorManifest, Rule, Workload, validating_configuration, validating_webhook};

pub static MANIFEST: OperatorManifest = OperatorManifest {
    dir: "ssp-operator",
    about:
        "The SSP operator (`ferrovirt ssp-operator`): each SSP CR gets the common templates in its
`commonTemplates.namespace`, its boot sources (DataImportCrons and DataSources in
kubevirt-os-images, with ssp-operator's roles there) and SSP's status. Beside it runs the
tekton-tasks operator: each TektonTasks CR with deployTektonTaskResources gets the KubeVirt
Tekton tasks and their RBAC (tasks.tekton.dev must be served; until it is, the CR's
conditions say so). HCO creates the SSP and TektonTasks CRs; deploy/hco/ installs this with HCO. SSP's template validator is served by CDI's
webhook (`ferrovirt webhook`, deploy/operators/webhook.yaml), which writes its CA into the
configuration below when it starts: install CDI's components with or after this file.",
    namespace: "kubevirt-hyperconverged",
    // HCO's namespace, where virt-handler and the CSI driver run privileged.
    privileged: true,
    other_namespaces: &[],
    workloads: &[Workload {
        name: "ssp-operator",
        account: None,
        selector: &[],
        command: "ssp-operator",
        ports: &[],
        namespace_env: &[],
        deploys_image: false,
        cluster_rules: CLUSTER_RULES,
        namespace_rules: &[],
        objects: template_validator,
    }],
};

const CLUSTER_RULES: &[Rule] = &[
    Rule::new(
        &["ssp.kubevirt.io"],
        &["ssps"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(
        &["ssp.kubevirt.io"],
        &["ssps/status"],
        &["get", "patch", "update"],
    ),
    Rule::new(&["ssp.kubevirt.io"], &["ssps/finalizers"], &["update"]),
    Rule::new(&["template.openshift.io"], &["templates"], ALL),
    Rule::new(
        &["cdi.kubevirt.io"],
        &["dataimportcrons", "datasources"],
        ALL,
    ),
    // The golden images namespace, made and removed with the SSP.
    Rule::new(&[""], &["namespaces"], ALL),
    Rule::new(
        &[""],
        &["persistentvolumeclaims"],
        &["get", "list", "watch"],
    ),
    // The tekton-tasks operator beside SSP: TektonTasks CRs, the Tasks and their accounts.
    Rule::new(
        &["tektontasks.kubevirt.io"],
        &["tektontasks"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(
        &["tektontasks.kubevirt.io"],
        &["tektontasks/status"],
        &["get", "patch", "update"],
    ),
    Rule::new(
        &["tektontasks.kubevirt.io"],
        &["tektontasks/finalizers"],
        &["update"],
    ),
    Rule::new(&["tekton.dev"], &["tasks"], ALL),
    Rule::new(&[""], &["serviceaccounts"], ALL),
    // The golden images' and the tasks' roles grant what the operator does not hold itself.
    Rule::new(
        &["rbac.authorization.k8s.io"],
        &["roles", "rolebindings", "clusterroles"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete", "escalate", "bind",
        ],
    ),
];

/// The template validator's configuration: CDI's webhook (Service ferrovirt-webhook in
/// CDI's namespace) judges VMs against their templates' validations and refuses deleting
/// a template VMs still use.
fn template_validator(_: &str) -> Vec<Value> {
    let at = |path| ("cdi", "ferrovirt-webhook", path);
    vec![validating_configuration(
        "virt-template-validator",
        None,
        vec![
            validating_webhook(
                "virtualmachine-admission.ssp.kubevirt.io",
                at("/virtualmachine-validate"),
                ("kubevirt.io", "v1", &["virtualmachines"]),
                &["CREATE", "UPDATE"],
                None,
            ),
            validating_webhook(
                "template-admission.ssp.kubevirt.io",
                at("/template-validate"),
                ("template.openshift.io", "v1", &["templates"]),
                &["DELETE"],
                None,
            ),
        ],
    )]
}
