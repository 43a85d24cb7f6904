//! The embedded API server under a kube-rs client: create throughput for many ConfigMaps
//! from concurrent tasks, full and paged list throughput, and watch latency (from a create
//! returning to its event arriving on a watch opened before it), under that load and one
//! create at a time; then the same creates and lists in JSON and in Kubernetes protobuf
//! side by side.
//!
//! `cargo bench -p ferrovirt-standalone --bench apiserver`; FERROVIRT_BENCH_OBJECTS (10000),
//! FERROVIRT_BENCH_TASKS (8) and FERROVIRT_BENCH_SEQUENTIAL (1000) change the sizes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use http_body_util::BodyExt;
use hyper::http;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
use standalone::apiserver::kube_protobuf::{MEDIA_TYPE as PROTOBUF, Messages};
use standalone::apiserver::{ApiServer, ApiServerConfig};
use tokio::sync::Mutex;

/// The page size of the paged list, as client-go's pager and kubectl use.
const PAGE: u32 = 500;

/// How long the whole benchmark may take before it gives up.
const DEADLINE: Duration = Duration::from_secs(900);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v| *v > 0)
        .unwrap_or(default)
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([("bench".to_string(), "apiserver".to_string())].into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            ("index".to_string(), name.to_string()),
            ("payload".to_string(), "x".repeat(256)),
        ])),
        ..Default::default()
    }
}

/// The `q` quantile (0..=1) of `samples`, which it sorts.
fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let index = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[index.min(samples.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn rate(count: usize, elapsed: Duration) -> String {
    format!("{:.0} objects/s", count as f64 / elapsed.as_secs_f64())
}

/// Arrival times of ADDED events on a watch, by object name, until `expected` arrived.
fn spawn_watch_recorder(
    stream: impl futures_util::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Send + 'static,
    expected: usize,
) -> tokio::task::JoinHandle<HashMap<String, Instant>> {
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut arrived = HashMap::with_capacity(expected);
        while arrived.len() < expected {
            match stream.next().await {
                Some(Ok(WatchEvent::Added(cm))) => {
                    let now = Instant::now();
                    if let Some(name) = cm.metadata.name {
                        arrived.entry(name).or_insert(now);
                    }
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    panic!("watch error: {} {}", status.code, status.message)
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => panic!("watch failed: {err}"),
                None => panic!("the watch ended after {} events", arrived.len()),
            }
        }
        arrived
    })
}

/// Latencies from each create returning to its event arriving; an event that arrived
/// before its create returned counts as zero. Returns them and how many arrived first.
fn latencies(
    returned: &HashMap<String, Instant>,
    arrived: &HashMap<String, Instant>,
) -> (Vec<Duration>, usize) {
    let mut early = 0;
    let samples = returned
        .iter()
        .map(|(name, done)| {
            let at = arrived
                .get(name)
                .unwrap_or_else(|| panic!("no event for {name}"));
            if at < done {
                early += 1;
            }
            at.saturating_duration_since(*done)
        })
        .collect();
    (samples, early)
}

async fn fresh_namespace(client: &kube::Client, name: &str) -> Api<ConfigMap> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("creating the namespace");
    Api::namespaced(client.clone(), name)
}

async fn current_rv(api: &Api<ConfigMap>) -> String {
    api.list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list resourceVersion")
}

async fn bench_create(api: &Api<ConfigMap>, objects: usize, tasks: usize) {
    let rv = current_rv(api).await;
    let stream = api
        .watch(&WatchParams::default().timeout(3600), &rv)
        .await
        .expect("opening the watch");
    let recorder = spawn_watch_recorder(stream, objects);
    let returned = Arc::new(Mutex::new(HashMap::with_capacity(objects)));
    let mut request_times = Vec::with_capacity(objects);
    let started = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let api = api.clone();
        let returned = returned.clone();
        handles.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut done = Vec::new();
            for i in (task..objects).step_by(tasks) {
                let name = format!("cm-{i:05}");
                let sent = Instant::now();
                api.create(&PostParams::default(), &config_map(&name))
                    .await
                    .expect("create");
                let now = Instant::now();
                times.push(now - sent);
                done.push((name, now));
            }
            returned.lock().await.extend(done);
            times
        }));
    }
    for handle in handles {
        request_times.extend(handle.await.expect("a creating task"));
    }
    let elapsed = started.elapsed();
    println!(
        "create: {objects} ConfigMaps from {tasks} tasks in {:.2} s: {} (per request p50 {}, p99 {})",
        elapsed.as_secs_f64(),
        rate(objects, elapsed),
        ms(quantile(&mut request_times, 0.5)),
        ms(quantile(&mut request_times, 0.99)),
    );
    let arrived = recorder.await.expect("the watch recorder");
    let (mut samples, early) = latencies(&*returned.lock().await, &arrived);
    println!(
        "watch latency while {tasks} tasks create {objects}: p50 {}, p99 {}, max {} ({early} events arrived before their create returned)",
        ms(quantile(&mut samples, 0.5)),
        ms(quantile(&mut samples, 0.99)),
        ms(quantile(&mut samples, 1.0)),
    );
}

