//! hostpath-provisioner-operator on a cluster: the HostPathProvisioner CRs deploy the CSI
//! driver ([`STRATEGY`], the manifests of `deploy/csi-driver/` but the StorageClass, which
//! is the user's to make) into the operator's namespace with its image, its DaemonSet
//! serving the CRs' path pools (the legacy `pathConfig` as pool `legacy`), each a host
//! directory of every node, and their `pvcTemplate` pools once mounted on every node
//! ([`pool_mounters`]). Each CR holds upstream's finalizer; deleting the last removes the
//! driver and the pools' mounters. The status is upstream's: the operator SDK conditions,
//! `Deploying` until the DaemonSet runs ready on every node and every templated pool is
//! mounted, then Available with each pool Ready. On `ferrovirt up` the pools go to the
//! running driver instead ([`super::run`]).

use std::collections::BTreeMap;
use std::time::Duration;

use api::common::NodePlacement;
use api::hostpath::{HostPathProvisioner, StoragePool, StoragePoolStatus, pool_phase};
use ferrovirt_hostpath::{Pool, parse_pool_flag};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use super::plan::pools_of;
use super::pool_mounters::{self, PoolMounting};
use super::status::{Outcome, RECONCILE_FAILED, ready_pool, status_for};
use super::{FINALIZER, VERSION};
use crate::install::manifests::{MANAGED_BY_LABEL, Manifests, place};
use crate::install::{changes, deployer, workloads};
use crate::kit::{finalizer, patch_status};

/// The CSI driver's manifests.
pub const STRATEGY: Manifests = Manifests {
    files: &[
        (
            "rbac.yaml",
            include_str!("../../../../deploy/csi-driver/rbac.yaml"),
        ),
        (
            "csidriver.yaml",
            include_str!("../../../../deploy/csi-driver/csidriver.yaml"),
        ),
        (
            "daemonset.yaml",
            include_str!("../../../../deploy/csi-driver/daemonset.yaml"),
        ),
    ],
    namespace: "ferrovirt",
    managed_by: MANAGER,
};

/// The field manager of what the operator applies, and its managed-by label.
const MANAGER: &str = "hostpath-provisioner-operator";
/// The driver's DaemonSet and its container that takes the pools.
pub const DAEMONSET: &str = "ferrovirt-csi-driver";
const DRIVER_CONTAINER: &str = "csi-driver";
/// The prefix of the pools' volumes in the DaemonSet.
const POOL_VOLUME: &str = "pool-";
/// How often everything is checked again without a change.
const RESYNC: Duration = Duration::from_secs(30);

/// The path pools of `crs` (oldest first): a pool name two CRs give keeps the oldest's
/// path, as on one machine. CRs that fail validation give none.
pub fn cluster_pools(crs: &[HostPathProvisioner]) -> Vec<Pool> {
    let mut pools: Vec<Pool> = Vec::new();
    for pool in crs
        .iter()
        .filter_map(|cr| pools_of(cr).ok())
        .flat_map(|p| p.wanted)
    {
        if !pools.iter().any(|p| p.name == pool.name) {
            pools.push(pool);
        }
    }
    pools
}

/// Makes the driver's DaemonSet among `objects` serve `pools`: a `--pool=NAME=PATH` flag
/// and a host directory mounted at the same path for each, in place of the manifest's.
pub fn serve_pools(objects: &mut [Value], pools: &[Pool]) {
    let Some(daemonset) = objects
        .iter_mut()
        .find(|o| o["kind"] == "DaemonSet" && o["metadata"]["name"] == DAEMONSET)
    else {
        return;
    };
    let spec = &mut daemonset["spec"]["template"]["spec"];
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        volumes.retain(|v| !is_pool_volume(v));
        volumes.extend(pools.iter().enumerate().map(|(i, pool)| {
            json!({"name": format!("{POOL_VOLUME}{i}"),
                   "hostPath": {"path": pool.path, "type": "DirectoryOrCreate"}})
        }));
    }
    let Some(container) = spec["containers"]
        .as_array_mut()
        .and_then(|c| c.iter_mut().find(|c| c["name"] == DRIVER_CONTAINER))
    else {
        return;
    };
    if let Some(args) = container["args"].as_array_mut() {
        args.retain(|a| !a.as_str().is_some_and(|a| a.starts_with("--pool=")));
        args.extend(
            pools
                .iter()
                .map(|p| json!(format!("--pool={}={}", p.name, p.path.display()))),
        );
    }
    if let Some(mounts) = container["volumeMounts"].as_array_mut() {
        mounts.retain(|m| !is_pool_volume(m));
        mounts.extend(pools.iter().enumerate().map(|(i, pool)| {
            json!({"name": format!("{POOL_VOLUME}{i}"), "mountPath": pool.path,
                   "mountPropagation": "Bidirectional"})
        }));
    }
}

