//! `ferrovirt cni bridge` against the containernetworking reference `bridge` plugin
//! (/usr/lib/cni/bridge, Debian's containernetworking-plugins): both run with the same
//! configuration and the same container ID, each in a "host" network namespace of its own
//! with a container namespace beside it and host-local IPAM over a data directory of its
//! own; then their results, links, addresses, routes, VLANs, sysctls and firewall rules are
//! compared, random names and MACs aside. Run as root (namespaces); skipped otherwise.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const REFERENCE: &str = "/usr/lib/cni/bridge";
const CNI_PATH: &str = "/usr/lib/cni";
const FIXED_MAC: &str = "02:42:ac:11:00:99";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Checks what the test needs, failing with what is missing (no test skips).
fn ready(test: &str) -> bool {
    assert!(
        is_root(),
        "{test} needs root: it makes network namespaces, bridges and veth pairs"
    );
    assert!(
        Path::new(REFERENCE).exists(),
        "{REFERENCE} is missing: install Debian's containernetworking-plugins (scripts/install-deps)"
    );
    true
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A network namespace of the test's own, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Self {
        let name = format!(
            "fvcni-{}-{}-{tag}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let status = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("ip netns add");
        assert!(status.success(), "ip netns add {name}");
        Netns(name)
    }

    fn path(&self) -> String {
        format!("/run/netns/{}", self.0)
    }

    /// Runs a command inside the namespace and returns its stdout.
    fn exec(&self, argv: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(argv)
            .output()
            .expect("ip netns exec");
        assert!(
            out.status.success(),
            "{argv:?} in {}: {}",
            self.0,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn ip_json(&self, args: &[&str]) -> Value {
        let mut argv = vec!["ip", "-j"];
        argv.extend_from_slice(args);
        let out = self.exec(&argv);
        if out.trim().is_empty() {
            json!([])
        } else {
            serde_json::from_str(&out).expect("ip -j output")
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Quietly: a test may have deleted it already.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.0])
            .stderr(Stdio::null())
            .status();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plugin {
    Reference,
    Ours,
}

/// What one invocation printed.
#[derive(Debug)]
struct Outcome {
    success: bool,
    stdout: Value,
    stderr: String,
}

impl Outcome {
    fn error_code(&self) -> u64 {
        assert!(!self.success, "expected a failure, got {}", self.stdout);
        self.stdout["code"]
            .as_u64()
            .unwrap_or_else(|| panic!("no error code in {}", self.stdout))
    }

    fn error_text(&self) -> String {
        format!(
            "{} {}",
            self.stdout["msg"].as_str().unwrap_or_default(),
            self.stdout["details"].as_str().unwrap_or_default()
        )
    }
}

/// One plugin's world: a host namespace, a container namespace, an IPAM data directory.
struct Side {
    plugin: Plugin,
    host: Netns,
    container: Netns,
    ipam_dir: tempfile::TempDir,
    container_id: String,
}

impl Side {
    fn new(plugin: Plugin, tag: &str) -> Self {
        Self::with_container_id(plugin, tag, &format!("ctr-{tag}"))
    }

    fn with_container_id(plugin: Plugin, tag: &str, container_id: &str) -> Self {
        let host = Netns::new(&format!("{tag}-h"));
        let container = Netns::new(&format!("{tag}-c"));
        host.exec(&["ip", "link", "set", "lo", "up"]);
        container.exec(&["ip", "link", "set", "lo", "up"]);
        Side {
            plugin,
            host,
            container,
            ipam_dir: tempfile::tempdir().expect("tempdir"),
            container_id: container_id.to_owned(),
        }
    }

    /// The reference's side and ours, with the same container ID (the NAT chain names and
    /// spoof-check chain names derive from it).
    fn pair(tag: &str) -> (Side, Side) {
        let id = format!("ctr-{tag}");
        (
            Side::with_container_id(Plugin::Reference, &format!("{tag}r"), &id),
            Side::with_container_id(Plugin::Ours, &format!("{tag}o"), &id),
        )
    }

    /// `config` with this side's IPAM data directory.
    fn config(&self, config: &Value) -> Value {
        let mut config = config.clone();
        if let Some(ipam) = config.get_mut("ipam").and_then(Value::as_object_mut)
            && ipam.get("type").and_then(Value::as_str) == Some("host-local")
        {
            ipam.insert("dataDir".into(), json!(self.ipam_dir.path()));
        }
        config
    }

    fn run(&self, command: &str, config: &Value) -> Outcome {
        self.run_with(command, &self.config(config).to_string(), &[])
    }

    /// Runs the plugin in the host namespace; `env` adds to or (with an empty value)
    /// removes from the usual CNI variables.
    fn run_with(&self, command: &str, stdin: &str, env: &[(&str, &str)]) -> Outcome {
        let ferrovirt = env!("CARGO_BIN_EXE_ferrovirt");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.host.0]);
        match self.plugin {
            Plugin::Reference => cmd.arg(REFERENCE),
            Plugin::Ours => cmd.args([ferrovirt, "cni", "bridge"]),
        };
        let netns = self.container.path();
        let mut vars = vec![
            ("CNI_COMMAND", command),
            ("CNI_CONTAINERID", self.container_id.as_str()),
            ("CNI_NETNS", netns.as_str()),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", CNI_PATH),
        ];
        for (key, value) in env {
            vars.retain(|(k, _)| k != key);
            if !value.is_empty() {
                vars.push((key, value));
            }
        }
        for (key, _) in std::env::vars() {
            if key.starts_with("CNI_") {
                cmd.env_remove(key);
            }
        }
        cmd.envs(vars)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the plugin");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().expect("wait").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{:?} {command} did not finish in 30 s", self.plugin);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().expect("plugin output");
        let text = String::from_utf8_lossy(&out.stdout);
        let stdout = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{:?} printed no JSON ({e}): {text}", self.plugin))
        };
        Outcome {
            success: out.status.success(),
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn add(&self, config: &Value) -> Value {
        let out = self.run("ADD", config);
        assert!(
            out.success,
            "{:?} ADD failed: {} {}",
            self.plugin, out.stdout, out.stderr
        );
        out.stdout
    }

    /// `config` with `prevResult`, for CHECK and DEL.
    fn with_prev(config: &Value, prev: &Value) -> Value {
        let mut config = config.clone();
        config["prevResult"] = prev.clone();
        config
    }

    /// Replaces what differs between the two sides by nature: veth names, random MACs, the
    /// container namespace path, namespace ids.
    fn normalize(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.normalize_str(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.normalize(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.normalize(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn normalize_str(&self, s: &str) -> String {
        if is_mac(s) && s != FIXED_MAC && s != "ff:ff:ff:ff:ff:ff" && s != "00:00:00:00:00:00" {
            return "MAC".to_owned();
        }
        let s = s.replace(&self.container.path(), "SANDBOX");
        replace_veth_names(&s)
    }

    /// Links, addresses, routes, VLANs and sysctls of both namespaces, and the firewall rules
    /// of the host one.
    fn snapshot(&self) -> Value {
        let mut out = serde_json::Map::new();
        for (label, ns) in [("host", &self.host), ("container", &self.container)] {
            out.insert(format!("{label} links"), links(ns));
            out.insert(format!("{label} addresses"), addresses(ns));
            out.insert(
                format!("{label} routes"),
                json!([
                    ns.ip_json(&["-4", "route", "show", "table", "main"]),
                    ns.ip_json(&["-6", "route", "show", "table", "main"])
                ]),
            );
            out.insert(format!("{label} sysctls"), sysctls(ns));
        }
        out.insert("host vlans".into(), vlans(&self.host));
        out.insert(
            "host nat".into(),
            json!([
                iptables_nat(&self.host, "iptables-save"),
                iptables_nat(&self.host, "ip6tables-save")
            ]),
        );
        out.insert("host nft".into(), nft_ruleset(&self.host));
        self.normalize(&Value::Object(out))
    }

    fn host_veths(&self) -> Vec<String> {
        let links = self.host.ip_json(&["-d", "link", "show"]);
        links
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["linkinfo"]["info_kind"] == "veth")
            .map(|l| l["ifname"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Addresses host-local holds for this side (its reservation files).
    fn reserved_ips(&self, network: &str) -> Vec<String> {
        let dir = self.ipam_dir.path().join(network);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut ips: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.parse::<std::net::IpAddr>().is_ok())
            .collect();
        ips.sort();
        ips
    }
}

fn is_mac(s: &str) -> bool {
    s.len() == 17
        && s.split(':').count() == 6
        && s.split(':')
            .all(|b| b.len() == 2 && b.chars().all(|c| c.is_ascii_hexdigit()))
}

/// "vethXXXXXXXX" (8 hex digits) anywhere in `s` becomes "VETH".
fn replace_veth_names(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(pos) = rest.find("veth") {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos + 4..];
        let hex_len = tail
            .chars()
            .take(8)
            .take_while(|c| c.is_ascii_hexdigit())
            .count();
        if hex_len == 8 {
            out.push_str("VETH");
            rest = &tail[8..];
        } else {
            out.push_str("veth");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

fn links(ns: &Netns) -> Value {
    let links = ns.ip_json(&["-d", "link", "show"]);
    let mut out: Vec<Value> = links
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let mut flags: Vec<String> =
                l["flags"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_owned()).collect();
            flags.sort();
            let info = &l["linkinfo"];
            json!({
                "ifname": l["ifname"], "mtu": l["mtu"], "operstate": l["operstate"], "flags": flags,
                "promiscuity": l["promiscuity"], "master": l["master"], "address": l["address"],
                // Debian's reference (1.1.1) gives veths a txqueuelen of 0; newer releases
                // and ours leave the kernel's default.
                "txqlen": if info["info_kind"] == "veth" { Value::Null } else { l["txqlen"].clone() },
                "kind": info["info_kind"], "port kind": info["info_slave_kind"],
                "hairpin": info["info_slave_data"]["hairpin"], "port state": info["info_slave_data"]["state"],
                "learning": info["info_slave_data"]["learning"],
                "vlan_filtering": info["info_data"]["vlan_filtering"], "stp_state": info["info_data"]["stp_state"],
            })
        })
        .collect();
    out.sort_by_key(|l| l["ifname"].to_string());
    Value::Array(out)
}

fn addresses(ns: &Netns) -> Value {
    let links = ns.ip_json(&["addr", "show"]);
    let mut out: Vec<Value> = links
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let addrs: Vec<Value> = l["addr_info"]
                .as_array()
                .map(|a| a.as_slice())
                .unwrap_or_default()
                .iter()
                // Link-local IPv6 addresses derive from random MACs.
                .filter(|a| !(a["family"] == "inet6" && a["scope"] == "link"))
                .map(|a| {
                    json!({"family": a["family"], "local": a["local"], "prefixlen": a["prefixlen"],
                                "broadcast": a["broadcast"], "scope": a["scope"]})
                })
                .collect();
            json!({"ifname": l["ifname"], "addresses": addrs})
        })
        .collect();
    out.sort_by_key(|l| l["ifname"].to_string());
    Value::Array(out)
}

fn sysctls(ns: &Netns) -> Value {
    let out = ns.exec(&[
        "sh",
        "-c",
        "cd /proc/sys/net && grep -H . ipv4/ip_forward ipv6/conf/all/forwarding ipv6/conf/*/accept_ra \
         ipv6/conf/*/accept_dad ipv6/conf/*/disable_ipv6 ipv4/conf/*/arp_notify 2>/dev/null; true",
    ]);
    let mut lines: Vec<String> = out.lines().map(replace_veth_names).collect();
    lines.sort();
    json!(lines)
}

fn vlans(ns: &Netns) -> Value {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, "bridge", "-j", "vlan", "show"])
        .output()
        .expect("bridge vlan show");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn iptables_nat(ns: &Netns, tool: &str) -> Value {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, tool, "-t", "nat"])
        .output()
        .expect("iptables-save");
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(" [").next().unwrap_or(l).to_owned())
        .collect();
    json!(lines)
}