async fn bench_list(api: &Api<ConfigMap>, objects: usize) {
    const ROUNDS: usize = 3;
    let mut full = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let list = api.list(&ListParams::default()).await.expect("list");
        full.push(started.elapsed());
        assert_eq!(list.items.len(), objects, "the full list has every object");
    }
    let best = quantile(&mut full, 0.0);
    println!(
        "list (full): {objects} objects in {} (best of {ROUNDS}, median {}): {}",
        ms(best),
        ms(quantile(&mut full, 0.5)),
        rate(objects, best),
    );

    let mut paged = Vec::new();
    let mut pages = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let mut count = 0;
        let mut token: Option<String> = None;
        pages = 0;
        loop {
            let mut params = ListParams::default().limit(PAGE);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let page = api.list(&params).await.expect("paged list");
            count += page.items.len();
            pages += 1;
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
        }
        paged.push(started.elapsed());
        assert_eq!(count, objects, "the pages hold every object once");
    }
    let best = quantile(&mut paged, 0.0);
    println!(
        "list (paged, limit={PAGE}, {pages} pages): {objects} objects in {} (best of {ROUNDS}, median {}): {}",
        ms(best),
        ms(quantile(&mut paged, 0.5)),
        rate(objects, best),
    );
}

async fn bench_sequential_watch(api: &Api<ConfigMap>, objects: usize) {
    let rv = current_rv(api).await;
    let stream = api
        .watch(&WatchParams::default().timeout(3600), &rv)
        .await
        .expect("opening the watch");
    let recorder = spawn_watch_recorder(stream, objects);
    let mut returned = HashMap::with_capacity(objects);
    for i in 0..objects {
        let name = format!("seq-{i:05}");
        api.create(&PostParams::default(), &config_map(&name))
            .await
            .expect("create");
        returned.insert(name, Instant::now());
    }
    let arrived = recorder.await.expect("the watch recorder");
    let (mut samples, early) = latencies(&returned, &arrived);
    println!(
        "watch latency, one create at a time ({objects}): p50 {}, p99 {}, max {} ({early} events arrived before their create returned)",
        ms(quantile(&mut samples, 0.5)),
        ms(quantile(&mut samples, 0.99)),
        ms(quantile(&mut samples, 1.0)),
    );
}

/// A wire format of requests and answers.
#[derive(Clone, Copy)]
enum Wire {
    Json,
    Protobuf,
}

impl Wire {
    fn media_type(self) -> &'static str {
        match self {
            Wire::Json => "application/json",
            Wire::Protobuf => PROTOBUF,
        }
    }

    fn body(self, messages: &Messages, object: &serde_json::Value) -> Vec<u8> {
        match self {
            Wire::Json => serde_json::to_vec(object).expect("JSON"),
            Wire::Protobuf => messages
                .encode(object)
                .expect("encodes")
                .expect("a ConfigMap has a message"),
        }
    }
}

/// Sends one request in `wire` (body and Accept) and returns the answer's bytes.
async fn call(
    client: &kube::Client,
    wire: Wire,
    method: http::Method,
    path: &str,
    body: Vec<u8>,
) -> Vec<u8> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, wire.media_type())
        .header(http::header::CONTENT_TYPE, wire.media_type())
        .body(kube::client::Body::from(body))
        .expect("a request");
    let response = client.send(request).await.expect("the server answers");
    let status = response.status();
    let bytes = response.into_body().collect().await.expect("the body");
    let bytes = bytes.to_bytes().to_vec();
    assert!(
        status.is_success(),
        "{path}: {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    bytes
}

