//! `ferrovirt controller` as the Deployment in `deploy/operators/` runs it: a separate process
//! that finds its API server through KUBECONFIG (here the embedded one, holding the CRDs of
//! `deploy/crds/` as a cluster would), acts as the service account of
//! `deploy/operators/rbac.yaml` under that server's RBAC, and reconciles what it watches.

use ferrovirt_tests::kubectl::Kubectl;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use api::cdi::{DataSource, StorageProfile};
use api::kubevirt::cluster_config::feature_gates as kubevirt_feature_gates;
use ferrovirt_tests::TempDir;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use standalone::apiserver::{ApiServer, ApiServerConfig};

const LIMIT: Duration = Duration::from_secs(30);

/// Polls `check` until it gives a value, or panics naming `what`.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + LIMIT;
    while Instant::now() < deadline {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what} did not happen within {LIMIT:?}");
}

/// Runs kubectl with `kubeconfig`. (Async: the API server shares this test's runtime.)
async fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) {
    Kubectl::new(kubeconfig).ok_async(args, None).await;
}

fn ready_reason(ds: &DataSource) -> Option<String> {
    ds.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .reason
        .clone()
}

#[tokio::test]
async fn the_controller_command_reconciles_against_the_api_server_of_its_kubeconfig() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = TempDir::new("controller");
    let server = start_api_server(&dir).await;
    let client = standalone::control_plane::client_for(&server.kubeconfig)
        .await
        .expect("a client");
    // The controller runs as the service account of deploy/operators/, with only what its
    // ClusterRole grants: a call the RBAC misses fails and the reconciles below never happen.
    let rbac = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/operators/rbac.yaml");
    kubectl(&server.kubeconfig, &["apply", "-f", rbac]).await;
    let admin = std::fs::read_to_string(&server.kubeconfig).expect("reading the kubeconfig");
    let impersonating = admin.replacen(
        "  user:\n",
        "  user:\n    as: system:serviceaccount:cdi:ferrovirt-controller\n",
        1,
    );
    assert_ne!(admin, impersonating, "the kubeconfig has a user");
    let as_controller = dir.join("controller-kubeconfig");
    std::fs::write(&as_controller, impersonating).expect("writing the kubeconfig");
    let _controller = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .arg("controller")
        .env("KUBECONFIG", &as_controller)
        .env("RUST_LOG", "info")
        .kill_on_drop(true)
        .spawn()
        .expect("starting ferrovirt controller");

    // StorageProfile controller: a profile for the hostpath class, with its capabilities.
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "hostpath-csi"},
        "provisioner": "kubevirt.io.hostpath-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .expect("a StorageClass");
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("creating the StorageClass");
    let profiles: Api<StorageProfile> = Api::all(client.clone());
    let sets = eventually("a StorageProfile for hostpath-csi", || async {
        profiles
            .get_opt("hostpath-csi")
            .await
            .ok()??
            .status?
            .claim_property_sets
    })
    .await;
    assert!(!sets.is_empty());

    // DataSource controller: NotFound until the PVC exists, then Ready.
    let sources: Api<DataSource> = Api::namespaced(client.clone(), "default");
    let ds: DataSource = serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataSource",
        "metadata": {"name": "golden"},
        "spec": {"source": {"pvc": {"namespace": "default", "name": "golden-disk"}}},
    }))
    .expect("a DataSource");
    sources
        .create(&PostParams::default(), &ds)
        .await
        .expect("creating the DataSource");
    let reason_is = |wanted: &'static str| {
        let sources = sources.clone();
        move || {
            let sources = sources.clone();
            async move {
                let ds = sources.get("golden").await.ok()?;
                (ready_reason(&ds)? == wanted).then_some(())
            }
        }
    };
    eventually("DataSource NotFound", reason_is("NotFound")).await;
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "golden-disk"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }))
    .expect("a PVC");
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pvc)
        .await
        .expect("creating the PVC");
    eventually("DataSource Ready", reason_is("Ready")).await;
    server.stop();
}

/// `kubectl get ARGS -o json` with `kubeconfig`, or `None` when it fails (not found).
async fn kubectl_json(kubeconfig: &std::path::Path, args: &[&str]) -> Option<serde_json::Value> {
    let mut all = vec!["get"];
    all.extend(args);
    Kubectl::new(kubeconfig).json_async(&all).await
}

/// The embedded API server alone, holding the CRDs of `deploy/crds/` as a cluster would.
async fn start_api_server(dir: &TempDir) -> ApiServer {
    let crds = api::crds::deployed()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).expect("a CRD as JSON"))
        .collect();
    let server = ApiServer::start(ApiServerConfig {
        data_dir: dir.join("data"),
        listen: "127.0.0.1:0".parse().expect("an address"),
        crds,
        admission: Vec::new(),
        virtual_creates: HashMap::new(),
    })
    .await
    .expect("the API server starts");
    // Standing for kube-apiserver, which would ask hco-webhook's /convert (tested over TLS
    // in `the_hco_webhook_guards_the_hc_on_a_cluster`): the same conversion, in process.
    server.register_converter(standalone::apiserver::Converter::new(
        api::hco::GROUP,
        api::hco::conversion::KIND,
        api::hco::conversion::webhook,
    ));
    server
}

/// `ferrovirt OPERATOR --image IMAGE` as `deploy/OPERATOR/operator.yaml` runs it: that file
/// applied but its Deployment (the process stands for its pod), the process acting as the
/// service account `account` ("namespace:name") under the server's RBAC.
async fn start_operator(
    kubeconfig: &std::path::Path,
    dir: &TempDir,
    operator: &str,
    account: &str,
    image: &str,
) -> tokio::process::Child {
    let path = format!(
        "{}/../deploy/{operator}/operator.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let manifests = std::fs::read_to_string(&path).expect("the operator's manifests");
    let objects: Vec<&str> = manifests
        .split("\n---\n")
        .filter(|document| !document.contains("kind: Deployment"))
        .collect();
    let applied = dir.join(&format!("{operator}.yaml"));
    std::fs::write(&applied, objects.join("\n---\n")).expect("writing manifests");
    kubectl(kubeconfig, &["apply", "-f", &applied.display().to_string()]).await;
    spawn_as(
        kubeconfig,
        dir,
        account,
        &[operator, "--image", image],
        &[("POD_NAMESPACE", None)],
    )
}

/// `ferrovirt ARGS` standing for a component's pod: acting as the service account `account`
/// ("namespace:name") under the server's RBAC, with `env` set (a value) or removed (None).
fn spawn_as(
    kubeconfig: &std::path::Path,
    dir: &TempDir,
    account: &str,
    args: &[&str],
    env: &[(&str, Option<&str>)],
) -> tokio::process::Child {
    let admin = std::fs::read_to_string(kubeconfig).expect("reading the kubeconfig");
    let impersonating = admin.replacen(
        "  user:\n",
        &format!("  user:\n    as: system:serviceaccount:{account}\n"),
        1,
    );
    assert_ne!(admin, impersonating, "the kubeconfig has a user");
    let as_account = dir.join(&format!("{}-kubeconfig", account.replace(':', "-")));
    std::fs::write(&as_account, impersonating).expect("writing the kubeconfig");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferrovirt"));
    command
        .args(args)
        .env("KUBECONFIG", &as_account)
        .env("RUST_LOG", "info")
        .kill_on_drop(true);
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    command.spawn().expect("starting the component")
}

/// `ferrovirt COMMAND --listen 127.0.0.1:PORT` on a free port, as `account`
/// ("namespace:name") in its own namespace, as its Deployment runs it; with the port.
fn spawn_server_as(
    kubeconfig: &std::path::Path,
    dir: &TempDir,
    account: &str,
    command: &[&str],
) -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let namespace = account.split(':').next().unwrap_or_default();
    let env = [("POD_NAMESPACE", Some(namespace))];
    let args: Vec<&str> = command
        .iter()
        .copied()
        .chain(["--listen", &listen])
        .collect();
    let child = spawn_as(kubeconfig, dir, account, &args, &env);
    (child, port)
}

