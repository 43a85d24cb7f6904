//! Disk image formats: detection by magic bytes and the readers that turn an image into
//! writes at virtual offsets.

pub mod cluster;
pub mod detect;
pub mod extent;
mod fields;
pub mod qcow2;
pub mod raw;
pub mod reader;
pub mod vdi;
pub mod vhd;
pub mod vhdx;
pub mod vmdk;

use std::fmt;

/// The formats the importer recognises. Only `Raw` and `Qcow2` are converted today; the
/// others are detected so they can be refused by name rather than imported as raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFormat {
    Raw,
    Iso,
    Qcow2,
    /// qcow version 1, which qemu itself has deprecated.
    Qcow1,
    Vmdk,
    Vdi,
    Vhd,
    Vhdx,
    Tar,
    Luks,
}

impl fmt::Display for DiskFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Raw => "raw",
            Self::Iso => "ISO 9660",
            Self::Qcow2 => "qcow2",
            Self::Qcow1 => "qcow (version 1)",
            Self::Vmdk => "VMDK",
            Self::Vdi => "VDI",
            Self::Vhd => "VHD",
            Self::Vhdx => "VHDX",
            Self::Tar => "tar archive",
            Self::Luks => "LUKS-encrypted",
        })
    }
}
