//! VHD (Virtual PC / Hyper-V "vpc"): dynamic images, whose block allocation table maps 2 MiB
//! blocks, and fixed images, which are raw data followed by a 512-byte footer (found at the
//! end of a raw stream, see `raw.rs`). Sizes follow qemu: the CHS geometry, except for the
//! tools known to write the real size in `current_size`.

use super::DiskFormat;
use super::extent::{Extent, ExtentKind, ImageMap, MetaRead};
use crate::error::ImportError;
use crate::format::fields::{be32, be64};

pub const FOOTER_LEN: usize = 512;
const DYNAMIC_HEADER_LEN: usize = 1024;
const UNALLOCATED: u32 = 0xffff_ffff;
const TYPE_FIXED: u32 = 2;
const TYPE_DYNAMIC: u32 = 3;
const TYPE_DIFFERENCING: u32 = 4;
/// The largest CHS geometry: a disk that large takes its size from `current_size`.
const MAX_CHS_SECTORS: u64 = 65535 * 16 * 255;
/// Bounds the allocation table read into memory (64 MiB covers a 32 TiB disk of 2 MiB blocks).
const MAX_BAT_BYTES: u64 = 64 << 20;

fn invalid(reason: impl Into<String>) -> ImportError {
    ImportError::InvalidFormat {
        format: DiskFormat::Vhd,
        reason: reason.into(),
    }
}

/// The hard disk footer.
#[derive(Debug, Clone)]
pub struct Footer {
    pub disk_type: u32,
    pub data_offset: u64,
    pub virtual_size: u64,
}

impl Footer {
    /// Parses a footer; `None` if `bytes` is not one (wrong cookie or checksum).
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < FOOTER_LEN || &bytes[..8] != b"conectix" {
            return None;
        }
        let stored = be32(bytes, 64);
        let sum = bytes[..FOOTER_LEN]
            .iter()
            .enumerate()
            .filter(|(i, _)| !(64..68).contains(i))
            .fold(0u32, |acc, (_, &b)| acc.wrapping_add(u32::from(b)));
        if !sum != stored {
            return None;
        }
        let chs = u64::from(u16::from_be_bytes([bytes[56], bytes[57]]))
            * u64::from(bytes[58])
            * u64::from(bytes[59]);
        let creator = &bytes[28..32];
        let sized_by_current_size = [b"win ", b"qem2", b"d2v ", b"CTXS", b"tap\0"]
            .iter()
            .any(|app| creator == &app[..]);
        let virtual_size = if sized_by_current_size || chs == MAX_CHS_SECTORS {
            be64(bytes, 48) / 512 * 512
        } else {
            chs * 512
        };
        Some(Footer {
            disk_type: be32(bytes, 60),
            data_offset: be64(bytes, 16),
            virtual_size,
        })
    }

    pub fn is_fixed(&self) -> bool {
        self.disk_type == TYPE_FIXED
    }
}

/// Maps a dynamic VHD (the footer copy at offset 0, then the dynamic header and the BAT).
pub fn map(meta: &mut dyn MetaRead) -> Result<ImageMap, ImportError> {
    let mut footer_bytes = [0u8; FOOTER_LEN];
    meta.read_at(0, &mut footer_bytes)?;
    let footer =
        Footer::parse(&footer_bytes).ok_or_else(|| invalid("footer copy has a bad checksum"))?;
    match footer.disk_type {
        TYPE_DYNAMIC => {}
        TYPE_DIFFERENCING => {
            return Err(ImportError::UnsupportedVariant {
                format: DiskFormat::Vhd,
                reason: "it is a differencing disk and needs its parent".into(),
            });
        }
        other => {
            return Err(invalid(format!(
                "disk type {other} with a footer copy at the start"
            )));
        }
    }
    let mut header = [0u8; DYNAMIC_HEADER_LEN];
    meta.read_at(footer.data_offset, &mut header)?;
    if &header[..8] != b"cxsparse" {
        return Err(invalid(format!(
            "no dynamic disk header at data offset {:#x}",
            footer.data_offset
        )));
    }
    let (bat_offset, entries, block_size) = (
        be64(&header, 16),
        u64::from(be32(&header, 28)),
        u64::from(be32(&header, 32)),
    );
    if !block_size.is_power_of_two() || !(512..=(256 << 20)).contains(&block_size) {
        return Err(invalid(format!(
            "block size {block_size} is not a power of two between 512 B and 256 MiB"
        )));
    }
    if entries * block_size < footer.virtual_size {
        return Err(invalid(format!(
            "its {entries} blocks of {block_size} bytes cannot hold virtual size {}",
            footer.virtual_size
        )));
    }
    if entries * 4 > MAX_BAT_BYTES {
        return Err(invalid(format!(
            "block allocation table of {entries} entries is too large"
        )));
    }
    let mut bat = vec![0u8; entries as usize * 4];
    meta.read_at(bat_offset, &mut bat)?;
    // Each block starts with a sector bitmap, padded to whole sectors; qemu (and so we) reads
    // allocated blocks whole and does not consult it.
    let bitmap_len = (block_size / 512 / 8).div_ceil(512) * 512;
    let mut extents = Vec::new();
    for (index, raw) in bat.chunks_exact(4).enumerate() {
        let sector = u32::from_be_bytes(raw.try_into().expect("4 bytes"));
        let virt = index as u64 * block_size;
        if sector == UNALLOCATED || virt >= footer.virtual_size {
            continue;
        }
        let len = block_size.min(footer.virtual_size - virt);
        extents.push(Extent {
            host: u64::from(sector) * 512 + bitmap_len,
            host_len: len,
            virt,
            kind: ExtentKind::Data,
        });
    }
    Ok(ImageMap::new(footer.virtual_size, extents))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn footer(creator: &[u8; 4], chs: (u16, u8, u8), current_size: u64) -> Vec<u8> {
        let mut f = vec![0u8; FOOTER_LEN];
        f[..8].copy_from_slice(b"conectix");
        f[28..32].copy_from_slice(creator);
        f[48..56].copy_from_slice(&current_size.to_be_bytes());
        f[56..58].copy_from_slice(&chs.0.to_be_bytes());
        f[58] = chs.1;
        f[59] = chs.2;
        f[60..64].copy_from_slice(&TYPE_FIXED.to_be_bytes());
        let sum = f
            .iter()
            .fold(0u32, |acc, &b| acc.wrapping_add(u32::from(b)));
        f[64..68].copy_from_slice(&(!sum).to_be_bytes());
        f
    }

    #[test]
    fn size_follows_the_creator() {
        let qemu = Footer::parse(&footer(b"qemu", (100, 16, 63), 1 << 30)).unwrap();
        assert_eq!(qemu.virtual_size, 100 * 16 * 63 * 512);
        let hyperv = Footer::parse(&footer(b"win ", (100, 16, 63), 1 << 30)).unwrap();
        assert_eq!(hyperv.virtual_size, 1 << 30);
        assert!(qemu.is_fixed());
        let mut bad = footer(b"qemu", (1, 1, 1), 0);
        bad[100] ^= 1;
        assert!(Footer::parse(&bad).is_none());
    }

    #[test]
    fn a_dynamic_vhd_converts_as_qemu_img_through_the_seam() {
        use crate::format::reader::testing::{assert_converts_as_qemu_img, qemu_image, scratch};
        let dir = scratch("vhd");
        let writes = ["-P 0xa1 0 64k", "-P 0xb2 2M 4k", "-P 0xc3 5M 100k"];
        let image = qemu_image(dir.path(), "vpc", "subformat=dynamic", "6M", &writes);
        assert_converts_as_qemu_img(&image);
    }
}