fn nft_ruleset(ns: &Netns) -> Value {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, "nft", "-j", "list", "ruleset"])
        .output()
        .expect("nft list ruleset");
    let mut ruleset: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("handle");
                map.remove("metainfo");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => {
                items.retain(|i| i.get("metainfo").is_none());
                items.iter_mut().for_each(strip);
            }
            _ => {}
        }
    }
    strip(&mut ruleset);
    ruleset
}

/// Waits for the kernel's deferred link-state events (linkwatch delays carrier changes by up
/// to a second) so a bridge that lost its last port reads the same on both sides.
fn settle() {
    std::thread::sleep(Duration::from_millis(1100));
}

/// Asserts two normalized values are equal, printing both in full when they are not.
fn assert_same(what: &str, reference: &Value, ours: &Value) {
    assert!(
        reference == ours,
        "{what} differs\nreference: {}\nours:      {}",
        serde_json::to_string_pretty(reference).unwrap(),
        serde_json::to_string_pretty(ours).unwrap()
    );
}

fn gateway_config() -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "fvnet",
        "type": "bridge",
        "bridge": "fvbr0",
        "isDefaultGateway": true,
        "ipMasq": true,
        "mtu": 1400,
        "hairpinMode": true,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": "10.88.5.0/24"}], [{"subnet": "fd00:88:5::/64"}]]
        }
    })
}