/// cdi-operator as deploy/cdi-operator runs it: its own process under its service account.
/// Upstream's CDI CR deploys deploy/operators' controller and webhook with the operator's
/// image (`Deploying` until their Deployments are ready, then `Deployed`), its
/// `spec.config` becomes the CDIConfig's spec, a second CR is put in `Error`, and deleting
/// the CR removes the components first.
#[tokio::test]
async fn the_cdi_operator_deploys_the_components_for_a_cdi_cr_and_removes_them_with_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = TempDir::new("cdi-operator");
    let server = start_api_server(&dir).await;
    let kubeconfig = server.kubeconfig.clone();
    let image = "registry.example/ferrovirt/ferrovirt:test";
    let _operator =
        start_operator(&kubeconfig, &dir, "cdi-operator", "cdi:cdi-operator", image).await;

    // Upstream's cdi-cr.yaml.
    let cr = dir.join("cdi-cr.yaml");
    std::fs::write(
        &cr,
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: CDI\nmetadata:\n  name: cdi\nspec:\n  config:\n    \
         featureGates:\n    - HonorWaitForFirstConsumer\n  imagePullPolicy: IfNotPresent\n  infra:\n    \
         nodeSelector:\n      kubernetes.io/os: linux\n    tolerations:\n    - key: CriticalAddonsOnly\n      \
         operator: Exists\n  workload:\n    nodeSelector:\n      kubernetes.io/os: linux\n",
    )
    .expect("writing the CR");
    kubectl(&kubeconfig, &["apply", "-f", &cr.display().to_string()]).await;
    let deploying = eventually("the CDI CR Deploying", || async {
        let cdi = kubectl_json(&kubeconfig, &["cdi", "cdi"]).await?;
        (cdi["status"]["phase"] == "Deploying").then_some(cdi)
    })
    .await;
    assert_eq!(
        deploying["metadata"]["finalizers"],
        json!(["operator.cdi.kubevirt.io"])
    );
    for name in ["ferrovirt-controller", "ferrovirt-webhook"] {
        let deployment = kubectl_json(&kubeconfig, &["deployment", name, "-n", "cdi"])
            .await
            .unwrap_or_else(|| panic!("Deployment {name}"));
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], image, "{name}");
        assert_eq!(
            deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "cdi-operator"
        );
    }
    let controller = kubectl_json(
        &kubeconfig,
        &["deployment", "ferrovirt-controller", "-n", "cdi"],
    )
    .await
    .expect("the controller");
    let env = controller["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env")
        .clone();
    assert!(
        env.iter()
            .any(|e| e["name"] == "FERROVIRT_IMAGE" && e["value"] == image),
        "the importer pods get the operator's image: {env:?}"
    );
    let config = kubectl_json(&kubeconfig, &["cdiconfig", "config"])
        .await
        .expect("the CDIConfig");
    assert_eq!(
        config["spec"]["featureGates"],
        json!(["HonorWaitForFirstConsumer"])
    );

    // kube-controller-manager's part: the Deployments report ready replicas.
    for name in [
        "ferrovirt-controller",
        "ferrovirt-webhook",
        "cdi-uploadproxy",
    ] {
        kubectl(
            &kubeconfig,
            &[
                "patch",
                "deployment",
                name,
                "-n",
                "cdi",
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"replicas":1,"readyReplicas":1}}"#,
            ],
        )
        .await;
    }
    eventually("the CDI CR Deployed", || async {
        let cdi = kubectl_json(&kubeconfig, &["cdi", "cdi"]).await?;
        (cdi["status"]["phase"] == "Deployed").then_some(())
    })
    .await;

    // A Deployment deleted by hand comes back.
    kubectl(
        &kubeconfig,
        &["delete", "deployment", "ferrovirt-webhook", "-n", "cdi"],
    )
    .await;
    eventually("ferrovirt-webhook put back", || async {
        let deployment = kubectl_json(
            &kubeconfig,
            &["deployment", "ferrovirt-webhook", "-n", "cdi"],
        )
        .await?;
        (deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image).then_some(())
    })
    .await;

    // A second CDI CR is an error.
    let second = dir.join("second.yaml");
    std::fs::write(
        &second,
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: CDI\nmetadata:\n  name: second\nspec: {}\n",
    )
    .expect("writing the second CR");
    kubectl(&kubeconfig, &["apply", "-f", &second.display().to_string()]).await;
    eventually("the second CDI CR in Error", || async {
        let cdi = kubectl_json(&kubeconfig, &["cdi", "second"]).await?;
        (cdi["status"]["phase"] == "Error").then_some(())
    })
    .await;
    kubectl(&kubeconfig, &["delete", "cdi", "second"]).await;

    // Deleting the CR removes its components, then the CR.
    kubectl(&kubeconfig, &["delete", "cdi", "cdi", "--wait=false"]).await;
    eventually("the CDI CR gone", || async {
        kubectl_json(&kubeconfig, &["cdi", "cdi"])
            .await
            .is_none()
            .then_some(())
    })
    .await;
    for (kind, name) in [
        ("deployment", "ferrovirt-controller"),
        ("deployment", "ferrovirt-webhook"),
        (
            "mutatingwebhookconfiguration",
            "ferrovirt-datavolume-mutate",
        ),
        ("clusterrole", "ferrovirt-controller"),
    ] {
        let left = if kind == "deployment" {
            kubectl_json(&kubeconfig, &[kind, name, "-n", "cdi"]).await
        } else {
            kubectl_json(&kubeconfig, &[kind, name]).await
        };
        assert!(left.is_none(), "{kind} {name} is left");
    }
    server.stop();
}

