//! MAC pool benchmark: MAC allocations per second through the pool's admission with 10 000
//! VirtualMachines already in the pool. In-process: the admission closure the embedded API
//! server runs (the VM's JSON in, its MAC and stamp written), over a wide range (CNAO's
//! random block of 2^24) and over a dense one (16 384 addresses, 10 000 held); then end to end:
//! VirtualMachine creates through `ferrovirt up --no-virt`'s API server with kube-rs,
//! 16 in flight, in a namespace the pool serves and, as the baseline without allocation,
//! in one labelled out of it.
//!
//! `cargo bench -p ferrovirt --bench macpool` (`FV_BENCH_POOL_VMS`, `FV_BENCH_CREATES` change
//! the counts).

#[allow(dead_code)]
mod common;
#[path = "../tests/platform/mod.rs"]
mod platform;

use std::time::{Duration, Instant};

use common::loadavg;
use futures_util::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use operators::macpool::{KubeMacPool, MacPoolConfig, MacRange, OptMode};
use platform::Platform;
use serde_json::{Value, json};

const CONCURRENCY: usize = 16;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn vm(namespace: &str, name: &str, uid: Option<&str>, mac: Option<String>) -> Value {
    let mut iface = json!({"name": "default", "masquerade": {}});
    if let Some(mac) = mac {
        iface["macAddress"] = json!(mac);
    }
    let mut metadata = json!({"name": name, "namespace": namespace});
    if let Some(uid) = uid {
        metadata["uid"] = json!(uid);
    }
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": metadata,
        "spec": {
            "runStrategy": "Halted",
            "template": {"spec": {
                "domain": {
                    "resources": {"requests": {"memory": "64Mi"}},
                    "devices": {"interfaces": [iface]},
                },
                "networks": [{"name": "default", "pod": {}}],
            }},
        },
    })
}

/// A pool over `range` holding `held` stored VMs' MACs from its start on, ready.
fn loaded_pool(range: MacRange, held: usize) -> std::sync::Arc<KubeMacPool> {
    let pool = KubeMacPool::new(MacPoolConfig {
        namespace: "cluster-network-addons".into(),
        wait_time: Duration::from_secs(300),
        opt_mode: OptMode::OptOut,
    });
    pool.set_range(Some(range));
    let start = range.start().as_u64();
    let stored: Vec<Value> = (0..held)
        .map(|i| {
            let mac = api::cnao::MacAddress::from_u64(start + i as u64).unwrap();
            vm(
                "held",
                &format!("vm-{i}"),
                Some(&format!("uid-{i}")),
                Some(mac.to_string()),
            )
        })
        .collect();
    let loaded = Instant::now();
    pool.replace_stored_vms(&stored);
    println!(
        "  pool rebuilt from {held} stored VMs in {:.1} ms",
        loaded.elapsed().as_secs_f64() * 1e3
    );
    pool.mark_ready();
    pool
}

/// Admissions per second of `count` new VMs through the embedded server's closure.
fn in_process(label: &str, range: MacRange, held: usize, count: usize) {
    let pool = loaded_pool(range, held);
    let requests: Vec<Value> = (0..count)
        .map(|i| {
            vm(
                "bench",
                &format!("new-{i}"),
                Some(&format!("new-uid-{i}")),
                None,
            )
        })
        .collect();
    let started = Instant::now();
    for mut request in requests {
        pool.admit("kubevirt.io", "virtualmachines", &mut request)
            .expect("admitted");
        assert!(
            request["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["macAddress"]
                .is_string()
        );
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "  {label}: {count} admissions in {:.1} ms: {:.0} allocations/s ({:.2} µs each)",
        secs * 1e3,
        count as f64 / secs,
        secs * 1e6 / count as f64
    );
}

/// Creates `names` in `namespace` through the API server, CONCURRENCY in flight; creates/s.
async fn create_all(client: &kube::Client, namespace: &str, names: Vec<String>) -> f64 {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
        "virtualmachines",
    );
    let api: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(client.clone(), namespace, &resource);
    let count = names.len();
    let started = Instant::now();
    futures_util::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            let object: DynamicObject =
                serde_json::from_value(vm(namespace, &name, None, None)).expect("a VM");
            async move {
                api.create(&PostParams::default(), &object)
                    .await
                    .expect("create")
            }
        })
        .buffer_unordered(CONCURRENCY)
        .for_each(|_| async {})
        .await;
    count as f64 / started.elapsed().as_secs_f64()
}

fn end_to_end(held: usize, count: usize) {
    let platform = Platform::start_with("bench-macpool", &["--no-virt"]);
    for (name, label) in [
        ("pool", ""),
        (
            "quiet",
            "\n  labels:\n    mutatevirtualmachines.kubemacpool.io: ignore",
        ),
    ] {
        platform.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}{label}\n"
        ));
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = standalone::control_plane::client_for(&platform.kubeconfig())
            .await
            .expect("a client");
        let filled = create_all(&client, "pool", (0..held).map(|i| format!("held-{i}")).collect()).await;
        println!("  filling the pool: {held} VM creates at {filled:.0}/s");
        let with_macs = create_all(&client, "pool", (0..count).map(|i| format!("new-{i}")).collect()).await;
        let without = create_all(&client, "quiet", (0..count).map(|i| format!("new-{i}")).collect()).await;
        println!(
            "  {count} VM creates with {held} in the pool: {with_macs:.0}/s allocating a MAC each, {without:.0}/s in a namespace the pool leaves alone"
        );
    });
    let list = platform.json(&["get", "vm", "-n", "pool"]).expect("VMs");
    let macs: std::collections::HashSet<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|vm| {
            vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["macAddress"]
                .as_str()
        })
        .collect();
    assert_eq!(macs.len(), held + count, "every VM got its own MAC");
}

fn main() {
    let held = env_count("FV_BENCH_POOL_VMS", 10_000);
    let count = env_count("FV_BENCH_CREATES", 2_000);
    println!("MAC pool, {held} VMs in the pool (load {})", loadavg());
    println!("in-process admission (the embedded API server's closure):");
    let wide = MacRange::parse("02:3c:71:00:00:00", "02:3c:71:ff:ff:ff").unwrap();
    in_process("wide range (16M)", wide, held, 20_000);
    let dense_end = api::cnao::MacAddress::from_u64(
        wide.start().as_u64() + (held as u64).next_power_of_two().max(held as u64 * 3 / 2) - 1,
    )
    .unwrap();
    let dense = MacRange::parse(&wide.start().to_string(), &dense_end.to_string()).unwrap();
    in_process(
        &format!("dense range ({})", dense.len()),
        dense,
        held,
        (dense.len() as usize - held).min(2_000),
    );
    println!("end to end (ferrovirt up --no-virt, kube-rs, {CONCURRENCY} in flight):");
    end_to_end(held, count);
}
