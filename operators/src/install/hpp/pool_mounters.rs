//! `pvcTemplate` pools on a cluster, served as upstream's operator serves them: for each such
//! pool and each node the driver's DaemonSet runs on (cordoned and not-ready ones too), a
//! claim made from the template (named and labelled as on one machine, [`claims`]) and a
//! Deployment pinned to the node whose
//! `ferrovirt hpp-pool-mounter` bind-mounts the claim (mounted by the kubelet at `/source`)
//! over the pool's path on the host, reached through the host's root mounted with
//! bidirectional propagation; it is ready once the mount is in place. The driver's DaemonSet
//! serves the pool at that path once every node's mounter is ready, so no volume is made
//! under a mount point still to come, and keeps serving it from then on: the mount outlives
//! its mounter's restarts. Claims are kept when a pool goes (they hold its volumes' data); the
//! mount on each host is taken off by a cleanup Job pinned to the node, as upstream's
//! operator cleans up, whose `hpp-pool-mounter --unmount` leaves any other mount alone. A
//! `volumeMode: Block` claim reaches the mounter as a device (at `/dev/hpp-pool`), which it
//! formats ext4 when blank (never when it holds anything else) and mounts at the pool's path.

use api::common::NodePlacement;
use api::hostpath::{ClaimStatus, StoragePool, StoragePoolStatus, pool_phase};
use api::node_selector;
use k8s_openapi::api::core::v1::{Node, Taint, Toleration};
use serde_json::{Value, json};

use super::claims::{self, POOL_LABEL, claim_name, name_within};
use crate::install::manifests::MANAGED_BY_LABEL;
/// Where the mounter finds the claim (a filesystem claim's mount, a block claim's device),
/// and the host's root.
const SOURCE: &str = "/source";
const DEVICE: &str = "/dev/hpp-pool";
const HOST_ROOT: &str = "/host";
/// The account the mounters run as: the CSI driver's (`deploy/csi-driver/rbac.yaml`), as
/// upstream's run as its driver's; they call no API.
const SERVICE_ACCOUNT: &str = "ferrovirt-csi-driver";

/// The label selecting one mounter's pod (its value the Deployment's name).
const MOUNTER_LABEL: &str = "hpp-pool-mounter";

/// The name of the claim and the Deployment of `pool` on `node`: `hpp-pool-POOL-NODE`, as
/// upstream names the Deployment, kept within 63 characters.
pub fn object_name(pool: &str, node: &str) -> String {
    claim_name(pool, node)
}

/// Taints the DaemonSet controller tolerates for every DaemonSet's pods: its driver pods stay
/// on cordoned, not-ready, unreachable and pressured nodes, and so must the pools' mounts.
const DAEMONSET_TOLERATED: [&str; 6] = [
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/pid-pressure",
];

/// The toleration that lets a mounter's pod come back on a cordoned node where the driver
/// still runs (a DaemonSet's pods have it).
const CORDONED: &str = "node.kubernetes.io/unschedulable";

/// The nodes a mounter goes to: those the driver's DaemonSet runs on, by the CR's workload
/// `placement` (its node selector, its required node affinity, and its tolerations of the
/// taints that keep pods off, `NoSchedule` and `NoExecute`) and the taints every DaemonSet
/// tolerates. A cordoned or
/// not-ready node keeps its driver pod and so keeps its mounter: taking the mounter away
/// would detach the claim under volumes the driver still serves there.
pub fn driver_nodes(nodes: &[Node], placement: &NodePlacement) -> Vec<String> {
    let selector = placement.node_selector.clone().unwrap_or_default();
    let required = placement
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let tolerations = placement.tolerations.as_deref().unwrap_or_default();
    nodes
        .iter()
        .filter(|node| {
            let labels = node.metadata.labels.clone().unwrap_or_default();
            selector
                .iter()
                .all(|(key, value)| labels.get(key) == Some(value))
        })
        .filter(|node| required.is_none_or(|r| node_selector::selects(r, node)))
        .filter(|node| {
            let spec = node.spec.clone().unwrap_or_default();
            let repelled = spec.taints.unwrap_or_default().iter().any(|taint| {
                matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
                    && !DAEMONSET_TOLERATED.contains(&taint.key.as_str())
                    && !tolerations.iter().any(|t| tolerates(t, taint))
            });
            !repelled
        })
        .filter_map(|node| node.metadata.name.clone())
        .collect()
}