/// The HostPathProvisioner `hostpath-provisioner` once its condition `type_` is True.
async fn hpp_with_condition_true(kubeconfig: &std::path::Path, type_: &str) -> serde_json::Value {
    eventually(&format!("the CR {type_}"), || async {
        let cr = kubectl_json(kubeconfig, &["hostpathprovisioner", "hostpath-provisioner"]).await?;
        let conditions = cr["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == type_ && c["status"] == "True")
            .then_some(cr)
    })
    .await
}

/// hostpath-provisioner-operator as deploy/hpp-operator runs it: its own process under its
/// service account. Upstream's CR with two path pools deploys the CSI driver's DaemonSet
/// serving both, with the operator's image; the CR is Progressing until the DaemonSet is
/// ready, then Available with both pools Ready. A `pvcTemplate` pool added to it gets a claim
/// and a mounter Deployment on the node, is Mounting (the CR Progressing) until the mounter
/// is ready, then Ready and served by the DaemonSet. Deleting the CR removes the driver and
/// the mounter and keeps the pool's claim.
#[tokio::test]
async fn the_hpp_operator_deploys_the_driver_with_the_crs_pools_and_removes_it_with_the_cr() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = TempDir::new("hpp-operator");
    let server = start_api_server(&dir).await;
    let kubeconfig = server.kubeconfig.clone();
    let image = "registry.example/ferrovirt/ferrovirt:test";
    let account = "ferrovirt:hostpath-provisioner-operator";
    let _operator = start_operator(&kubeconfig, &dir, "hpp-operator", account, image).await;
    // An object of the operator's namespace, if it exists.
    let in_ferrovirt = |kind: &'static str, name: &'static str| {
        let kubeconfig = &kubeconfig;
        async move { kubectl_json(kubeconfig, &[kind, name, "-n", "ferrovirt"]).await }
    };
    let cr = dir.join("hpp-cr.yaml");
    std::fs::write(
        &cr,
        "apiVersion: hostpathprovisioner.kubevirt.io/v1beta1\nkind: HostPathProvisioner\n\
         metadata:\n  name: hostpath-provisioner\nspec:\n  imagePullPolicy: Always\n  \
         storagePools:\n    - name: local\n      path: /var/hpvolumes\n    - name: fast\n      \
         path: /mnt/fast\n  workload:\n    nodeSelector:\n      kubernetes.io/os: linux\n",
    )
    .expect("writing the CR");
    kubectl(&kubeconfig, &["apply", "-f", &cr.display().to_string()]).await;
    let daemonset = eventually("the driver's DaemonSet", || async {
        in_ferrovirt("daemonset", "ferrovirt-csi-driver").await
    })
    .await;
    let driver = &daemonset["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(driver["image"], image);
    assert_eq!(
        daemonset["spec"]["template"]["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "linux"}),
        "the CR's workload placement"
    );
    let args: Vec<&str> = driver["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    assert!(args.contains(&"--pool=local=/var/hpvolumes"), "{args:?}");
    assert!(args.contains(&"--pool=fast=/mnt/fast"), "{args:?}");
    assert!(
        kubectl_json(
            &kubeconfig,
            &["csidriver", "kubevirt.io.hostpath-provisioner"]
        )
        .await
        .is_some()
    );
    let progressing = hpp_with_condition_true(&kubeconfig, "Progressing").await;
    assert_eq!(
        progressing["metadata"]["finalizers"],
        json!(["finalizer.delete.hostpath-provisioner"])
    );

    // kube-controller-manager's part: the driver runs ready on the one node.
    report_driver_rolled_out(&kubeconfig).await;
    let available = hpp_with_condition_true(&kubeconfig, "Available").await;
    let ready = |name: &str| (name.to_owned(), "Ready".to_owned());
    assert_eq!(pool_phases(&available), [ready("fast"), ready("local")]);

    // A pvcTemplate pool: a claim and a mounter on the node, Ready once the mounter is.
    let node = dir.join("node.json");
    std::fs::write(
        &node,
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "node-a", "labels": {"kubernetes.io/os": "linux"}}})
        .to_string(),
    )
    .expect("writing the Node");
    kubectl(&kubeconfig, &["apply", "-f", &node.display().to_string()]).await;
    kubectl(
        &kubeconfig,
        &[
            "patch", "hostpathprovisioner", "hostpath-provisioner", "--type=json", "-p",
            r#"[{"op":"add","path":"/spec/storagePools/-","value":{"name":"claimed","path":"/var/claimed","pvcTemplate":{"storageClassName":"ceph","accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"5Gi"}}}}}]"#,
        ],
    )
    .await;
    let mounter = eventually("the pool's mounter on node-a", || {
        in_ferrovirt("deployment", "hpp-pool-claimed-node-a")
    })
    .await;
    let container = &mounter["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], image);
    assert_eq!(
        container["args"],
        json!([
            "hpp-pool-mounter",
            "--source",
            "/source",
            "--claim",
            "hpp-pool-claimed-node-a",
            "--target",
            "/var/claimed",
            "--host-root",
            "/host"
        ])
    );
    let claim = in_ferrovirt("pvc", "hpp-pool-claimed-node-a")
        .await
        .expect("the pool's claim on node-a");
    assert_eq!(claim["spec"]["storageClassName"], "ceph");
    let mounting = eventually("the pool Mounting", || async {
        let cr = kubectl_json(
            &kubeconfig,
            &["hostpathprovisioner", "hostpath-provisioner"],
        )
        .await?;
        let mounting = ("claimed".to_owned(), "Mounting".to_owned());
        pool_phases(&cr).contains(&mounting).then_some(cr)
    })
    .await;
    assert!(condition_true(&mounting, "Progressing"), "{mounting:#}");
    report_ready(
        &kubeconfig,
        "ferrovirt",
        "deployment",
        "hpp-pool-claimed-node-a",
    )
    .await;
    let served = eventually("the pool Ready and served", || async {
        let cr = kubectl_json(
            &kubeconfig,
            &["hostpathprovisioner", "hostpath-provisioner"],
        )
        .await?;
        (condition_true(&cr, "Available") && pool_phases(&cr).contains(&ready("claimed")))
            .then_some(cr)
    })
    .await;
    assert_eq!(
        pool_phases(&served),
        [ready("claimed"), ready("fast"), ready("local")]
    );
    let claimed = served["status"]["storagePoolStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "claimed")
        .expect("the templated pool's status");
    assert_eq!(
        claimed["claimStatuses"][0]["name"], "hpp-pool-claimed-node-a",
        "{claimed:#}"
    );
    let daemonset = in_ferrovirt("daemonset", "ferrovirt-csi-driver")
        .await
        .expect("the DaemonSet");
    let args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--pool=claimed=/var/claimed"), "{args}");

    // A cordoned node keeps its driver pod (a DaemonSet's), and so keeps its mounter: the
    // claim under the pool's volumes stays attached. (A path pool added after the cordon
    // shows the operator has looked again since.)
    kubectl(&kubeconfig, &["cordon", "node-a"]).await;
    kubectl(
        &kubeconfig,
        &[
            "patch", "hostpathprovisioner", "hostpath-provisioner", "--type=json", "-p",
            r#"[{"op":"add","path":"/spec/storagePools/-","value":{"name":"later","path":"/var/later"}}]"#,
        ],
    )
    .await;
    eventually("the pool added after the cordon served", || async {
        let daemonset = in_ferrovirt("daemonset", "ferrovirt-csi-driver").await?;
        let args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        args.contains("--pool=later=/var/later").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        in_ferrovirt("deployment", "hpp-pool-claimed-node-a")
            .await
            .is_some(),
        "the mounter of a cordoned node stays"
    );
    kubectl(&kubeconfig, &["uncordon", "node-a"]).await;

    kubectl(
        &kubeconfig,
        &[
            "delete",
            "hostpathprovisioner",
            "hostpath-provisioner",
            "--wait=false",
        ],
    )
    .await;
    // The driver goes first; then each node's cleanup Job takes the pool's mount off, and
    // the mounter (and the CR) stay until it has.
    let cleanup = eventually("the cleanup Job of the pool's node", || async {
        in_ferrovirt("job", "hpp-pool-claimed-node-a-cleanup").await
    })
    .await;
    assert_unmounts_claimed_on_node_a(&cleanup);
    assert!(
        in_ferrovirt("daemonset", "ferrovirt-csi-driver")
            .await
            .is_none(),
        "nothing serves the pool while it is unmounted"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        in_ferrovirt("deployment", "hpp-pool-claimed-node-a")
            .await
            .is_some(),
        "the mounter holds the claim until the pool is unmounted"
    );
    report_cleanup_succeeded(&kubeconfig).await;
    eventually("the CR gone", || async {
        kubectl_json(
            &kubeconfig,
            &["hostpathprovisioner", "hostpath-provisioner"],
        )
        .await
        .is_none()
        .then_some(())
    })
    .await;
    assert!(
        in_ferrovirt("daemonset", "ferrovirt-csi-driver")
            .await
            .is_none()
    );
    assert!(
        kubectl_json(&kubeconfig, &["clusterrole", "ferrovirt-csi-driver"])
            .await
            .is_none()
    );
    assert!(
        in_ferrovirt("deployment", "hpp-pool-claimed-node-a")
            .await
            .is_none(),
        "the mounter is removed"
    );
    assert!(
        in_ferrovirt("pvc", "hpp-pool-claimed-node-a")
            .await
            .is_some(),
        "the claim holding the pool's volumes is kept"
    );
    assert!(
        in_ferrovirt("job", "hpp-pool-claimed-node-a-cleanup")
            .await
            .is_none(),
        "the finished cleanup Job is removed"
    );
    server.stop();
}

/// A `pvcTemplate` pool taken out of a live CR (its path pool staying Ready) leaves the
/// driver's DaemonSet at once, but its node's cleanup Job (`hpp-pool-mounter --unmount`)
/// comes only once the DaemonSet reports the new spec rolled out to every pod, the mounter
/// staying until then. The pool put back before the Job succeeded cancels the Job and keeps
/// the mounter, the DaemonSet serving the pool again; taken out again, its Job comes back
/// after the next rollout, and once it succeeded the mounter and the Job go and the claim
/// (the pool's data) stays.
#[tokio::test]
async fn a_pvc_template_pool_leaving_a_live_cr_is_unmounted_after_the_rollout_unless_it_returns() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = TempDir::new("hpp-pool-removal");
    let server = start_api_server(&dir).await;
    let kubeconfig = server.kubeconfig.clone();
    let image = "registry.example/ferrovirt/ferrovirt:test";
    let account = "ferrovirt:hostpath-provisioner-operator";
    let _operator = start_operator(&kubeconfig, &dir, "hpp-operator", account, image).await;
    let in_ferrovirt = |kind: &'static str, name: &'static str| {
        let kubeconfig = &kubeconfig;
        async move { kubectl_json(kubeconfig, &[kind, name, "-n", "ferrovirt"]).await }
    };
    // The driver container's args, once the DaemonSet exists.
    let driver_args = || async {
        let daemonset = in_ferrovirt("daemonset", "ferrovirt-csi-driver").await?;
        Some(daemonset["spec"]["template"]["spec"]["containers"][0]["args"].to_string())
    };
    let (mounter, job) = ("hpp-pool-claimed-node-a", "hpp-pool-claimed-node-a-cleanup");
    let served = "--pool=claimed=/var/claimed";
    let claimed = json!({"name": "claimed", "path": "/var/claimed", "pvcTemplate": {
        "storageClassName": "ceph", "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "5Gi"}}}});
    let objects = [
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "node-a", "labels": {"kubernetes.io/os": "linux"}}}),
        json!({"apiVersion": "hostpathprovisioner.kubevirt.io/v1beta1",
               "kind": "HostPathProvisioner", "metadata": {"name": "hostpath-provisioner"},
               "spec": {"imagePullPolicy": "Always",
                        "storagePools": [{"name": "local", "path": "/var/hpvolumes"}, claimed],
                        "workload": {"nodeSelector": {"kubernetes.io/os": "linux"}}}}),
    ];
    for (i, object) in objects.iter().enumerate() {
        let file = dir.join(&format!("object-{i}.json"));
        std::fs::write(&file, object.to_string()).expect("writing the object");
        kubectl(&kubeconfig, &["apply", "-f", &file.display().to_string()]).await;
    }
    let remove_claimed = r#"[{"op":"remove","path":"/spec/storagePools/1"}]"#;
    let add_claimed =
        json!([{"op": "add", "path": "/spec/storagePools/-", "value": claimed}]).to_string();
    let patch_cr = |patch: String| {
        let kubeconfig = &kubeconfig;
        async move {
            let args = [
                "patch",
                "hostpathprovisioner",
                "hostpath-provisioner",
                "--type=json",
                "-p",
                &patch,
            ];
            kubectl(kubeconfig, &args).await;
        }
    };

    // Ready: the mounter mounted on node-a, then the driver serving both pools rolled out.
    eventually("the pool's mounter on node-a", || {
        in_ferrovirt("deployment", mounter)
    })
    .await;
    report_ready(&kubeconfig, "ferrovirt", "deployment", mounter).await;
    eventually("the driver serving the templated pool", || async {
        driver_args().await.filter(|args| args.contains(served))
    })
    .await;
    report_driver_rolled_out(&kubeconfig).await;
    let ready = |name: &str| (name.to_owned(), "Ready".to_owned());
    eventually("the CR Available with both pools Ready", || async {
        let cr = kubectl_json(
            &kubeconfig,
            &["hostpathprovisioner", "hostpath-provisioner"],
        )
        .await?;
        let both = [ready("claimed"), ready("local")];
        (condition_true(&cr, "Available") && pool_phases(&cr) == both).then_some(())
    })
    .await;

    // The pool taken out: the driver drops it, but nothing unmounts it before the new spec
    // has rolled out (the status is rolled out but for the generation).
    patch_cr(remove_claimed.to_owned()).await;
    let args = eventually("the driver no longer serving the pool", || async {
        driver_args()
            .await
            .filter(|args| !args.contains("--pool=claimed="))
    })
    .await;
    assert!(args.contains("--pool=local=/var/hpvolumes"), "{args}");
    let daemonset = in_ferrovirt("daemonset", "ferrovirt-csi-driver")
        .await
        .expect("the DaemonSet");
    assert!(
        daemonset["metadata"]["generation"].as_i64()
            > daemonset["status"]["observedGeneration"].as_i64(),
        "the new spec is not rolled out yet: {:#}",
        daemonset["status"]
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        in_ferrovirt("job", job).await.is_none(),
        "no unmount while driver pods may still serve the pool"
    );
    assert!(
        in_ferrovirt("deployment", mounter).await.is_some(),
        "the mounter stays until the pool is unmounted"
    );

    // kube-controller-manager's part: the new spec rolled out; the node's cleanup Job comes.
    report_driver_rolled_out(&kubeconfig).await;
    let cleanup = eventually("the cleanup Job of the pool's node", || {
        in_ferrovirt("job", job)
    })
    .await;
    assert_unmounts_claimed_on_node_a(&cleanup);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        in_ferrovirt("deployment", mounter).await.is_some(),
        "the mounter stays until the Job has succeeded"
    );

    // The pool back before the Job succeeded: the Job is cancelled, the mounter kept, the
    // pool served again.
    patch_cr(add_claimed).await;
    eventually("the pending cleanup Job cancelled", || async {
        in_ferrovirt("job", job).await.is_none().then_some(())
    })
    .await;
    eventually("the driver serving the returning pool", || async {
        driver_args().await.filter(|args| args.contains(served))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        in_ferrovirt("deployment", mounter).await.is_some(),
        "the returning pool keeps its mounter"
    );
    assert!(
        in_ferrovirt("job", job).await.is_none(),
        "the cancelled Job does not come back"
    );

    // Out again: after the next rollout the Job comes again; once it succeeded the mounter
    // and the Job go, the claim stays.
    patch_cr(remove_claimed.to_owned()).await;
    eventually("the driver no longer serving the pool", || async {
        driver_args()
            .await
            .filter(|args| !args.contains("--pool=claimed="))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        in_ferrovirt("job", job).await.is_none(),
        "no unmount before the rollout, the second time either"
    );
    report_driver_rolled_out(&kubeconfig).await;
    let cleanup = eventually("the cleanup Job again", || in_ferrovirt("job", job)).await;
    assert_unmounts_claimed_on_node_a(&cleanup);
    report_cleanup_succeeded(&kubeconfig).await;
    eventually("the mounter removed", || async {
        in_ferrovirt("deployment", mounter)
            .await
            .is_none()
            .then_some(())
    })
    .await;
    eventually("the finished cleanup Job removed", || async {
        in_ferrovirt("job", job).await.is_none().then_some(())
    })
    .await;
    assert!(
        in_ferrovirt("pvc", mounter).await.is_some(),
        "the claim holding the pool's volumes is kept"
    );
    let cr = kubectl_json(
        &kubeconfig,
        &["hostpathprovisioner", "hostpath-provisioner"],
    )
    .await
    .expect("the CR");
    assert!(condition_true(&cr, "Available"), "{cr:#}");
    assert_eq!(pool_phases(&cr), [ready("local")], "{cr:#}");
    server.stop();
}

/// Whether `object`'s condition `type_` is True.
fn condition_true(object: &serde_json::Value, type_: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

/// Plays kube-controller-manager: `kind` (deployment or daemonset) `name` reports ready.
async fn report_ready(kubeconfig: &std::path::Path, namespace: &str, kind: &str, name: &str) {
    let generation = kubectl_json(kubeconfig, &[kind, name, "-n", namespace])
        .await
        .and_then(|object| object["metadata"]["generation"].as_i64())
        .unwrap_or(1);
    let status = if kind == "daemonset" {
        r#"{"status":{"desiredNumberScheduled":1,"numberReady":1,"currentNumberScheduled":1,"numberMisscheduled":0}}"#.to_owned()
    } else {
        format!(
            r#"{{"status":{{"replicas":1,"readyReplicas":1,"availableReplicas":1,"observedGeneration":{generation}}}}}"#
        )
    };
    kubectl(
        kubeconfig,
        &[
            "patch",
            kind,
            name,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
    )
    .await;
}

/// The (name, phase) of each pool in a HostPathProvisioner's status.
fn pool_phases(cr: &serde_json::Value) -> Vec<(String, String)> {
    cr["status"]["storagePoolStatuses"]
        .as_array()
        .expect("storagePoolStatuses")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_owned(),
                p["phase"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Plays kube-controller-manager: the HPP driver's DaemonSet runs its current spec ready on
/// the one node.
async fn report_driver_rolled_out(kubeconfig: &std::path::Path) {
    let generation = kubectl_json(
        kubeconfig,
        &["daemonset", "ferrovirt-csi-driver", "-n", "ferrovirt"],
    )
    .await
    .and_then(|daemonset| daemonset["metadata"]["generation"].as_i64())
    .expect("the DaemonSet's generation");
    let status = json!({"status": {"observedGeneration": generation,
        "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1,
        "numberReady": 1, "numberAvailable": 1, "numberMisscheduled": 0}})
    .to_string();
    let args = [
        "patch",
        "daemonset",
        "ferrovirt-csi-driver",
        "-n",
        "ferrovirt",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ];
    kubectl(kubeconfig, &args).await;
}

/// Plays kube-controller-manager: the cleanup Job of pool `claimed` on node-a succeeded.
async fn report_cleanup_succeeded(kubeconfig: &std::path::Path) {
    let args = [
        "patch",
        "job",
        "hpp-pool-claimed-node-a-cleanup",
        "-n",
        "ferrovirt",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"succeeded":1}}"#,
    ];
    kubectl(kubeconfig, &args).await;
}

/// Asserts that `job` takes pool `claimed` (at /var/claimed) off node-a.
fn assert_unmounts_claimed_on_node_a(job: &serde_json::Value) {
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["args"],
        json!([
            "hpp-pool-mounter",
            "--unmount",
            "--claim",
            "hpp-pool-claimed-node-a",
            "--target",
            "/var/claimed",
            "--host-root",
            "/host"
        ])
    );
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["values"],
        json!(["node-a"])
    );
}

/// `kubectl apply -f deploy/hco/` as the README gives it for a cluster, everything in HCO's
/// namespace, each operator then its own process under its service account (standing for
/// its Deployment's pod, which nothing runs here): upstream's HyperConverged becomes the KubeVirt, CDI,
/// NetworkAddonsConfig and SSP CRs, which virt-operator, cdi-operator, the network operator
/// and the SSP operator act on; once the components report ready the HC is Available and
/// ReconcileComplete; a feature gate turned off in the HC leaves the KubeVirt CR; deleting
/// the HC removes the operands and what they deployed.
#[tokio::test]
async fn deploy_hco_installs_the_operators_that_one_hyperconverged_configures() {
    const HCO_NS: &str = "kubevirt-hyperconverged";
    const KUBEVIRT: &str = "kubevirt-kubevirt-hyperconverged";
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = TempDir::new("hco-stack");
    let server = start_api_server(&dir).await;
    let kubeconfig = server.kubeconfig.clone();
    let image = "registry.example/ferrovirt/ferrovirt:test";
    let deploy = format!("{}/../deploy/hco/", env!("CARGO_MANIFEST_DIR"));
    kubectl(&kubeconfig, &["apply", "-f", &deploy]).await;
    let operand_namespace = Some(HCO_NS);
    let _operators = [
        (
            "kubevirt-hyperconverged:hyperconverged-cluster-operator",
            vec!["hco-operator", "--image", image],
            ("POD_NAMESPACE", Some(HCO_NS)),
        ),
        (
            "kubevirt-hyperconverged:ssp-operator",
            vec!["ssp-operator"],
            ("POD_NAMESPACE", Some(HCO_NS)),
        ),
        (
            "kubevirt-hyperconverged:cluster-network-addons-operator",
            vec!["network-operator", "--image", image],
            ("OPERAND_NAMESPACE", operand_namespace),
        ),
        (
            "kubevirt-hyperconverged:kubevirt-operator",
            vec![
                "virt-operator",
                "--image",
                image,
                "--webhook-listen",
                "127.0.0.1:0",
            ],
            ("POD_NAMESPACE", Some(HCO_NS)),
        ),
        (
            "kubevirt-hyperconverged:cdi-operator",
            vec!["cdi-operator", "--image", image],
            ("POD_NAMESPACE", Some(HCO_NS)),
        ),
    ]
    .map(|(account, args, env)| spawn_as(&kubeconfig, &dir, account, &args, &[env]));

    let cr = format!("{}/tests/data/hco.v1.cr.yaml", env!("CARGO_MANIFEST_DIR"));
    kubectl(&kubeconfig, &["apply", "-n", HCO_NS, "-f", &cr]).await;

    // The operands, with HCO's spec; each operator acts on its own.
    let kubevirt = eventually("the KubeVirt CR", || {
        kubectl_json(&kubeconfig, &["kubevirt", KUBEVIRT, "-n", HCO_NS])
    })
    .await;
    assert!(
        kubevirt_feature_gates(&kubevirt)
            .iter()
            .any(|g| g == "VideoConfig")
    );
    eventually("virt-api deployed with the operator's image", || async {
        let api = kubectl_json(&kubeconfig, &["deployment", "virt-api", "-n", HCO_NS]).await?;
        (api["spec"]["template"]["spec"]["containers"][0]["image"] == image).then_some(())
    })
    .await;
    eventually("CDI's controller deployed", || {
        kubectl_json(
            &kubeconfig,
            &["deployment", "ferrovirt-controller", "-n", HCO_NS],
        )
    })
    .await;
    eventually("the common templates", || {
        kubectl_json(
            &kubeconfig,
            &["template", "fedora-server-small", "-n", "openshift"],
        )
    })
    .await;
    // CNAO deploys kubemacpool's manager with its image, and is Progressing until it is up.
    const KUBEMACPOOL: &str = "kubemacpool-mac-controller-manager";
    let manager = eventually("kubemacpool's manager", || {
        kubectl_json(&kubeconfig, &["deployment", KUBEMACPOOL, "-n", HCO_NS])
    })
    .await;
    let manager_container = &manager["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(manager_container["image"], image);
    assert_eq!(manager_container["args"][0], "macpool");
    let progressing =
        format!("Deployment \"{HCO_NS}/{KUBEMACPOOL}\" is not yet scheduled on any nodes");
    let nac = eventually("NetworkAddonsConfig cluster Progressing", || async {
        let nac = kubectl_json(&kubeconfig, &["networkaddonsconfig", "cluster"]).await?;
        condition_true(&nac, "Progressing").then_some(nac)
    })
    .await;
    let conditions = nac["status"]["conditions"].as_array().expect("conditions");
    let of = |type_: &str| conditions.iter().find(|c| c["type"] == type_).cloned();
    assert_eq!(
        of("Progressing").expect("Progressing")["message"],
        progressing.as_str(),
        "{nac:#}"
    );
    assert_eq!(of("Available").expect("Available")["reason"], "Startup");
    // The manager as its Deployment runs it: under its account, it loads the pool and writes
    // its CA into the webhook configuration CNAO created.
    let port = |_| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
    };
    let [webhook_port, metrics_port] = [0, 1].map(port);
    let (listen, metrics) = (
        format!("127.0.0.1:{webhook_port}"),
        format!("127.0.0.1:{metrics_port}"),
    );
    let _kubemacpool = spawn_as(
        &kubeconfig,
        &dir,
        &format!("{HCO_NS}:kubemacpool-sa"),
        &[
            "macpool",
            "--wait-time",
            "300",
            "--listen",
            &listen,
            "--metrics-listen",
            &metrics,
        ],
        &[("POD_NAMESPACE", Some(HCO_NS))],
    );
    eventually("kubemacpool's CA in its webhook configuration", || async {
        let configuration = kubectl_json(
            &kubeconfig,
            &["mutatingwebhookconfiguration", "kubemacpool-mutator"],
        )
        .await?;
        configuration["webhooks"][0]["clientConfig"]["caBundle"]
            .as_str()
            .is_some_and(|ca| !ca.is_empty())
            .then_some(())
    })
    .await;
    eventually("kubemacpool ready (its pool loaded)", || async {
        let ready = tokio::process::Command::new("curl")
            .args(["-skf", &format!("https://{listen}/readyz")])
            .output()
            .await
            .ok()?;
        ready.status.success().then_some(())
    })
    .await;
    let download = eventually("the CLI download server", || {
        kubectl_json(
            &kubeconfig,
            &[
                "deployment",
                "hyperconverged-cluster-cli-download",
                "-n",
                HCO_NS,
            ],
        )
    })
    .await;
    assert_eq!(
        download["spec"]["template"]["spec"]["containers"][0]["image"],
        image
    );

    // The components come up; the HC aggregates the operands' Available.
    for (namespace, kind, name) in [
        (HCO_NS, "deployment", "virt-api"),
        (HCO_NS, "deployment", "virt-controller"),
        (HCO_NS, "daemonset", "virt-handler"),
        (HCO_NS, "deployment", "ferrovirt-controller"),
        (HCO_NS, "deployment", "ferrovirt-webhook"),
        (HCO_NS, "deployment", "cdi-uploadproxy"),
        (HCO_NS, "deployment", KUBEMACPOOL),
    ] {
        report_ready(&kubeconfig, namespace, kind, name).await;
    }
    eventually("NetworkAddonsConfig cluster Available", || async {
        let nac = kubectl_json(&kubeconfig, &["networkaddonsconfig", "cluster"]).await?;
        condition_true(&nac, "Available").then_some(())
    })
    .await;
    eventually("the HC Available and ReconcileComplete", || async {
        let hc = kubectl_json(&kubeconfig, &["hco", HCO_NS, "-n", HCO_NS]).await?;
        (condition_true(&hc, "Available") && condition_true(&hc, "ReconcileComplete")).then_some(())
    })
    .await;

    // The HC is the source of truth for the feature gates.
    kubectl(
        &kubeconfig,
        &[
            "patch",
            "hco",
            HCO_NS,
            "-n",
            HCO_NS,
            "--type=merge",
            "-p",
            r#"{"spec":{"featureGates":[{"name":"videoConfig","state":"Disabled"}]}}"#,
        ],
    )
    .await;
    eventually("VideoConfig gone from the KubeVirt CR", || async {
        let kubevirt = kubectl_json(&kubeconfig, &["kubevirt", KUBEVIRT, "-n", HCO_NS]).await?;
        (!kubevirt_feature_gates(&kubevirt)
            .iter()
            .any(|g| g == "VideoConfig"))
        .then_some(())
    })
    .await;

    // Deleting the HC removes the operands, and with them what their operators deployed.
    kubectl(
        &kubeconfig,
        &["delete", "hco", HCO_NS, "-n", HCO_NS, "--wait=false"],
    )
    .await;
    for (what, args) in [
        ("the HC", vec!["hco", HCO_NS, "-n", HCO_NS]),
        ("the KubeVirt CR", vec!["kubevirt", KUBEVIRT, "-n", HCO_NS]),
        ("virt-api", vec!["deployment", "virt-api", "-n", HCO_NS]),
        ("the CDI CR", vec!["cdi", "cdi-kubevirt-hyperconverged"]),
        (
            "CDI's controller",
            vec!["deployment", "ferrovirt-controller", "-n", HCO_NS],
        ),
        (
            "the SSP CR",
            vec!["ssp", "ssp-kubevirt-hyperconverged", "-n", HCO_NS],
        ),
        (
            "the templates",
            vec!["template", "fedora-server-small", "-n", "openshift"],
        ),
        (
            "kubemacpool's manager",
            vec!["deployment", KUBEMACPOOL, "-n", HCO_NS],
        ),
        (
            "kubemacpool's webhook configuration",
            vec!["mutatingwebhookconfiguration", "kubemacpool-mutator"],
        ),
    ] {
        eventually(&format!("{what} removed"), || async {
            kubectl_json(&kubeconfig, &args)
                .await
                .is_none()
                .then_some(())
        })
        .await;
    }
    server.stop();
}

/// Applies `object` and sets its status phase `Deployed`, as its operator would.
async fn apply_deployed(kubeconfig: &std::path::Path, dir: &TempDir, object: &serde_json::Value) {
    let file = dir.join("deployed.json");
    std::fs::write(&file, object.to_string()).expect("writing the object");
    kubectl(kubeconfig, &["apply", "-f", &file.display().to_string()]).await;
    let kind = object["kind"].as_str().expect("a kind").to_lowercase();
    let name = object["metadata"]["name"].as_str().expect("a name");
    let deployed = r#"{"status":{"phase":"Deployed"}}"#;
    let mut patch = vec![
        "patch",
        &kind,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        deployed,
    ];
    if let Some(namespace) = object["metadata"]["namespace"].as_str() {
        patch.extend(["-n", namespace]);
    }
    kubectl(kubeconfig, &patch).await;
}

/// An AdmissionReview of `operation` on `object` (as `object`, or as `oldObject` for a
/// delete), of `group`/`resource` in `namespace`.
fn admission_review(
    uid: &str,
    operation: &str,
    (group, version, resource): (&str, &str, &str),
    namespace: &str,
    object: serde_json::Value,
    old: serde_json::Value,
) -> serde_json::Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "resource": {"group": group, "version": version, "resource": resource},
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
        },
    })
}