#[test]
fn gateway_bridge_with_host_local_matches_the_reference_through_add_check_and_del() {
    if !ready("gateway_bridge_with_host_local_matches_the_reference_through_add_check_and_del") {
        return;
    }
    let (reference, ours) = Side::pair("gw");
    let config = gateway_config();
    let results: Vec<Value> = [&reference, &ours]
        .iter()
        .map(|side| side.add(&config))
        .collect();
    assert_same(
        "ADD result",
        &reference.normalize(&results[0]),
        &ours.normalize(&results[1]),
    );
    assert_eq!(
        results[1]["ips"][0]["address"], "10.88.5.2/24",
        "{}",
        results[1]
    );
    assert_eq!(results[1]["ips"][0]["interface"], 2);
    assert_same("state after ADD", &reference.snapshot(), &ours.snapshot());
    assert_eq!(
        ours.reserved_ips("fvnet"),
        vec!["10.88.5.2", "fd00:88:5::2"]
    );

    // CHECK passes on an intact attachment, and fails once its address is gone.
    for (side, result) in [(&reference, &results[0]), (&ours, &results[1])] {
        let out = side.run("CHECK", &Side::with_prev(&config, result));
        assert!(
            out.success,
            "{:?} CHECK: {} {}",
            side.plugin, out.stdout, out.stderr
        );
        assert_eq!(out.stdout, Value::Null, "CHECK prints nothing on success");
        side.container
            .exec(&["ip", "addr", "del", "10.88.5.2/24", "dev", "eth0"]);
        let out = side.run("CHECK", &Side::with_prev(&config, result));
        assert!(
            !out.success,
            "{:?} CHECK passed a tampered attachment",
            side.plugin
        );
        assert!(
            out.error_text().contains("10.88.5.2/24"),
            "{:?}: {}",
            side.plugin,
            out.stdout
        );
        // Put it back: the reference finds the NAT rules to remove from the interface's
        // addresses (ours also from prevResult).
        side.container
            .exec(&["ip", "addr", "add", "10.88.5.2/24", "dev", "eth0"]);
    }
    let out = ours.run("CHECK", &config);
    assert!(out.error_text().contains("prevResult"), "{}", out.stdout);

    // DEL undoes it all, and a second DEL succeeds.
    for (side, result) in [(&reference, &results[0]), (&ours, &results[1])] {
        for round in 0..2 {
            let out = side.run("DEL", &Side::with_prev(&config, result));
            assert!(
                out.success,
                "{:?} DEL #{round}: {} {}",
                side.plugin, out.stdout, out.stderr
            );
        }
        assert!(
            side.host_veths().is_empty(),
            "{:?} left {:?}",
            side.plugin,
            side.host_veths()
        );
        assert!(
            side.reserved_ips("fvnet").is_empty(),
            "{:?} kept {:?}",
            side.plugin,
            side.reserved_ips("fvnet")
        );
    }
    settle();
    assert_same("state after DEL", &reference.snapshot(), &ours.snapshot());
}