/// The pools the driver's DaemonSet `daemonset` serves now (its `--pool=NAME=PATH` flags).
pub fn served_pool_names(daemonset: &DaemonSet) -> Vec<String> {
    daemonset
        .spec
        .iter()
        .flat_map(|s| s.template.spec.iter())
        .flat_map(|s| s.containers.iter())
        .filter(|c| c.name == DRIVER_CONTAINER)
        .flat_map(|c| c.args.iter().flatten())
        .filter_map(|a| a.strip_prefix("--pool="))
        .filter_map(|a| parse_pool_flag(a).ok().map(|pool| pool.name))
        .collect()
}

fn is_pool_volume(volume: &Value) -> bool {
    volume["name"]
        .as_str()
        .is_some_and(|n| n.starts_with(POOL_VOLUME))
}

/// How far each `pvcTemplate` pool is mounted, by name.
pub type Mounted = BTreeMap<String, PoolMounting>;

/// What one live CR's status says, given whether the driver runs ready everywhere and how
/// far its `pvcTemplate` pools are mounted, and the pools it reports (its path pools Ready
/// once healthy, its templated pools as far as they are mounted).
pub fn outcome_of(
    cr: &HostPathProvisioner,
    driver_ready: bool,
    mounted: &Mounted,
) -> (Outcome, Vec<StoragePoolStatus>) {
    let pools = match pools_of(cr) {
        Ok(pools) => pools,
        Err(err) => {
            let failed = Outcome::Failed {
                reason: RECONCILE_FAILED,
                message: err.to_string(),
            };
            return (failed, Vec::new());
        }
    };
    let templated: Vec<StoragePoolStatus> = pools
        .templated
        .iter()
        .map(|pool| {
            let mounting = mounted.get(&pool.name).cloned().unwrap_or_default();
            pool_mounters::pool_status(pool, &mounting)
        })
        .collect();
    if !driver_ready {
        return (Outcome::Deploying, templated);
    }
    let all_mounted = templated.iter().all(|p| p.phase == pool_phase::READY);
    let statuses = pools
        .wanted
        .iter()
        .map(|p| ready_pool(&p.name))
        .chain(templated)
        .collect();
    let outcome = if all_mounted {
        Outcome::Healthy
    } else {
        Outcome::Deploying
    };
    (outcome, statuses)
}

/// The `pvcTemplate` pools of `crs` that a cluster can serve (oldest CR first, a name
/// once).
fn templated_pools(crs: &[HostPathProvisioner]) -> Vec<StoragePool> {
    let mut pools: Vec<StoragePool> = Vec::new();
    for pool in crs
        .iter()
        .filter_map(|cr| pools_of(cr).ok())
        .flat_map(|p| p.templated)
    {
        if !pools.iter().any(|p| p.name == pool.name) {
            pools.push(pool);
        }
    }
    pools
}