/// `ferrovirt hco-webhook` as deploy/hco-operator runs it, under its service account,
/// answering the AdmissionReviews its ValidatingWebhookConfiguration sends: an HC outside
/// HCO's namespace is refused with HCO's words; an update with a bad certConfig is refused
/// and one naming a missing operand too; deleting the HC is refused while a VM exists (its
/// KubeVirt CR Deployed with BlockUninstallIfWorkloadsExist) with virt-operator's message
/// inside HCO's, then while a DataVolume exists with CDI's; once the workloads are gone it
/// passes.
#[tokio::test]
async fn the_hco_webhook_guards_the_hc_on_a_cluster() {
    const HCO_NS: &str = "kubevirt-hyperconverged";
    const SERVICE: &str = "hyperconverged-cluster-webhook-service.kubevirt-hyperconverged.svc";
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = TempDir::new("hco-webhook");
    let server = start_api_server(&dir).await;
    let kubeconfig = server.kubeconfig.clone();
    let manifest = format!(
        "{}/../deploy/hco-operator/operator.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    kubectl(&kubeconfig, &["apply", "-f", &manifest]).await;
    // As HCO's, the webhook writes the CRD's whole conversion stanza, not only its CA.
    kubectl(
        &kubeconfig,
        &[
            "patch",
            "crd",
            "hyperconvergeds.hco.kubevirt.io",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/spec/conversion"}]"#,
        ],
    )
    .await;
    let (_webhook, port) = spawn_server_as(
        &kubeconfig,
        &dir,
        "kubevirt-hyperconverged:hyperconverged-cluster-webhook",
        &["hco-webhook"],
    );
    let bundle = eventually("the webhook's CA in its configuration", || async {
        let configuration = kubectl_json(
            &kubeconfig,
            &["validatingwebhookconfiguration", "validate-hco.kubevirt.io"],
        )
        .await?;
        let webhooks = configuration["webhooks"].as_array()?.clone();
        let bundles: Vec<&str> = webhooks
            .iter()
            .filter_map(|w| w["clientConfig"]["caBundle"].as_str())
            .collect();
        (bundles.len() == 1).then(|| bundles[0].to_owned())
    })
    .await;
    use base64::Engine as _;
    let bundle = base64::engine::general_purpose::STANDARD
        .decode(bundle)
        .expect("a base64 caBundle");
    let https = reqwest::Client::builder()
        .tls_certs_merge(reqwest::Certificate::from_pem_bundle(&bundle).expect("the CA"))
        .resolve(SERVICE, ([127, 0, 0, 1], port).into())
        .build()
        .expect("an HTTPS client");
    let ask = |path: &'static str, review: serde_json::Value| {
        let https = https.clone();
        async move {
            let url = format!("https://{SERVICE}:{port}{path}");
            post_admission_review(&https, &url, &review).await
        }
    };
    const HC: (&str, &str, &str) = ("hco.kubevirt.io", "v1beta1", "hyperconvergeds");
    const HC_PATH: &str = "/validate-hco-kubevirt-io-v1beta1-hyperconverged";
    // Upstream's example HC as JSON, through kubectl.
    let example = format!("{}/tests/data/hco.cr.yaml", env!("CARGO_MANIFEST_DIR"));
    let converted = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["create", "--dry-run=client", "-o", "json", "-f", &example])
        .output()
        .await
        .expect("running kubectl");
    let mut hc: serde_json::Value =
        serde_json::from_slice(&converted.stdout).expect("the example HC as JSON");
    hc["metadata"]["namespace"] = json!(HCO_NS);

    // Created outside HCO's namespace: refused as HCO refuses it.
    let mut elsewhere = hc.clone();
    elsewhere["metadata"]["namespace"] = json!("default");
    let answer = ask(
        HC_PATH,
        admission_review("1", "CREATE", HC, "default", elsewhere, json!(null)),
    )
    .await;
    assert_eq!(answer["allowed"], false, "{answer:#}");
    assert_eq!(
        answer["status"]["message"],
        "invalid namespace for v1beta1.HyperConverged - please use the kubevirt-hyperconverged namespace"
    );
    let answer = ask(
        HC_PATH,
        admission_review("2", "CREATE", HC, HCO_NS, hc.clone(), json!(null)),
    )
    .await;
    assert_eq!(answer["allowed"], true, "{answer:#}");

    // The webhook converts the HC for the API server (v1beta1 to the v1 it stores), under
    // the CA it keeps in the CRD's conversion stanza.
    let crd = eventually(
        "the webhook's CA in the CRD's conversion stanza",
        || async {
            let crd =
                kubectl_json(&kubeconfig, &["crd", "hyperconvergeds.hco.kubevirt.io"]).await?;
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]
                .is_string()
                .then_some(crd)
        },
    )
    .await;
    let conversion = &crd["spec"]["conversion"]["webhook"]["clientConfig"];
    assert_eq!(
        conversion["service"],
        json!({"namespace": HCO_NS, "name": "hyperconverged-cluster-webhook-service",
               "path": "/convert", "port": 443})
    );
    let crd_bundle = conversion["caBundle"]
        .as_str()
        .expect("a conversion caBundle");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(crd_bundle)
            .unwrap(),
        bundle
    );
    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c-1", "desiredAPIVersion": "hco.kubevirt.io/v1", "objects": [hc.clone()]}});
    let converted: serde_json::Value = https
        .post(format!("https://{SERVICE}:{port}/convert"))
        .json(&review)
        .send()
        .await
        .expect("the webhook converts")
        .json()
        .await
        .expect("a ConversionReview");
    let response = &converted["response"];
    assert_eq!(response["uid"], "c-1");
    assert_eq!(response["result"]["status"], "Success", "{converted:#}");
    let v1 = &response["convertedObjects"][0];
    assert_eq!(v1["apiVersion"], "hco.kubevirt.io/v1");
    assert_eq!(
        v1["spec"]["deployment"]["uninstallStrategy"],
        hc["spec"]["uninstallStrategy"]
    );

    // A second replica (or a rolling update's new pod) serves under the same CA, from the
    // Secret the first one made: the bundle in the configuration verifies it too.
    let (_second, second_port) = spawn_server_as(
        &kubeconfig,
        &dir,
        "kubevirt-hyperconverged:hyperconverged-cluster-webhook",
        &["hco-webhook"],
    );
    let answer: serde_json::Value = eventually("the second replica answering", || async {
        https
            .post(format!("https://{SERVICE}:{second_port}{HC_PATH}"))
            .json(&admission_review(
                "2b",
                "CREATE",
                HC,
                HCO_NS,
                hc.clone(),
                json!(null),
            ))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()
    })
    .await;
    assert_eq!(answer["response"]["allowed"], true, "{answer:#}");
    let secret = kubectl_json(&kubeconfig, &["secret", "hco-webhook-ca", "-n", HCO_NS])
        .await
        .expect("the CA's Secret");
    assert!(secret["data"]["tls.key"].is_string());

    // An update: its own checks first, then the operands it would change must exist.
    let mut bad_certs = hc.clone();
    bad_certs["spec"]["certConfig"]["ca"]["duration"] = json!("1h0m0s");
    let answer = ask(
        HC_PATH,
        admission_review("3", "UPDATE", HC, HCO_NS, bad_certs, hc.clone()),
    )
    .await;
    assert_eq!(answer["allowed"], false, "{answer:#}");
    assert!(
        answer["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("certConfig")),
        "{answer:#}"
    );
    let mut changed = hc.clone();
    changed["spec"]["featureGates"]["videoConfig"] = json!(false);
    let answer = ask(
        HC_PATH,
        admission_review("4", "UPDATE", HC, HCO_NS, changed, hc.clone()),
    )
    .await;
    assert_eq!(answer["allowed"], false, "{answer:#}");
    assert_eq!(answer["status"]["code"], 404, "{answer:#}");

    // HCO's KubeVirt, deployed with the blocking strategy, and a VM.
    let kubevirt = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": "kubevirt-kubevirt-hyperconverged", "namespace": HCO_NS,
                     "labels": {"app": "kubevirt-hyperconverged"}},
        "spec": {"uninstallStrategy": "BlockUninstallIfWorkloadsExist"},
    });
    apply_deployed(&kubeconfig, &dir, &kubevirt).await;
    let vm = dir.join("vm.yaml");
    std::fs::write(
        &vm,
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: guest\n  namespace: default\n\
         spec:\n  runStrategy: Halted\n  template:\n    spec:\n      domain:\n        devices: {}\n",
    )
    .expect("writing the VM");
    kubectl(&kubeconfig, &["apply", "-f", &vm.display().to_string()]).await;

    let virt_refusal = "Rejecting the uninstall request, since there are still Virtual Machines present. Either delete all KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt.";
    let answer = ask(
        HC_PATH,
        admission_review("6", "DELETE", HC, HCO_NS, json!(null), hc.clone()),
    )
    .await;
    assert_eq!(answer["allowed"], false, "{answer:#}");
    assert_eq!(
        answer["status"]["message"],
        format!(
            "admission webhook \"kubevirt-validator.kubevirt.io\" denied the request: {virt_refusal}"
        )
    );

    // Without the VM, a DataVolume blocks the deletion through HCO's CDI, in the words of
    // CDI's webhook.
    kubectl(&kubeconfig, &["delete", "vm", "guest", "-n", "default"]).await;
    let cdi = json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI",
        "metadata": {"name": "cdi-kubevirt-hyperconverged",
                     "labels": {"app": "kubevirt-hyperconverged"}},
        "spec": {"uninstallStrategy": "BlockUninstallIfWorkloadsExist"},
    });
    apply_deployed(&kubeconfig, &dir, &cdi).await;
    let dv = dir.join("dv.yaml");
    std::fs::write(
        &dv,
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: disk\n  namespace: default\n\
         spec:\n  source:\n    blank: {}\n  storage:\n    resources:\n      requests:\n        storage: 1Gi\n",
    )
    .expect("writing the DataVolume");
    kubectl(&kubeconfig, &["apply", "-f", &dv.display().to_string()]).await;
    let answer = ask(
        HC_PATH,
        admission_review("7", "DELETE", HC, HCO_NS, json!(null), hc.clone()),
    )
    .await;
    assert_eq!(answer["allowed"], false, "{answer:#}");
    assert_eq!(
        answer["status"]["message"],
        "admission webhook \"cdi-validate.cdi.kubevirt.io\" denied the request: rejecting the uninstall request, since there are still 1 DataVolumes present. Either delete all DataVolumes or change the uninstall strategy before uninstalling CDI"
    );

    // Without workloads, the deletion passes.
    kubectl(&kubeconfig, &["delete", "dv", "disk", "-n", "default"]).await;
    let answer = ask(
        HC_PATH,
        admission_review("8", "DELETE", HC, HCO_NS, json!(null), hc.clone()),
    )
    .await;
    assert_eq!(answer["allowed"], true, "{answer:#}");

    // The operands' own admission warnings reach the HC's review: with all four operands
    // there, a warning the API server sends back from the dry run of the KubeVirt CR (here
    // from a check registered in-process, as `ferrovirt up` registers its webhooks) is
    // passed on by the webhook.
    for operand in [
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI",
               "metadata": {"name": "cdi-kubevirt-hyperconverged"}, "spec": {}}),
        json!({"apiVersion": "networkaddonsoperator.network.kubevirt.io/v1", "kind": "NetworkAddonsConfig",
               "metadata": {"name": "cluster"}, "spec": {}}),
        json!({"apiVersion": "ssp.kubevirt.io/v1beta2", "kind": "SSP",
               "metadata": {"name": "ssp-kubevirt-hyperconverged", "namespace": HCO_NS},
               "spec": {"commonTemplates": {"namespace": "openshift"}}}),
    ] {
        let file = dir.join("operand.json");
        std::fs::write(&file, operand.to_string()).expect("writing an operand");
        kubectl(&kubeconfig, &["apply", "-f", &file.display().to_string()]).await;
    }
    const OPERAND_WARNING: &str = "spec.configuration: a warning from the KubeVirt CR's webhook";
    server.register_admission(standalone::apiserver::AdmissionPlugin::validating(
        "kubevirt-update-validator.kubevirt.io",
        ("kubevirt.io", "kubevirts"),
        &[standalone::apiserver::Operation::Update],
        Box::new(|_| Ok(vec![OPERAND_WARNING.to_owned()])),
    ));
    let mut changed = hc.clone();
    changed["spec"]["featureGates"]["downwardMetrics"] = json!(true);
    let answer = ask(
        HC_PATH,
        admission_review("12", "UPDATE", HC, HCO_NS, changed, hc.clone()),
    )
    .await;
    assert_eq!(answer["allowed"], true, "{answer:#}");
    assert_eq!(answer["warnings"], json!([OPERAND_WARNING]), "{answer:#}");

    // An operand's refusal keeps the warnings the API server sent with it: the webhook
    // before the refusing one, and the refusing one's own.
    const REFUSAL_WARNING: &str = "spec.configuration: a warning given with a refusal";
    server.register_admission(standalone::apiserver::AdmissionPlugin::validating(
        "refuses-with-a-warning.kubevirt.io",
        ("kubevirt.io", "kubevirts"),
        &[standalone::apiserver::Operation::Update],
        Box::new(|_| {
            Err(standalone::apiserver::Refusal {
                warnings: vec![REFUSAL_WARNING.to_owned()],
                ..standalone::apiserver::Refusal::new(422, "refused for the test")
            })
        }),
    ));
    let mut refused = hc.clone();
    refused["spec"]["featureGates"]["downwardMetrics"] = json!(true);
    let answer = ask(
        HC_PATH,
        admission_review("13", "UPDATE", HC, HCO_NS, refused, hc.clone()),
    )
    .await;
    assert_eq!(answer["allowed"], false, "{answer:#}");
    assert!(
        answer["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused for the test")),
        "{answer:#}"
    );
    assert_eq!(
        answer["warnings"],
        json!([OPERAND_WARNING, REFUSAL_WARNING]),
        "{answer:#}"
    );
    server.stop();
}

