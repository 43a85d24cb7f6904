//! MAC collision detection, as kubemacpool's VMI collision controller does it: running
//! VirtualMachineInstances in managed namespaces are indexed by the MACs their status
//! reports (`status.interfaces[].mac`); when one joins a MAC another already has, every
//! instance sharing it gets a `MACCollision` warning Event, and `kmp_mac_collisions{mac}`
//! counts them until fewer than two remain.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use api::cnao::MacAddress;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::Value;

use super::runtime::KubeMacPool;
use super::{COLLISION_REASON, REPORTER};

/// A VirtualMachineInstance, named as kubemacpool names it in its messages (`vmi/ns/name`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VmiRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl fmt::Display for VmiRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vmi/{}/{}", self.namespace, self.name)
    }
}

/// A MAC more than one running instance has, after a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collision {
    /// The MAC.
    pub mac: MacAddress,
    /// Every instance that has it.
    pub members: Vec<VmiRef>,
    /// Whether an instance joined it with this change (and so every member is warned).
    pub grew: bool,
}

impl Collision {
    /// The Event's message, kubemacpool's: `MAC 02:…: Collision between vmi/a/x, vmi/b/y`.
    pub fn message(&self) -> String {
        let names: Vec<String> = self.members.iter().map(ToString::to_string).collect();
        format!("MAC {}: Collision between {}", self.mac, names.join(", "))
    }
}

/// What a change does to the collisions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollisionChanges {
    /// MACs still or newly shared by several instances.
    pub colliding: Vec<Collision>,
    /// MACs no longer shared.
    pub resolved: Vec<MacAddress>,
}

/// The running instances by MAC.
#[derive(Debug, Default)]
pub struct CollisionTracker {
    macs_of: HashMap<VmiRef, BTreeSet<MacAddress>>,
    by_mac: HashMap<MacAddress, BTreeSet<VmiRef>>,
}

impl CollisionTracker {
    /// `vmi` now has `macs` (none when it does not run, is not managed or is gone).
    pub fn update(&mut self, vmi: &VmiRef, macs: BTreeSet<MacAddress>) -> CollisionChanges {
        let before = self.macs_of.remove(vmi).unwrap_or_default();
        let mut changes = CollisionChanges::default();
        for mac in before.difference(&macs) {
            let Some(members) = self.by_mac.get_mut(mac) else {
                continue;
            };
            members.remove(vmi);
            match members.len() {
                0 => {
                    self.by_mac.remove(mac);
                }
                1 => changes.resolved.push(*mac),
                _ => changes.colliding.push(Collision {
                    mac: *mac,
                    members: members.iter().cloned().collect(),
                    grew: false,
                }),
            }
        }
        for mac in macs.difference(&before) {
            let members = self.by_mac.entry(*mac).or_default();
            members.insert(vmi.clone());
            if members.len() > 1 {
                changes.colliding.push(Collision {
                    mac: *mac,
                    members: members.iter().cloned().collect(),
                    grew: true,
                });
            }
        }
        if !macs.is_empty() {
            self.macs_of.insert(vmi.clone(), macs);
        }
        changes
    }

    /// The instances the tracker holds.
    pub fn tracked(&self) -> Vec<VmiRef> {
        self.macs_of.keys().cloned().collect()
    }
}

/// The MACs a VirtualMachineInstance counts with: those in its status while it runs.
pub fn running_macs(vmi: &Value) -> BTreeSet<MacAddress> {
    if vmi["status"]["phase"] != "Running" {
        return BTreeSet::new();
    }
    vmi["status"]["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|iface| iface["mac"].as_str()?.parse().ok())
        .collect()
}

/// The VirtualMachineInstance resource.
fn vmi_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachineInstance"),
        "virtualmachineinstances",
    )
}

/// Watches every VirtualMachineInstance and reports collisions until the watch ends.
pub async fn run(pool: Arc<KubeMacPool>, client: Client) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: REPORTER.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        },
    );
    let api: Api<DynamicObject> = Api::all_with(client, &vmi_resource());
    let mut tracker = CollisionTracker::default();
    let mut uids: BTreeMap<VmiRef, String> = BTreeMap::new();
    let mut listed: Option<BTreeSet<VmiRef>> = None;
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(err) => {
                tracing::debug!(%err, "VirtualMachineInstance watch");
                continue;
            }
        };
        let (vmi, macs) = match event {
            watcher::Event::Init => {
                listed = Some(BTreeSet::new());
                continue;
            }
            watcher::Event::InitDone => {
                let seen = listed.take().unwrap_or_default();
                for gone in tracker.tracked().into_iter().filter(|v| !seen.contains(v)) {
                    let changes = tracker.update(&gone, BTreeSet::new());
                    report(&pool, &recorder, &uids, changes).await;
                    uids.remove(&gone);
                }
                continue;
            }
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                let value = serde_json::to_value(&object).unwrap_or_default();
                let vmi = reference(&value);
                if let Some(seen) = listed.as_mut() {
                    seen.insert(vmi.clone());
                }
                if let Some(uid) = value["metadata"]["uid"].as_str() {
                    uids.insert(vmi.clone(), uid.to_owned());
                }
                let macs = if pool.is_namespace_managed(&vmi.namespace) {
                    running_macs(&value)
                } else {
                    BTreeSet::new()
                };
                (vmi, macs)
            }
            watcher::Event::Delete(object) => {
                let value = serde_json::to_value(&object).unwrap_or_default();
                let vmi = reference(&value);
                let changes = tracker.update(&vmi, BTreeSet::new());
                report(&pool, &recorder, &uids, changes).await;
                uids.remove(&vmi);
                continue;
            }
        };
        let changes = tracker.update(&vmi, macs);
        report(&pool, &recorder, &uids, changes).await;
    }
}

