//! Disks: each VMI disk and the volume behind it become a blockdev chain (the image file or
//! device, then its format) and a guest device on the disk's bus.
//!
//! | volume                        | image                                              |
//! |-------------------------------|----------------------------------------------------|
//! | persistentVolumeClaim, dataVolume | `disk.img` of a filesystem claim (made sparse at the claim's capacity when missing), or the block device |
//! | ephemeral                     | a qcow2 overlay in the run dir over the claim's image |
//! | containerDisk                 | a qcow2 overlay over the image in the node's cache |
//! | emptyDisk                     | a sparse raw file in the run dir                   |
//! | hostDisk                      | the file on the node (made for `DiskOrCreate`)     |
//! | cloudInitNoCloud, cloudInitConfigDrive | an ISO made in the run dir              |
//! | configMap, secret, serviceAccount, downwardAPI | an ISO of the mounted files       |

use std::path::{Path, PathBuf};

use api::kubevirt::VirtualMachineInstanceSpec;
use api::kubevirt::vmi::{
    AccessCredential, AttachedTarget, CloudInitSource, Disk, HostDisk, Volume,
};
use api::quantity::quantity_bytes;
use api::validation::FieldPath;
use base64::Engine;
use serde_json::{Value, json};

use super::facts::{NodeFacts, VolumeBacking};
use super::machine::{Identity, MachinePlan};
use super::{DomainError, PrepareStep};
use crate::cloudinit::{CloudInitData, CloudInitKind, DataSource};

/// SATA ports of an AHCI controller.
const AHCI_PORTS: usize = 6;

/// The disks part of the invocation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskPlan {
    pub drives: Vec<Drive>,
    /// A virtio-scsi controller `scsi0` is needed.
    pub scsi_controller: bool,
    /// An AHCI controller `sata0` must be added (i440fx has none built in).
    pub ahci_controller: bool,
    /// A USB controller is needed for usb disks.
    pub usb: bool,
    pub prepare: Vec<PrepareStep>,
}

/// One guest disk: its blockdev chain, bottom first, and its device.
#[derive(Debug, Clone, PartialEq)]
pub struct Drive {
    pub blockdevs: Vec<Value>,
    pub device: Value,
}

/// Where a disk's bytes are.
struct Image {
    path: PathBuf,
    /// `file` or `host_device`.
    protocol: &'static str,
    /// `raw` or `qcow2`.
    format: &'static str,
    /// Generated content the guest must not change.
    read_only: bool,
}

pub fn plan(
    spec: &VirtualMachineInstanceSpec,
    facts: &NodeFacts,
    identity: &Identity,
    machine: &MachinePlan,
) -> Result<DiskPlan, DomainError> {
    let devices = FieldPath::new("spec")
        .child("domain")
        .child("devices")
        .child("disks");
    let volumes_path = FieldPath::new("spec").child("volumes");
    let volumes: Vec<&Volume> = spec.volumes.iter().flatten().collect();
    let credentials = spec.access_credentials.as_deref().unwrap_or_default();
    let mut cloud_init_kinds = std::collections::BTreeSet::<&str>::new();
    let mut plan = DiskPlan::default();
    let mut slots = BusSlots {
        q35: machine.is_q35(),
        sata_port: 0,
        scsi_lun: 0,
    };
    let mut boot_orders = std::collections::BTreeMap::new();
    for (i, disk) in spec.domain.devices.disks.iter().flatten().enumerate() {
        let path = devices.index(i);
        let (v, volume) = volume_of(&volumes, disk, &path)?;
        check_boot_order_unused(&mut boot_orders, disk, i, &path)?;
        let vpath = volumes_path.index(v);
        check_one_cloud_init_of_each_kind(&mut cloud_init_kinds, volume, &vpath)?;
        let image = image(
            volume,
            &vpath,
            facts,
            identity,
            credentials,
            &mut plan.prepare,
        )?;
        let target = disk.attached_target();
        let kind = target.kind;
        let read_only = is_read_only(&image, &target, volume);
        let bus = bus(&target, &path)?;
        let cache = cache(disk, &image, facts, &path)?;
        let node = format!("drive{i}");
        let blockdevs = blockdev_chain(&node, &image, read_only, &cache, disk, &path)?;
        let mut device = bus_device(bus, kind, &mut slots, &mut plan, &path)?;
        set_device_properties(&mut device, disk, &node, kind, bus, &cache, &path)?;
        plan.drives.push(Drive { blockdevs, device });
    }
    Ok(plan)
}