#[test]
fn layer2_bridge_with_a_fixed_mac_and_promiscuous_mode_matches_the_reference() {
    if !ready("layer2_bridge_with_a_fixed_mac_and_promiscuous_mode_matches_the_reference") {
        return;
    }
    let (reference, ours) = Side::pair("l2");
    let config = json!({
        "cniVersion": "0.4.0",
        "name": "fvl2",
        "type": "bridge",
        "bridge": "fvbr-l2",
        "promiscMode": true,
        "mtu": 9000,
        "runtimeConfig": {"mac": FIXED_MAC},
        "ipam": {}
    });
    let results: Vec<Value> = [&reference, &ours]
        .iter()
        .map(|side| side.add(&config))
        .collect();
    assert_same(
        "ADD result",
        &reference.normalize(&results[0]),
        &ours.normalize(&results[1]),
    );
    assert_eq!(results[1]["interfaces"][2]["mac"], FIXED_MAC);
    assert_same("state after ADD", &reference.snapshot(), &ours.snapshot());

    // The reference's CHECK asks an IPAM plugin even when there is none, and fails; ours
    // checks the links alone.
    let out = ours.run("CHECK", &Side::with_prev(&config, &results[1]));
    assert!(out.success, "CHECK: {} {}", out.stdout, out.stderr);
    ours.host
        .exec(&["ip", "link", "set", "fvbr-l2", "promisc", "off"]);
    let out = ours.run("CHECK", &Side::with_prev(&config, &results[1]));
    assert!(out.error_text().contains("Promisc"), "{}", out.stdout);

    for side in [&reference, &ours] {
        let out = side.run("DEL", &config);
        assert!(out.success, "{:?} DEL: {}", side.plugin, out.stdout);
        assert!(side.host_veths().is_empty());
    }
    ours.host
        .exec(&["ip", "link", "set", "fvbr-l2", "promisc", "on"]);
    settle();
    assert_same("state after DEL", &reference.snapshot(), &ours.snapshot());
}

