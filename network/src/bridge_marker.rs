//! The bridge marker (kubevirt/bridge-marker): every Linux bridge on the node is reported as
//! the node resource `bridge.network.kubevirt.io/<bridge>` with a capacity of 1k, and
//! removed when the bridge goes, so that a pod attached to a bridge network (which requests
//! one of that resource) is only scheduled where the bridge exists.
//!
//! As upstream, the marker remembers what it reported and patches the Node only when the
//! node's bridges differ from that, re-reading the Node's capacity now and then to notice an
//! edit by someone else. Bridges are read from sysfs (`/sys/class/net/<link>/bridge` exists
//! for a bridge only), which answers for the network namespace the marker runs in.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use api::network_attachment::BRIDGE_RESOURCE_PREFIX;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Map, Value, json};

/// The capacity reported for a bridge: how many pods may attach to it (upstream's 1k).
pub const BRIDGE_CAPACITY: &str = "1k";
/// Where the kernel lists the links of the marker's network namespace.
pub const SYS_CLASS_NET: &str = "/sys/class/net";

/// How the marker runs.
#[derive(Clone, Debug)]
pub struct MarkerSettings {
    pub node: String,
    /// Between two looks at the node's bridges (upstream: 60 s).
    pub interval: Duration,
    /// Between two re-reads of what the Node reports (upstream: 10 min).
    pub reconcile_interval: Duration,
    /// Also write `status.allocatable`: where no kubelet copies the capacity there (the
    /// embedded node of `ferrovirt up`).
    pub mirror_allocatable: bool,
}

/// Why one round of marking failed.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error("listing the links in {dir}: {source}")]
    Links { dir: String, source: std::io::Error },
    #[error("Node {node}: {source}")]
    Node { node: String, source: kube::Error },
}

/// The Linux bridges among the links listed in `sys_class_net` whose names can name a node
/// resource; the others (a link name may hold characters a resource name may not, `br-`
/// say) are left out, or the Node's patch would be refused for every bridge.
pub fn node_bridges(sys_class_net: &Path) -> Result<BTreeSet<String>, MarkerError> {
    let links = std::fs::read_dir(sys_class_net).map_err(|source| MarkerError::Links {
        dir: sys_class_net.display().to_string(),
        source,
    })?;
    let (usable, unusable): (BTreeSet<String>, BTreeSet<String>) = links
        .flatten()
        .filter(|link| link.path().join("bridge").is_dir())
        .filter_map(|link| link.file_name().into_string().ok())
        .partition(|name| is_resource_name(name));
    if !unusable.is_empty() {
        tracing::debug!(bridges = ?unusable, "bridges whose names cannot name a node resource");
    }
    Ok(usable)
}

/// Whether `name` may follow the prefix of a resource name (a qualified name's name part:
/// alphanumerics, `-`, `_` and `.`, beginning and ending alphanumeric, at most 63).
fn is_resource_name(name: &str) -> bool {
    let alphanumeric_ends = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    name.len() <= 63
        && alphanumeric_ends
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The bridges a Node's capacity reports.
pub fn reported_bridges(node: &Node) -> BTreeSet<String> {
    node.status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|(resource, _)| resource.strip_prefix(BRIDGE_RESOURCE_PREFIX))
        .map(str::to_owned)
        .collect()
}

/// The status patch (a JSON merge patch) that takes the Node from reporting `reported` to
/// reporting `available`; `None` when they agree.
pub fn status_patch(
    reported: &BTreeSet<String>,
    available: &BTreeSet<String>,
    mirror_allocatable: bool,
) -> Option<Value> {
    let mut resources = Map::new();
    for gone in reported.difference(available) {
        resources.insert(format!("{BRIDGE_RESOURCE_PREFIX}{gone}"), Value::Null);
    }
    for new in available.difference(reported) {
        resources.insert(
            format!("{BRIDGE_RESOURCE_PREFIX}{new}"),
            json!(BRIDGE_CAPACITY),
        );
    }
    if resources.is_empty() {
        return None;
    }
    let mut status = json!({"capacity": resources});
    if mirror_allocatable {
        status["allocatable"] = status["capacity"].clone();
    }
    Some(json!({"status": status}))
}

