//! What virt-handler writes on a VMI, as pure functions of what the launcher reports: the
//! phase Running once the domain started (Failed when it could not), the conditions Paused
//! and AgentConnected, the guest's OS and its interfaces.

use api::kubevirt::VirtualMachineInstance;
use api::kubevirt::vmi::{VirtualMachineCondition, condition_types, set_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::guest_agent::GuestInfo;
use crate::launcher::{DomainStatus, LifeCycle};

/// The status patch after a successful Sync: the domain runs. `pod_ip` is the launcher
/// pod's address, which a masquerade interface is reached at.
pub fn started(vmi: &VirtualMachineInstance, pod_ip: Option<&str>, now: &Time) -> Value {
    let mut conditions = conditions_of(vmi);
    set(&mut conditions, condition_types::READY, true, "", "", now);
    json!({
        "phase": "Running",
        "conditions": conditions,
        "interfaces": spec_interfaces(vmi, None, pod_ip),
    })
}

/// The status patch after a failed Sync: the domain cannot run as specified.
pub fn failed_to_start(vmi: &VirtualMachineInstance, message: &str, now: &Time) -> Value {
    let mut conditions = conditions_of(vmi);
    set(
        &mut conditions,
        "Synchronized",
        false,
        "SyncFailed",
        message,
        now,
    );
    json!({"phase": "Failed", "reason": message, "conditions": conditions})
}

/// The status patch for a running domain, `None` when nothing changed.
pub fn running(
    vmi: &VirtualMachineInstance,
    domain: &DomainStatus,
    guest: Option<&GuestInfo>,
    pod_ip: Option<&str>,
    now: &Time,
) -> Option<Value> {
    let before = conditions_of(vmi);
    let mut conditions = before.clone();
    if domain.state == LifeCycle::Paused {
        let (reason, message) = match domain.reason.as_str() {
            "User" | "" => ("PausedByUser", "VMI was paused by user"),
            "IOError" => (
                "PausedIOError",
                "VMI was paused, low-level IO error detected",
            ),
            _ => ("PausedByUser", "VMI was paused"),
        };
        set(
            &mut conditions,
            condition_types::PAUSED,
            true,
            reason,
            message,
            now,
        );
    } else {
        conditions.retain(|c| c.type_ != condition_types::PAUSED);
    }
    if domain.guest_agent_connected {
        set(
            &mut conditions,
            condition_types::AGENT_CONNECTED,
            true,
            "",
            "",
            now,
        );
    } else {
        conditions.retain(|c| c.type_ != condition_types::AGENT_CONNECTED);
    }
    // As virt-handler: the last result stands until the launcher reports another.
    if let Some(sync) = &domain.access_credentials {
        set(
            &mut conditions,
            condition_types::ACCESS_CREDENTIALS_SYNCHRONIZED,
            sync.succeeded,
            "",
            &sync.message,
            now,
        );
    }
    let status = vmi.status.clone().unwrap_or_default();
    let mut patch = serde_json::Map::new();
    if conditions != before {
        patch.insert("conditions".into(), json!(conditions));
    }
    if let Some(guest) = guest {
        let os = json!(guest.os);
        if json!(status.guest_os_info) != os {
            patch.insert("guestOSInfo".into(), os);
        }
        let interfaces = spec_interfaces(vmi, Some(guest), pod_ip);
        if json!(status.interfaces) != interfaces {
            patch.insert("interfaces".into(), interfaces);
        }
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

fn conditions_of(vmi: &VirtualMachineInstance) -> Vec<VirtualMachineCondition> {
    vmi.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

fn set(
    conditions: &mut Vec<VirtualMachineCondition>,
    type_: &str,
    holds: bool,
    reason: &str,
    message: &str,
    now: &Time,
) {
    set_condition(
        conditions,
        VirtualMachineCondition::new(type_, holds, reason, message, now),
    );
}

/// `status.interfaces`: one entry per interface of the spec. A masquerade interface is
/// reached at the pod's address, which is its `ipAddress` as KubeVirt reports it; the
/// guest's own addresses come from the agent when it reports an interface of the same MAC
/// (or, with one interface, the only non-loopback one).
fn spec_interfaces(
    vmi: &VirtualMachineInstance,
    guest: Option<&GuestInfo>,
    pod_ip: Option<&str>,
) -> Value {
    let spec = &vmi.spec.domain.devices.interfaces;
    let count = spec.as_ref().map_or(0, Vec::len);
    let guest_nics: Vec<_> = guest
        .map(|g| {
            g.interfaces
                .iter()
                .filter(|i| i.interface_name != "lo")
                .collect()
        })
        .unwrap_or_default();
    let entries: Vec<Value> = spec
        .iter()
        .flatten()
        .map(|iface| {
            let mac = iface.mac_address.clone().unwrap_or_default();
            let seen = guest_nics
                .iter()
                .find(|g| !mac.is_empty() && g.mac.eq_ignore_ascii_case(&mac))
                .or_else(|| (count == 1 && guest_nics.len() == 1).then(|| &guest_nics[0]));
            let mut entry = json!({"name": iface.name, "infoSource": "domain"});
            if let Some(nic) = seen {
                entry["mac"] = json!(nic.mac);
                entry["interfaceName"] = json!(nic.interface_name);
                entry["ipAddresses"] = json!(nic.ip_addresses);
                if let Some(first) = nic.ip_addresses.first() {
                    entry["ipAddress"] = json!(first);
                }
                entry["infoSource"] = json!("domain, guest-agent");
            } else if !mac.is_empty() {
                entry["mac"] = json!(mac);
            }
            if let (Some(ip), true) = (pod_ip, iface.masquerade.is_some()) {
                entry["ipAddress"] = json!(ip);
                entry["ipAddresses"] = json!([ip]);
            }
            entry
        })
        .collect();
    Value::Array(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest_agent::{GuestInterface, GuestOsInfo};

    fn vmi() -> VirtualMachineInstance {
        let mut vmi: VirtualMachineInstance = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"domain": {"devices": {"interfaces": [{"name": "default", "masquerade": {}}]}},
                     "networks": [{"name": "default", "pod": {}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .expect("test VMI");
        vmi.metadata.uid = Some("u".into());
        vmi
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_790_000_000).expect("time"))
    }

    fn domain(state: LifeCycle, agent: bool) -> DomainStatus {
        DomainStatus {
            state,
            guest_agent_connected: agent,
            ..Default::default()
        }
    }

    #[test]
    fn a_paused_domain_sets_paused_and_resuming_clears_it() {
        let patch = running(
            &vmi(),
            &domain(LifeCycle::Paused, false),
            None,
            None,
            &now(),
        )
        .expect("a change");
        let paused = &patch["conditions"][1];
        assert_eq!(paused["type"], "Paused");
        assert_eq!(paused["reason"], "PausedByUser");
        let mut v = vmi();
        v.status.as_mut().unwrap().conditions =
            serde_json::from_value(patch["conditions"].clone()).unwrap();
        let resumed =
            running(&v, &domain(LifeCycle::Running, false), None, None, &now()).expect("a change");
        assert_eq!(resumed["conditions"].as_array().unwrap().len(), 1);
        assert_eq!(
            running(
                &vmi(),
                &domain(LifeCycle::Running, false),
                None,
                None,
                &now()
            ),
            None
        );
    }

    #[test]
    fn the_agent_s_credential_sync_is_a_condition_without_reason() {
        use crate::launcher::agent_credentials::SyncResult;
        let mut failed = domain(LifeCycle::Running, false);
        failed.access_credentials = Some(SyncResult::failed("Guest agent is offline"));
        let patch = running(&vmi(), &failed, None, None, &now()).expect("a change");
        let condition = &patch["conditions"][1];
        assert_eq!(condition["type"], "AccessCredentialsSynchronized");
        assert_eq!(condition["status"], "False");
        assert_eq!(condition["message"], "Guest agent is offline");
        assert!(
            condition.get("reason").is_none_or(|r| r == ""),
            "{condition}"
        );

        let mut v = vmi();
        v.status.as_mut().unwrap().conditions =
            serde_json::from_value(patch["conditions"].clone()).unwrap();
        let mut synced = domain(LifeCycle::Running, true);
        synced.access_credentials = Some(SyncResult {
            succeeded: true,
            message: String::new(),
        });
        let patch = running(&v, &synced, None, None, &now()).expect("a change");
        let condition = patch["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "AccessCredentialsSynchronized")
            .expect("the condition");
        assert_eq!(condition["status"], "True");
    }

    #[test]
    fn the_agent_brings_the_os_and_addresses() {
        let guest = GuestInfo {
            os: GuestOsInfo {
                id: "debian".into(),
                ..Default::default()
            },
            interfaces: vec![
                GuestInterface {
                    interface_name: "lo".into(),
                    mac: "00:00:00:00:00:00".into(),
                    ip_addresses: vec!["127.0.0.1".into()],
                },
                GuestInterface {
                    interface_name: "enp1s0".into(),
                    mac: "52:54:00:12:34:56".into(),
                    ip_addresses: vec!["10.0.2.2".into()],
                },
            ],
            ..Default::default()
        };
        let patch = running(
            &vmi(),
            &domain(LifeCycle::Running, true),
            Some(&guest),
            None,
            &now(),
        )
        .expect("a change");
        assert_eq!(patch["guestOSInfo"]["id"], "debian");
        assert_eq!(patch["interfaces"][0]["ipAddress"], "10.0.2.2");
        assert_eq!(patch["interfaces"][0]["interfaceName"], "enp1s0");
        assert_eq!(patch["conditions"][1]["type"], "AgentConnected");
    }

    #[test]
    fn a_failed_start_says_why() {
        let patch = failed_to_start(&vmi(), "spec.domain.devices.tpm: not supported", &now());
        let up = started(&vmi(), Some("127.1.0.5"), &now());
        assert_eq!(
            up["interfaces"][0]["ipAddress"], "127.1.0.5",
            "masquerade: the pod's IP"
        );
        assert_eq!(patch["phase"], "Failed");
        assert_eq!(patch["conditions"][1]["reason"], "SyncFailed");
    }
}
