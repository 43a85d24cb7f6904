//! The Go types of a KubeVirt VirtualMachine as far as validation rules reach into them, so
//! that paths on a VM given as JSON resolve as upstream's resolve on the typed object: a field
//! that is a value in Go (a number, a string, an embedded struct) reads as its zero value when
//! the JSON leaves it out, a pointer reads as absent; and the reference VM upstream falls back
//! on, whose domain has every optional field present with its zero value.

use serde_json::{Map, Value, json};

/// The type of one field, as far as its lookups care.
#[derive(Debug)]
pub enum Shape {
    /// Any integer.
    Int,
    /// A string (or a string-typed enum such as a disk bus).
    Str,
    /// A boolean.
    Bool,
    /// A `resource.Quantity`.
    Quantity,
    /// A struct with these fields.
    Object(&'static [Field]),
    /// A slice; the reference VM holds this many zero items.
    List(usize, &'static Shape),
    /// A map from strings to values of a shape.
    Map(&'static Shape),
}

/// A named field of a struct.
#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub shape: &'static Shape,
    /// A pointer (or slice or map) in Go: absent when the JSON leaves it out.
    pub pointer: bool,
}

const fn val(name: &'static str, shape: &'static Shape) -> Field {
    Field {
        name,
        shape,
        pointer: false,
    }
}

const fn ptr(name: &'static str, shape: &'static Shape) -> Field {
    Field {
        name,
        shape,
        pointer: true,
    }
}

/// How many items upstream's reference VM gives a slice (`kubevirtobjs.MaxItems` and its
/// per-field numbers).
const MAX_ITEMS: usize = 64;
const MAX_PORTS: usize = 16;

static INT: Shape = Shape::Int;
static STR: Shape = Shape::Str;
static BOOL: Shape = Shape::Bool;
static QUANTITY: Shape = Shape::Quantity;
static EMPTY: Shape = Shape::Object(&[]);
static STR_MAP: Shape = Shape::Map(&STR);
static QUANTITY_MAP: Shape = Shape::Map(&QUANTITY);

static OBJECT_META: Shape = Shape::Object(&[
    val("name", &STR),
    val("namespace", &STR),
    val("generateName", &STR),
    val("labels", &STR_MAP),
    val("annotations", &STR_MAP),
]);

static RESOURCES: Shape = Shape::Object(&[
    val("requests", &QUANTITY_MAP),
    val("limits", &QUANTITY_MAP),
    val("overcommitGuestOverhead", &BOOL),
]);

static CPU_FEATURE: Shape = Shape::Object(&[val("name", &STR), val("policy", &STR)]);
static CPU_FEATURES: Shape = Shape::List(MAX_ITEMS, &CPU_FEATURE);
static REALTIME: Shape = Shape::Object(&[val("mask", &STR)]);
static NUMA: Shape = Shape::Object(&[ptr("guestMappingPassthrough", &EMPTY)]);
static CPU: Shape = Shape::Object(&[
    val("cores", &INT),
    val("sockets", &INT),
    val("maxSockets", &INT),
    val("threads", &INT),
    val("model", &STR),
    val("features", &CPU_FEATURES),
    val("dedicatedCpuPlacement", &BOOL),
    val("isolateEmulatorThread", &BOOL),
    ptr("numa", &NUMA),
    ptr("realtime", &REALTIME),
]);

static HUGEPAGES: Shape = Shape::Object(&[val("pageSize", &STR)]);
static MEMORY: Shape = Shape::Object(&[
    ptr("hugepages", &HUGEPAGES),
    ptr("guest", &QUANTITY),
    ptr("maxGuest", &QUANTITY),
]);

static MACHINE: Shape = Shape::Object(&[val("type", &STR)]);

static BIOS: Shape = Shape::Object(&[ptr("useSerial", &BOOL)]);
static EFI: Shape = Shape::Object(&[ptr("secureBoot", &BOOL), ptr("persistent", &BOOL)]);
static BOOTLOADER: Shape = Shape::Object(&[ptr("bios", &BIOS), ptr("efi", &EFI)]);
static FIRMWARE: Shape = Shape::Object(&[
    val("uuid", &STR),
    ptr("bootloader", &BOOTLOADER),
    val("serial", &STR),
]);

static UTC_OFFSET: Shape = Shape::Object(&[ptr("offsetSeconds", &INT)]);
static CLOCK: Shape = Shape::Object(&[ptr("utc", &UTC_OFFSET), ptr("timezone", &STR)]);

static FEATURE_STATE: Shape = Shape::Object(&[ptr("enabled", &BOOL)]);
static FEATURE_APIC: Shape = Shape::Object(&[ptr("enabled", &BOOL), val("endOfInterrupt", &BOOL)]);
static FEATURE_KVM: Shape = Shape::Object(&[val("hidden", &BOOL)]);
static FEATURES: Shape = Shape::Object(&[
    val("acpi", &FEATURE_STATE),
    ptr("apic", &FEATURE_APIC),
    ptr("smm", &FEATURE_STATE),
    ptr("kvm", &FEATURE_KVM),
    ptr("pvspinlock", &FEATURE_STATE),
]);

static DISK_TARGET: Shape = Shape::Object(&[
    val("bus", &STR),
    val("readonly", &BOOL),
    val("pciAddress", &STR),
]);
static LUN_TARGET: Shape = Shape::Object(&[
    val("bus", &STR),
    val("readonly", &BOOL),
    val("reservation", &BOOL),
]);
static CDROM_TARGET: Shape =
    Shape::Object(&[val("bus", &STR), ptr("readonly", &BOOL), val("tray", &STR)]);
static DISK: Shape = Shape::Object(&[
    val("name", &STR),
    ptr("disk", &DISK_TARGET),
    ptr("lun", &LUN_TARGET),
    ptr("cdrom", &CDROM_TARGET),
    ptr("bootOrder", &INT),
    val("serial", &STR),
    ptr("dedicatedIOThread", &BOOL),
    val("cache", &STR),
    val("io", &STR),
    val("tag", &STR),
    ptr("shareable", &BOOL),
    ptr("errorPolicy", &STR),
]);
static DISKS: Shape = Shape::List(MAX_ITEMS, &DISK);

static PORT: Shape = Shape::Object(&[val("name", &STR), val("protocol", &STR), val("port", &INT)]);
static PORTS: Shape = Shape::List(MAX_PORTS, &PORT);
static BINDING: Shape = Shape::Object(&[val("name", &STR)]);
static INTERFACE: Shape = Shape::Object(&[
    val("name", &STR),
    val("model", &STR),
    ptr("bridge", &EMPTY),
    ptr("masquerade", &EMPTY),
    ptr("sriov", &EMPTY),
    ptr("binding", &BINDING),
    val("ports", &PORTS),
    val("macAddress", &STR),
    ptr("bootOrder", &INT),
    val("pciAddress", &STR),
    val("tag", &STR),
    val("state", &STR),
]);
static INTERFACES: Shape = Shape::List(MAX_ITEMS, &INTERFACE);

static INPUT: Shape = Shape::Object(&[val("bus", &STR), val("type", &STR), val("name", &STR)]);
static INPUTS: Shape = Shape::List(MAX_ITEMS, &INPUT);
static GPU: Shape = Shape::Object(&[val("name", &STR), val("deviceName", &STR)]);
static GPUS: Shape = Shape::List(MAX_ITEMS, &GPU);
static NAMED: Shape = Shape::Object(&[val("name", &STR)]);
static WATCHDOG: Shape = Shape::Object(&[val("name", &STR)]);
static SOUND: Shape = Shape::Object(&[val("name", &STR), val("model", &STR)]);
static TPM: Shape = Shape::Object(&[ptr("persistent", &BOOL)]);
static NAMED_LIST: Shape = Shape::List(MAX_ITEMS, &NAMED);

static DEVICES: Shape = Shape::Object(&[
    ptr("useVirtioTransitional", &BOOL),
    val("disableHotplug", &BOOL),
    val("disks", &DISKS),
    ptr("watchdog", &WATCHDOG),
    val("interfaces", &INTERFACES),
    val("inputs", &INPUTS),
    ptr("autoattachPodInterface", &BOOL),
    ptr("autoattachGraphicsDevice", &BOOL),
    ptr("autoattachSerialConsole", &BOOL),
    ptr("autoattachMemBalloon", &BOOL),
    ptr("autoattachInputDevice", &BOOL),
    ptr("autoattachVSOCK", &BOOL),
    ptr("rng", &EMPTY),
    ptr("blockMultiQueue", &BOOL),
    ptr("networkInterfaceMultiqueue", &BOOL),
    val("gpus", &GPUS),
    val("filesystems", &NAMED_LIST),
    val("hostDevices", &NAMED_LIST),
    ptr("sound", &SOUND),
    ptr("tpm", &TPM),
]);

/// `DomainSpec`, the part upstream's reference VM fills.
pub static DOMAIN: Shape = Shape::Object(&[
    val("resources", &RESOURCES),
    ptr("cpu", &CPU),
    ptr("memory", &MEMORY),
    ptr("machine", &MACHINE),
    ptr("firmware", &FIRMWARE),
    ptr("clock", &CLOCK),
    ptr("features", &FEATURES),
    val("devices", &DEVICES),
    ptr("ioThreadsPolicy", &STR),
]);

static NETWORK: Shape = Shape::Object(&[val("name", &STR), ptr("pod", &EMPTY)]);
static NETWORKS: Shape = Shape::List(MAX_ITEMS, &NETWORK);
static VOLUMES: Shape = Shape::List(MAX_ITEMS, &NAMED);

static VMI_SPEC: Shape = Shape::Object(&[
    val("domain", &DOMAIN),
    val("nodeSelector", &STR_MAP),
    ptr("terminationGracePeriodSeconds", &INT),
    ptr("evictionStrategy", &STR),
    val("hostname", &STR),
    val("subdomain", &STR),
    val("schedulerName", &STR),
    val("priorityClassName", &STR),
    val("architecture", &STR),
    val("volumes", &VOLUMES),
    val("networks", &NETWORKS),
]);

static TEMPLATE: Shape = Shape::Object(&[val("metadata", &OBJECT_META), val("spec", &VMI_SPEC)]);

static VM_SPEC: Shape = Shape::Object(&[
    ptr("running", &BOOL),
    ptr("runStrategy", &STR),
    ptr("template", &TEMPLATE),
]);

/// A `VirtualMachine`.
pub static VIRTUAL_MACHINE: Shape =
    Shape::Object(&[val("metadata", &OBJECT_META), val("spec", &VM_SPEC)]);

impl Shape {
    /// The field `name` of a struct shape.
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        match self {
            Shape::Object(fields) => fields.iter().find(|f| f.name == name),
            _ => None,
        }
    }

    /// The Go zero value: what a value (non-pointer) field reads as when the JSON leaves it out.
    pub fn zero(&self) -> Value {
        match self {
            Shape::Int => json!(0),
            Shape::Str => json!(""),
            Shape::Bool => json!(false),
            Shape::Quantity => json!("0"),
            Shape::Object(_) | Shape::Map(_) => Value::Object(Map::new()),
            Shape::List(..) => Value::Array(Vec::new()),
        }
    }

    /// The value with every optional field present (upstream's `makeStruct`): structs with
    /// all their fields, slices with their reference number of items, maps empty.
    fn populated(&self) -> Value {
        match self {
            Shape::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|f| (f.name.to_owned(), f.shape.populated()))
                    .collect(),
            ),
            Shape::List(items, shape) => Value::Array(vec![shape.populated(); *items]),
            other => other.zero(),
        }
    }
}