#[test]
fn older_spec_versions_print_the_same_results_as_the_reference() {
    if !ready("older_spec_versions_print_the_same_results_as_the_reference") {
        return;
    }
    for version in ["0.2.0", "0.3.1"] {
        let (reference, ours) = Side::pair(&format!("v{}", version.replace('.', "")));
        let config = json!({
            "cniVersion": version, "name": "fvold", "type": "bridge", "bridge": "fvbr-old", "isGateway": true,
            "ipam": {"type": "host-local", "subnet": "10.88.6.0/24", "routes": [{"dst": "10.99.0.0/16"}]}
        });
        let results: Vec<Value> = [&reference, &ours]
            .iter()
            .map(|side| side.add(&config))
            .collect();
        assert_same(
            &format!("ADD result at {version}"),
            &reference.normalize(&results[0]),
            &ours.normalize(&results[1]),
        );
        assert_same(
            &format!("state at {version}"),
            &reference.snapshot(),
            &ours.snapshot(),
        );
        for side in [&reference, &ours] {
            assert!(side.run("DEL", &config).success);
        }
    }
    // 0.2.0 results need an address: both refuse an L2 attachment at 0.2.0.
    let (reference, ours) = Side::pair("v020l2");
    let config =
        json!({"cniVersion": "0.2.0", "name": "fvold", "type": "bridge", "bridge": "fvbr-old"});
    for side in [&reference, &ours] {
        let out = side.run("ADD", &config);
        assert!(
            !out.success,
            "{:?} wrote an L2 result at 0.2.0",
            side.plugin
        );
    }
}

#[test]
fn macspoofchk_rules_match_the_reference_and_go_with_del() {
    if !ready("macspoofchk_rules_match_the_reference_and_go_with_del") {
        return;
    }
    let (reference, ours) = Side::pair("msc");
    let config = json!({
        "cniVersion": "1.0.0", "name": "fvmsc", "type": "bridge", "bridge": "fvbr-msc", "macspoofchk": true,
        "ipam": {"type": "host-local", "subnet": "10.88.7.0/24"}
    });
    let results: Vec<Value> = [&reference, &ours]
        .iter()
        .map(|side| side.add(&config))
        .collect();
    assert_same(
        "ADD result",
        &reference.normalize(&results[0]),
        &ours.normalize(&results[1]),
    );
    let snapshot = ours.snapshot();
    assert!(
        snapshot["host nft"]
            .to_string()
            .contains("macspoofchk-ctr-msc-eth0"),
        "{}",
        snapshot["host nft"]
    );
    assert_same("state after ADD", &reference.snapshot(), &snapshot);
    let out = ours.run("CHECK", &Side::with_prev(&config, &results[1]));
    assert!(out.success, "CHECK: {}", out.stdout);
    for side in [&reference, &ours] {
        let out = side.run("DEL", &config);
        assert!(out.success, "{:?} DEL: {}", side.plugin, out.stdout);
    }
    settle();
    assert_same("state after DEL", &reference.snapshot(), &ours.snapshot());
    assert!(
        !ours.snapshot()["host nft"]
            .to_string()
            .contains("cni-br-iface")
    );
}