/// Creates from `tasks` tasks and lists whole, in one wire format; returns the create
/// latencies, the time to create them all, and the best list time and its size.
async fn bench_wire(
    client: &kube::Client,
    messages: &Arc<Messages>,
    wire: Wire,
    namespace: &str,
    objects: usize,
    tasks: usize,
) -> (Vec<Duration>, Duration, Duration, usize) {
    fresh_namespace(client, namespace).await;
    let path = format!("/api/v1/namespaces/{namespace}/configmaps");
    let started = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (client, messages, path) = (client.clone(), messages.clone(), path.clone());
        handles.push(tokio::spawn(async move {
            let mut times = Vec::new();
            for i in (task..objects).step_by(tasks) {
                let mut object =
                    serde_json::to_value(config_map(&format!("cm-{i:05}"))).expect("a ConfigMap");
                object["apiVersion"] = "v1".into();
                object["kind"] = "ConfigMap".into();
                let sent = Instant::now();
                let body = wire.body(&messages, &object);
                call(&client, wire, http::Method::POST, &path, body).await;
                times.push(sent.elapsed());
            }
            times
        }));
    }
    let mut times = Vec::new();
    for handle in handles {
        times.extend(handle.await.expect("a creating task"));
    }
    let created = started.elapsed();
    let mut best = Duration::MAX;
    let mut size = 0;
    for _ in 0..3 {
        let started = Instant::now();
        size = call(client, wire, http::Method::GET, &path, Vec::new())
            .await
            .len();
        best = best.min(started.elapsed());
    }
    (times, created, best, size)
}

/// The same creates and lists in JSON and in protobuf, side by side.
async fn bench_wire_formats(client: &kube::Client, objects: usize, tasks: usize) {
    let messages = Arc::new(Messages::new());
    let mut rows = Vec::new();
    for (wire, name, namespace) in [
        (Wire::Json, "JSON", "bench-json"),
        (Wire::Protobuf, "protobuf", "bench-protobuf"),
    ] {
        let (mut times, created, listed, size) =
            bench_wire(client, &messages, wire, namespace, objects, tasks).await;
        println!(
            "{name:<9} create {objects} from {tasks} tasks: {} (p50 {}, p99 {}); list whole: {} ({} KiB)",
            rate(objects, created),
            ms(quantile(&mut times, 0.5)),
            ms(quantile(&mut times, 0.99)),
            ms(listed),
            size / 1024,
        );
        rows.push((created, listed, size));
    }
    let ((json_create, json_list, json_size), (pb_create, pb_list, pb_size)) = (rows[0], rows[1]);
    println!(
        "protobuf/JSON: create time {:.2}x, list time {:.2}x, list size {:.2}x",
        pb_create.as_secs_f64() / json_create.as_secs_f64(),
        pb_list.as_secs_f64() / json_list.as_secs_f64(),
        pb_size as f64 / json_size as f64,
    );
}

async fn run() {
    let objects = env_usize("FERROVIRT_BENCH_OBJECTS", 10_000);
    let tasks = env_usize("FERROVIRT_BENCH_TASKS", 8);
    let sequential = env_usize("FERROVIRT_BENCH_SEQUENTIAL", 1_000);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = ApiServer::start(ApiServerConfig {
        data_dir: dir.path().join("data"),
        listen: "127.0.0.1:0".parse().expect("a socket address"),
        crds: vec![],
        admission: vec![],
        virtual_creates: HashMap::new(),
    })
    .await
    .expect("the server starts");
    let kubeconfig =
        kube::config::Kubeconfig::read_from(&server.kubeconfig).expect("the kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("the kubeconfig is usable");
    let client = kube::Client::try_from(config).expect("a client");
    println!(
        "ferrovirt embedded API server at {} (data in {}), kube-rs client",
        server.addr,
        dir.path().display()
    );

    let api = fresh_namespace(&client, "bench").await;
    bench_create(&api, objects, tasks).await;
    bench_list(&api, objects).await;
    let api = fresh_namespace(&client, "bench-seq").await;
    bench_sequential_watch(&api, sequential).await;
    bench_wire_formats(
        &client,
        env_usize("FERROVIRT_BENCH_WIRE_OBJECTS", 2_000),
        tasks,
    )
    .await;
    server.stop();
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and only wants
    // to know the benchmark builds and starts.
    if std::env::args().all(|a| a != "--bench") {
        println!(
            "apiserver benchmark: run it with `cargo bench -p ferrovirt-standalone --bench apiserver`"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        tokio::time::timeout(DEADLINE, run())
            .await
            .expect("the benchmark finishes within its deadline")
    });
}
