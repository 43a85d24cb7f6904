//! kube-rs against the embedded server: typed and dynamic Api calls, every patch type,
//! optimistic concurrency, raw watches, `watcher`, and a `Controller`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::GroupVersionKind;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use serde_json::json;
use standalone::apiserver::ApiServer;

use crate::common::{client, config, crds};

const DEADLINE: Duration = Duration::from_secs(30);

async fn start(crds: Vec<serde_json::Value>) -> (tempfile::TempDir, ApiServer, kube::Client) {
    let dir = tempfile::tempdir().unwrap();
    let server = ApiServer::start(config(&dir.path().join("data"), crds))
        .await
        .expect("server starts");
    let client = client(&server.kubeconfig).await;
    (dir, server, client)
}

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

fn rv_of(meta: &kube::api::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .expect("a resourceVersion")
        .parse()
        .expect("a numeric resourceVersion")
}

fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

async fn within<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(DEADLINE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {DEADLINE:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_api_crud_and_patches_on_config_maps() {
    let (_dir, server, client) = start(vec![]).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = api
        .create(&PostParams::default(), &config_map("one", &[("a", "1")]))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    let err = api
        .create(&PostParams::default(), &config_map("one", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(409), "{err}");
    let fetched = api.get("one").await.unwrap();
    assert_eq!(
        fetched.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(api.get_opt("missing").await.unwrap(), None);
    assert_eq!(api_code(&api.get("missing").await.unwrap_err()), Some(404));

    // replace with the current resourceVersion.
    let mut next = fetched.clone();
    next.data.as_mut().unwrap().insert("b".into(), "2".into());
    let replaced = api
        .replace("one", &PostParams::default(), &next)
        .await
        .unwrap();
    assert!(rv_of(&replaced.metadata) > rv_of(&created.metadata));

    // merge, JSON and apply patches.
    let merged = api
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"c": "3", "a": null}})),
        )
        .await
        .unwrap();
    let data = merged.data.clone().unwrap();
    assert_eq!(
        (data.get("a"), data.get("c").map(String::as_str)),
        (None, Some("3"))
    );
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/c", "value": "3"},
        {"op": "add", "path": "/data/d", "value": "4"},
    ]))
    .unwrap();
    let jsoned = api
        .patch("one", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .unwrap();
    assert_eq!(jsoned.data.as_ref().unwrap()["d"], "4");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/c", "value": "wrong"}]))
            .unwrap();
    let err = api
        .patch("one", &PatchParams::default(), &Patch::<()>::Json(failing))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
    let applied = api
        .patch(
            "one",
            &PatchParams::apply("kube-rs-test").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one", "labels": {"applied": "yes"}}, "data": {"e": "5"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.labels()["applied"], "yes");
    assert_eq!(applied.data.as_ref().unwrap()["e"], "5");
    // Apply creates what does not exist.
    let fresh = api
        .patch(
            "applied-new",
            &PatchParams::apply("kube-rs-test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied-new"}, "data": {"x": "y"}})),
        )
        .await
        .unwrap();
    assert_eq!(fresh.data.unwrap()["x"], "y");

    // list with a label selector, and paging.
    let list = api
        .list(&ListParams::default().labels("applied=yes"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.resource_version.is_some());
    let page = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(page.items.len(), 1);
    let token = page.metadata.continue_.clone().expect("a continue token");
    let rest = api
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_ne!(rest.items[0].metadata.name, page.items[0].metadata.name);

    api.delete("one", &DeleteParams::default()).await.unwrap();
    assert_eq!(api.get_opt("one").await.unwrap(), None);
    assert_eq!(
        api_code(
            &api.delete("one", &DeleteParams::default())
                .await
                .unwrap_err()
        ),
        Some(404)
    );
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_dynamic_objects_status_apply_and_discovery() {
    let (_dir, server, client) = start(crds()).await;
    let gvk = GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataVolume");
    let (resource, caps) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!(resource.plural, "datavolumes");
    assert!(caps.supports_operation(kube::discovery::verbs::WATCH));
    let api: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &resource);
    let manifest =
        std::fs::read_to_string(crate::common::data_file("datavolume-http.yaml")).unwrap();
    let object: DynamicObject = serde_saphyr::from_str(&manifest).unwrap();
    let created = api.create(&PostParams::default(), &object).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.data["spec"]["storage"]["resources"]["requests"]["storage"],
        "5Gi"
    );

    // Status through server-side apply with a field manager, on the status subresource.
    let status = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "status": {"phase": "ImportScheduled", "progress": "N/A",
                   "conditions": [{"type": "Bound", "status": "False", "reason": "Pending"}]}});
    let after = api
        .patch_status(
            "fedora-http",
            &PatchParams::apply("cdi-controller").force(),
            &Patch::Apply(status),
        )
        .await
        .unwrap();
    assert_eq!(after.data["status"]["phase"], "ImportScheduled");
    assert_eq!(after.metadata.generation, Some(1));
    let merged = api
        .patch_status(
            "fedora-http",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded", "progress": "100.0%"}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.data["status"]["conditions"][0]["type"], "Bound");
    assert_eq!(merged.data["status"]["phase"], "Succeeded");
    // A spec change through the main resource bumps the generation and keeps the status.
    let spec = api
        .patch(
            "fedora-http",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"preallocation": true}, "status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec.metadata.generation, Some(2));
    assert_eq!(spec.data["status"]["phase"], "Succeeded");
    let got = api.get_status("fedora-http").await.unwrap();
    assert_eq!(got.data["status"]["progress"], "100.0%");

    // The VirtualMachine CRD through full discovery.
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    let (vm, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "kubevirt.io",
            "v1",
            "VirtualMachine",
        ))
        .expect("discovery lists VirtualMachine");
    assert_eq!(vm.plural, "virtualmachines");
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_stale_replace_from_concurrent_updaters_gets_409() {
    let (_dir, server, client) = start(vec![]).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(
        &PostParams::default(),
        &config_map("counter", &[("n", "0")]),
    )
    .await
    .unwrap();

    // Two updaters read the same version, then both write: exactly one wins.
    let a = api.get("counter").await.unwrap();
    let b = api.get("counter").await.unwrap();
    let write = |mut cm: ConfigMap, value: &str| {
        let api = api.clone();
        cm.data.as_mut().unwrap().insert("n".into(), value.into());
        async move { api.replace("counter", &PostParams::default(), &cm).await }
    };
    let (ra, rb) = tokio::join!(write(a, "a"), write(b, "b"));
    let codes: Vec<Option<u16>> = [&ra, &rb]
        .iter()
        .map(|r| r.as_ref().err().and_then(api_code))
        .collect();
    assert_eq!(
        codes.iter().filter(|c| c.is_none()).count(),
        1,
        "exactly one replace succeeds: {ra:?} {rb:?}"
    );
    assert!(codes.contains(&Some(409)), "{ra:?} {rb:?}");

    // Read-modify-write with retry on 409 from 4 tasks loses no increment.
    api.patch(
        "counter",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"n": "0"}})),
    )
    .await
    .unwrap();
    let conflicts = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let api = api.clone();
        let conflicts = conflicts.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..15 {
                loop {
                    let mut cm = api.get("counter").await.unwrap();
                    let data = cm.data.as_mut().unwrap();
                    let n: u64 = data["n"].parse().unwrap();
                    data.insert("n".into(), (n + 1).to_string());
                    match api.replace("counter", &PostParams::default(), &cm).await {
                        Ok(_) => break,
                        Err(err) if api_code(&err) == Some(409) => {
                            conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) => panic!("{err}"),
                    }
                }
            }
        }));
    }
    for task in tasks {
        within("the updaters", task).await.unwrap();
    }
    let n = api.get("counter").await.unwrap().data.unwrap()["n"].clone();
    assert_eq!(n, "60", "{} conflicts", conflicts.load(Ordering::Relaxed));
    server.stop();
}