#[test]
fn vlan_settings_match_the_reference() {
    if !ready("vlan_settings_match_the_reference") {
        return;
    }
    let (reference, ours) = Side::pair("vl");
    let config = json!({
        "cniVersion": "1.0.0", "name": "fvvlan", "type": "bridge", "bridge": "fvbr-vlan", "vlan": 100,
        "ipam": {"type": "host-local", "subnet": "10.88.8.0/24"}
    });
    let outcomes: Vec<Outcome> = [&reference, &ours]
        .iter()
        .map(|side| side.run("ADD", &config))
        .collect();
    assert_eq!(
        outcomes[0].success, outcomes[1].success,
        "reference: {} / ours: {}",
        outcomes[0].stdout, outcomes[1].stdout
    );
    if outcomes[0].success {
        assert_same(
            "ADD result",
            &reference.normalize(&outcomes[0].stdout),
            &ours.normalize(&outcomes[1].stdout),
        );
        assert_same("state after ADD", &reference.snapshot(), &ours.snapshot());
    } else {
        // This kernel has no VLAN filtering on bridges (CONFIG_BRIDGE_VLAN_FILTERING):
        // both refuse, and neither leaves a veth or an allocation behind in our case.
        eprintln!("VLAN filtering unsupported here: {}", outcomes[0].stdout);
        assert!(ours.host_veths().is_empty());
        assert!(ours.reserved_ips("fvvlan").is_empty());
    }
    for side in [&reference, &ours] {
        assert!(side.run("DEL", &config).success);
    }
}

#[test]
fn version_lists_the_reference_versions_and_1_1_0() {
    if !ready("version_lists_the_reference_versions_and_1_1_0") {
        return;
    }
    let (reference, ours) = (
        Side::new(Plugin::Reference, "verr"),
        Side::new(Plugin::Ours, "vero"),
    );
    let theirs = reference.run_with("VERSION", "", &[]);
    let mine = ours.run_with("VERSION", "", &[]);
    assert!(theirs.success && mine.success);
    let mut expected: Vec<Value> = theirs.stdout["supportedVersions"]
        .as_array()
        .unwrap()
        .clone();
    expected.push(json!("1.1.0"));
    assert_eq!(
        mine.stdout["supportedVersions"],
        Value::Array(expected),
        "{}",
        mine.stdout
    );
    assert_eq!(mine.stdout["cniVersion"], "1.1.0");
}

