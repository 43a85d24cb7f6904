//! A restart on the same data directory, as `ferrovirt up` after `ferrovirt down`: every
//! object of every resource comes back byte for byte with its resourceVersion, the list
//! resourceVersion is where it was, new writes continue above every old version, the
//! kubeconfig keeps its CA and token, and a watch resumed from a resourceVersion taken
//! before the restart replays what followed it (the change log is stored with the objects)
//! and then sees the new writes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, verbs};
use serde_json::{Value, json};
use standalone::apiserver::ApiServer;

use crate::common::{client, config, crds, data_file, kubectl_command, run};

/// How long each phase of the test (populating, checking) may take.
const DEADLINE: Duration = Duration::from_secs(90);

/// Namespace of the objects this test makes besides those in `default`.
const NS: &str = "restart";

/// One life of the server: its own runtime, dropped at stop as a process exit would.
struct Life {
    runtime: tokio::runtime::Runtime,
    server: ApiServer,
}

impl Life {
    fn start(data_dir: &Path, crds: Vec<Value>) -> Life {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime
            .block_on(ApiServer::start(config(data_dir, crds)))
            .expect("server starts");
        Life { runtime, server }
    }

    /// Runs `future` on this life's runtime, failing the test after [`DEADLINE`].
    fn run<F: std::future::Future>(&self, what: &str, future: F) -> F::Output {
        self.runtime
            .block_on(async { tokio::time::timeout(DEADLINE, future).await })
            .unwrap_or_else(|_| panic!("{what} did not finish within {DEADLINE:?}"))
    }

    fn stop(self) {
        self.server.stop();
        // Ends every connection, watch and background task, and with them the last handle
        // on the database.
        drop(self.server);
        self.runtime.shutdown_timeout(Duration::from_secs(5));
    }
}

fn rv(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .expect("a resourceVersion")
        .parse()
        .expect("a numeric resourceVersion")
}

fn config_map(name: &str, ns: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn describe(event: &WatchEvent<ConfigMap>) -> String {
    let name = |o: &ConfigMap| {
        format!(
            "{}/{}",
            o.metadata.namespace.as_deref().unwrap_or(""),
            o.metadata.name.as_deref().unwrap_or("")
        )
    };
    match event {
        WatchEvent::Added(o) => format!("ADDED {}", name(o)),
        WatchEvent::Modified(o) => format!("MODIFIED {}", name(o)),
        WatchEvent::Deleted(o) => format!("DELETED {}", name(o)),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(e) => format!("ERROR {} {}", e.code, e.message),
    }
}

/// What the first life left behind, as its clients saw it.
struct Before {
    /// Every object of every listable resource, by "group/version/plural ns/name".
    objects: BTreeMap<String, Value>,
    /// The resourceVersion of a ConfigMap list taken at the end.
    list_rv: u64,
    /// A ConfigMap list resourceVersion taken midway, and the ConfigMap changes after it.
    midway_rv: String,
    changes_after_midway: Vec<String>,
}

/// Creates, updates and deletes objects of several kinds through kube-rs.
async fn populate(client: kube::Client) -> Before {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NS.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let default_cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let ns_cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let all_cms: Api<ConfigMap> = Api::all(client.clone());
    let pp = PostParams::default();
    default_cms
        .create(&pp, &config_map("alpha", "default", &[("v", "1")]))
        .await
        .unwrap();
    default_cms
        .create(&pp, &config_map("beta", "default", &[("v", "1")]))
        .await
        .unwrap();
    ns_cms
        .create(&pp, &config_map("gamma", NS, &[("v", "1")]))
        .await
        .unwrap();
    ns_cms
        .create(&pp, &config_map("doomed", NS, &[]))
        .await
        .unwrap();

    // A namespaced Secret, given as data and as stringData.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("credentials".into()),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some([("user".to_string(), ByteString(b"admin".to_vec()))].into()),
        string_data: Some([("password".to_string(), "s3cret".to_string())].into()),
        ..Default::default()
    };
    let created = secrets.create(&pp, &secret).await.unwrap();
    let data = created.data.clone().unwrap_or_default();
    assert_eq!(
        data.get("password").map(|b| b.0.as_slice()),
        Some(&b"s3cret"[..]),
        "stringData is folded into data: {created:?}"
    );
    assert_eq!(created.string_data, None, "stringData is write-only");

    // A custom resource: the upstream-style DataVolume, with a status and a spec change.
    let gvk = GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataVolume");
    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    let dvs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource);
    let manifest = std::fs::read_to_string(data_file("datavolume-http.yaml")).unwrap();
    let dv: DynamicObject = serde_saphyr::from_str(&manifest).unwrap();
    dvs.create(&pp, &dv).await.unwrap();

    let midway = all_cms.list(&ListParams::default()).await.unwrap();
    let midway_rv = midway.metadata.resource_version.clone().unwrap();
    let mut changes_after_midway = Vec::new();

    // Updates of every kind: replace, merge patch, status, spec, delete, a held delete.
    let mut alpha = default_cms.get("alpha").await.unwrap();
    alpha.data.as_mut().unwrap().insert("v".into(), "2".into());
    default_cms.replace("alpha", &pp, &alpha).await.unwrap();
    changes_after_midway.push("MODIFIED default/alpha".to_string());
    let merge = |value: Value| Patch::Merge(value);
    default_cms
        .patch(
            "beta",
            &PatchParams::default(),
            &merge(json!({"data": {"v": "2"}})),
        )
        .await
        .unwrap();
    changes_after_midway.push("MODIFIED default/beta".to_string());
    secrets
        .patch(
            "credentials",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"rotated": "yes"}}})),
        )
        .await
        .unwrap();
    dvs.patch_status(
        "fedora-http",
        &PatchParams::apply("restart-test").force(),
        &Patch::Apply(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
            "status": {"phase": "ImportInProgress", "progress": "42.0%"},
        })),
    )
    .await
    .unwrap();
    let dv = dvs
        .patch(
            "fedora-http",
            &PatchParams::default(),
            &merge(json!({"spec": {"preallocation": true}})),
        )
        .await
        .unwrap();
    assert_eq!(dv.metadata.generation, Some(2));
    ns_cms
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    changes_after_midway.push(format!("DELETED {NS}/doomed"));
    let mut held = config_map("held", NS, &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    ns_cms.create(&pp, &held).await.unwrap();
    changes_after_midway.push(format!("ADDED {NS}/held"));
    ns_cms
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    changes_after_midway.push(format!("MODIFIED {NS}/held"));
    let held = ns_cms.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());

    let list_rv = all_cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    Before {
        objects: snapshot(&client).await,
        list_rv,
        midway_rv,
        changes_after_midway,
    }
}

