//! The machine: type, acceleration, CPU model and topology, memory, and the identity the
//! guest sees (name, UUID, SMBIOS).

use api::instancetype::annotations;
use api::kubevirt::vmi::START_STRATEGY_PAUSED;
use api::kubevirt::{VirtualMachineInstance, VirtualMachineInstanceSpec};
use api::quantity::quantity_bytes;
use api::validation::FieldPath;
use sha2::{Digest, Sha256};

use super::DomainError;
use super::facts::{Acceleration, NodeFacts};

const MIB: u128 = 1024 * 1024;

/// Who the VMI is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `namespace_name`, QEMU's `-name`.
    pub qemu_name: String,
    /// The SMBIOS UUID: `firmware.uuid`, else derived from the VMI's uid or name.
    pub uuid: String,
    /// A stable seed for generated values (MAC addresses, tap names).
    pub seed: String,
    /// The guest's host name: `spec.hostname`, else the VMI's name up to its first dot.
    pub hostname: String,
    pub name: String,
    pub namespace: String,
    /// The instancetype the VMI was expanded from (the annotation KubeVirt sets, a cluster
    /// instancetype's before a namespaced one's), which cloud-init's metadata names.
    pub instance_type: Option<String>,
}

impl Identity {
    pub fn of(vmi: &VirtualMachineInstance) -> Self {
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        let name = vmi.metadata.name.as_deref().unwrap_or("vmi");
        let seed = match vmi.metadata.uid.as_deref() {
            Some(uid) if !uid.is_empty() => uid.to_owned(),
            _ => format!("{namespace}/{name}"),
        };
        let firmware_uuid = vmi
            .spec
            .domain
            .firmware
            .as_ref()
            .and_then(|f| f.uuid.clone());
        Self {
            qemu_name: format!("{namespace}_{name}"),
            uuid: firmware_uuid.unwrap_or_else(|| uuid_from(&seed)),
            hostname: vmi.spec.hostname.clone().unwrap_or_else(|| {
                name.split('.')
                    .next()
                    .unwrap_or(name)
                    .chars()
                    .take(63)
                    .collect()
            }),
            seed,
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            instance_type: instance_type_of(vmi),
        }
    }
}

/// The instancetype named by the VMI's annotations: a cluster instancetype first.
fn instance_type_of(vmi: &VirtualMachineInstance) -> Option<String> {
    let annotations = vmi.metadata.annotations.as_ref()?;
    [annotations::CLUSTER_INSTANCETYPE, annotations::INSTANCETYPE]
        .into_iter()
        .filter_map(|key| annotations.get(key))
        .find(|name| !name.is_empty())
        .cloned()
}