/// Upstream's reference VM (`NewDefaultVirtualMachine`): a zero VM whose domain has every
/// optional field present with its zero value, CD-ROMs read-only with a closed tray.
pub fn reference_vm() -> Value {
    let mut domain = DOMAIN.populated();
    if let Some(disks) = domain["devices"]["disks"].as_array_mut() {
        for disk in disks {
            disk["cdrom"]["readonly"] = json!(true);
            disk["cdrom"]["tray"] = json!("closed");
        }
    }
    json!({"spec": {"template": {"spec": {"domain": domain}}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_vm_has_every_optional_domain_field() {
        let vm = reference_vm();
        let domain = &vm["spec"]["template"]["spec"]["domain"];
        assert_eq!(domain["memory"]["guest"], "0");
        assert_eq!(domain["cpu"]["cores"], 0);
        assert_eq!(
            domain["devices"]["disks"].as_array().map(Vec::len),
            Some(64)
        );
        assert_eq!(domain["devices"]["disks"][3]["disk"]["bus"], "");
        assert_eq!(domain["devices"]["disks"][3]["cdrom"]["tray"], "closed");
        assert_eq!(
            domain["devices"]["interfaces"][0]["ports"]
                .as_array()
                .map(Vec::len),
            Some(16)
        );
        assert_eq!(domain["resources"]["requests"], json!({}));
    }

    #[test]
    fn fields_know_whether_they_are_pointers() {
        let cores = CPU.field("cores").expect("cores");
        assert!(!cores.pointer);
        let guest = MEMORY.field("guest").expect("guest");
        assert!(guest.pointer);
        assert!(DOMAIN.field("nope").is_none());
    }
}
