//! What a VirtualMachine asks of the pool, read from its JSON as the admission sees it: which
//! interfaces kubemacpool gives a MAC (masquerade and bridge on the pod network, any binding
//! on a Multus network), the MACs set by hand, and the checks that need no pool (MAC format,
//! the same MAC twice in one VM, interface names).

use std::collections::HashMap;
use std::fmt;

use api::FieldPath;
use api::cnao::{InvalidMacAddress, MacAddress};
use serde_json::Value;

/// A VirtualMachine's identity in the pool.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VmKey {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl VmKey {
    /// The key of `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> VmKey {
        VmKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for VmKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why a VirtualMachine gets no MACs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocationError {
    /// A `macAddress` set by hand is not a MAC address.
    #[error("invalid MAC address format for interface {interface}: {source}")]
    InvalidMac {
        /// The `macAddress` field.
        field: FieldPath,
        /// The interface's name.
        interface: String,
        /// What does not parse.
        source: InvalidMacAddress,
    },
    /// Two interfaces of the VM have the same MAC.
    #[error("duplicate MAC address {mac} found on interfaces: {first} and {second}")]
    DuplicateMac {
        /// The `macAddress` field of the second interface.
        field: FieldPath,
        /// The MAC.
        mac: MacAddress,
        /// The interface that has it first.
        first: String,
        /// The interface that repeats it.
        second: String,
    },
    /// Two interfaces have the same name (the pool keys a VM's MACs by interface name).
    #[error("Failed to mutate virtual machine: every interface must have a unique name")]
    DuplicateInterfaceName {
        /// The `name` field of the second interface.
        field: FieldPath,
    },
    /// A MAC set by hand is allocated to another VirtualMachine.
    #[error(
        "failed to allocate requested mac address: {mac} is already allocated to VirtualMachine {holder}"
    )]
    AlreadyAllocated {
        /// The `macAddress` field.
        field: FieldPath,
        /// The MAC.
        mac: MacAddress,
        /// The VirtualMachine that holds it.
        holder: VmKey,
    },
    /// Every address of the range is allocated.
    #[error("the range is full")]
    RangeFull {
        /// The `macAddress` field of the interface that found none.
        field: FieldPath,
    },
}

impl AllocationError {
    /// The field at fault.
    pub fn field(&self) -> &FieldPath {
        match self {
            AllocationError::InvalidMac { field, .. }
            | AllocationError::DuplicateMac { field, .. }
            | AllocationError::DuplicateInterfaceName { field }
            | AllocationError::AlreadyAllocated { field, .. }
            | AllocationError::RangeFull { field } => field,
        }
    }

    /// The variant's name, as failures are counted.
    pub fn metric_label(&self) -> &'static str {
        match self {
            AllocationError::InvalidMac { .. } => "InvalidMac",
            AllocationError::DuplicateMac { .. } => "DuplicateMac",
            AllocationError::DuplicateInterfaceName { .. } => "DuplicateInterfaceName",
            AllocationError::AlreadyAllocated { .. } => "AlreadyAllocated",
            AllocationError::RangeFull { .. } => "RangeFull",
        }
    }
}

/// One interface of the VM's template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestedInterface {
    /// Its position in `interfaces`.
    pub index: usize,
    /// Its name (the network's).
    pub name: String,
    /// The MAC set by hand.
    pub mac: Option<MacAddress>,
    /// Whether the pool gives it a MAC.
    pub managed: bool,
}

/// What a VirtualMachine asks of the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmRequest {
    /// The VM.
    pub key: VmKey,
    /// Its uid, when it has one already (an update; a create on the embedded API server).
    pub uid: Option<String>,
    /// Its interfaces, in order.
    pub interfaces: Vec<RequestedInterface>,
}

/// The path of interface `index` of a VM's template.
pub fn interface_field(index: usize) -> FieldPath {
    FieldPath::new("spec")
        .child("template")
        .child("spec")
        .child("domain")
        .child("devices")
        .child("interfaces")
        .index(index)
}

