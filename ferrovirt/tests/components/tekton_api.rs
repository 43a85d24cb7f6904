//! Tekton's API as `ferrovirt up` serves it, driven with kubectl against the embedded API
//! server with the in-process webhooks of `up` (Tekton's defaults, refusals and conversion):
//! the project's Tasks apply; a v1 TaskRun and PipelineRun read back at v1beta1 under the
//! older field names and written back there reach v1 unchanged; `kubectl get` prints
//! upstream's columns; a run naming no Task is refused with Tekton's words. Upstream's
//! kubevirt-tekton-tasks release, not in this repository, applies from the directory
//! `FERROVIRT_UPSTREAM_TEKTON_TASKS` names (an ignored test).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferrovirt_tests::TempDir;
use ferrovirt_tests::kubectl::Kubectl;
use serde_json::{Value, json};
use standalone::apiserver::ApiServer;

use crate::admission_review::bare_api_server;

/// The embedded API server with every CRD `up` serves and `up`'s in-process webhooks.
async fn start(dir: &TempDir) -> (ApiServer, Kubectl) {
    let server = bare_api_server(&dir.join("data")).await;
    ferrovirt::webhooks::embedded::register(&server);
    let kubectl = Kubectl::new(&server.kubeconfig).with_cache_dir(dir.join("kube-cache"));
    (server, kubectl)
}

fn task_run() -> Value {
    json!({
        "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
        "metadata": {"name": "cleanup", "namespace": "default"},
        "spec": {
            "taskRef": {"name": "cleanup-vm"},
            "params": [{"name": "vmName", "value": "vm"}, {"name": "command", "value": ["true"]}],
            "stepSpecs": [{"name": "cleanup-vm", "computeResources": {"limits": {"cpu": "1"}}}],
        },
    })
}

fn pipeline_run() -> Value {
    json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": "run", "namespace": "default"},
        "spec": {
            "pipelineSpec": {"tasks": [{"name": "clean", "taskRef": {"name": "cleanup-vm"}}]},
            "taskRunTemplate": {"serviceAccountName": "builder",
                                "podTemplate": {"nodeSelector": {"disk": "ssd"}}},
            "timeouts": {"pipeline": "2h0m0s"},
            "taskRunSpecs": [{"pipelineTaskName": "clean", "serviceAccountName": "cleaner"}],
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tekton_runs_are_served_at_v1_and_v1beta1_with_tektons_defaults_and_refusals() {
    let dir = TempDir::new("tekton-api");
    let (server, kubectl) = start(&dir).await;
    let tasks = format!("{}/../deploy/tekton/tasks", env!("CARGO_MANIFEST_DIR"));
    let applied = kubectl.ok_async(&["apply", "-f", &tasks], None).await;
    assert_eq!(applied.matches("created").count(), 6, "{applied}");

    kubectl
        .ok_async(&["create", "-f", "-"], Some(&task_run().to_string()))
        .await;
    let old = kubectl
        .json_async(&[
            "get",
            "taskruns.v1beta1.tekton.dev",
            "cleanup",
            "-n",
            "default",
        ])
        .await
        .expect("the TaskRun at v1beta1");
    assert_eq!(old["apiVersion"], "tekton.dev/v1beta1");
    assert_eq!(
        old["spec"]["stepOverrides"],
        json!([{"name": "cleanup-vm", "resources": {"limits": {"cpu": "1"}}}])
    );
    assert!(old["spec"].get("stepSpecs").is_none());
    // Tekton's defaults, set on create.
    assert_eq!(old["spec"]["serviceAccountName"], "default");
    assert_eq!(old["spec"]["timeout"], "1h0m0s");
    assert_eq!(old["spec"]["taskRef"]["kind"], "Task");
    assert_eq!(
        old["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "tekton-pipelines"
    );
    written_back_at_v1beta1(&kubectl, old, "taskruns", "cleanup").await;
    let now = kubectl
        .json_async(&["get", "taskruns.v1.tekton.dev", "cleanup", "-n", "default"])
        .await
        .expect("the TaskRun at v1");
    assert_eq!(now["spec"]["stepSpecs"], task_run()["spec"]["stepSpecs"]);
    assert_eq!(now["metadata"]["labels"]["edited"], "at-v1beta1");

    kubectl
        .ok_async(&["create", "-f", "-"], Some(&pipeline_run().to_string()))
        .await;
    let old = kubectl
        .json_async(&[
            "get",
            "pipelineruns.v1beta1.tekton.dev",
            "run",
            "-n",
            "default",
        ])
        .await
        .expect("the PipelineRun at v1beta1");
    assert_eq!(old["spec"]["serviceAccountName"], "builder");
    assert_eq!(
        old["spec"]["podTemplate"],
        json!({"nodeSelector": {"disk": "ssd"}})
    );
    assert_eq!(
        old["spec"]["taskRunSpecs"],
        json!([{"pipelineTaskName": "clean", "taskServiceAccountName": "cleaner"}])
    );
    assert!(old["spec"].get("taskRunTemplate").is_none());
    written_back_at_v1beta1(&kubectl, old, "pipelineruns", "run").await;
    let now = kubectl
        .json_async(&["get", "pipelineruns.v1.tekton.dev", "run", "-n", "default"])
        .await
        .expect("the PipelineRun at v1");
    for field in ["taskRunTemplate", "timeouts", "taskRunSpecs"] {
        assert_eq!(now["spec"][field], pipeline_run()["spec"][field], "{field}");
    }

    let table = kubectl
        .ok_async(&["get", "taskruns", "-n", "default"], None)
        .await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "SUCCEEDED", "REASON", "STARTTIME", "COMPLETIONTIME"]
    );
    let short = kubectl
        .ok_async(&["get", "tr,pr", "-n", "default", "-o", "name"], None)
        .await;
    assert_eq!(
        short,
        "taskrun.tekton.dev/cleanup\npipelinerun.tekton.dev/run\n"
    );

    let mut neither = task_run();
    neither["metadata"]["name"] = json!("neither");
    neither["spec"].as_object_mut().map(|s| s.remove("taskRef"));
    let out = kubectl
        .run_async(&["create", "-f", "-"], Some(&neither.to_string()))
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "admission webhook \"validation.webhook.pipeline.tekton.dev\" denied the request: \
             validation failed: expected exactly one, got neither: spec.taskRef, spec.taskSpec"
        ),
        "{stderr}"
    );
    server.stop();
}