/// The volume a disk names, with its index in `spec.volumes`.
fn volume_of<'a>(
    volumes: &[&'a Volume],
    disk: &Disk,
    path: &FieldPath,
) -> Result<(usize, &'a Volume), DomainError> {
    volumes
        .iter()
        .copied()
        .enumerate()
        .find(|(_, v)| v.name == disk.name)
        .ok_or_else(|| DomainError::unsupported(&path.child("name"), "no volume of this name"))
}

/// A boot order belongs to one disk only.
fn check_boot_order_unused(
    boot_orders: &mut std::collections::BTreeMap<u32, usize>,
    disk: &Disk,
    i: usize,
    path: &FieldPath,
) -> Result<(), DomainError> {
    if let Some(order) = disk.boot_order
        && let Some(first) = boot_orders.insert(order, i)
    {
        return Err(DomainError::unsupported(
            &path.child("bootOrder"),
            format!("boot order {order} is already used by disk {first}"),
        ));
    }
    Ok(())
}

/// At most one cloudInitNoCloud and one cloudInitConfigDrive volume among the disks.
fn check_one_cloud_init_of_each_kind(
    seen: &mut std::collections::BTreeSet<&str>,
    volume: &Volume,
    vpath: &FieldPath,
) -> Result<(), DomainError> {
    for (kind, set) in [
        ("cloudInitNoCloud", volume.cloud_init_no_cloud.is_some()),
        (
            "cloudInitConfigDrive",
            volume.cloud_init_config_drive.is_some(),
        ),
    ] {
        if set && !seen.insert(kind) {
            return Err(DomainError::unsupported(
                &vpath.child(kind),
                "only one volume of each cloud-init kind can be given",
            ));
        }
    }
    Ok(())
}

/// Read-only: generated content, a CD-ROM, a read-only target or a read-only claim.
fn is_read_only(image: &Image, target: &AttachedTarget<'_>, volume: &Volume) -> bool {
    image.read_only
        || target.kind == "cdrom"
        || target.readonly
        || volume
            .persistent_volume_claim
            .as_ref()
            .and_then(|p| p.read_only)
            .unwrap_or(false)
}

/// The blockdev chain of one drive, bottom first: the file or device, then its format.
fn blockdev_chain(
    node: &str,
    image: &Image,
    read_only: bool,
    cache: &Cache,
    disk: &Disk,
    path: &FieldPath,
) -> Result<Vec<Value>, DomainError> {
    let mut file = json!({
        "driver": image.protocol,
        "filename": image.path,
        "node-name": format!("{node}-file"),
        "read-only": read_only,
        "cache": {"direct": cache.direct, "no-flush": false},
        "aio": aio(disk, cache.direct, path)?,
    });
    if !read_only {
        file["discard"] = json!("unmap");
    }
    let format = json!({
        "driver": image.format,
        "file": format!("{node}-file"),
        "node-name": node,
        "read-only": read_only,
        "cache": {"direct": cache.direct, "no-flush": false},
    });
    Ok(vec![file, format])
}

/// The next free places on the disk buses.
struct BusSlots {
    /// q35 has an AHCI controller (`ide`) built in.
    q35: bool,
    sata_port: usize,
    scsi_lun: u32,
}