/// Runs the operator for every HostPathProvisioner CR, deploying `image` into `namespace`.
pub async fn run(client: Client, namespace: String, image: String) {
    let managed = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGER}"));
    let crs: Api<HostPathProvisioner> = Api::all(client.clone());
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
    let mounters: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let cleanups: Api<Job> = Api::namespaced(client.clone(), &namespace);
    let changes = futures_util::stream::select(
        futures_util::stream::select(
            changes::of(crs, watcher::Config::default()),
            changes::of(daemonsets, managed.clone()),
        ),
        futures_util::stream::select(
            changes::of(mounters, managed.clone()),
            changes::of(cleanups, managed),
        ),
    );
    changes::run_on_changes(changes, RESYNC, || async {
        if let Err(err) = reconcile(&client, &namespace, &image).await {
            tracing::warn!(%err, "reconciling HostPathProvisioner CRs");
        }
    })
    .await;
}

async fn reconcile(client: &Client, namespace: &str, image: &str) -> Result<(), kube::Error> {
    let api: Api<HostPathProvisioner> = Api::all(client.clone());
    let mut crs = api.list(&ListParams::default()).await?.items;
    crs.sort_by_key(|cr| (cr.metadata.creation_timestamp.clone(), cr.name_any()));
    let (deleting, live): (Vec<_>, Vec<_>) = crs
        .into_iter()
        .partition(|cr| cr.metadata.deletion_timestamp.is_some());
    let mut objects = STRATEGY.render(namespace, image);
    if live.is_empty() {
        if deleting.iter().any(|cr| finalizer::has(cr, FINALIZER)) {
            // The driver first, so that nothing serves the pools when they are unmounted;
            // the CRs stay until every pool's mount is off its node.
            deployer::remove_all(client, &objects).await?;
            if retire_mounters(client, namespace, &[], &[], true).await? > 0 {
                return Ok(());
            }
            tracing::info!(%namespace, "removed the hostpath provisioner");
        }
    } else {
        for cr in &live {
            finalizer::set(&api, cr, FINALIZER, true).await?;
        }
        let templated = templated_pools(&live);
        // The oldest CR's workload placement decides where the driver (and so the pools) run.
        let workload = live[0].spec.workload.clone().unwrap_or_default();
        let (mounted, mounters) =
            mount_templated(client, namespace, image, &templated, &workload).await?;
        let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
        let served_now = daemonsets
            .get_opt(DAEMONSET)
            .await?
            .map(|d| served_pool_names(&d))
            .unwrap_or_default();
        let mut pools = cluster_pools(&live);
        pools.extend(
            templated
                .iter()
                // Served once mounted on every node, and from then on: a mounter restarting
                // or a node joining must not restart every driver pod without the pool.
                .filter(|p| {
                    served_now.contains(&p.name)
                        || mounted.get(&p.name).is_some_and(PoolMounting::everywhere)
                })
                .filter(|p| !pools.iter().any(|served| served.name == p.name))
                .map(|p| Pool {
                    name: p.name.clone(),
                    path: p.path.clone().into(),
                })
                .collect::<Vec<_>>(),
        );
        serve_pools(&mut objects, &pools);
        let workload = serde_json::to_value(&workload).unwrap_or_default();
        place(&mut objects, &[DAEMONSET], &workload);
        deployer::ensure_all(client, MANAGER, &objects).await?;
        let driver = workloads::observe(
            client,
            namespace,
            &[],
            workloads::DeploymentRule::AllReplicas,
            &[DAEMONSET],
        )
        .await?;
        let driver_ready = driver.iter().all(|w| w.ready);
        for cr in &live {
            write_status(&api, cr, driver_ready, &mounted).await?;
        }
        // A pool no longer wanted is unmounted once the driver, rolled out, serves it no more.
        let wanted = wanted_pool_labels(&live);
        let driver_now = daemonsets.get_opt(DAEMONSET).await?;
        let rolled_out = driver_now.as_ref().is_some_and(rolled_out);
        retire_mounters(client, namespace, &mounters, &wanted, rolled_out).await?;
    }
    for cr in &deleting {
        finalizer::remove_from_latest(&api, cr, FINALIZER).await?;
    }
    Ok(())
}