/// The next event of a raw watch, skipping bookmarks.
async fn next_event<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: futures_util::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    loop {
        let event = within("the next watch event", stream.next())
            .await
            .expect("the watch stays open")
            .expect("a decodable event");
        if !matches!(event, WatchEvent::Bookmark(_)) {
            return event;
        }
    }
}

fn describe(event: &WatchEvent<ConfigMap>) -> String {
    match event {
        WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(e) => format!("ERROR {} {}", e.code, e.message),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_watch_and_watcher_see_events_in_order() {
    let (_dir, server, client) = start(vec![]).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &config_map("before", &[]))
        .await
        .unwrap();
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();

    let mut raw = api
        .watch(&WatchParams::default().timeout(60).labels("w=1"), &rv)
        .await
        .unwrap()
        .boxed();
    let mut runtime_watcher =
        watcher(api.clone(), watcher::Config::default().labels("w=1")).boxed();
    // The watcher lists first: wait until it has.
    loop {
        match within("the watcher's initial list", runtime_watcher.try_next())
            .await
            .unwrap()
        {
            Some(watcher::Event::InitDone) => break,
            Some(_) => {}
            None => panic!("watcher ended"),
        }
    }

    let mut labelled = config_map("w", &[("v", "1")]);
    labelled.metadata.labels = Some([("w".to_string(), "1".to_string())].into());
    api.create(&PostParams::default(), &labelled).await.unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &config_map("unlabelled", &[]))
        .await
        .unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "3"}})),
    )
    .await
    .unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();

    let mut seen = Vec::new();
    let mut last_rv = 0;
    for _ in 0..4 {
        let event = next_event(&mut raw).await;
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &event {
            let rv = rv_of(&o.metadata);
            assert!(rv > last_rv, "resourceVersions increase along the watch");
            last_rv = rv;
        }
        seen.push(describe(&event));
    }
    assert_eq!(seen, ["ADDED w", "MODIFIED w", "MODIFIED w", "DELETED w"]);

    let mut applied = Vec::new();
    while applied.len() < 4 {
        match within("watcher events", runtime_watcher.try_next())
            .await
            .unwrap()
            .unwrap()
        {
            watcher::Event::Apply(o) => applied.push(format!("apply {}", o.data.unwrap()["v"])),
            watcher::Event::Delete(o) => {
                applied.push(format!("delete {}", o.metadata.name.unwrap()))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(applied, ["apply 1", "apply 2", "apply 3", "delete w"]);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_watch_resumed_from_a_recent_version_misses_nothing() {
    let (_dir, server, client) = start(vec![]).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..20 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("early-{i}"), &[]),
        )
        .await
        .unwrap();
    }
    let remembered = api
        .get("early-19")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut expected = Vec::new();
    for i in 0..30 {
        let name = format!("late-{i}");
        api.create(&PostParams::default(), &config_map(&name, &[]))
            .await
            .unwrap();
        expected.push(format!("ADDED {name}"));
        if i % 3 == 0 {
            let early = format!("early-{}", i / 3);
            api.patch(
                &early,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"x": "y"}})),
            )
            .await
            .unwrap();
            expected.push(format!("MODIFIED {early}"));
        }
        if i % 5 == 0 {
            api.delete(&name, &DeleteParams::default()).await.unwrap();
            expected.push(format!("DELETED {name}"));
        }
    }
    let mut stream = api
        .watch(&WatchParams::default().timeout(60), &remembered)
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while seen.len() < expected.len() {
        seen.push(describe(&next_event(&mut stream).await));
    }
    assert_eq!(seen, expected);
    // Nothing more: the next event is a change made now.
    api.create(&PostParams::default(), &config_map("after", &[]))
        .await
        .unwrap();
    assert_eq!(describe(&next_event(&mut stream).await), "ADDED after");
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_controller_reconciles_config_maps() {
    let (_dir, server, client) = start(vec![]).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    struct Context {
        api: Api<ConfigMap>,
        reconciles: AtomicUsize,
    }
    async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
        ctx.reconciles.fetch_add(1, Ordering::Relaxed);
        let value = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default();
        let wanted = format!("seen-{value}");
        if cm.annotations().get("reconciled") != Some(&wanted) {
            ctx.api
                .patch(
                    cm.metadata.name.as_deref().unwrap(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"annotations": {"reconciled": wanted}}})),
                )
                .await?;
        }
        Ok(Action::await_change())
    }
    fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Arc<Context>) -> Action {
        Action::requeue(Duration::from_millis(200))
    }
    let context = Arc::new(Context {
        api: api.clone(),
        reconciles: AtomicUsize::new(0),
    });
    let controller = tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default().labels("app=ctl"))
            .run(reconcile, error_policy, context.clone())
            .for_each(|_| futures_util::future::ready(())),
    );
    let annotation_becomes = |name: &'static str, wanted: &'static str| {
        let api = api.clone();
        async move {
            within(&format!("{name} reconciled to {wanted}"), async {
                loop {
                    if let Some(cm) = api.get_opt(name).await.unwrap() {
                        if cm.annotations().get("reconciled").map(String::as_str) == Some(wanted) {
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await
        }
    };
    let mut cm = config_map("ctl-a", &[("v", "1")]);
    cm.metadata.labels = Some([("app".to_string(), "ctl".to_string())].into());
    api.create(&PostParams::default(), &cm).await.unwrap();
    annotation_becomes("ctl-a", "seen-1").await;
    api.patch(
        "ctl-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    annotation_becomes("ctl-a", "seen-2").await;
    // Objects outside the selector are not reconciled.
    api.create(&PostParams::default(), &config_map("other", &[("v", "1")]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        api.get("other")
            .await
            .unwrap()
            .annotations()
            .get("reconciled")
            .is_none()
    );
    assert!(context.reconciles.load(Ordering::Relaxed) >= 2);
    controller.abort();
    server.stop();
}

/// Sends `body` as `content_type` with `method` to `path`; the answer's status and message.
async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, String) {
    let request = hyper::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(kube::client::Body::from(body))
        .unwrap();
    let response = client.send(request).await.expect("an answer");
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("a body")
        .to_bytes();
    let message = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|s| s["message"].as_str().map(str::to_string))
        .unwrap_or_default();
    (status, message)
}

/// Bad protobuf bodies and field selectors the server cannot serve are the client's
/// mistakes: 400 or 415, with a message naming the problem, never a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_protobuf_bodies_and_unservable_field_selectors_are_named() {
    let (_dir, server, client) = start(crds()).await;
    let pb = "application/vnd.kubernetes.protobuf";
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let (code, message) = raw(&client, "POST", configmaps, pb, b"{\"a\":1}".to_vec()).await;
    assert_eq!(code, 400, "{message}");
    assert!(message.contains("Kubernetes prefix"), "{message}");
    // The prefix, then bytes that are no runtime.Unknown.
    let garbage = b"k8s\0\xff\xff\xff".to_vec();
    let (code, message) = raw(&client, "POST", configmaps, pb, garbage).await;
    assert_eq!(code, 400, "{message}");
    assert!(message.contains("does not decode"), "{message}");
    // A well-formed envelope of a kind that has no protobuf message.
    let field = |number: u8, bytes: &[u8]| [&[number << 3 | 2, bytes.len() as u8], bytes].concat();
    let type_meta = [
        field(1, b"cdi.kubevirt.io/v1beta1"),
        field(2, b"DataVolume"),
    ]
    .concat();
    let envelope = [b"k8s\0".to_vec(), field(1, &type_meta)].concat();
    let path = "/apis/cdi.kubevirt.io/v1beta1/namespaces/default/datavolumes";
    let (code, message) = raw(&client, "POST", path, pb, envelope).await;
    assert_eq!(code, 415, "{message}");
    assert!(message.contains("DataVolume"), "{message}");
    // A request without a body may still name the protobuf content type.
    let (code, message) = raw(&client, "GET", configmaps, pb, Vec::new()).await;
    assert_eq!(code, 200, "{message}");
    // A field selector on a field the server does not index.
    let path = format!("{configmaps}?fieldSelector=data.mode%3Dfast");
    let (code, message) = raw(&client, "GET", &path, "application/json", Vec::new()).await;
    assert_eq!(code, 400, "{message}");
    assert!(message.contains("data.mode"), "{message}");
    server.stop();
}
