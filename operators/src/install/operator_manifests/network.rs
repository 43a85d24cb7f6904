//! The network addons operator's manifests.

use super::{OperatorManifest, Rule, Workload, no_objects};

pub static MANIFEST: OperatorManifest = OperatorManifest {
    dir: "network-operator",
    about:
        "The network addons operator (`ferrovirt network-operator`): NetworkAddonsConfig `cluster`
gets the MAC pool in this namespace (CNAO's OPERAND_NAMESPACE): its range ConfigMap
`kubemacpool-mac-range-config` and kubemacpool's manager (deploy/network/kubemacpool.yaml,
compiled in, run with this image), and CNAO's status. HCO creates the NetworkAddonsConfig;
deploy/hco/ installs this with HCO.",
    namespace: "kubevirt-hyperconverged",
    // HCO's namespace, where virt-handler and the CSI driver run privileged.
    privileged: true,
    other_namespaces: &[],
    workloads: &[Workload {
        name: "cluster-network-addons-operator",
        account: None,
        selector: &[],
        command: "network-operator",
        ports: &[],
        // Where the operands go: its own namespace.
        namespace_env: &["OPERAND_NAMESPACE"],
        // kubemacpool's manager.
        deploys_image: true,
        cluster_rules: CLUSTER_RULES,
        namespace_rules: &[],
        objects: no_objects,
    }],
};

const CREATE_PATCH_DELETE: &[&str] = &["get", "create", "patch", "delete"];

const CLUSTER_RULES: &[Rule] = &[
    Rule::new(
        &["networkaddonsoperator.network.kubevirt.io"],
        &["networkaddonsconfigs"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(
        &["networkaddonsoperator.network.kubevirt.io"],
        &["networkaddonsconfigs/status"],
        &["get", "patch", "update"],
    ),
    // Its ConfigMaps' owner references block the config's deletion.
    Rule::new(
        &["networkaddonsoperator.network.kubevirt.io"],
        &["networkaddonsconfigs/finalizers"],
        &["update"],
    ),
    Rule::new(
        &[""],
        &["configmaps"],
        &[
            "get", "list", "watch", "create", "patch", "update", "delete",
        ],
    ),
    Rule::new(&[""], &["namespaces"], &["get", "list", "watch", "create"]),
    // kubemacpool's objects (deploy/network/kubemacpool.yaml), deployed for spec.kubeMacPool.
    Rule::new(&[""], &["serviceaccounts", "services"], CREATE_PATCH_DELETE),
    Rule::new(
        &["apps"],
        &["deployments"],
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    Rule::new(
        &["rbac.authorization.k8s.io"],
        &[
            "clusterroles",
            "clusterrolebindings",
            "roles",
            "rolebindings",
        ],
        CREATE_PATCH_DELETE,
    ),
    Rule::new(
        &["admissionregistration.k8s.io"],
        &["mutatingwebhookconfigurations"],
        CREATE_PATCH_DELETE,
    ),
    // What kubemacpool's role grants, which its operator must hold to grant it.
    Rule::new(
        &["kubevirt.io"],
        &["virtualmachines", "virtualmachineinstances"],
        &["get", "list", "watch"],
    ),
    Rule::new(
        &["", "events.k8s.io"],
        &["events"],
        &["create", "patch", "update"],
    ),
    Rule::new(&[""], &["secrets"], &["get", "create"]),
];