#[test]
fn bad_input_is_refused_with_a_spec_error_naming_the_field() {
    if !ready("bad_input_is_refused_with_a_spec_error_naming_the_field") {
        return;
    }
    let (reference, ours) = Side::pair("bad");
    let base = json!({"cniVersion": "1.0.0", "name": "fvbad", "type": "bridge", "bridge": "fvbr-bad", "ipam": {}});
    let with = |key: &str, value: Value| {
        let mut config = base.clone();
        if value.is_null() {
            config.as_object_mut().unwrap().remove(key);
        } else {
            config[key] = value;
        }
        config
    };
    let cases = [
        ("no bridge", with("bridge", Value::Null), 7, "bridge"),
        (
            "bridge name too long",
            with("bridge", json!("a-very-long-bridge-name")),
            7,
            "bridge",
        ),
        ("mtu out of range", with("mtu", json!(70000)), 7, "mtu"),
        ("mtu not a number", with("mtu", json!("big")), 7, "mtu"),
        ("vlan out of range", with("vlan", json!(5000)), 7, "vlan"),
        (
            "unknown cniVersion",
            with("cniVersion", json!("9.9.9")),
            1,
            "cniVersion",
        ),
        (
            "no such ipam plugin",
            with("ipam", json!({"type": "no-such-ipam"})),
            7,
            "ipam.type",
        ),
        ("no name", with("name", Value::Null), 7, "name"),
    ];
    for (what, config, code, field) in cases {
        let out = ours.run("ADD", &config);
        assert!(!out.success, "{what}: accepted");
        assert_eq!(out.error_code(), code, "{what}: {}", out.stdout);
        assert!(
            out.error_text().contains(field),
            "{what}: the error does not name {field}: {}",
            out.stdout
        );
        assert!(
            ours.host_veths().is_empty(),
            "{what}: a veth was left behind"
        );
    }
    // An IPAM failure after the veth pair exists undoes the pair; the IPAM plugin's error
    // comes through as it printed it.
    let bad_subnet = with(
        "ipam",
        json!({"type": "host-local", "subnet": "not-a-subnet"}),
    );
    let out = ours.run("ADD", &bad_subnet);
    assert!(!out.success);
    assert!(out.error_text().contains("not-a-subnet"), "{}", out.stdout);
    assert!(
        ours.host_veths().is_empty(),
        "the veth pair stayed after a failed ADD"
    );
    assert!(
        !ours
            .container
            .exec(&["ip", "link", "show"])
            .contains("eth0")
    );

    // The reference refuses these too (its codes are generic).
    for config in [
        with("cniVersion", json!("9.9.9")),
        with("ipam", json!({"type": "no-such-ipam"})),
    ] {
        let out = reference.run("ADD", &config);
        assert!(!out.success, "the reference accepted {config}");
    }
    assert_eq!(
        reference
            .run("ADD", &with("cniVersion", json!("9.9.9")))
            .error_code(),
        1
    );

    // A missing variable is named; so is a config that is not JSON.
    let out = ours.run_with("ADD", &base.to_string(), &[("CNI_NETNS", "")]);
    assert_eq!(out.error_code(), 4);
    assert!(out.error_text().contains("CNI_NETNS"), "{}", out.stdout);
    let missing = ours.run_with(
        "ADD",
        &base.to_string(),
        &[("CNI_NETNS", "/run/netns/fvcni-no-such-ns")],
    );
    assert_eq!(missing.error_code(), 3, "{}", missing.stdout);
    let not_netns = ours.run_with("ADD", &base.to_string(), &[("CNI_NETNS", "/etc/hostname")]);
    assert_eq!(not_netns.error_code(), 8, "{}", not_netns.stdout);
    let out = ours.run_with("ADD", "{not json", &[]);
    assert_eq!(out.error_code(), 6);
    let out = ours.run_with(
        "CHECK",
        &with("cniVersion", json!("0.3.1")).to_string(),
        &[],
    );
    assert_eq!(out.error_code(), 1, "CHECK needs 0.4.0: {}", out.stdout);
}

#[test]
fn del_succeeds_when_the_namespace_is_gone_and_releases_the_addresses() {
    if !ready("del_succeeds_when_the_namespace_is_gone_and_releases_the_addresses") {
        return;
    }
    let ours = Side::new(Plugin::Ours, "gone");
    let config = json!({
        "cniVersion": "1.0.0", "name": "fvgone", "type": "bridge", "bridge": "fvbr-gone",
        "ipam": {"type": "host-local", "subnet": "10.88.9.0/24"}
    });
    ours.add(&config);
    assert_eq!(ours.reserved_ips("fvgone"), vec!["10.88.9.2"]);
    let status = Command::new("ip")
        .args(["netns", "del", &ours.container.0])
        .status()
        .unwrap();
    assert!(status.success());
    let out = ours.run("DEL", &config);
    assert!(out.success, "DEL without its namespace: {}", out.stdout);
    assert!(ours.reserved_ips("fvgone").is_empty());
    // The namespace took the container end, and the host end with it. The kernel tears a
    // deleted namespace's devices down in a work queue, so this may take a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ours.host_veths().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(ours.host_veths(), Vec::<String>::new());
    let out = ours.run_with(
        "DEL",
        &ours.config(&config).to_string(),
        &[("CNI_NETNS", "")],
    );
    assert!(out.success, "DEL without CNI_NETNS: {}", out.stdout);
}