/// Puts the claims and mounters of `templated` on every node (cancelling any cleanup of
/// theirs still pending), and says how far each pool is mounted and which mounters it
/// wants.
async fn mount_templated(
    client: &Client,
    namespace: &str,
    image: &str,
    templated: &[StoragePool],
    placement: &NodePlacement,
) -> Result<(Mounted, Vec<String>), kube::Error> {
    let nodes = pool_mounters::driver_nodes(
        &Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items,
        placement,
    );
    let spec = pool_mounters::MounterSpec {
        namespace,
        image,
        manager: MANAGER,
        tolerations: placement.tolerations.as_deref().unwrap_or_default(),
    };
    let objects = pool_mounters::desired(templated, &nodes, &spec);
    let names: Vec<String> = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    cancel_cleanups(client, namespace, &names).await?;
    deployer::ensure_all(client, MANAGER, &objects).await?;
    let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let mut mounted = Mounted::new();
    for pool in templated {
        let pool_objects: Vec<String> = nodes
            .iter()
            .map(|node| pool_mounters::object_name(&pool.name, node))
            .collect();
        let refs: Vec<&str> = pool_objects.iter().map(String::as_str).collect();
        let observed = workloads::observe(
            client,
            namespace,
            &refs,
            workloads::DeploymentRule::AnyReplica,
            &[],
        )
        .await?;
        let ready = observed.iter().filter(|w| w.ready).count();
        let mut claims = Vec::new();
        for name in &pool_objects {
            if let Some(claim) = claims_api.get_opt(name).await? {
                claims.push(super::claims::claim_status(&claim));
            }
        }
        let mounting = PoolMounting {
            desired: nodes.len(),
            ready,
            claims,
        };
        mounted.insert(pool.name.clone(), mounting);
    }
    Ok((mounted, names))
}

/// Takes the pool mounters of `namespace` but `keep` away, and says how many are left. A
/// mounter of a pool still wanted (its pool label among `wanted`) is on a node the driver
/// no longer runs on (gone, relabelled, tainted): it goes, its mount stays. One
/// of a pool no longer wanted goes only once its cleanup Job has taken the mount off its
/// node, and that Job runs only when `may_unmount` (nothing serves the pool any more); the
/// mounter keeps the claim attached until then.
async fn retire_mounters(
    client: &Client,
    namespace: &str,
    keep: &[String],
    wanted: &[String],
    may_unmount: bool,
) -> Result<usize, kube::Error> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{MANAGED_BY_LABEL}={MANAGER},{}", super::claims::POOL_LABEL);
    let mut left = 0;
    for deployment in deployments
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let name = deployment.name_any();
        if keep.contains(&name) {
            continue;
        }
        let pool = deployment.labels().get(super::claims::POOL_LABEL).cloned();
        if pool.is_some_and(|p| wanted.contains(&p)) {
            tracing::info!(%name, "removing a storage pool's mounter from a node the driver left");
            crate::kit::delete_ignoring_missing(&deployments, &name).await?;
            continue;
        }
        let mounter = serde_json::to_value(&deployment).map_err(kube::Error::SerdeError)?;
        let Some(job) = pool_mounters::cleanup_job(&mounter) else {
            crate::kit::delete_ignoring_missing(&deployments, &name).await?;
            continue;
        };
        if !may_unmount {
            left += 1;
            continue;
        }
        let job_name = job["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match jobs.get_opt(&job_name).await? {
            None => {
                tracing::info!(%name, "unmounting a removed storage pool on its node");
                deployer::ensure_all(client, MANAGER, &[job]).await?;
                left += 1;
            }
            Some(done) if succeeded(&done) => {
                tracing::info!(%name, "removing a storage pool's mounter, its pool unmounted");
                crate::kit::delete_ignoring_missing(&deployments, &name).await?;
                delete_job(&jobs, &job_name).await?;
            }
            Some(_) => left += 1,
        }
    }
    Ok(left)
}

/// The pool labels of every pool the live CRs name, valid or not: a CR with a mistake must
/// not make its pools go.
fn wanted_pool_labels(live: &[HostPathProvisioner]) -> Vec<String> {
    live.iter()
        .flat_map(|cr| cr.spec.storage_pools.iter().flatten())
        .map(pool_mounters::pool_label)
        .collect()
}