/// The guest device on its bus, taking the bus's next slot (and asking for its controller).
fn bus_device(
    bus: &str,
    kind: &str,
    slots: &mut BusSlots,
    plan: &mut DiskPlan,
    path: &FieldPath,
) -> Result<Value, DomainError> {
    let q35 = slots.q35;
    Ok(match (bus, kind) {
        ("virtio", _) => json!({"driver": "virtio-blk-pci"}),
        ("sata", _) => {
            if slots.sata_port == AHCI_PORTS {
                return Err(DomainError::unsupported(
                    path,
                    format!("more than {AHCI_PORTS} sata disks"),
                ));
            }
            let controller = if q35 { "ide" } else { "sata0" };
            plan.ahci_controller |= !q35;
            slots.sata_port += 1;
            let driver = if kind == "cdrom" { "ide-cd" } else { "ide-hd" };
            json!({"driver": driver, "bus": format!("{controller}.{}", slots.sata_port - 1)})
        }
        ("scsi", _) => {
            plan.scsi_controller = true;
            slots.scsi_lun += 1;
            let driver = if kind == "cdrom" {
                "scsi-cd"
            } else {
                "scsi-hd"
            };
            json!({"driver": driver, "bus": "scsi0.0", "channel": 0, "scsi-id": 0, "lun": slots.scsi_lun - 1})
        }
        _ => {
            plan.usb = true;
            json!({"driver": "usb-storage", "bus": "usb.0", "removable": kind == "cdrom"})
        }
    })
}

/// The device's drive, id, write cache, boot index, serial and error actions.
fn set_device_properties(
    device: &mut Value,
    disk: &Disk,
    node: &str,
    kind: &str,
    bus: &str,
    cache: &Cache,
    path: &FieldPath,
) -> Result<(), DomainError> {
    device["drive"] = json!(node);
    device["id"] = json!(format!("ua-{}", disk.name));
    if kind != "cdrom" {
        device["write-cache"] = json!(if cache.write_cache { "on" } else { "off" });
    }
    if let Some(order) = disk.boot_order {
        device["bootindex"] = json!(order);
    }
    if let Some(serial) = &disk.serial {
        if serial.len() > 20
            || !serial
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(DomainError::unsupported(
                &path.child("serial"),
                "a disk serial is at most 20 letters, digits, '-', '_' or '.'",
            ));
        }
        device["serial"] = json!(serial);
    }
    if let Some(policy) = disk.error_policy.as_deref() {
        let (werror, rerror) = error_policy(policy, &path.child("errorPolicy"))?;
        if bus != "usb" {
            device["werror"] = json!(werror);
            if bus != "virtio" || rerror != "enospc" {
                device["rerror"] = json!(rerror);
            }
        }
    }
    Ok(())
}