/// A name-based UUID (the version 5 layout over sha256) of `seed`.
fn uuid_from(seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The machine part of the invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachinePlan {
    /// QEMU's machine type, such as `q35`.
    pub machine_type: String,
    /// `kvm` or `tcg`.
    pub accel: &'static str,
    pub software_emulation: bool,
    /// The `-cpu` model.
    pub cpu_model: String,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    /// `maxcpus`, when CPU hotplug leaves room.
    pub max_cpus: Option<u32>,
    pub memory_mib: u64,
    pub smm: bool,
    pub acpi: bool,
    pub start_paused: bool,
    /// The SMBIOS serial number.
    pub serial: Option<String>,
}

impl MachinePlan {
    /// Whether the machine type is a q35 (else i440fx, `pc`).
    pub fn is_q35(&self) -> bool {
        self.machine_type == "q35" || self.machine_type.starts_with("pc-q35")
    }
}

pub fn plan(
    spec: &VirtualMachineInstanceSpec,
    facts: &NodeFacts,
) -> Result<MachinePlan, DomainError> {
    let domain = FieldPath::new("spec").child("domain");
    let machine_type = machine_type(spec, &domain)?;
    let (accel, software_emulation) = match facts.acceleration {
        Acceleration::Kvm => ("kvm", false),
        Acceleration::Unavailable {
            emulation_allowed: true,
        } => ("tcg", true),
        Acceleration::Unavailable {
            emulation_allowed: false,
        } => return Err(DomainError::KvmNotPresent),
    };
    let cpu = spec.domain.cpu.clone().unwrap_or_default();
    let cpu_path = domain.child("cpu");
    let count = |value: Option<u32>, name: &str| match value {
        None => Ok(1),
        Some(0) => Err(DomainError::unsupported(
            &cpu_path.child(name),
            "must be at least 1",
        )),
        Some(n) if n > 255 => Err(DomainError::unsupported(
            &cpu_path.child(name),
            format!("{n} is more than the 255 this machine supports"),
        )),
        Some(n) => Ok(n),
    };
    let topology_given = cpu.sockets.is_some() || cpu.cores.is_some() || cpu.threads.is_some();
    let sockets = match cpu.sockets {
        // As KubeVirt: with no topology, one socket per CPU of the limit, else the request.
        None if !topology_given => cpus_from_resources(spec)?.unwrap_or(1),
        given => count(given, "sockets")?,
    };
    let cores = count(cpu.cores, "cores")?;
    let threads = count(cpu.threads, "threads")?;
    if sockets * cores * threads > 255 {
        return Err(DomainError::unsupported(
            &cpu_path,
            format!("{sockets} sockets x {cores} cores x {threads} threads is more than 255 vCPUs"),
        ));
    }
    let max_cpus = match cpu.max_sockets {
        Some(max) if max < sockets => {
            return Err(DomainError::unsupported(
                &cpu_path.child("maxSockets"),
                format!("{max} is fewer than the {sockets} sockets"),
            ));
        }
        Some(max) => max
            .checked_mul(cores * threads)
            .filter(|m| *m <= 255)
            .map(Some)
            .ok_or_else(|| {
                DomainError::unsupported(&cpu_path.child("maxSockets"), "more than 255 vCPUs")
            })?,
        None => None,
    };
    let cpu_model = cpu_model(cpu.model.as_deref(), accel, &cpu_path)?;
    let features = spec.domain.features.clone().unwrap_or_default();
    if features.apic.as_ref().is_some_and(|a| !a.is_enabled()) {
        return Err(DomainError::unsupported(
            &domain.child("features").child("apic"),
            "an x86 machine cannot run without an APIC",
        ));
    }
    Ok(MachinePlan {
        machine_type,
        accel,
        software_emulation,
        cpu_model,
        sockets,
        cores,
        threads,
        max_cpus,
        memory_mib: memory_mib(spec, &domain)?,
        smm: features.smm.as_ref().is_some_and(|s| s.is_enabled()),
        acpi: features.acpi.as_ref().is_none_or(|a| a.is_enabled()),
        start_paused: spec.start_strategy.as_deref() == Some(START_STRATEGY_PAUSED),
        serial: spec.domain.firmware.as_ref().and_then(|f| f.serial.clone()),
    })
}

/// `resources.limits.cpu`, else `resources.requests.cpu`, in whole CPUs rounded up.
fn cpus_from_resources(spec: &VirtualMachineInstanceSpec) -> Result<Option<u32>, DomainError> {
    let resources = FieldPath::new("spec").child("domain").child("resources");
    let Some(r) = spec.domain.resources.as_ref() else {
        return Ok(None);
    };
    for (which, list) in [("limits", &r.limits), ("requests", &r.requests)] {
        if let Some(q) = list.as_ref().and_then(|l| l.get("cpu")) {
            let path = resources.child(which).child("cpu");
            let millis = parse_cpu_millis(&q.0).ok_or_else(|| {
                DomainError::unsupported(&path, format!("{:?} is not a CPU quantity", q.0))
            })?;
            let cpus = millis.div_ceil(1000).max(1);
            return u32::try_from(cpus)
                .ok()
                .filter(|c| *c <= 255)
                .map(Some)
                .ok_or_else(|| DomainError::unsupported(&path, "more than 255 vCPUs"));
        }
    }
    Ok(None)
}

/// A CPU quantity (`2`, `500m`, `1.5`) in millicores.
fn parse_cpu_millis(text: &str) -> Option<u64> {
    if let Some(m) = text.strip_suffix('m') {
        return m.parse().ok();
    }
    let value: f64 = text.parse().ok()?;
    (value.is_finite() && (0.0..1e6).contains(&value)).then(|| (value * 1000.0).ceil() as u64)
}

fn machine_type(
    spec: &VirtualMachineInstanceSpec,
    domain: &FieldPath,
) -> Result<String, DomainError> {
    let requested = spec
        .domain
        .machine
        .as_ref()
        .and_then(|m| m.type_.as_deref())
        .filter(|t| !t.is_empty())
        .unwrap_or("q35");
    // RHEL machine types name the same chipsets; this QEMU has only upstream's.
    let upstream = match requested {
        "q35" | "pc-q35" => "q35".to_owned(),
        "pc" | "pc-i440fx" => "pc".to_owned(),
        t if t.starts_with("pc-q35-rhel") => "q35".to_owned(),
        t if t.starts_with("pc-i440fx-rhel") => "pc".to_owned(),
        t if t.starts_with("pc-q35-") || t.starts_with("pc-i440fx-") => t.to_owned(),
        other => {
            return Err(DomainError::unsupported(
                &domain.child("machine").child("type"),
                format!("machine type {other:?} is not an x86 q35 or pc (i440fx) machine"),
            ));
        }
    };
    Ok(upstream)
}

/// The `-cpu` model: the host's CPU under KVM; under TCG, where there is no host CPU to
/// pass through, QEMU's `max` (every feature TCG emulates).
fn cpu_model(model: Option<&str>, accel: &str, path: &FieldPath) -> Result<String, DomainError> {
    match (model.unwrap_or("host-model"), accel) {
        ("host-model" | "host-passthrough", "kvm") => Ok("host".to_owned()),
        ("host-model" | "host-passthrough", _) => Ok("max".to_owned()),
        ("", _) => Ok("max".to_owned()),
        (named, _)
            if named
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.') =>
        {
            Ok(named.to_owned())
        }
        (named, _) => Err(DomainError::unsupported(
            &path.child("model"),
            format!("{named:?} is not a CPU model name"),
        )),
    }
}

/// `memory.guest`, else the memory request, else the limit; in MiB, rounded up.
fn memory_mib(spec: &VirtualMachineInstanceSpec, domain: &FieldPath) -> Result<u64, DomainError> {
    let resources = spec.domain.resources.as_ref();
    let from_resources = |which: &str| {
        let list = match which {
            "requests" => resources.and_then(|r| r.requests.as_ref()),
            _ => resources.and_then(|r| r.limits.as_ref()),
        };
        list.and_then(|l| l.get("memory"))
            .map(|q| (domain.child("resources").child(which).child("memory"), q))
    };
    let (path, quantity) = spec
        .domain
        .memory
        .as_ref()
        .and_then(|m| m.guest.as_ref())
        .map(|q| (domain.child("memory").child("guest"), q))
        .or_else(|| from_resources("requests"))
        .or_else(|| from_resources("limits"))
        .ok_or_else(|| {
            DomainError::unsupported(
                &domain.child("memory").child("guest"),
                "the guest needs memory: set memory.guest or resources.requests.memory",
            )
        })?;
    let bytes = quantity_bytes(quantity).ok_or_else(|| {
        DomainError::unsupported(&path, format!("{:?} is not a quantity", quantity.0))
    })?;
    let mib = bytes.div_ceil(MIB);
    if mib < 16 {
        return Err(DomainError::unsupported(
            &path,
            format!("{} is less than the 16Mi a guest needs", quantity.0),
        ));
    }
    u64::try_from(mib)
        .ok()
        .filter(|m| *m <= 16 * 1024 * 1024)
        .ok_or_else(|| DomainError::unsupported(&path, "more than 16 TiB of memory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_stable_and_well_formed() {
        let a = uuid_from("ns/name");
        assert_eq!(a, uuid_from("ns/name"));
        assert_ne!(a, uuid_from("ns/other"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "5");
    }

    #[test]
    fn cpu_quantities_parse_to_millicores() {
        assert_eq!(parse_cpu_millis("500m"), Some(500));
        assert_eq!(parse_cpu_millis("2"), Some(2000));
        assert_eq!(parse_cpu_millis("1.5"), Some(1500));
        assert_eq!(parse_cpu_millis("x"), None);
    }

    #[test]
    fn host_cpu_models_become_max_under_tcg() {
        let p = FieldPath::new("spec.domain.cpu");
        assert_eq!(cpu_model(None, "tcg", &p).as_deref(), Ok("max"));
        assert_eq!(
            cpu_model(Some("host-passthrough"), "kvm", &p).as_deref(),
            Ok("host")
        );
        assert_eq!(
            cpu_model(Some("Skylake-Client"), "tcg", &p).as_deref(),
            Ok("Skylake-Client")
        );
        assert!(cpu_model(Some("a,b"), "tcg", &p).is_err());
    }
}