/// `object` (read at v1beta1) with a label added, replaced at v1beta1 as a v1beta1 client
/// writes it back.
async fn written_back_at_v1beta1(kubectl: &Kubectl, mut object: Value, plural: &str, name: &str) {
    object["metadata"]["labels"]["edited"] = json!("at-v1beta1");
    kubectl
        .ok_async(&["replace", "-f", "-"], Some(&object.to_string()))
        .await;
    let resource = format!("{plural}.v1beta1.tekton.dev");
    let read = kubectl
        .json_async(&["get", &resource, name, "-n", "default"])
        .await
        .expect("read back");
    assert_eq!(
        read["spec"], object["spec"],
        "{plural} at v1beta1 after the write"
    );
}

/// Every YAML file under `dir`, recursively.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(yaml_files(&path));
        } else if path.extension().is_some_and(|e| e == "yaml") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Upstream's kubevirt-tekton-tasks release (`release/` of its v0.26.0 tag, say) created
/// object by object: every Task and Pipeline is taken, and every example TaskRun and
/// PipelineRun is taken or refused for a field Tekton's own CRD does not declare either
/// (kubectl's strict validation refuses it there the same way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs kubevirt-tekton-tasks' release directory: FERROVIRT_UPSTREAM_TEKTON_TASKS=DIR"]
async fn upstream_kubevirt_tekton_tasks_apply() {
    let release = std::env::var_os("FERROVIRT_UPSTREAM_TEKTON_TASKS")
        .expect("FERROVIRT_UPSTREAM_TEKTON_TASKS");
    let dir = TempDir::new("tekton-upstream");
    let (server, kubectl) = start(&dir).await;
    let (mut taken, mut as_tekton, mut problems) = (BTreeMap::new(), Vec::new(), Vec::new());
    for (file, document) in tekton_documents(Path::new(&release)) {
        let out = kubectl
            .run_async(
                &["create", "-n", "default", "-f", "-"],
                Some(&document.to_string()),
            )
            .await;
        let kind = document["kind"].as_str().unwrap_or_default().to_owned();
        let version = document["apiVersion"].as_str().unwrap_or_default();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            *taken.entry(format!("{version} {kind}")).or_insert(0) += 1;
        } else if let Some(field) = undeclared_upstream(&stderr, &kind, version) {
            as_tekton.push(format!("{file}: {kind} {field}"));
        } else {
            problems.push(format!("{file}: {kind}: {stderr}"));
        }
    }
    eprintln!("taken: {taken:?}");
    eprintln!("refused as Tekton's CRDs refuse them: {as_tekton:#?}");
    server.stop();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every `tekton.dev` document of every YAML file under `dir`, with its file's path.
fn tekton_documents(dir: &Path) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for file in yaml_files(dir) {
        let text = std::fs::read_to_string(&file).expect("a release file");
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML documents");
        let tekton = documents.into_iter().filter(|d| {
            d["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("tekton.dev/"))
        });
        found.extend(tekton.map(|d| (file.display().to_string(), d)));
    }
    found
}

/// The field kubectl's strict validation refused, when Tekton's own CRD (its flattened
/// schema kept in `api/tests/upstream-api`) does not declare it either.
fn undeclared_upstream(stderr: &str, kind: &str, api_version: &str) -> Option<String> {
    let (_, rest) = stderr.split_once("strict decoding error: unknown field \"")?;
    let (field, _) = rest.split_once('"')?;
    let version = api_version.strip_prefix("tekton.dev/")?;
    let kept = format!(
        "{}/../api/tests/upstream-api/tekton.dev_{kind}_{version}.paths",
        env!("CARGO_MANIFEST_DIR")
    );
    let paths = std::fs::read_to_string(kept).ok()?;
    let flattened = list_indexes_removed(field);
    let declared = paths
        .lines()
        .any(|line| line.split('\t').next() == Some(flattened.as_str()));
    (!declared).then(|| field.to_owned())
}

/// `spec.workspaces[0].secret.name` as the kept schemas write it: `spec.workspaces[].secret.name`.
fn list_indexes_removed(field: &str) -> String {
    let mut out = String::new();
    let mut in_index = false;
    for c in field.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}