/// The bus, with KubeVirt's amd64 defaults: sata for disks and CD-ROMs; scsi for LUNs, the
/// only bus that carries one.
fn bus(target: &AttachedTarget<'_>, path: &FieldPath) -> Result<&'static str, DomainError> {
    let kind = target.kind;
    let default = if kind == "lun" { "scsi" } else { "sata" };
    let bus = target.bus.unwrap_or(default);
    let field = path.child(kind).child("bus");
    match (kind, bus) {
        ("cdrom", "virtio") => Err(DomainError::unsupported(
            &field,
            "Bus type virtio is invalid for CD-ROM device",
        )),
        ("lun", "scsi") => Ok("scsi"),
        ("lun", other) => Err(DomainError::unsupported(
            &field,
            format!("a lun is a SCSI device; bus {other:?} cannot carry it"),
        )),
        (_, "virtio") => Ok("virtio"),
        (_, "sata") => Ok("sata"),
        (_, "scsi") => Ok("scsi"),
        (_, "usb") => Ok("usb"),
        (_, other) => Err(DomainError::unsupported(
            &field,
            format!("unsupported bus {other:?}; supported: virtio, sata, scsi, usb"),
        )),
    }
}

struct Cache {
    direct: bool,
    write_cache: bool,
}

/// The cache mode: as asked, else `none` (O_DIRECT) where the image's filesystem supports
/// it and `writethrough` where it does not, as KubeVirt decides.
fn cache(
    disk: &Disk,
    image: &Image,
    facts: &NodeFacts,
    path: &FieldPath,
) -> Result<Cache, DomainError> {
    let direct_io = !facts.no_direct_io.iter().any(|p| image.path.starts_with(p));
    let mode = disk
        .cache
        .as_deref()
        .unwrap_or(if direct_io { "none" } else { "writethrough" });
    match mode {
        "none" if !direct_io => Err(DomainError::unsupported(
            &path.child("cache"),
            format!(
                "cache mode none needs O_DIRECT, which the filesystem holding {} does not support",
                image.path.display()
            ),
        )),
        "none" => Ok(Cache {
            direct: true,
            write_cache: true,
        }),
        "writethrough" => Ok(Cache {
            direct: false,
            write_cache: false,
        }),
        "writeback" => Ok(Cache {
            direct: false,
            write_cache: true,
        }),
        other => Err(DomainError::unsupported(
            &path.child("cache"),
            format!("unsupported cache mode {other:?}; supported: none, writethrough, writeback"),
        )),
    }
}

/// `io: native` needs O_DIRECT; `threads` is QEMU's default.
fn aio(disk: &Disk, direct: bool, path: &FieldPath) -> Result<&'static str, DomainError> {
    match disk.io.as_deref() {
        None | Some("threads") | Some("default") => Ok("threads"),
        Some("native") if direct => Ok("native"),
        Some("native") => Err(DomainError::unsupported(
            &path.child("io"),
            "io native needs cache mode none",
        )),
        Some(other) => Err(DomainError::unsupported(
            &path.child("io"),
            format!("unsupported io mode {other:?}; supported: native, threads, default"),
        )),
    }
}

/// KubeVirt's errorPolicy as QEMU's write and read error actions.
fn error_policy(
    policy: &str,
    path: &FieldPath,
) -> Result<(&'static str, &'static str), DomainError> {
    match policy {
        "stop" => Ok(("stop", "stop")),
        "ignore" => Ok(("ignore", "ignore")),
        "report" => Ok(("report", "report")),
        "enospace" => Ok(("enospc", "report")),
        other => Err(DomainError::unsupported(
            path,
            format!(
                "unsupported error policy {other:?}; supported: stop, ignore, report, enospace"
            ),
        )),
    }
}

fn image(
    volume: &Volume,
    path: &FieldPath,
    facts: &NodeFacts,
    identity: &Identity,
    credentials: &[AccessCredential],
    prepare: &mut Vec<PrepareStep>,
) -> Result<Image, DomainError> {
    let run = &facts.run_dir;
    let name = &volume.name;
    let backing = || backing_of(facts, name, path);
    if volume.persistent_volume_claim.is_some() || volume.data_volume.is_some() {
        let read_only = volume
            .persistent_volume_claim
            .as_ref()
            .and_then(|p| p.read_only)
            .unwrap_or(false);
        return claim_image(name, backing()?, path, prepare, !read_only);
    }
    if let Some(ephemeral) = &volume.ephemeral {
        if ephemeral.persistent_volume_claim.is_none() {
            return Err(DomainError::unsupported(
                &path.child("ephemeral").child("persistentVolumeClaim"),
                "an ephemeral volume needs a claim",
            ));
        }
        let base = claim_image(name, backing()?, path, prepare, false)?;
        return Ok(overlay(run, "ephemeral", name, base.path, prepare));
    }
    if volume.container_disk.is_some() {
        let base = match backing()? {
            VolumeBacking::ContainerDiskImage(image) => image.clone(),
            other => return Err(wrong_backing(path, name, "a pulled container disk", other)),
        };
        return Ok(overlay(run, "container-disk", name, base, prepare));
    }
    if let Some(empty) = &volume.empty_disk {
        let size = bytes(&empty.capacity, &path.child("emptyDisk").child("capacity"))?;
        let file = run.join(format!("empty-disk-{name}.img"));
        prepare.push(PrepareStep::SparseImageIfMissing {
            path: file.clone(),
            size,
            field: path.child("emptyDisk").to_string(),
        });
        return Ok(raw(file, "file"));
    }
    if let Some(host) = &volume.host_disk {
        return host_disk_image(host, name, path, prepare);
    }
    if let Some(image) = cloud_init_image(volume, path, facts, identity, credentials, prepare)? {
        return Ok(image);
    }
    if let Some(label) = directory_iso_label(volume) {
        return directory_image(label, name, backing()?, path, run, prepare);
    }
    Err(DomainError::unsupported(
        path,
        "this volume source is not supported",
    ))
}