/// `ferrovirt webhook` as deploy/operators/webhook.yaml runs it (its own process under its
/// service account) is also cdi-apiserver: once the Service's endpoints name it (as
/// kube-controller-manager would), the embedded API server proxies the APIService
/// `v1beta1.upload.cdi.kubevirt.io` to it as kube-aggregator does, and `kubectl create` of an
/// UploadTokenRequest by a user the aggregated `cdi.kubevirt.io:upload` role lets create one
/// gets a token for the PVC, signed with the key of Secret `cdi/cdi-api-signing-key`; and
/// it guards the CDI CR's uninstall.
#[tokio::test]
async fn the_webhook_serves_upload_token_requests_behind_their_apiservice() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = TempDir::new("upload-token-api");
    let server = start_api_server(&dir).await;
    let kubeconfig = server.kubeconfig.clone();
    let deploy = format!("{}/../deploy/operators", env!("CARGO_MANIFEST_DIR"));
    for file in ["rbac.yaml", "webhook.yaml"] {
        kubectl(&kubeconfig, &["apply", "-f", &format!("{deploy}/{file}")]).await;
    }
    let (_webhook, port) =
        spawn_server_as(&kubeconfig, &dir, "cdi:ferrovirt-webhook", &["webhook"]);
    // kube-controller-manager's part: the Service's endpoints are the webhook's address.
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "ferrovirt-webhook", "namespace": "cdi"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": port}]}],
    });
    let service_port = format!(r#"{{"spec":{{"ports":[{{"port":443,"targetPort":{port}}}]}}}}"#);
    kubectl(
        &kubeconfig,
        &[
            "patch",
            "service",
            "ferrovirt-webhook",
            "-n",
            "cdi",
            "-p",
            &service_port,
        ],
    )
    .await;
    let applied = dir.join("endpoints.json");
    std::fs::write(&applied, endpoints.to_string()).expect("writing the endpoints");
    kubectl(
        &kubeconfig,
        &["apply", "-f", &applied.display().to_string()],
    )
    .await;
    eventually("the APIService Available", || async {
        let service = kubectl_json(
            &kubeconfig,
            &["apiservice", "v1beta1.upload.cdi.kubevirt.io"],
        )
        .await?;
        condition_true(&service, "Available").then_some(())
    })
    .await;

    // Alice may upload in her namespace.
    kubectl(&kubeconfig, &["create", "namespace", "team"]).await;
    kubectl(
        &kubeconfig,
        &[
            "create",
            "rolebinding",
            "alice-uploads",
            "-n",
            "team",
            "--clusterrole=cdi.kubevirt.io:upload",
            "--user=alice",
        ],
    )
    .await;
    let request = dir.join("request.yaml");
    std::fs::write(
        &request,
        "apiVersion: upload.cdi.kubevirt.io/v1beta1\nkind: UploadTokenRequest\nmetadata:\n  \
         name: token-for-virtctl\nspec:\n  pvcName: disk\n",
    )
    .expect("writing the request");
    let created = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--as", "alice", "create", "-n", "team", "-o", "json", "-f"])
        .arg(&request)
        .output()
        .await
        .expect("running kubectl");
    assert!(created.status.success(), "kubectl create: {created:?}");
    let answer: serde_json::Value =
        serde_json::from_slice(&created.stdout).expect("the UploadTokenRequest");
    let token = answer["status"]["token"].as_str().expect("a token");
    let secret = kubectl_json(&kubeconfig, &["secret", "cdi-api-signing-key", "-n", "cdi"])
        .await
        .expect("the signing key's Secret");
    use base64::Engine as _;
    let public_key = base64::engine::general_purpose::STANDARD
        .decode(
            secret["data"]["id_rsa.pub"]
                .as_str()
                .expect("the public key"),
        )
        .expect("base64");
    let validator = uploadproxy::UploadTokenValidator::from_public_key_pem(
        std::str::from_utf8(&public_key).expect("PEM"),
    )
    .expect("the public key");
    let claims = validator.validate(token).expect("a valid token");
    assert_eq!(
        (claims.namespace.as_str(), claims.name.as_str()),
        ("team", "disk")
    );

    // Bob may not.
    let refused = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--as", "bob", "create", "-n", "team", "-f"])
        .arg(&request)
        .output()
        .await
        .expect("running kubectl");
    assert!(!refused.status.success(), "bob got a token");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("forbidden"),
        "{refused:?}"
    );

    cdi_webhook_guards_the_uninstall(&kubeconfig, &dir, port).await;
    server.stop();
}