impl VmRequest {
    /// The request of `vm` (namespace `namespace` when its metadata names none); `None`
    /// when the pool leaves it alone: no template, or being deleted.
    pub fn from_vm(vm: &Value, namespace: &str) -> Result<Option<VmRequest>, AllocationError> {
        let metadata = &vm["metadata"];
        let template = &vm["spec"]["template"];
        if template.is_null() || !metadata["deletionTimestamp"].is_null() {
            return Ok(None);
        }
        let namespace = metadata["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(namespace);
        let key = VmKey::new(namespace, metadata["name"].as_str().unwrap_or_default());
        let uid = metadata["uid"]
            .as_str()
            .filter(|u| !u.is_empty())
            .map(str::to_owned);
        let spec = &template["spec"];
        let kinds = network_kinds(spec);
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut macs: HashMap<MacAddress, &str> = HashMap::new();
        let mut interfaces = Vec::new();
        for (index, iface) in interface_list(spec).iter().enumerate() {
            let name = iface["name"].as_str().unwrap_or_default();
            if names.insert(name, index).is_some() {
                return Err(AllocationError::DuplicateInterfaceName {
                    field: interface_field(index).child("name"),
                });
            }
            let field = || interface_field(index).child("macAddress");
            let mac = match iface["macAddress"].as_str().filter(|m| !m.is_empty()) {
                None => None,
                Some(text) => {
                    let mac = text.parse::<MacAddress>().map_err(|source| {
                        AllocationError::InvalidMac {
                            field: field(),
                            interface: name.to_owned(),
                            source,
                        }
                    })?;
                    if let Some(first) = macs.insert(mac, name) {
                        return Err(AllocationError::DuplicateMac {
                            field: field(),
                            mac,
                            first: first.to_owned(),
                            second: name.to_owned(),
                        });
                    }
                    Some(mac)
                }
            };
            interfaces.push(RequestedInterface {
                index,
                name: name.to_owned(),
                mac,
                managed: is_managed(iface, kinds.get(name).copied()),
            });
        }
        Ok(Some(VmRequest {
            key,
            uid,
            interfaces,
        }))
    }
}

/// The MACs a stored VirtualMachine holds: its managed interfaces' MACs that parse (a VM
/// stored with a bad MAC, from before the pool ran, holds nothing for that interface).
pub fn stored_interfaces(vm: &Value) -> Vec<(String, MacAddress)> {
    let spec = &vm["spec"]["template"]["spec"];
    let kinds = network_kinds(spec);
    interface_list(spec)
        .iter()
        .filter_map(|iface| {
            let name = iface["name"].as_str().unwrap_or_default();
            let mac = iface["macAddress"].as_str()?.parse().ok()?;
            is_managed(iface, kinds.get(name).copied()).then(|| (name.to_owned(), mac))
        })
        .collect()
}

/// Which network an interface is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NetworkKind {
    Pod,
    Multus,
}