/// What backs volume `name` on this node, refused when nothing does.
fn backing_of<'a>(
    facts: &'a NodeFacts,
    name: &str,
    path: &FieldPath,
) -> Result<&'a VolumeBacking, DomainError> {
    facts
        .volumes
        .get(name)
        .ok_or_else(|| DomainError::VolumeBacking {
            field: path.to_string(),
            volume: name.to_owned(),
            problem: "has nothing backing it on this node".into(),
        })
}

/// A raw image the guest may write.
fn raw(path: PathBuf, protocol: &'static str) -> Image {
    Image {
        path,
        protocol,
        format: "raw",
        read_only: false,
    }
}

/// A hostDisk: the file on the node, which must exist (`Disk`) or is made sparse at the
/// given capacity when missing (`DiskOrCreate`).
fn host_disk_image(
    host: &HostDisk,
    name: &str,
    path: &FieldPath,
    prepare: &mut Vec<PrepareStep>,
) -> Result<Image, DomainError> {
    let hpath = path.child("hostDisk");
    let file = PathBuf::from(&host.path);
    if !file.is_absolute() {
        return Err(DomainError::unsupported(
            &hpath.child("path"),
            "must be an absolute path",
        ));
    }
    match host.type_.as_str() {
        "Disk" => prepare.push(PrepareStep::MustExist {
            path: file.clone(),
            what: format!("the image of hostDisk {name:?}"),
        }),
        "DiskOrCreate" => {
            let capacity = host.capacity.as_ref().ok_or_else(|| {
                DomainError::unsupported(&hpath.child("capacity"), "DiskOrCreate needs a capacity")
            })?;
            prepare.push(PrepareStep::SparseImageIfMissing {
                path: file.clone(),
                size: bytes(capacity, &hpath.child("capacity"))?,
                field: hpath.to_string(),
            });
        }
        other => {
            return Err(DomainError::unsupported(
                &hpath.child("type"),
                format!("unsupported type {other:?}; supported: Disk, DiskOrCreate"),
            ));
        }
    }
    Ok(raw(file, "file"))
}

/// A cloud-init volume (NoCloud or ConfigDrive): its ISO, made in the run dir; `None` for
/// any other volume.
fn cloud_init_image(
    volume: &Volume,
    path: &FieldPath,
    facts: &NodeFacts,
    identity: &Identity,
    credentials: &[AccessCredential],
    prepare: &mut Vec<PrepareStep>,
) -> Result<Option<Image>, DomainError> {
    for (kind, source, field) in [
        (
            CloudInitKind::NoCloud,
            &volume.cloud_init_no_cloud,
            "cloudInitNoCloud",
        ),
        (
            CloudInitKind::ConfigDrive,
            &volume.cloud_init_config_drive,
            "cloudInitConfigDrive",
        ),
    ] {
        if let Some(source) = source {
            let mut data = cloud_init(
                kind,
                source,
                &path.child(field),
                facts,
                identity,
                &volume.name,
            )?;
            data.ssh_key_dirs = ssh_key_dirs(kind, credentials, facts)?;
            let file = facts.run_dir.join(kind.iso_name());
            prepare.push(PrepareStep::CloudInitIso {
                path: file.clone(),
                data,
            });
            return Ok(Some(Image {
                read_only: true,
                ..raw(file, "file")
            }));
        }
    }
    Ok(None)
}

