//! The MAC pool (kubemacpool) and its operator (CNAO's NetworkAddonsConfig) on `ferrovirt
//! up`, through kubectl: VirtualMachines (Halted, so no guest boots) get distinct MACs of
//! the configured range and keep them across `down`/`up`; MACs of deleted VMs, of removed
//! interfaces and of VMs that were never stored return to the pool; an opted-out namespace
//! gets none; bad input is refused naming the field; two running VMIs with one MAC raise
//! `MACCollision` on both and `kmp_mac_collisions`.

use crate::platform;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use platform::{Platform, condition};
use serde_json::Value;

const NAMESPACE_LABEL: &str = "mutatevirtualmachines.kubemacpool.io";
const OPERAND_NAMESPACE: &str = "cluster-network-addons";

fn vm_yaml(namespace: &str, name: &str, interfaces: &str, networks: &str) -> String {
    format!(
        r#"apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
  namespace: {namespace}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        resources:
          requests:
            memory: 64Mi
        devices:
          interfaces:
{interfaces}
      networks:
{networks}
"#
    )
}

/// A Halted VM with one masquerade interface on the pod network.
fn plain_vm(namespace: &str, name: &str) -> String {
    vm_yaml(
        namespace,
        name,
        "          - name: default\n            masquerade: {}",
        "      - name: default\n        pod: {}",
    )
}

fn network_addons_config(range: Option<(&str, &str)>) -> String {
    let pool = match range {
        Some((start, end)) => format!("\n    rangeStart: \"{start}\"\n    rangeEnd: \"{end}\""),
        None => " {}".to_owned(),
    };
    format!(
        "apiVersion: networkaddonsoperator.network.kubevirt.io/v1\nkind: NetworkAddonsConfig\nmetadata:\n  name: cluster\nspec:\n  kubeMacPool:{pool}\n"
    )
}

fn namespace(platform: &Platform, name: &str, opted_out: bool) {
    let labels = if opted_out {
        format!("\n  labels:\n    {NAMESPACE_LABEL}: ignore")
    } else {
        String::new()
    };
    platform.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}{labels}\n"
    ));
}

/// `kubectl create -f -` of `yaml`: Ok, or kubectl's stderr.
fn create(platform: &Platform, yaml: &str) -> Result<(), String> {
    let out = platform.kubectl(&["create", "-f", "-"], Some(yaml));
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn mac_of(vm: &Value, interface: usize) -> Option<String> {
    vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][interface]["macAddress"]
        .as_str()
        .map(str::to_owned)
}

fn vm_mac(platform: &Platform, namespace: &str, name: &str) -> Option<String> {
    let vm = platform
        .json(&["get", "-n", namespace, "vm", name])
        .unwrap_or_else(|| panic!("VM {namespace}/{name} exists"));
    mac_of(&vm, 0)
}

/// The VMs of `namespace` and their first interface's MAC.
fn macs_in(platform: &Platform, namespace: &str) -> Vec<(String, Option<String>)> {
    let list = platform
        .json(&["get", "-n", namespace, "vm"])
        .expect("listing VMs");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|vm| {
            (
                vm["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                mac_of(vm, 0),
            )
        })
        .collect()
}

fn in_range(mac: &str, prefix: &str) -> bool {
    mac.starts_with(prefix)
}

fn wait_until(what: &str, limit: Duration, platform: &Platform, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} within {limit:?}; log:\n{}", platform.log());
}

/// Applies NetworkAddonsConfig `cluster` with `range`, and waits until the pool allocates
/// from it (its ConfigMap reached the pool: a probe VM gets a MAC starting with `prefix`).
fn use_range(platform: &Platform, start: &str, end: &str, prefix: &str) {
    platform.apply(&network_addons_config(Some((start, end))));
    namespace(platform, "probe", false);
    let mut attempt = 0;
    wait_until(
        "the pool allocates from the new range",
        Duration::from_secs(20),
        platform,
        || {
            attempt += 1;
            let name = format!("probe-{attempt}");
            if create(platform, &plain_vm("probe", &name)).is_err() {
                return false;
            }
            let mac = vm_mac(platform, "probe", &name).unwrap_or_default();
            platform.ok(&["delete", "-n", "probe", "vm", &name, "--timeout=30s"]);
            in_range(&mac, prefix)
        },
    );
}