fn interface_list(spec: &Value) -> &[Value] {
    spec["domain"]["devices"]["interfaces"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

fn network_kinds(spec: &Value) -> HashMap<&str, NetworkKind> {
    spec["networks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|network| {
            let name = network["name"].as_str()?;
            let kind = if !network["multus"].is_null() {
                NetworkKind::Multus
            } else if !network["pod"].is_null() {
                NetworkKind::Pod
            } else {
                return None;
            };
            Some((name, kind))
        })
        .collect()
}

/// kubemacpool's rule: masquerade (which only the pod network has) and every interface on a
/// Multus network; and, here, bridge on the pod network too, whose guest-facing MAC is not the
/// pod's own on this platform (a tap on a node bridge), so it needs one of its own.
fn is_managed(iface: &Value, network: Option<NetworkKind>) -> bool {
    match network {
        Some(NetworkKind::Multus) => true,
        Some(NetworkKind::Pod) => !iface["masquerade"].is_null() || !iface["bridge"].is_null(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vm(interfaces: Value, networks: Value) -> Value {
        json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "web", "namespace": "prod", "uid": "u1"},
            "spec": {"template": {"spec": {
                "domain": {"devices": {"interfaces": interfaces}},
                "networks": networks,
            }}},
        })
    }

    #[test]
    fn masquerade_bridge_and_multus_interfaces_are_managed() {
        let v = vm(
            json!([
                {"name": "default", "masquerade": {}},
                {"name": "br", "bridge": {}},
                {"name": "blue", "bridge": {}, "macAddress": "02-00-00-00-00-0A"},
                {"name": "vf", "sriov": {}},
                {"name": "orphan", "masquerade": {}},
            ]),
            json!([
                {"name": "default", "pod": {}},
                {"name": "br", "pod": {}},
                {"name": "blue", "multus": {"networkName": "blue-net"}},
                {"name": "vf", "pod": {}},
            ]),
        );
        let request = VmRequest::from_vm(&v, "ignored").unwrap().unwrap();
        assert_eq!(request.key, VmKey::new("prod", "web"));
        assert_eq!(request.uid.as_deref(), Some("u1"));
        let managed: Vec<(&str, bool)> = request
            .interfaces
            .iter()
            .map(|i| (i.name.as_str(), i.managed))
            .collect();
        assert_eq!(
            managed,
            [
                ("default", true),
                ("br", true),
                ("blue", true),
                ("vf", false),
                ("orphan", false)
            ]
        );
        assert_eq!(
            request.interfaces[2].mac,
            Some("02:00:00:00:00:0a".parse().unwrap())
        );
        assert_eq!(
            stored_interfaces(&v),
            [("blue".to_owned(), "02:00:00:00:00:0a".parse().unwrap())]
        );
    }

    #[test]
    fn bad_macs_duplicates_and_repeated_names_are_refused_by_field() {
        let networks =
            json!([{"name": "a", "pod": {}}, {"name": "b", "multus": {"networkName": "n"}}]);
        let bad = vm(
            json!([{"name": "a", "masquerade": {}, "macAddress": "02:00:00:00:00:zz"}]),
            networks.clone(),
        );
        let err = VmRequest::from_vm(&bad, "ns").unwrap_err();
        assert_eq!(
            format!("{}: {err}", err.field()),
            "spec.template.spec.domain.devices.interfaces[0].macAddress: invalid MAC address format for interface a: address 02:00:00:00:00:zz: invalid MAC address"
        );
        let twice = vm(
            json!([
                {"name": "a", "masquerade": {}, "macAddress": "02:00:00:00:00:01"},
                {"name": "b", "bridge": {}, "macAddress": "02:00:00:00:00:01"},
            ]),
            networks.clone(),
        );
        let err = VmRequest::from_vm(&twice, "ns").unwrap_err();
        assert_eq!(
            format!("{}: {err}", err.field()),
            "spec.template.spec.domain.devices.interfaces[1].macAddress: duplicate MAC address 02:00:00:00:00:01 found on interfaces: a and b"
        );
        let same_name = vm(
            json!([{"name": "a", "masquerade": {}}, {"name": "a", "bridge": {}}]),
            networks,
        );
        assert!(matches!(
            VmRequest::from_vm(&same_name, "ns").unwrap_err(),
            AllocationError::DuplicateInterfaceName { field } if field.as_str() == "spec.template.spec.domain.devices.interfaces[1].name"
        ));
    }

    #[test]
    fn vms_without_template_or_being_deleted_are_left_alone() {
        let mut v = vm(
            json!([{"name": "a", "masquerade": {}}]),
            json!([{"name": "a", "pod": {}}]),
        );
        v["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert_eq!(VmRequest::from_vm(&v, "ns"), Ok(None));
        let bare = json!({"metadata": {"name": "x"}, "spec": {}});
        assert_eq!(VmRequest::from_vm(&bare, "ns"), Ok(None));
    }
}