/// A ConfigMap, Secret, service account or downward API volume: an ISO of its mounted files.
fn directory_image(
    label: String,
    name: &str,
    backing: &VolumeBacking,
    path: &FieldPath,
    run: &Path,
    prepare: &mut Vec<PrepareStep>,
) -> Result<Image, DomainError> {
    let dir = match backing {
        VolumeBacking::Files(dir) => dir.clone(),
        other => return Err(wrong_backing(path, name, "a directory of files", other)),
    };
    let file = run.join(format!("{name}.config.iso"));
    prepare.push(PrepareStep::DirectoryIso {
        path: file.clone(),
        label,
        dir,
    });
    Ok(Image {
        read_only: true,
        ..raw(file, "file")
    })
}

/// The ISO volume label of a ConfigMap, Secret, service account or downward API volume:
/// its `volumeLabel`, else KubeVirt's default.
fn directory_iso_label(volume: &Volume) -> Option<String> {
    if let Some(cm) = &volume.config_map {
        return Some(cm.volume_label.clone().unwrap_or_else(|| "cfgdata".into()));
    }
    if let Some(secret) = &volume.secret {
        return Some(
            secret
                .volume_label
                .clone()
                .unwrap_or_else(|| "cfgdata".into()),
        );
    }
    if volume.service_account.is_some() {
        return Some("cfgdata".into());
    }
    volume
        .downward_api
        .as_ref()
        .map(|d| d.volume_label.clone().unwrap_or_else(|| "cfgdata".into()))
}

fn claim_image(
    name: &str,
    backing: &VolumeBacking,
    path: &FieldPath,
    prepare: &mut Vec<PrepareStep>,
    writable: bool,
) -> Result<Image, DomainError> {
    match backing {
        VolumeBacking::ClaimDirectory { dir, capacity } => {
            let file = dir.join("disk.img");
            if writable {
                prepare.push(PrepareStep::SparseImageIfMissing {
                    path: file.clone(),
                    size: *capacity,
                    field: path.to_string(),
                });
            } else {
                prepare.push(PrepareStep::MustExist {
                    path: file.clone(),
                    what: format!("disk.img of claim volume {name:?}"),
                });
            }
            Ok(Image {
                path: file,
                protocol: "file",
                format: "raw",
                read_only: false,
            })
        }
        VolumeBacking::BlockDevice(device) => Ok(Image {
            path: device.clone(),
            protocol: "host_device",
            format: "raw",
            read_only: false,
        }),
        other => Err(wrong_backing(
            path,
            name,
            "a claim (a directory or a block device)",
            other,
        )),
    }
}

fn overlay(
    run: &Path,
    kind: &str,
    name: &str,
    base: PathBuf,
    prepare: &mut Vec<PrepareStep>,
) -> Image {
    let file = run.join(format!("{kind}-{name}.qcow2"));
    prepare.push(PrepareStep::Qcow2Overlay {
        path: file.clone(),
        backing: base,
    });
    Image {
        path: file,
        protocol: "file",
        format: "qcow2",
        read_only: false,
    }
}

fn wrong_backing(path: &FieldPath, name: &str, wanted: &str, got: &VolumeBacking) -> DomainError {
    let got = match got {
        VolumeBacking::ClaimDirectory { dir, .. } => {
            format!("the claim directory {}", dir.display())
        }
        VolumeBacking::BlockDevice(d) => format!("the block device {}", d.display()),
        VolumeBacking::Files(d) => format!("the directory of files {}", d.display()),
        VolumeBacking::ContainerDiskImage(i) => format!("the container disk image {}", i.display()),
    };
    DomainError::VolumeBacking {
        field: path.to_string(),
        volume: name.to_owned(),
        problem: format!("needs {wanted}, but is backed by {got}"),
    }
}