/// Every object of every resource that can be listed, found through discovery.
async fn snapshot(client: &kube::Client) -> BTreeMap<String, Value> {
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut objects = BTreeMap::new();
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let list = api.list(&ListParams::default()).await.unwrap();
            for item in list.items {
                let key = format!(
                    "{}/{} {}/{}",
                    resource.api_version,
                    resource.plural,
                    item.metadata.namespace.as_deref().unwrap_or(""),
                    item.metadata.name.as_deref().unwrap_or("")
                );
                objects.insert(key, serde_json::to_value(&item).unwrap());
            }
        }
    }
    objects
}

/// The kubeconfig's CA and the admin user, without the server address.
fn credentials_of(kubeconfig: &str) -> (Value, Value) {
    let parsed: Value = serde_saphyr::from_str(kubeconfig).unwrap();
    (
        parsed["clusters"][0]["cluster"]["certificate-authority-data"].clone(),
        parsed["users"].clone(),
    )
}

#[test]
fn restart_keeps_objects_versions_credentials_and_the_change_log() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");

    let first = Life::start(&data_dir, crds());
    let first_addr: SocketAddr = first.server.addr;
    let first_kubeconfig = std::fs::read_to_string(&first.server.kubeconfig).unwrap();
    let before = first.run("populating the first server", async {
        populate(client(&first.server.kubeconfig).await).await
    });
    first.stop();

    let expected_keys = [
        "v1/namespaces /restart".to_string(),
        "v1/configmaps default/alpha".to_string(),
        "v1/configmaps default/beta".to_string(),
        format!("v1/configmaps {NS}/gamma"),
        format!("v1/configmaps {NS}/held"),
        format!("v1/secrets {NS}/credentials"),
        format!("cdi.kubevirt.io/v1beta1/datavolumes {NS}/fedora-http"),
        "apiextensions.k8s.io/v1/customresourcedefinitions /datavolumes.cdi.kubevirt.io"
            .to_string(),
    ];
    for key in &expected_keys {
        assert!(
            before.objects.contains_key(key),
            "{key} missing before the restart; have {:?}",
            before.objects.keys().collect::<Vec<_>>()
        );
    }
    let highest_before = before
        .objects
        .values()
        .map(|o| {
            o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .max()
        .unwrap();
    assert!(before.list_rv >= highest_before);

    // The second life: the same data directory, the same CRDs installed at start.
    let second = Life::start(&data_dir, crds());
    let second_kubeconfig = std::fs::read_to_string(&second.server.kubeconfig).unwrap();
    assert_eq!(
        credentials_of(&first_kubeconfig),
        credentials_of(&second_kubeconfig),
        "the CA and the admin token are kept"
    );
    // The kubeconfig written before the restart, pointed at the new port, still works.
    let old_kubeconfig = dir.path().join("old-kubeconfig");
    std::fs::write(
        &old_kubeconfig,
        first_kubeconfig.replace(
            &format!("https://{first_addr}"),
            &format!("https://{}", second.server.addr),
        ),
    )
    .unwrap();

    second.run("checking the second server", async {
        let old_client = client(&old_kubeconfig).await;
        let after = snapshot(&old_client).await;
        let before_keys: BTreeSet<_> = before.objects.keys().collect();
        let after_keys: BTreeSet<_> = after.keys().collect();
        assert_eq!(before_keys, after_keys, "the same objects exist");
        for (key, object) in &before.objects {
            assert_eq!(&after[key], object, "{key} came back unchanged");
        }

        let client = client(&second.server.kubeconfig).await;
        let all_cms: Api<ConfigMap> = Api::all(client.clone());
        let listed = all_cms.list(&ListParams::default()).await.unwrap();
        let list_rv: u64 = listed.metadata.resource_version.unwrap().parse().unwrap();
        assert_eq!(
            list_rv, before.list_rv,
            "nothing was written by the restart"
        );
        let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
        let secret = secrets.get("credentials").await.unwrap();
        assert_eq!(
            secret.data.unwrap()["password"].0,
            b"s3cret",
            "secret data survives"
        );

        // Watches resumed from versions taken before the restart.
        let wp = WatchParams::default().timeout(60);
        let mut from_midway = all_cms.watch(&wp, &before.midway_rv).await.unwrap().boxed();
        let mut from_end = all_cms
            .watch(&wp, &before.list_rv.to_string())
            .await
            .unwrap()
            .boxed();

        let ns_cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
        let fresh = ns_cms
            .create(
                &PostParams::default(),
                &config_map("after-restart", NS, &[]),
            )
            .await
            .unwrap();
        assert!(
            rv(&fresh.metadata) > before.list_rv && rv(&fresh.metadata) > highest_before,
            "a new write ({}) continues above every version before the restart ({})",
            rv(&fresh.metadata),
            before.list_rv
        );

        let mut expected = before.changes_after_midway.clone();
        expected.push(format!("ADDED {NS}/after-restart"));
        let mut seen = Vec::new();
        while seen.len() < expected.len() {
            seen.push(describe(&next_event(&mut from_midway).await));
        }
        assert_eq!(seen, expected, "the watch from midway replays and follows");
        assert_eq!(
            describe(&next_event(&mut from_end).await),
            format!("ADDED {NS}/after-restart"),
            "the watch from the last version sees only the new write"
        );
    });

    // kubectl with the rewritten kubeconfig sees the same versions.
    let cache = dir.path().join("kube-cache");
    let kubectl = |args: &[&str]| {
        let out = run(
            kubectl_command(&second.server.kubeconfig, &cache, args),
            None,
        );
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let alpha = kubectl(&["get", "configmap", "alpha", "-n", "default", "-o", "json"]);
    assert_eq!(
        alpha["metadata"]["resourceVersion"],
        before.objects["v1/configmaps default/alpha"]["metadata"]["resourceVersion"]
    );
    let dv = kubectl(&["get", "datavolume", "fedora-http", "-n", NS, "-o", "json"]);
    assert_eq!(dv["status"]["progress"], "42.0%");
    assert_eq!(
        dv["metadata"]["resourceVersion"],
        before.objects[&format!("cdi.kubevirt.io/v1beta1/datavolumes {NS}/fedora-http")]["metadata"]
            ["resourceVersion"]
    );
    second.stop();
}

/// The next event of a watch, skipping bookmarks.
async fn next_event<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: futures_util::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("a watch event within 30s")
            .expect("the watch stays open")
            .expect("a decodable event");
        if !matches!(event, WatchEvent::Bookmark(_)) {
            return event;
        }
    }
}