/// As cdi-apiserver, the webhook guards the CDI CR's deletion (`/cdi-validate` of
/// ValidatingWebhookConfiguration `cdi-api-validate`, over TLS verified with the caBundle
/// it keeps there): a Deployed CR under BlockUninstallIfWorkloadsExist may not go while a
/// DataVolume exists, and may once it is gone (a boot source's import does not count).
async fn cdi_webhook_guards_the_uninstall(kubeconfig: &std::path::Path, dir: &TempDir, port: u16) {
    const SERVICE: &str = "ferrovirt-webhook.cdi.svc";
    use base64::Engine as _;
    let bundle = eventually("the webhook's CA in cdi-api-validate", || async {
        let configuration = kubectl_json(
            kubeconfig,
            &["validatingwebhookconfiguration", "cdi-api-validate"],
        )
        .await?;
        let bundle = configuration["webhooks"][0]["clientConfig"]["caBundle"].as_str()?;
        base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .ok()
    })
    .await;
    let https = reqwest::Client::builder()
        .tls_certs_merge(reqwest::Certificate::from_pem_bundle(&bundle).expect("the CA"))
        .resolve(SERVICE, ([127, 0, 0, 1], port).into())
        .build()
        .expect("an HTTPS client");
    let cdi = json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI", "metadata": {"name": "cdi"},
        "spec": {"uninstallStrategy": "BlockUninstallIfWorkloadsExist"},
    });
    apply_deployed(kubeconfig, dir, &cdi).await;
    let cdi = kubectl_json(kubeconfig, &["cdi", "cdi"])
        .await
        .expect("the CDI CR");
    // A boot source's import (labelled by its DataImportCron) goes with CDI: it does not
    // block, the other DataVolume does.
    let dv = dir.join("dv.yaml");
    std::fs::write(
        &dv,
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: blank\n  namespace: team\n\
         spec:\n  source:\n    blank: {}\n  storage:\n    resources:\n      requests:\n        storage: 1Gi\n\
         ---\napiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: boot-source\n  namespace: team\n\
         \x20 labels:\n    cdi.kubevirt.io/dataImportCron: fedora\n\
         spec:\n  source:\n    blank: {}\n  storage:\n    resources:\n      requests:\n        storage: 1Gi\n",
    )
    .expect("writing the DataVolumes");
    kubectl(kubeconfig, &["apply", "-f", &dv.display().to_string()]).await;
    let ask = |uid: &'static str| {
        let review = admission_review(
            uid,
            "DELETE",
            ("cdi.kubevirt.io", "v1beta1", "cdis"),
            "",
            json!(null),
            cdi.clone(),
        );
        let https = https.clone();
        async move {
            let url = format!("https://{SERVICE}:{port}/cdi-validate");
            post_admission_review(&https, &url, &review).await
        }
    };
    let answer = ask("cdi-1").await;
    assert_eq!(answer["allowed"], false, "{answer:#}");
    assert_eq!(
        answer["status"]["message"],
        "rejecting the uninstall request, since there are still 1 DataVolumes present. Either delete all DataVolumes or change the uninstall strategy before uninstalling CDI"
    );
    kubectl(kubeconfig, &["delete", "dv", "blank", "-n", "team"]).await;
    let answer = ask("cdi-2").await;
    assert_eq!(answer["allowed"], true, "{answer:#}");
}