fn bytes(
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    path: &FieldPath,
) -> Result<u64, DomainError> {
    quantity_bytes(q)
        .and_then(|b| u64::try_from(b).ok())
        .filter(|b| *b > 0)
        .ok_or_else(|| DomainError::unsupported(path, format!("{:?} is not a size", q.0)))
}

fn cloud_init(
    kind: CloudInitKind,
    source: &CloudInitSource,
    path: &FieldPath,
    facts: &NodeFacts,
    identity: &Identity,
    volume: &str,
) -> Result<CloudInitData, DomainError> {
    let secret_dir = || match facts.volumes.get(volume) {
        Some(VolumeBacking::Files(dir)) => Ok(dir.clone()),
        _ => Err(DomainError::VolumeBacking {
            field: path.child("secretRef").to_string(),
            volume: volume.to_owned(),
            problem: "names a Secret whose files are not mounted on this node".into(),
        }),
    };
    let decode = |text: &str, field: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| DomainError::unsupported(&path.child(field), format!("not base64: {e}")))
    };
    let user_data = if let Some(text) = &source.user_data {
        Some(DataSource::Inline(text.clone().into_bytes()))
    } else if let Some(b64) = &source.user_data_base64 {
        Some(DataSource::Inline(decode(b64, "userDataBase64")?))
    } else if source.secret_ref.is_some() {
        Some(DataSource::SecretFile {
            dir: secret_dir()?,
            keys: &["userdata", "userData"],
        })
    } else {
        None
    };
    let network_data = if let Some(text) = &source.network_data {
        Some(DataSource::Inline(text.clone().into_bytes()))
    } else if let Some(b64) = &source.network_data_base64 {
        Some(DataSource::Inline(decode(b64, "networkDataBase64")?))
    } else if source.network_data_secret_ref.is_some() {
        Some(DataSource::SecretFile {
            dir: secret_dir()?,
            keys: &["networkdata", "networkData"],
        })
    } else {
        None
    };
    if user_data.is_none() && network_data.is_none() {
        return Err(DomainError::unsupported(
            path,
            "userDataBase64, userData, networkDataBase64 or networkData is required for a cloud-init data source",
        ));
    }
    Ok(CloudInitData {
        kind,
        instance_id: match kind {
            CloudInitKind::NoCloud => identity.uuid.clone(),
            CloudInitKind::ConfigDrive => format!("{}.{}", identity.name, identity.namespace),
        },
        hostname: identity.hostname.clone(),
        uuid: identity.uuid.clone(),
        user_data,
        network_data,
        instance_type: identity.instance_type.clone(),
        ssh_key_dirs: Vec::new(),
    })
}

/// Where the Secrets of the SSH keys that `kind` propagates are mounted, in the order of
/// `spec.accessCredentials`.
fn ssh_key_dirs(
    kind: CloudInitKind,
    credentials: &[AccessCredential],
    facts: &NodeFacts,
) -> Result<Vec<PathBuf>, DomainError> {
    let credentials_path = FieldPath::new("spec").child("accessCredentials");
    let mut dirs = Vec::new();
    for (i, credential) in credentials.iter().enumerate() {
        let Some(key) = &credential.ssh_public_key else {
            continue;
        };
        let method = &key.propagation_method;
        let propagated = match kind {
            CloudInitKind::NoCloud => method.no_cloud.is_some(),
            CloudInitKind::ConfigDrive => method.config_drive.is_some(),
        };
        let Some(secret) = key.source.secret.as_ref().filter(|_| propagated) else {
            continue;
        };
        let dir = facts
            .access_credentials
            .get(&secret.secret_name)
            .ok_or_else(|| DomainError::VolumeBacking {
                field: credentials_path.index(i).to_string(),
                volume: AccessCredential::volume_name(&secret.secret_name),
                problem: "names a Secret whose files are not mounted on this node".into(),
            })?;
        dirs.push(dir.clone());
    }
    Ok(dirs)
}
