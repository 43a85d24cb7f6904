//! The TektonTasks operator against the embedded API server: a CR with
//! `deployTektonTaskResources` gets the catalogue's Tasks in its tasks namespace and their
//! ClusterRoles, ServiceAccounts and RoleBindings, reports Deployed in the operator SDK's
//! conditions, and takes them away when deleted; on a server without Tekton's CRDs the CR
//! says which CRD is missing and the operator keeps running.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use ferrovirt_tests::TempDir;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use serde_json::{Value, json};
use standalone::apiserver::{ApiServer, ApiServerConfig};

use api::tekton_tasks::TektonTasks;

/// The embedded API server with every CRD, or every CRD but Tekton's.
async fn server(dir: &TempDir, with_tekton: bool) -> ApiServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    ApiServer::start(ApiServerConfig {
        data_dir: dir.join("data"),
        listen: "127.0.0.1:0".parse().expect("an address"),
        crds: api::crds::all()
            .into_iter()
            .filter(|crd| with_tekton || crd.spec.group != api::tekton::GROUP)
            .map(|crd| serde_json::to_value(crd).expect("a CRD as JSON"))
            .collect(),
        admission: Vec::new(),
        virtual_creates: HashMap::new(),
    })
    .await
    .expect("the API server starts")
}

async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    mut probe: impl FnMut() -> F,
) -> T {
    for _ in 0..300 {
        if let Some(found) = probe().await {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

fn tekton_tasks(name: &str, tasks_namespace: &str) -> TektonTasks {
    serde_json::from_value(json!({
        "apiVersion": "tektontasks.kubevirt.io/v1alpha1", "kind": "TektonTasks",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "featureGates": {"deployTektonTaskResources": true},
            "tasks": {"namespace": tasks_namespace},
        },
    }))
    .expect("a TektonTasks")
}

fn condition(tt: &TektonTasks, type_: &str) -> Option<(String, String)> {
    let value = serde_json::to_value(tt.status.as_ref()?).ok()?;
    let found = value["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    Some((
        found["status"].as_str()?.to_owned(),
        found["message"].as_str()?.to_owned(),
    ))
}

fn dynamic(
    client: &kube::Client,
    gvk: (&str, &str, &str),
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(gvk.0, gvk.1, gvk.2));
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_and_their_rbac_are_deployed_and_removed_with_the_cr() {
    let dir = TempDir::new("tekton-tasks-operator");
    let server = server(&dir, true).await;
    let client = standalone::control_plane::client_for(&server.kubeconfig)
        .await
        .expect("a client");
    let operator = tokio::spawn(operators::install::tekton_tasks::run(
        client.clone(),
        "quay.io/example/ferrovirt:test".to_owned(),
    ));
    let crs: Api<TektonTasks> = Api::namespaced(client.clone(), "default");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let tasks_ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "tasks"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &tasks_ns)
        .await
        .ok();
    crs.create(&PostParams::default(), &tekton_tasks("tto", "tasks"))
        .await
        .expect("creating the TektonTasks");

    let deployed = eventually("the CR to be Deployed", || async {
        let tt = crs.get("tto").await.ok()?;
        let status = tt.status.as_ref()?;
        (status.phase.as_deref() == Some("Deployed")).then_some(tt)
    })
    .await;
    assert_eq!(
        condition(&deployed, "Available"),
        Some(("True".into(), "Tekton operator is available".into()))
    );
    assert_eq!(
        deployed.metadata.finalizers,
        Some(vec!["tekton-tasks.kubevirt.io/finalizer".to_owned()])
    );

    let tasks = dynamic(&client, ("tekton.dev", "v1", "Task"), Some("tasks"));
    let listed = tasks
        .list(&ListParams::default())
        .await
        .expect("listing Tasks");
    let mut names: Vec<String> = listed
        .items
        .iter()
        .filter_map(|t| t.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "cleanup-vm",
            "create-vm-from-manifest",
            "execute-in-vm",
            "generate-ssh-keys",
            "modify-data-object",
            "wait-for-vmi-status",
        ]
    );
    let task = serde_json::to_value(&listed.items[0]).unwrap();
    assert_eq!(
        task["spec"]["steps"][0]["image"],
        "quay.io/example/ferrovirt:test"
    );
    assert_eq!(
        task["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "tekton-tasks-operator"
    );
    let accounts = dynamic(&client, ("", "v1", "ServiceAccount"), Some("default"));
    let bindings = dynamic(
        &client,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        Some("default"),
    );
    let roles = dynamic(
        &client,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        None,
    );
    for name in [
        "cleanup-vm-task",
        "execute-in-vm-task",
        "generate-ssh-keys-task",
    ] {
        accounts
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("ServiceAccount {name}: {e}"));
        let binding =
            serde_json::to_value(bindings.get(name).await.expect("a RoleBinding")).unwrap();
        assert_eq!(binding["roleRef"]["name"], name);
        roles
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("ClusterRole {name}: {e}"));
    }

    // An edit is put back.
    let mut edited = tasks.get("cleanup-vm").await.expect("the Task");
    edited.data["spec"]["description"] = Value::String("edited".into());
    tasks
        .replace("cleanup-vm", &PostParams::default(), &edited)
        .await
        .expect("editing the Task");
    eventually("the edit to be reverted", || async {
        let task = tasks.get("cleanup-vm").await.ok()?;
        (task.data["spec"]["description"] != "edited").then_some(())
    })
    .await;

    crs.delete("tto", &DeleteParams::default())
        .await
        .expect("deleting the CR");
    eventually("the CR and what it made to go", || async {
        let cr_gone = crs.get_opt("tto").await.ok()?.is_none();
        let tasks_gone = tasks
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .is_empty();
        let role_gone = roles.get_opt("cleanup-vm-task").await.ok()?.is_none();
        let account_gone = accounts.get_opt("cleanup-vm-task").await.ok()?.is_none();
        (cr_gone && tasks_gone && role_gone && account_gone).then_some(())
    })
    .await;
    operator.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tekton_the_cr_names_the_missing_crd_and_the_operator_keeps_running() {
    let dir = TempDir::new("tekton-tasks-operator-no-tekton");
    let server = server(&dir, false).await;
    let client = standalone::control_plane::client_for(&server.kubeconfig)
        .await
        .expect("a client");
    let operator = tokio::spawn(operators::install::tekton_tasks::run(
        client.clone(),
        "img".to_owned(),
    ));
    let crs: Api<TektonTasks> = Api::namespaced(client.clone(), "default");
    crs.create(&PostParams::default(), &tekton_tasks("tto", "default"))
        .await
        .expect("creating the TektonTasks");
    let missing = "Required CRDs are missing: tasks.tekton.dev".to_owned();
    let tt = eventually("the missing CRD in the conditions", || async {
        let tt = crs.get("tto").await.ok()?;
        (condition(&tt, "Degraded") == Some(("True".into(), missing.clone()))).then_some(tt)
    })
    .await;
    assert_eq!(
        condition(&tt, "Available"),
        Some(("False".into(), missing.clone()))
    );
    assert_eq!(
        tt.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Deploying")
    );
    assert!(
        !operator.is_finished(),
        "the operator keeps running without Tekton"
    );
    // The ServiceAccounts wait for Tekton too: nothing is half-deployed.
    let accounts = dynamic(&client, ("", "v1", "ServiceAccount"), Some("default"));
    assert!(
        accounts
            .get_opt("cleanup-vm-task")
            .await
            .expect("a get")
            .is_none()
    );
    operator.abort();
}