/// The AdmissionResponse a webhook gives `review` at `url`, its uid checked against the
/// request's, as kube-apiserver checks it.
async fn post_admission_review(
    https: &reqwest::Client,
    url: &str,
    review: &serde_json::Value,
) -> serde_json::Value {
    let answer: serde_json::Value = https
        .post(url)
        .json(review)
        .send()
        .await
        .expect("the webhook answers")
        .json()
        .await
        .expect("an AdmissionReview");
    assert_eq!(answer["response"]["uid"], review["request"]["uid"]);
    answer["response"].clone()
}

/// The PEM under `key` of Secret `namespace/name`.
async fn secret_pem(
    kubeconfig: &std::path::Path,
    namespace: &str,
    name: &str,
    key: &str,
) -> String {
    use base64::Engine as _;
    let secret = kubectl_json(kubeconfig, &["secret", name, "-n", namespace])
        .await
        .unwrap_or_else(|| panic!("Secret {namespace}/{name}"));
    let encoded = secret["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{name} has no {key}"));
    let pem = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    String::from_utf8(pem).expect("PEM")
}

/// Uploads on a cluster as deploy/operators/ runs them, each component its own process
/// under its service account: the controller signs a claim's upload server certificate
/// with the CA kept in Secret `cdi/cdi-uploadserver-signer`, and `ferrovirt upload-proxy
/// --in-cluster` serves with a certificate from the CA it publishes in ConfigMap
/// `cdi/cdi-uploadproxy-signer-bundle`, refuses a forged token, and finds the claim's upload
/// server from the cluster (here never ready: no kubelet runs its pod).
#[tokio::test]
async fn the_controller_and_the_upload_proxy_share_the_upload_cas_of_the_cluster() {
    const SERVICE: &str = "cdi-uploadproxy.cdi.svc";
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = TempDir::new("upload-proxy-cluster");
    let server = start_api_server(&dir).await;
    let kubeconfig = server.kubeconfig.clone();
    let deploy = format!("{}/../deploy/operators", env!("CARGO_MANIFEST_DIR"));
    for file in ["rbac.yaml", "controller.yaml", "uploadproxy.yaml"] {
        kubectl(&kubeconfig, &["apply", "-f", &format!("{deploy}/{file}")]).await;
    }
    let (_proxy, port) = spawn_server_as(
        &kubeconfig,
        &dir,
        "cdi:cdi-uploadproxy",
        &["upload-proxy", "--in-cluster", "--ready-timeout-secs", "1"],
    );
    let _controller = spawn_as(
        &kubeconfig,
        &dir,
        "cdi:ferrovirt-controller",
        &["controller"],
        &[("POD_NAMESPACE", Some("cdi"))],
    );
    let bundle = eventually("the proxy's CA published", || async {
        let map = kubectl_json(
            &kubeconfig,
            &["configmap", "cdi-uploadproxy-signer-bundle", "-n", "cdi"],
        )
        .await?;
        map["data"]["ca-bundle.crt"].as_str().map(str::to_owned)
    })
    .await;
    let https = reqwest::Client::builder()
        .tls_certs_merge(reqwest::Certificate::from_pem_bundle(bundle.as_bytes()).expect("the CA"))
        .resolve(SERVICE, ([127, 0, 0, 1], port).into())
        .build()
        .expect("an HTTPS client");
    let upload = |token: String| {
        let https = https.clone();
        async move {
            let answer = eventually("the proxy answering", || async {
                https
                    .post(format!("https://{SERVICE}:{port}/v1beta1/upload"))
                    .bearer_auth(&token)
                    .body("not a disk")
                    .send()
                    .await
                    .ok()
            })
            .await;
            let status = answer.status().as_u16();
            (status, answer.text().await.expect("the answer's text"))
        }
    };

    // A token signed by another key is refused; one signed with CDI's key names the claim.
    let forged = uploadproxy::UploadTokenIssuer::generate()
        .expect("a key")
        .issue("team", "disk")
        .expect("a token");
    assert_eq!(upload(forged).await.0, 401);
    let key = secret_pem(&kubeconfig, "cdi", "cdi-api-signing-key", "id_rsa").await;
    let issuer = uploadproxy::UploadTokenIssuer::from_pem(&key).expect("CDI's signing key");
    let token = issuer.issue("team", "disk").expect("a token");
    let (status, text) = upload(token.clone()).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("PVC team/disk not found"), "{text}");

    // The CDI CR's workload placement goes to the worker pods (read under the controller's
    // own RBAC).
    let cdi = dir.join("cdi.yaml");
    std::fs::write(
        &cdi,
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: CDI\nmetadata:\n  name: cdi\nspec:\n  \
         workload:\n    nodeSelector:\n      disk: ssd\n    tolerations:\n    - key: storage\n      \
         operator: Exists\n      effect: NoSchedule\n",
    )
    .expect("writing the CDI CR");
    kubectl(&kubeconfig, &["apply", "-f", &cdi.display().to_string()]).await;

    // A claim that asks for an upload gets a server whose certificate the cluster's CA
    // signed; the proxy waits for it to be ready.
    kubectl(&kubeconfig, &["create", "namespace", "team"]).await;
    let claim = dir.join("claim.yaml");
    std::fs::write(
        &claim,
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: disk\n  namespace: team\n  \
         annotations:\n    cdi.kubevirt.io/storage.upload.target: \"\"\nspec:\n  accessModes: [ReadWriteOnce]\n  \
         resources:\n    requests:\n      storage: 1Gi\n",
    )
    .expect("writing the claim");
    kubectl(&kubeconfig, &["apply", "-f", &claim.display().to_string()]).await;
    eventually("the upload server's certificate", || {
        kubectl_json(&kubeconfig, &["secret", "cdi-upload-disk", "-n", "team"])
    })
    .await;
    let ca = dir.join("server-ca.crt");
    let leaf = dir.join("upload-server.crt");
    let ca_pem = secret_pem(&kubeconfig, "cdi", "cdi-uploadserver-signer", "tls.crt").await;
    std::fs::write(&ca, ca_pem).expect("writing the CA");
    let leaf_pem = secret_pem(&kubeconfig, "team", "cdi-upload-disk", "tls.crt").await;
    std::fs::write(&leaf, leaf_pem).expect("writing the certificate");
    let verified = std::process::Command::new("openssl")
        .args(["verify", "-CAfile"])
        .arg(&ca)
        .arg(&leaf)
        .output()
        .expect("running openssl");
    assert!(verified.status.success(), "{verified:?}");
    let (status, text) = upload(token).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("not ready"), "{text}");
    let pod = kubectl_json(&kubeconfig, &["pod", "cdi-upload-disk", "-n", "team"])
        .await
        .expect("the upload server's pod");
    assert_eq!(
        pod["spec"]["nodeSelector"],
        json!({"disk": "ssd"}),
        "{pod:#}"
    );
    assert_eq!(pod["spec"]["tolerations"][0]["key"], "storage", "{pod:#}");
    server.stop();
}