/// Whether `toleration` tolerates `taint`, by Kubernetes' rule: the effect matches or is
/// left empty, the key matches or is left empty with `Exists`, and `Exists` takes any
/// value where `Equal` (the default) needs the taint's.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    let key = toleration.key.as_deref().unwrap_or_default();
    let exists = toleration.operator.as_deref() == Some("Exists");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    if key.is_empty() {
        return exists;
    }
    key == taint.key
        && (exists
            || toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default())
}

/// Where the mounters run and what they are, beside the pools and nodes.
pub struct MounterSpec<'a> {
    pub namespace: &'a str,
    /// The image whose binary mounts.
    pub image: &'a str,
    /// The manager label's value.
    pub manager: &'a str,
    /// The CR's workload tolerations, so a mounter goes wherever the driver goes.
    pub tolerations: &'a [Toleration],
}

/// The claim and the mounter Deployment of each of `pools` on each of `nodes`; claims
/// first.
pub fn desired(pools: &[StoragePool], nodes: &[String], spec: &MounterSpec<'_>) -> Vec<Value> {
    let pairs = || {
        pools
            .iter()
            .flat_map(|pool| nodes.iter().map(move |node| (pool, node.as_str())))
    };
    let claims = pairs().map(|(pool, node)| claim(pool, node, spec.namespace, spec.manager));
    let mounters = pairs().map(|(pool, node)| mounter(pool, node, spec));
    claims.chain(mounters).collect()
}

/// The value of the pool label on `pool`'s claims, mounters and cleanup Jobs.
pub fn pool_label(pool: &StoragePool) -> String {
    name_within(&pool.name, "hpp", 63)
}

fn labels(pool: &StoragePool, manager: &str) -> Value {
    json!({
        POOL_LABEL: pool_label(pool),
        claims::APP_LABEL: claims::APP,
        MANAGED_BY_LABEL: manager,
    })
}

fn claim(pool: &StoragePool, node: &str, namespace: &str, manager: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": object_name(&pool.name, node),
            "namespace": namespace,
            "labels": labels(pool, manager),
        },
        "spec": pool.pvc_template.clone().unwrap_or_default(),
    })
}

fn is_block(pool: &StoragePool) -> bool {
    let mode = pool
        .pvc_template
        .as_ref()
        .and_then(|t| t.volume_mode.as_deref());
    mode == Some("Block")
}

fn mounter(pool: &StoragePool, node: &str, spec: &MounterSpec<'_>) -> Value {
    let name = object_name(&pool.name, node);
    let (namespace, image, manager) = (spec.namespace, spec.image, spec.manager);
    let mut tolerations = serde_json::to_value(spec.tolerations).unwrap_or_else(|_| json!([]));
    if let Some(list) = tolerations.as_array_mut() {
        list.push(json!({"key": CORDONED, "operator": "Exists", "effect": "NoSchedule"}));
    }
    let host_root = json!({"name": "host-root", "mountPath": HOST_ROOT,
                           "mountPropagation": "Bidirectional"});
    let (claim_flag, claim_path, mounts, devices) = if is_block(pool) {
        let device = json!([{"name": "data", "devicePath": DEVICE}]);
        ("--device", DEVICE, json!([host_root]), Some(device))
    } else {
        let mounts = json!([{"name": "data", "mountPath": SOURCE}, host_root]);
        ("--source", SOURCE, mounts, None)
    };
    let mut deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(pool, manager)},
        "spec": {
            "replicas": 1,
            // The old mounter must unmount before a new one mounts.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {MOUNTER_LABEL: name}},
            "template": {
                "metadata": {"labels": {MOUNTER_LABEL: name}},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "tolerations": tolerations,
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{
                            "key": "kubernetes.io/hostname", "operator": "In", "values": [node],
                        }]}],
                    }}},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{
                        "name": "mounter",
                        "image": image,
                        "args": ["hpp-pool-mounter", claim_flag, claim_path, "--claim", name,
                                 "--target", pool.path, "--host-root", HOST_ROOT],
                        "securityContext": {"privileged": true},
                        // Ready once the claim is mounted at the pool's path. The container's
                        // first process is this binary, whatever its path in the image.
                        "readinessProbe": {
                            "exec": {"command": ["/proc/1/exe", "hpp-pool-mounter", "--check",
                                                 "--claim", name, "--target", pool.path,
                                                 "--host-root", HOST_ROOT]},
                            "periodSeconds": 10,
                        },
                        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                        "volumeMounts": mounts,
                    }],
                    "volumes": [
                        {"name": "data", "persistentVolumeClaim": {"claimName": name}},
                        {"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}},
                    ],
                },
            },
        },
    });
    if let Some(devices) = devices {
        deployment["spec"]["template"]["spec"]["containers"][0]["volumeDevices"] = devices;
    }
    deployment
}