/// Whether every pod of `daemonset` runs its current spec and is ready: only then has a pool
/// taken out of its flags stopped being served everywhere.
fn rolled_out(daemonset: &DaemonSet) -> bool {
    let generation = daemonset.metadata.generation.unwrap_or(0);
    daemonset.status.as_ref().is_some_and(|s| {
        s.observed_generation.unwrap_or(0) >= generation
            && s.updated_number_scheduled.unwrap_or(0) == s.desired_number_scheduled
            && s.number_ready == s.desired_number_scheduled
    })
}

fn succeeded(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.succeeded)
        .is_some_and(|n| n > 0)
}

/// Deletes Job `name` with its pods (a Job's own default would leave them).
async fn delete_job(jobs: &Api<Job>, name: &str) -> Result<(), kube::Error> {
    match jobs.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(err),
    }
}

/// Deletes the cleanup Jobs of `mounters` (a pool wanted again): one still to run would
/// unmount the pool under its new mounter.
async fn cancel_cleanups(
    client: &Client,
    namespace: &str,
    mounters: &[String],
) -> Result<(), kube::Error> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{MANAGED_BY_LABEL}={MANAGER},{}", super::claims::POOL_LABEL);
    for job in jobs
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let name = job.name_any();
        if mounters
            .iter()
            .any(|m| pool_mounters::cleanup_job_name(m) == name)
        {
            tracing::info!(%name, "cancelling the cleanup of a storage pool wanted again");
            delete_job(&jobs, &name).await?;
        }
    }
    Ok(())
}

