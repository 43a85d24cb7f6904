//! The disks of a domain: how each volume is attached (disk, CD-ROM or LUN) and how QEMU
//! drives it (cache, IO mode, error policy, block size).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::FeatureState;

/// A disk of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// The name, the same as the volume's.
    pub name: String,
    /// Attached as a disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskTarget>,
    /// Attached as a CD-ROM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<CdromTarget>,
    /// Attached as a LUN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun: Option<LunTarget>,
    /// The boot order, lower first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub boot_order: Option<u32>,
    /// The serial number the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The cache mode: `none`, `writethrough` or `writeback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// The IO mode: `native`, `threads` or `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    /// What an IO error does: `stop` (default), `report`, `ignore` or `enospace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_policy: Option<String>,
    /// The logical and physical block sizes the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<BlockSize>,
    /// Whether the disk gets an IO thread of its own.
    #[serde(
        default,
        rename = "dedicatedIOThread",
        skip_serializing_if = "Option::is_none"
    )]
    pub dedicated_io_thread: Option<bool>,
    /// Whether several VMs may write the disk at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shareable: Option<bool>,
    /// A tag the guest sees in its device metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// How a disk is attached as a disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskTarget {
    /// The bus: `virtio`, `sata`, `scsi` or `usb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// The guest PCI address of a virtio disk, `domain:bus:slot.function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
}

/// How a disk is attached as a CD-ROM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CdromTarget {
    /// The bus: `sata`, `scsi` or `usb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    /// Read-only (a CD-ROM always is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// The tray: `closed` (default) or `open`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tray: Option<String>,
}

/// How a disk is attached as a SCSI LUN.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LunTarget {
    /// The bus; only `scsi` carries a LUN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly: Option<bool>,
    /// Whether SCSI persistent reservations pass through to the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<bool>,
}

/// The block sizes of a disk: given, or taken from the volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockSize {
    /// Sizes given explicitly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomBlockSize>,
    /// Sizes taken from the backing volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_volume: Option<FeatureState>,
}

/// Explicit block sizes in bytes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomBlockSize {
    /// The logical block size.
    pub logical: i32,
    /// The physical block size.
    pub physical: i32,
}

/// The target a disk names, whichever kind it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttachedTarget<'a> {
    /// `disk`, `cdrom` or `lun`, the field that names the target.
    pub kind: &'static str,
    /// The bus asked for, if any.
    pub bus: Option<&'a str>,
    /// Whether the target is read-only as given (a CD-ROM is read-only regardless).
    pub readonly: bool,
}

impl Disk {
    /// The target the disk names: its CD-ROM, else its LUN, else its disk target (a disk
    /// without a target is attached as a disk).
    pub fn attached_target(&self) -> AttachedTarget<'_> {
        let (kind, bus, readonly) = if let Some(t) = &self.cdrom {
            ("cdrom", t.bus.as_deref(), t.readonly)
        } else if let Some(t) = &self.lun {
            ("lun", t.bus.as_deref(), t.readonly)
        } else {
            let t = self.disk.as_ref();
            (
                "disk",
                t.and_then(|t| t.bus.as_deref()),
                t.and_then(|t| t.readonly),
            )
        };
        AttachedTarget {
            kind,
            bus,
            readonly: readonly.unwrap_or(false),
        }
    }
}