/// The name of the cleanup Job of mounter Deployment `mounter`.
pub fn cleanup_job_name(mounter: &str) -> String {
    name_within(mounter, "cleanup", 63)
}

/// The Job that takes the pool of `mounter` (a mounter Deployment of [`desired`], whose
/// pool is no longer wanted) off its node: the mounter's pod on the same node with the
/// same tolerations, run once with `--unmount`. It runs under the namespace's default
/// account (it calls no API), so that it can run after the driver's account is gone, and
/// is removed a while after it ends.
pub fn cleanup_job(mounter: &Value) -> Option<Value> {
    let name = mounter["metadata"]["name"].as_str()?;
    let pod = &mounter["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let after = |flag: &str| {
        let at = args.iter().position(|a| *a == flag)?;
        args.get(at + 1).copied()
    };
    let (claim, target) = (after("--claim")?, after("--target")?);
    let host_root = after("--host-root")?;
    let host_mount = container["volumeMounts"]
        .as_array()?
        .iter()
        .find(|m| m["mountPath"] == host_root)?;
    let host_volume = pod["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == host_mount["name"])?;
    Some(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": cleanup_job_name(name),
            "namespace": mounter["metadata"]["namespace"],
            "labels": mounter["metadata"]["labels"],
        },
        "spec": {
            "backoffLimit": 6,
            "ttlSecondsAfterFinished": 600,
            "template": {
                "spec": {
                    "restartPolicy": "OnFailure",
                    "automountServiceAccountToken": false,
                    "affinity": pod["affinity"],
                    "tolerations": pod["tolerations"],
                    "containers": [{
                        "name": "cleanup",
                        "image": container["image"],
                        "args": ["hpp-pool-mounter", "--unmount", "--claim", claim,
                                 "--target", target, "--host-root", host_root],
                        "securityContext": {"privileged": true},
                        "volumeMounts": [host_mount],
                    }],
                    "volumes": [host_volume],
                },
            },
        },
    }))
}

/// How far a templated pool is mounted: on how many nodes it should be, on how many its
/// mounter is ready, and the statuses of its claims.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolMounting {
    pub desired: usize,
    pub ready: usize,
    pub claims: Vec<ClaimStatus>,
}

impl PoolMounting {
    /// Whether every node's mounter is ready.
    pub fn everywhere(&self) -> bool {
        self.desired > 0 && self.ready == self.desired
    }
}