async fn write_status(
    api: &Api<HostPathProvisioner>,
    cr: &HostPathProvisioner,
    driver_ready: bool,
    mounted: &Mounted,
) -> Result<(), kube::Error> {
    let (outcome, ready) = outcome_of(cr, driver_ready, mounted);
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = status_for(cr.status.as_ref(), &ready, &outcome, VERSION, &now);
    if cr.status.as_ref() != Some(&status) {
        patch_status(api, &cr.name_any(), &status).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cr(name: &str, spec: Value) -> HostPathProvisioner {
        serde_json::from_value(json!({
            "apiVersion": "hostpathprovisioner.kubevirt.io/v1beta1",
            "kind": "HostPathProvisioner",
            "metadata": {"name": name},
            "spec": spec,
        }))
        .expect("a HostPathProvisioner")
    }

    #[test]
    fn the_daemonset_serves_the_crs_path_pools_oldest_first() {
        let crs = [
            cr(
                "a",
                json!({"storagePools": [{"name": "local", "path": "/var/hpvolumes"},
                                        {"name": "fast", "path": "/mnt/fast"}]}),
            ),
            cr(
                "b",
                json!({"storagePools": [{"name": "fast", "path": "/elsewhere"}],
                       "pathConfig": null}),
            ),
        ];
        let pools = cluster_pools(&crs);
        let names: Vec<_> = pools
            .iter()
            .map(|p| (p.name.as_str(), p.path.display().to_string()))
            .collect();
        assert_eq!(
            names,
            [
                ("local", "/var/hpvolumes".into()),
                ("fast", "/mnt/fast".into())
            ]
        );
        let mut objects = STRATEGY.render("hpp", "registry.example/fv:1");
        serve_pools(&mut objects, &pools);
        let daemonset = objects
            .iter()
            .find(|o| o["kind"] == "DaemonSet")
            .expect("the DaemonSet");
        let spec = &daemonset["spec"]["template"]["spec"];
        let driver = &spec["containers"][0];
        assert_eq!(driver["image"], "registry.example/fv:1");
        let pool_args: Vec<&str> = driver["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .filter(|a| a.starts_with("--pool="))
            .collect();
        assert_eq!(
            pool_args,
            ["--pool=local=/var/hpvolumes", "--pool=fast=/mnt/fast"]
        );
        let typed: DaemonSet = serde_json::from_value(daemonset.clone()).expect("a DaemonSet");
        assert_eq!(served_pool_names(&typed), ["local", "fast"]);
        let mounted: Vec<&Value> = driver["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .filter(|m| is_pool_volume(m))
            .map(|m| &m["mountPath"])
            .collect();
        assert_eq!(mounted, [&json!("/var/hpvolumes"), &json!("/mnt/fast")]);
        let host_paths: Vec<&Value> = spec["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .filter(|v| is_pool_volume(v))
            .map(|v| &v["hostPath"]["path"])
            .collect();
        assert_eq!(host_paths, mounted);
        // The StorageClass is the user's, not the operator's.
        assert!(objects.iter().all(|o| o["kind"] != "StorageClass"));
    }

    #[test]
    fn the_pools_of_an_invalid_cr_stay_wanted() {
        let invalid = cr(
            "bad",
            json!({"pathConfig": {"path": "/p"}, "storagePools": [{"name": "pvc", "path": "/v",
                "pvcTemplate": {"resources": {"requests": {"storage": "1Gi"}}}}]}),
        );
        assert!(pools_of(&invalid).is_err(), "the CR fails validation");
        let valid = cr(
            "good",
            json!({"storagePools": [{"name": "a", "path": "/a"}]}),
        );
        assert_eq!(wanted_pool_labels(&[valid, invalid]), ["a-hpp", "pvc-hpp"]);
    }

    #[test]
    fn a_pool_leaves_the_driver_once_every_pod_runs_the_new_spec() {
        let daemonset = |generation: i64, status: Value| -> DaemonSet {
            serde_json::from_value(
                json!({"metadata": {"generation": generation}, "status": status}),
            )
            .expect("a DaemonSet")
        };
        let all = json!({"observedGeneration": 2, "desiredNumberScheduled": 3,
                         "updatedNumberScheduled": 3, "numberReady": 3,
                         "currentNumberScheduled": 3, "numberMisscheduled": 0});
        assert!(rolled_out(&daemonset(2, all.clone())));
        assert!(
            !rolled_out(&daemonset(3, all.clone())),
            "the new spec not seen yet"
        );
        let mut old_pods = all.clone();
        old_pods["updatedNumberScheduled"] = json!(2);
        assert!(
            !rolled_out(&daemonset(2, old_pods)),
            "a pod still runs the old spec"
        );
        let mut unready = all;
        unready["numberReady"] = json!(2);
        assert!(!rolled_out(&daemonset(2, unready)));
    }

    #[test]
    fn template_pools_are_progressing_until_mounted_on_every_node() {
        let templated = cr(
            "t",
            json!({"storagePools": [{"name": "a", "path": "/a"}, {"name": "pvc", "path": "/p",
                "pvcTemplate": {"resources": {"requests": {"storage": "1Gi"}}}}]}),
        );
        let mounting = |desired, ready| PoolMounting {
            desired,
            ready,
            claims: Vec::new(),
        };
        let halfway = Mounted::from([("pvc".to_owned(), mounting(2, 1))]);
        let (outcome, pools) = outcome_of(&templated, true, &halfway);
        assert_eq!(outcome, Outcome::Deploying);
        let phases: Vec<(&str, &str)> = pools
            .iter()
            .map(|p| (p.name.as_str(), p.phase.as_str()))
            .collect();
        assert_eq!(phases, [("a", "Ready"), ("pvc", "Mounting")]);
        let everywhere = Mounted::from([("pvc".to_owned(), mounting(2, 2))]);
        let (outcome, pools) = outcome_of(&templated, true, &everywhere);
        assert_eq!(outcome, Outcome::Healthy);
        assert!(pools.iter().all(|p| p.phase == "Ready"), "{pools:?}");
        let plain = cr("p", json!({"storagePools": [{"name": "a", "path": "/a"}]}));
        assert_eq!(
            outcome_of(&plain, false, &Mounted::new()).0,
            Outcome::Deploying
        );
        assert_eq!(
            outcome_of(&plain, true, &Mounted::new()).0,
            Outcome::Healthy
        );
    }
}
