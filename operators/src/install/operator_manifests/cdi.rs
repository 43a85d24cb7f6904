//! cdi-operator's manifests.

use super::{
    ALL, GRANTS_ROLES, OperatorManifest, REGISTERS_APIS, REGISTERS_WEBHOOKS, Rule, Workload,
    no_objects,
};

pub static MANIFEST: OperatorManifest = OperatorManifest {
    dir: "cdi-operator",
    about:
        "cdi-operator (`ferrovirt cdi-operator`): the CDI CR deploys the DataVolume controllers and
the admission webhook (the manifests of deploy/operators/, compiled into the operator)
into this namespace with this image, and keeps the CDIConfig `config` to the CR's
`spec.config`. Apply deploy/crds first, then this, then a CDI CR:
  kubectl apply -f deploy/crds/ -f deploy/cdi-operator/
  kubectl apply -f cdi-cr.yaml    # upstream's, unchanged",
    namespace: "cdi",
    privileged: false,
    other_namespaces: &[],
    workloads: &[Workload {
        name: "cdi-operator",
        account: None,
        selector: &[],
        command: "cdi-operator",
        ports: &[],
        namespace_env: &[],
        deploys_image: true,
        cluster_rules: CLUSTER_RULES,
        namespace_rules: &[],
        objects: no_objects,
    }],
};

/// What the operator deploys and watches (the roles of what it deploys among it).
const CLUSTER_RULES: &[Rule] = &[
    Rule::new(
        &["cdi.kubevirt.io"],
        &["cdis"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(
        &["cdi.kubevirt.io"],
        &["cdis/status"],
        &["get", "patch", "update"],
    ),
    Rule::new(
        &["cdi.kubevirt.io"],
        &["cdiconfigs"],
        &["get", "create", "patch", "update", "delete"],
    ),
    Rule::new(&[""], &["serviceaccounts", "services"], ALL),
    Rule::new(&["apps"], &["deployments"], ALL),
    GRANTS_ROLES,
    REGISTERS_WEBHOOKS,
    REGISTERS_APIS,
];
