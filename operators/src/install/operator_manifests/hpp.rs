//! hostpath-provisioner-operator's manifests.

use super::{ALL, GRANTS_ROLES, OperatorManifest, Rule, Workload, no_objects};

pub static MANIFEST: OperatorManifest = OperatorManifest {
    dir: "hpp-operator",
    about: "hostpath-provisioner-operator (`ferrovirt hpp-operator`): the HostPathProvisioner CRs
deploy the CSI driver (the manifests of deploy/csi-driver/ but its StorageClass, compiled
into the operator) into this namespace with this image, its DaemonSet serving the CRs'
path pools. Apply deploy/crds first, then this, then a CR and a StorageClass per pool:
  kubectl apply -f deploy/crds/ -f deploy/hpp-operator/
  kubectl apply -f hostpathprovisioner_cr.yaml     # upstream's, unchanged
  kubectl apply -f deploy/csi-driver/storageclass.yaml",
    namespace: "ferrovirt",
    // The CSI driver runs privileged.
    privileged: true,
    other_namespaces: &[],
    workloads: &[Workload {
        name: "hostpath-provisioner-operator",
        account: None,
        selector: &[],
        command: "hpp-operator",
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
        &["hostpathprovisioner.kubevirt.io"],
        &["hostpathprovisioners"],
        &["get", "list", "watch", "patch", "update"],
    ),
    Rule::new(
        &["hostpathprovisioner.kubevirt.io"],
        &["hostpathprovisioners/status"],
        &["get", "patch", "update"],
    ),
    Rule::new(&[""], &["serviceaccounts"], ALL),
    Rule::new(&["apps"], &["daemonsets", "deployments"], ALL),
    // A cleanup Job per node when a pvcTemplate pool goes.
    Rule::new(
        &["batch"],
        &["jobs"],
        &["get", "list", "watch", "create", "delete"],
    ),
    // pvcTemplate pools: a claim and a mounter Deployment per pool and node.
    Rule::new(&[""], &["nodes"], &["get", "list", "watch"]),
    Rule::new(
        &[""],
        &["persistentvolumeclaims"],
        &["get", "list", "watch", "create", "patch"],
    ),
    Rule::new(&["storage.k8s.io"], &["csidrivers"], ALL),
    GRANTS_ROLES,
];