fn reference(vmi: &Value) -> VmiRef {
    let text = |key: &str| vmi["metadata"][key].as_str().unwrap_or_default().to_owned();
    VmiRef {
        namespace: text("namespace"),
        name: text("name"),
    }
}

/// Sets the gauge and warns the members of collisions that grew.
async fn report(
    pool: &KubeMacPool,
    recorder: &Recorder,
    uids: &BTreeMap<VmiRef, String>,
    changes: CollisionChanges,
) {
    let metrics = pool.metrics();
    for mac in changes.resolved {
        metrics.clear_collision(mac);
        tracing::info!(%mac, "MAC collision resolved");
    }
    for collision in changes.colliding {
        metrics.set_collision(collision.mac, collision.members.len());
        if !collision.grew {
            continue;
        }
        let message = collision.message();
        tracing::warn!(%message, "MAC collision");
        for member in &collision.members {
            let object = ObjectReference {
                api_version: Some("kubevirt.io/v1".to_owned()),
                kind: Some("VirtualMachineInstance".to_owned()),
                namespace: Some(member.namespace.clone()),
                name: Some(member.name.clone()),
                uid: uids.get(member).cloned(),
                ..Default::default()
            };
            let event = Event {
                type_: EventType::Warning,
                reason: COLLISION_REASON.to_owned(),
                note: Some(message.clone()),
                action: "DetectCollision".to_owned(),
                secondary: None,
            };
            if let Err(err) = recorder.publish(&event, &object).await {
                tracing::warn!(%err, vmi = %member, "cannot publish the MACCollision event");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vmi(name: &str) -> VmiRef {
        VmiRef {
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn macs(list: &[&str]) -> BTreeSet<MacAddress> {
        list.iter().map(|m| m.parse().unwrap()).collect()
    }

    #[test]
    fn a_second_instance_with_a_mac_makes_a_collision_warned_to_both() {
        let mut tracker = CollisionTracker::default();
        assert_eq!(
            tracker.update(&vmi("a"), macs(&["02:00:00:00:00:01"])),
            CollisionChanges::default()
        );
        let changes = tracker.update(&vmi("b"), macs(&["02:00:00:00:00:01", "02:00:00:00:00:02"]));
        assert_eq!(changes.colliding.len(), 1);
        let collision = &changes.colliding[0];
        assert!(collision.grew);
        assert_eq!(collision.members, [vmi("a"), vmi("b")]);
        assert_eq!(
            collision.message(),
            "MAC 02:00:00:00:00:01: Collision between vmi/ns/a, vmi/ns/b"
        );
        // A third joins: all three are warned again; one leaves: the count shrinks quietly.
        let third = tracker.update(&vmi("c"), macs(&["02:00:00:00:00:01"]));
        assert_eq!(third.colliding[0].members.len(), 3);
        let left = tracker.update(&vmi("c"), BTreeSet::new());
        assert_eq!(
            left.colliding,
            [Collision {
                mac: "02:00:00:00:00:01".parse().unwrap(),
                members: vec![vmi("a"), vmi("b")],
                grew: false
            }]
        );
        // Then b stops: resolved.
        let stopped = tracker.update(&vmi("b"), BTreeSet::new());
        assert_eq!(
            stopped.resolved,
            ["02:00:00:00:00:01".parse::<MacAddress>().unwrap()]
        );
        assert!(stopped.colliding.is_empty());
        assert_eq!(tracker.tracked(), [vmi("a")]);
    }

    #[test]
    fn only_running_instances_count_with_their_status_macs() {
        let running = json!({"status": {"phase": "Running", "interfaces": [{"mac": "02:00:00:00:00:0A"}, {"name": "x"}, {"mac": "bad"}]}});
        assert_eq!(running_macs(&running), macs(&["02:00:00:00:00:0a"]));
        let pending =
            json!({"status": {"phase": "Scheduled", "interfaces": [{"mac": "02:00:00:00:00:0a"}]}});
        assert!(running_macs(&pending).is_empty());
    }
}