#[test]
fn status_and_gc_speak_cni_1_1() {
    if !ready("status_and_gc_speak_cni_1_1") {
        return;
    }
    let ours = Side::new(Plugin::Ours, "gc");
    let config = json!({"cniVersion": "1.1.0", "name": "fvgc", "type": "bridge", "bridge": "fvbr-gc", "macspoofchk": true});
    let out = ours.run_with(
        "STATUS",
        &config.to_string(),
        &[
            ("CNI_CONTAINERID", ""),
            ("CNI_NETNS", ""),
            ("CNI_IFNAME", ""),
        ],
    );
    assert!(out.success, "STATUS: {}", out.stdout);
    let mut old = config.clone();
    old["cniVersion"] = json!("1.0.0");
    assert_eq!(
        ours.run_with("STATUS", &old.to_string(), &[]).error_code(),
        1
    );

    ours.add(&config);
    assert!(
        ours.snapshot()["host nft"]
            .to_string()
            .contains("cni-br-iface-ctr-gc-eth0")
    );
    // Still valid: kept.
    let mut gc = config.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "ctr-gc", "ifname": "eth0"}]);
    let out = ours.run_with(
        "GC",
        &gc.to_string(),
        &[
            ("CNI_CONTAINERID", ""),
            ("CNI_NETNS", ""),
            ("CNI_IFNAME", ""),
        ],
    );
    assert!(out.success, "GC: {}", out.stdout);
    assert!(
        ours.snapshot()["host nft"]
            .to_string()
            .contains("cni-br-iface-ctr-gc-eth0")
    );
    // No longer valid: collected.
    gc["cni.dev/valid-attachments"] = json!([]);
    let out = ours.run_with(
        "GC",
        &gc.to_string(),
        &[
            ("CNI_CONTAINERID", ""),
            ("CNI_NETNS", ""),
            ("CNI_IFNAME", ""),
        ],
    );
    assert!(out.success, "GC: {}", out.stdout);
    assert!(
        !ours.snapshot()["host nft"]
            .to_string()
            .contains("cni-br-iface"),
        "{}",
        ours.snapshot()["host nft"]
    );
}

#[test]
fn static_ipam_routes_and_dns_match_the_reference() {
    if !ready("static_ipam_routes_and_dns_match_the_reference") {
        return;
    }
    let (reference, ours) = Side::pair("st");
    let config = json!({
        "cniVersion": "1.0.0", "name": "fvstatic", "type": "bridge", "bridge": "fvbr-st",
        "ipam": {
            "type": "static",
            "addresses": [{"address": "10.88.10.5/24", "gateway": "10.88.10.1"}],
            "routes": [{"dst": "0.0.0.0/0"}, {"dst": "192.168.77.0/24", "gw": "10.88.10.254"}],
            "dns": {"nameservers": ["10.88.10.53"], "search": ["vm.example"]}
        }
    });
    let results: Vec<Value> = [&reference, &ours]
        .iter()
        .map(|side| side.add(&config))
        .collect();
    // Debian's reference (1.1.1) prints the configuration's DNS even when it has none; ours
    // keeps the IPAM plugin's unless the configuration sets one, as newer releases do.
    assert_eq!(results[0]["dns"], json!({}));
    assert_eq!(
        results[1]["dns"],
        json!({"nameservers": ["10.88.10.53"], "search": ["vm.example"]})
    );
    let without_dns = |side: &Side, result: &Value| {
        let mut result = side.normalize(result);
        result.as_object_mut().unwrap().remove("dns");
        result
    };
    assert_same(
        "ADD result",
        &without_dns(&reference, &results[0]),
        &without_dns(&ours, &results[1]),
    );
    let snapshot = ours.snapshot();
    assert!(
        snapshot["container routes"]
            .to_string()
            .contains("10.88.10.254"),
        "{}",
        snapshot["container routes"]
    );
    assert_same("state after ADD", &reference.snapshot(), &snapshot);
    for (side, result) in [(&reference, &results[0]), (&ours, &results[1])] {
        let out = side.run("CHECK", &Side::with_prev(&config, result));
        assert!(
            out.success,
            "{:?} CHECK: {} {}",
            side.plugin, out.stdout, out.stderr
        );
        // A route gone is a failed CHECK.
        side.container
            .exec(&["ip", "route", "del", "192.168.77.0/24"]);
        let out = side.run("CHECK", &Side::with_prev(&config, result));
        // (The reference prints the route as a Go struct.)
        assert!(
            out.error_text().contains("192.168.77.0"),
            "{:?}: {}",
            side.plugin,
            out.stdout
        );
        assert!(side.run("DEL", &config).success);
    }
}

/// Linked under the plugin's name, as a runtime finds plugins, the binary is the plugin.
#[test]
fn the_binary_linked_as_cnv_bridge_is_the_plugin() {
    let dir = tempfile::tempdir().expect("a directory");
    let link = dir.path().join("cnv-bridge");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ferrovirt"), &link).expect("a link");
    let out = std::process::Command::new(&link)
        .env("CNI_COMMAND", "VERSION")
        .output()
        .expect("running the link");
    assert!(out.status.success(), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(answer["cniVersion"], "1.1.0", "{answer}");
    assert!(
        answer["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.len() > 3)
    );
}