/// The platform's metrics endpoint, from the last address its log names.
fn metrics(platform: &Platform) -> String {
    let log = platform.log();
    let address = log
        .lines()
        .rev()
        .find_map(|line| line.split("metrics on http://").nth(1))
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"))
        .to_owned();
    let mut stream = std::net::TcpStream::connect(&address).expect("connecting to the metrics");
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: metrics\r\n\r\n")
        .expect("asking for the metrics");
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .expect("reading the metrics");
    text
}

/// The value of `kmp_mac_pool_allocated_macs`.
fn allocated(platform: &Platform) -> u64 {
    metrics(platform)
        .lines()
        .find_map(|line| line.strip_prefix("kmp_mac_pool_allocated_macs "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

fn wait_allocated(platform: &Platform, count: u64) {
    wait_until(
        &format!("{count} MACs allocated"),
        Duration::from_secs(10),
        platform,
        || allocated(platform) == count,
    );
}

#[test]
fn two_hundred_vms_get_distinct_macs_of_the_range_and_keep_them_across_down_and_up() {
    let mut platform = Platform::start("macpool-many");
    // `up` made NetworkAddonsConfig cluster with the pool, as HCO would.
    let nac = platform
        .json(&["get", "networkaddonsconfig", "cluster"])
        .expect("NAC cluster");
    assert_eq!(
        condition(&nac, "Available").expect("Available")["status"],
        "True",
        "{nac}"
    );
    assert_eq!(
        condition(&nac, "Degraded").expect("Degraded")["status"],
        "False"
    );
    assert!(nac["status"]["observedVersion"].is_string(), "{nac}");
    use_range(
        &platform,
        "02:0a:00:00:00:00",
        "02:0a:00:00:ff:ff",
        "02:0a:00:00:",
    );

    namespace(&platform, "pool", false);
    let many: String = (0..200)
        .map(|i| format!("---\n{}", plain_vm("pool", &format!("vm-{i:03}"))))
        .collect();
    create(&platform, &many).expect("creating 200 VMs");
    let first = macs_in(&platform, "pool");
    assert_eq!(first.len(), 200);
    let mut seen = HashSet::new();
    for (name, mac) in &first {
        let mac = mac
            .as_deref()
            .unwrap_or_else(|| panic!("{name} got no MAC"));
        assert!(in_range(mac, "02:0a:00:00:"), "{name}: {mac}");
        assert!(seen.insert(mac.to_owned()), "{mac} given twice");
    }
    let vm = platform
        .json(&["get", "-n", "pool", "vm", "vm-000"])
        .unwrap();
    assert!(vm["metadata"]["annotations"]["kubemacpool.io/transaction-timestamp"].is_string());

    // An opted-out namespace gets none.
    namespace(&platform, "quiet", true);
    create(&platform, &plain_vm("quiet", "untouched")).expect("a VM in an opted-out namespace");
    assert_eq!(vm_mac(&platform, "quiet", "untouched"), None);

    // A MAC set by hand that another VM holds, twice in one VM, or malformed: refused.
    let taken = first[0].1.clone().unwrap();
    let iface = |mac: &str| {
        format!(
            "          - name: default\n            masquerade: {{}}\n            macAddress: \"{mac}\""
        )
    };
    let pod_network = "      - name: default\n        pod: {}";
    let err = create(
        &platform,
        &vm_yaml("pool", "thief", &iface(&taken), pod_network),
    )
    .unwrap_err();
    assert!(
        err.contains("failed to allocate requested mac address"),
        "{err}"
    );
    assert!(
        err.contains("spec.template.spec.domain.devices.interfaces[0].macAddress"),
        "{err}"
    );
    let twice = format!(
        "{}\n          - name: blue\n            bridge: {{}}\n            macAddress: \"02:0c:00:00:00:01\"",
        iface("02:0c:00:00:00:01")
    );
    let networks =
        format!("{pod_network}\n      - name: blue\n        multus:\n          networkName: blue");
    let err = create(&platform, &vm_yaml("pool", "twice", &twice, &networks)).unwrap_err();
    assert!(
        err.contains("duplicate MAC address 02:0c:00:00:00:01"),
        "{err}"
    );
    assert!(err.contains("interfaces[1].macAddress"), "{err}");
    let err = create(
        &platform,
        &vm_yaml("pool", "bad", &iface("02:0c:00:00:00:zz"), pod_network),
    )
    .unwrap_err();
    assert!(
        err.contains("spec.template.spec.domain.devices.interfaces[0].macAddress"),
        "{err}"
    );
    // A MAC set by hand that nobody holds is recorded: a second VM cannot take it.
    create(
        &platform,
        &vm_yaml("pool", "manual", &iface("02:0c:00:00:00:02"), pod_network),
    )
    .expect("a free MAC by hand");
    let err = create(
        &platform,
        &vm_yaml("quiet", "copy", &iface("02:0c:00:00:00:02"), pod_network),
    );
    assert!(
        err.is_ok(),
        "an opted-out namespace is not checked: {err:?}"
    );
    let err = create(
        &platform,
        &vm_yaml("pool", "copy", &iface("02:0c:00:00:00:02"), pod_network),
    )
    .unwrap_err();
    assert!(
        err.contains("already allocated to VirtualMachine pool/manual"),
        "{err}"
    );

    // Bad NetworkAddonsConfigs are refused naming the field.
    for (start, end, field, words) in [
        (
            "02:00:00:00:00:00",
            "",
            "spec.kubeMacPool.rangeEnd",
            "both or none",
        ),
        (
            "02:00:00:00:zz:00",
            "02:00:00:00:ff:00",
            "spec.kubeMacPool.rangeStart",
            "the mac address is invalid",
        ),
        (
            "03:00:00:00:00:00",
            "03:00:00:00:ff:00",
            "spec.kubeMacPool.rangeStart",
            "Multicast",
        ),
        (
            "02:00:00:00:ff:00",
            "02:00:00:00:00:00",
            "spec.kubeMacPool.rangeEnd",
            "lesser than or equal",
        ),
    ] {
        let out = platform.kubectl(
            &["apply", "-f", "-"],
            Some(&network_addons_config(Some((start, end)))),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{start}-{end} was accepted");
        assert!(
            err.contains(field) && err.contains(words),
            "{start}-{end}: {err}"
        );
    }

    // After down and up, new VMs never get a MAC already allocated.
    platform.stop_and_restart();
    let more: String = (0..50)
        .map(|i| format!("---\n{}", plain_vm("pool", &format!("after-{i:02}"))))
        .collect();
    create(&platform, &more).expect("creating 50 more VMs");
    let after = macs_in(&platform, "pool");
    let mut all = HashSet::new();
    for (name, mac) in &after {
        let mac = mac
            .as_deref()
            .unwrap_or_else(|| panic!("{name} got no MAC"));
        assert!(all.insert(mac.to_owned()), "{name}: {mac} given twice");
    }
    assert_eq!(all.len(), 251, "200 + manual + 50");
    // Every VM kept its MAC.
    for (name, mac) in &first {
        assert_eq!(
            vm_mac(&platform, "pool", name).as_ref(),
            mac.as_ref(),
            "{name}"
        );
    }
}

#[test]
fn macs_return_to_a_full_range_from_deleted_vms_removed_interfaces_and_vms_never_stored() {
    let platform = Platform::start_with("macpool-tiny", &["--mac-pool-wait-time", "2"]);
    use_range(
        &platform,
        "02:0b:00:00:00:00",
        "02:0b:00:00:00:02",
        "02:0b:00:00:00:0",
    );
    wait_allocated(&platform, 0);
    namespace(&platform, "tiny", false);
    for name in ["a", "b", "c"] {
        create(&platform, &plain_vm("tiny", name)).expect(name);
    }
    let held: HashSet<String> = macs_in(&platform, "tiny")
        .into_iter()
        .filter_map(|(_, m)| m)
        .collect();
    assert_eq!(held.len(), 3, "{held:?}");
    let err = create(&platform, &plain_vm("tiny", "d")).unwrap_err();
    assert!(
        err.contains("Failed to create virtual machine allocation error: Failed to allocate mac to the vm object: the range is full"),
        "{err}"
    );

    // A deleted VM's MAC returns.
    let a = vm_mac(&platform, "tiny", "a").unwrap();
    platform.ok(&["delete", "-n", "tiny", "vm", "a", "--timeout=30s"]);
    wait_allocated(&platform, 2);
    create(&platform, &plain_vm("tiny", "d")).expect("d after a was deleted");
    assert_eq!(vm_mac(&platform, "tiny", "d"), Some(a));

    // An interface removed by an update returns its MAC.
    let b = vm_mac(&platform, "tiny", "b").unwrap();
    platform.ok(&[
        "patch", "-n", "tiny", "vm", "b", "--type=json", "-p",
        r#"[{"op":"remove","path":"/spec/template/spec/domain/devices/interfaces"},{"op":"remove","path":"/spec/template/spec/networks"}]"#,
    ]);
    wait_allocated(&platform, 2);
    create(&platform, &plain_vm("tiny", "e")).expect("e after b lost its interface");
    assert_eq!(vm_mac(&platform, "tiny", "e"), Some(b));

    // A create refused after the pool allocated for it (the name exists) holds its MAC
    // only for the wait time.
    platform.ok(&["delete", "-n", "tiny", "vm", "e", "--timeout=30s"]);
    wait_allocated(&platform, 2);
    let err = create(&platform, &plain_vm("tiny", "c")).unwrap_err();
    assert!(
        err.contains("AlreadyExists") || err.contains("already exists"),
        "{err}"
    );
    let err = create(&platform, &plain_vm("tiny", "f")).unwrap_err();
    assert!(
        err.contains("the range is full"),
        "the refused create's MAC is held: {err}"
    );
    let started = Instant::now();
    wait_allocated(&platform, 2);
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "released after {:?}",
        started.elapsed()
    );
    create(&platform, &plain_vm("tiny", "f")).expect("f once the refused create's MAC expired");
}

#[test]
fn two_running_vmis_with_one_mac_raise_mac_collision_on_both() {
    let mut platform = Platform::start_with("macpool-collision", &["--no-virt"]);
    // With no range given, CNAO's random locally administered one, kept across restarts.
    let range = |platform: &Platform| {
        let cm = platform
            .json(&[
                "get",
                "-n",
                OPERAND_NAMESPACE,
                "configmap",
                "kubemacpool-mac-range-config",
            ])
            .expect("the range ConfigMap");
        (
            cm["data"]["RANGE_START"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            cm["data"]["RANGE_END"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    let (start, end) = range(&platform);
    assert!(
        start.starts_with("02:") && start.ends_with(":00:00:00"),
        "{start}"
    );
    assert_eq!(start[..8], end[..8]);
    assert!(end.ends_with(":ff:ff:ff"), "{end}");

    let mac = "02:0d:00:00:00:01";
    for name in ["vmi-a", "vmi-b"] {
        create(
            &platform,
            &format!(
                r#"apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
  namespace: default
spec:
  domain:
    resources:
      requests:
        memory: 64Mi
    devices:
      interfaces:
      - name: default
        masquerade: {{}}
        macAddress: "{mac}"
  networks:
  - name: default
    pod: {{}}
"#
            ),
        )
        .expect(name);
        let status = format!(
            r#"{{"status":{{"phase":"Running","interfaces":[{{"name":"default","mac":"{}"}}]}}}}"#,
            mac.to_uppercase()
        );
        platform.ok(&[
            "patch",
            "vmi",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ]);
    }
    let collision_events = |platform: &Platform, name: &str| -> Vec<String> {
        let events = platform
            .json(&[
                "get",
                "events",
                "--field-selector",
                &format!("involvedObject.name={name}"),
            ])
            .unwrap_or_default();
        events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["reason"] == "MACCollision" && e["type"] == "Warning")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    wait_until(
        "MACCollision on both VMIs",
        Duration::from_secs(15),
        &platform,
        || {
            !collision_events(&platform, "vmi-a").is_empty()
                && !collision_events(&platform, "vmi-b").is_empty()
        },
    );
    let messages = collision_events(&platform, "vmi-a");
    assert!(
        messages
            .iter()
            .any(|m| m
                == &format!("MAC {mac}: Collision between vmi/default/vmi-a, vmi/default/vmi-b")),
        "{messages:?}"
    );
    let gauge = format!("kmp_mac_collisions{{mac=\"{mac}\"}} 2");
    wait_until(
        "the collision gauge",
        Duration::from_secs(5),
        &platform,
        || metrics(&platform).contains(&gauge),
    );

    // vmi-b stops: the collision is over.
    platform.ok(&[
        "patch",
        "vmi",
        "vmi-b",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Succeeded"}}"#,
    ]);
    wait_until(
        "the collision gauge to go",
        Duration::from_secs(5),
        &platform,
        || !metrics(&platform).contains(&format!("mac=\"{mac}\"")),
    );

    platform.stop_and_restart();
    assert_eq!(
        range(&platform),
        (start, end),
        "the random range changed across down and up"
    );
}