/// Marks the node's bridges until the task is dropped; a failed round is logged and tried
/// again at the next interval.
pub async fn run(client: Client, settings: MarkerSettings) {
    let nodes = Api::<Node>::all(client);
    let mut reported: Option<BTreeSet<String>> = None;
    let mut refreshed = Instant::now();
    loop {
        // Unknown (first round, a failed one) or stale: read what the Node reports.
        let known = reported
            .take()
            .filter(|_| refreshed.elapsed() < settings.reconcile_interval);
        if known.is_none() {
            refreshed = Instant::now();
        }
        match mark(&nodes, &settings, known).await {
            Ok(now_reported) => reported = Some(now_reported),
            Err(err) => tracing::warn!(%err, "bridge marker"),
        }
        tokio::time::sleep(settings.interval).await;
    }
}

/// One round: compares the bridges with what the Node reports (read from the Node when
/// `reported` is not known) and patches the difference. Returns what the Node now reports.
async fn mark(
    nodes: &Api<Node>,
    settings: &MarkerSettings,
    reported: Option<BTreeSet<String>>,
) -> Result<BTreeSet<String>, MarkerError> {
    let node_error = |source| MarkerError::Node {
        node: settings.node.clone(),
        source,
    };
    let available = node_bridges(Path::new(SYS_CLASS_NET))?;
    let reported = match reported {
        Some(reported) => reported,
        None => reported_bridges(&nodes.get_status(&settings.node).await.map_err(node_error)?),
    };
    if let Some(patch) = status_patch(&reported, &available, settings.mirror_allocatable) {
        tracing::info!(node = %settings.node, bridges = ?available, "marking the node's bridges");
        nodes
            .patch_status(
                &settings.node,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(node_error)?;
    }
    Ok(available)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn new_bridges_are_added_and_gone_ones_removed() {
        let patch = status_patch(&set(&["br0", "old"]), &set(&["br0", "br1"]), false).unwrap();
        assert_eq!(
            patch,
            json!({"status": {"capacity": {
                "bridge.network.kubevirt.io/br1": "1k",
                "bridge.network.kubevirt.io/old": null,
            }}})
        );
        assert_eq!(status_patch(&set(&["br0"]), &set(&["br0"]), true), None);
    }

    #[test]
    fn allocatable_mirrors_capacity_where_no_kubelet_does() {
        let patch = status_patch(&set(&[]), &set(&["br1"]), true).unwrap();
        assert_eq!(patch["status"]["allocatable"], patch["status"]["capacity"]);
    }

    #[test]
    fn only_bridge_resources_count_as_reported() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "status": {"capacity": {
                "cpu": "2",
                "bridge.network.kubevirt.io/br1": "1k",
                "example.com/bridge.network.kubevirt.io": "1",
            }},
        }))
        .unwrap();
        assert_eq!(reported_bridges(&node), set(&["br1"]));
    }

    #[test]
    fn only_bridges_are_listed_among_links() {
        let dir = tempfile::tempdir().unwrap();
        for (link, is_bridge) in [
            ("br-a", true),
            ("eth0", false),
            ("lo", false),
            ("br-", true),
        ] {
            std::fs::create_dir(dir.path().join(link)).unwrap();
            if is_bridge {
                std::fs::create_dir(dir.path().join(link).join("bridge")).unwrap();
            }
        }
        assert_eq!(node_bridges(dir.path()).unwrap(), set(&["br-a"]));
        assert!(matches!(
            node_bridges(&dir.path().join("missing")),
            Err(MarkerError::Links { .. })
        ));
    }
}