/// The status of templated `pool` as far as it is mounted.
pub fn pool_status(pool: &StoragePool, mounting: &PoolMounting) -> StoragePoolStatus {
    let phase = if mounting.everywhere() {
        pool_phase::READY
    } else {
        pool_phase::MOUNTING
    };
    let count = |n: usize| Some(i32::try_from(n).unwrap_or(i32::MAX));
    StoragePoolStatus {
        name: pool.name.clone(),
        phase: phase.to_owned(),
        desired_ready: count(mounting.desired),
        current_ready: count(mounting.ready),
        claim_statuses: (!mounting.claims.is_empty()).then(|| mounting.claims.clone()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The mounters of namespace `hpp`, image `img:1`, with `tolerations`.
    fn mounter_spec(tolerations: &[Toleration]) -> MounterSpec<'_> {
        MounterSpec {
            namespace: "hpp",
            image: "img:1",
            manager: "hpp-operator",
            tolerations,
        }
    }

    fn pool(name: &str, mode: Option<&str>) -> StoragePool {
        serde_json::from_value(json!({
            "name": name, "path": format!("/var/{name}"),
            "pvcTemplate": {"volumeMode": mode, "storageClassName": "ceph",
                            "resources": {"requests": {"storage": "10Gi"}}},
        }))
        .expect("a pool")
    }

    #[test]
    fn each_pool_gets_a_claim_and_a_pinned_mounter_on_each_node() {
        let nodes = ["n1".to_owned(), "n2".to_owned()];
        let tolerations: Vec<Toleration> = serde_json::from_value(json!([
            {"key": "storage", "operator": "Exists", "effect": "NoSchedule"},
        ]))
        .expect("tolerations");
        let spec = mounter_spec(&tolerations);
        let objects = desired(&[pool("fast", None)], &nodes, &spec);
        let kinds: Vec<(&str, &str)> = objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("PersistentVolumeClaim", "hpp-pool-fast-n1"),
                ("PersistentVolumeClaim", "hpp-pool-fast-n2"),
                ("Deployment", "hpp-pool-fast-n1"),
                ("Deployment", "hpp-pool-fast-n2"),
            ]
        );
        let claim = &objects[0];
        assert_eq!(claim["spec"]["storageClassName"], "ceph");
        assert_eq!(claim["metadata"]["labels"][POOL_LABEL], "fast-hpp");
        let mounter = &objects[3];
        let spec = &mounter["spec"]["template"]["spec"];
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"][0]["values"],
            json!(["n2"])
        );
        assert_eq!(spec["tolerations"][0]["key"], "storage", "{spec:#}");
        assert_eq!(
            spec["tolerations"][1],
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                   "effect": "NoSchedule"}),
            "a mounter comes back on a cordoned node, as the driver's pod stays there"
        );
        let container = &spec["containers"][0];
        assert_eq!(container["image"], "img:1");
        assert_eq!(
            container["args"],
            json!([
                "hpp-pool-mounter",
                "--source",
                "/source",
                "--claim",
                "hpp-pool-fast-n2",
                "--target",
                "/var/fast",
                "--host-root",
                "/host"
            ])
        );
        assert_eq!(
            spec["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "hpp-pool-fast-n2"
        );
        assert_eq!(
            container["volumeMounts"][1]["mountPropagation"],
            "Bidirectional"
        );
    }

    #[test]
    fn mounters_go_where_the_drivers_daemonset_runs() {
        let node = |name: &str, spec: Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))
                .expect("a Node")
        };
        let nodes = [
            node("worker", json!({})),
            node(
                "cordoned",
                json!({"unschedulable": true, "taints": [
                    {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}),
            ),
            node(
                "control-plane",
                json!({"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}),
            ),
            node(
                "preferred",
                json!({"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}),
            ),
        ];
        let anywhere = NodePlacement::default();
        assert_eq!(
            driver_nodes(&nodes, &anywhere),
            ["worker", "cordoned", "preferred"],
            "a cordoned node keeps its driver pod, and its mounter"
        );
        let labelled: Node =
            serde_json::from_value(json!({"metadata": {"name": "ssd", "labels": {"disk": "ssd"}}}))
                .expect("a Node");
        let on_ssd = NodePlacement {
            node_selector: Some(BTreeMap::from([("disk".to_owned(), "ssd".to_owned())])),
            ..Default::default()
        };
        assert_eq!(
            driver_nodes(&[nodes[0].clone(), labelled.clone()], &on_ssd),
            ["ssd"],
            "only where the driver runs"
        );
        let affine: NodePlacement = serde_json::from_value(json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
            ]},
        }}}))
        .expect("a placement");
        assert_eq!(
            driver_nodes(&[nodes[0].clone(), labelled.clone()], &affine),
            ["ssd"],
            "the required node affinity too"
        );
        let tolerating = |tolerations: Value| NodePlacement {
            tolerations: Some(serde_json::from_value(tolerations).expect("tolerations")),
            ..Default::default()
        };
        assert_eq!(
            driver_nodes(
                &nodes,
                &tolerating(json!([{"key": "node-role.kubernetes.io/control-plane",
                                    "operator": "Exists", "effect": "NoSchedule"}]))
            ),
            ["worker", "cordoned", "control-plane", "preferred"],
            "a taint the workload tolerates does not keep the mounter off"
        );
        assert_eq!(
            driver_nodes(&nodes, &tolerating(json!([{"operator": "Exists"}]))),
            ["worker", "cordoned", "control-plane", "preferred"],
            "an empty key with Exists tolerates every taint"
        );
        for (toleration, why) in [
            (
                json!({"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                    "effect": "NoExecute"}),
                "another effect",
            ),
            (
                json!({"key": "node-role.kubernetes.io/control-plane", "value": "yes"}),
                "Equal with another value",
            ),
            (json!({"key": "other", "operator": "Exists"}), "another key"),
            (json!({}), "an empty key without Exists"),
        ] {
            assert_eq!(
                driver_nodes(&nodes, &tolerating(json!([toleration]))),
                ["worker", "cordoned", "preferred"],
                "{why} does not tolerate the taint"
            );
        }
        let long = "n".repeat(80);
        assert!(object_name("fast", &long).len() <= 63);
    }

    #[test]
    fn a_gone_pools_mount_is_taken_off_by_a_job_on_its_node() {
        let tolerations: Vec<Toleration> =
            serde_json::from_value(json!([{"operator": "Exists"}])).expect("tolerations");
        let spec = mounter_spec(&tolerations);
        let objects = desired(&[pool("fast", None)], &["n1".to_owned()], &spec);
        let mounter = &objects[1];
        let job = cleanup_job(mounter).expect("a Job");
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["metadata"]["name"], "hpp-pool-fast-n1-cleanup");
        assert_eq!(job["metadata"]["namespace"], "hpp");
        assert_eq!(job["metadata"]["labels"][POOL_LABEL], "fast-hpp");
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(
            pod["affinity"],
            mounter["spec"]["template"]["spec"]["affinity"]
        );
        assert_eq!(pod["tolerations"][0]["operator"], "Exists");
        assert!(pod.get("serviceAccountName").is_none(), "{pod:#}");
        let container = &pod["containers"][0];
        assert_eq!(container["image"], "img:1");
        assert_eq!(
            container["args"],
            json!([
                "hpp-pool-mounter",
                "--unmount",
                "--claim",
                "hpp-pool-fast-n1",
                "--target",
                "/var/fast",
                "--host-root",
                "/host"
            ])
        );
        assert_eq!(
            container["volumeMounts"][0]["mountPropagation"],
            "Bidirectional"
        );
        assert_eq!(
            pod["volumes"],
            json!([{"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}}])
        );
        assert_eq!(cleanup_job(&json!({"metadata": {"name": "x"}})), None);
    }

    #[test]
    fn a_block_claim_reaches_its_mounter_as_a_device() {
        let spec = mounter_spec(&[]);
        let objects = desired(&[pool("raw", Some("Block"))], &["n1".to_owned()], &spec);
        let container = &objects[1]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["args"],
            json!([
                "hpp-pool-mounter",
                "--device",
                "/dev/hpp-pool",
                "--claim",
                "hpp-pool-raw-n1",
                "--target",
                "/var/raw",
                "--host-root",
                "/host"
            ])
        );
        assert_eq!(
            container["volumeDevices"],
            json!([{"name": "data", "devicePath": "/dev/hpp-pool"}])
        );
        let mounts = container["volumeMounts"].as_array().expect("mounts");
        assert_eq!(mounts.len(), 1, "only the host's root: {mounts:?}");
        let job = cleanup_job(&objects[1]).expect("its cleanup Job");
        assert_eq!(
            job["spec"]["template"]["spec"]["containers"][0]["args"][1],
            "--unmount"
        );
        let filesystem = desired(&[pool("fs", Some("Filesystem"))], &["n1".to_owned()], &spec);
        let container = &filesystem[1]["spec"]["template"]["spec"]["containers"][0];
        assert!(container.get("volumeDevices").is_none(), "{container:#}");
    }

    #[test]
    fn a_pool_is_ready_once_every_node_mounted_it() {
        let p = pool("fast", None);
        let mounting = |desired, ready| PoolMounting {
            desired,
            ready,
            claims: Vec::new(),
        };
        assert_eq!(pool_status(&p, &mounting(2, 1)).phase, "Mounting");
        assert_eq!(pool_status(&p, &mounting(0, 0)).phase, "Mounting");
        let ready = pool_status(&p, &mounting(2, 2));
        assert_eq!(ready.phase, "Ready");
        assert_eq!(
            (ready.desired_ready, ready.current_ready),
            (Some(2), Some(2))
        );
        assert_eq!(ready.claim_statuses, None);
        let bound: ClaimStatus = serde_json::from_value(json!({
            "name": "hpp-pool-fast-n1", "status": {"phase": "Bound"},
        }))
        .expect("a claim status");
        let with_claims = PoolMounting {
            claims: vec![bound.clone()],
            ..mounting(2, 2)
        };
        assert_eq!(
            pool_status(&p, &with_claims).claim_statuses,
            Some(vec![bound])
        );
    }
}
