//! VDI (VirtualBox): a block map of 1 MiB blocks, static (all allocated) or dynamic.

use super::DiskFormat;
use super::extent::{Extent, ExtentKind, ImageMap, MetaRead};
use crate::error::ImportError;
use crate::format::fields::{le32, le64};

const HEADER_LEN: usize = 0x190;
const SIGNATURE: u32 = 0xbeda_107f;
const VERSION_1_1: u32 = 0x0001_0001;
const TYPE_DYNAMIC: u32 = 1;
const TYPE_STATIC: u32 = 2;
/// Block map entries at or above this are unallocated (0xffffffff) or discarded/zero.
const FIRST_UNALLOCATED: u32 = 0xffff_fffe;
const MAX_MAP_BYTES: u64 = 64 << 20;

fn invalid(field: &str, reason: impl std::fmt::Display) -> ImportError {
    ImportError::InvalidFormat {
        format: DiskFormat::Vdi,
        reason: format!("{field}: {reason}"),
    }
}

pub fn map(meta: &mut dyn MetaRead) -> Result<ImageMap, ImportError> {
    let mut h = [0u8; HEADER_LEN];
    meta.read_at(0, &mut h)?;
    if le32(&h, 0x40) != SIGNATURE {
        return Err(invalid("signature", "missing"));
    }
    if le32(&h, 0x44) != VERSION_1_1 {
        return Err(invalid(
            "version",
            format!("{:#x} (only 1.1 exists)", le32(&h, 0x44)),
        ));
    }
    match le32(&h, 0x4c) {
        TYPE_DYNAMIC | TYPE_STATIC => {}
        other => {
            return Err(ImportError::UnsupportedVariant {
                format: DiskFormat::Vdi,
                reason: format!(
                    "image type {other} (undo and differencing images need their parent)"
                ),
            });
        }
    }
    let (map_offset, data_offset) = (u64::from(le32(&h, 0x154)), u64::from(le32(&h, 0x158)));
    let sector_size = le32(&h, 0x168);
    let disk_size = le64(&h, 0x170);
    let block_size = u64::from(le32(&h, 0x178));
    let block_extra = le32(&h, 0x17c);
    let blocks = u64::from(le32(&h, 0x180));
    if sector_size != 512 {
        return Err(invalid("sector size", sector_size));
    }
    if block_size == 0 || !block_size.is_power_of_two() || block_size > (256 << 20) {
        return Err(invalid("block size", block_size));
    }
    if block_extra != 0 {
        return Err(invalid("block extra", block_extra));
    }
    if blocks * block_size < disk_size {
        return Err(invalid(
            "blocks in image",
            format!("{blocks} blocks cannot hold disk size {disk_size}"),
        ));
    }
    if blocks * 4 > MAX_MAP_BYTES {
        return Err(invalid("blocks in image", format!("{blocks} is too many")));
    }
    let virtual_size = disk_size / 512 * 512;
    let mut block_map = vec![0u8; blocks as usize * 4];
    meta.read_at(map_offset, &mut block_map)?;
    let mut extents = Vec::new();
    for (index, raw) in block_map.chunks_exact(4).enumerate() {
        let entry = u32::from_le_bytes(raw.try_into().expect("4 bytes"));
        let virt = index as u64 * block_size;
        if entry >= FIRST_UNALLOCATED || virt >= virtual_size {
            continue;
        }
        if u64::from(entry) >= blocks {
            return Err(invalid(
                "block map",
                format!("entry {index} points at block {entry} of {blocks}"),
            ));
        }
        let host = data_offset + u64::from(entry) * block_size;
        extents.push(Extent {
            host,
            host_len: block_size.min(virtual_size - virt),
            virt,
            kind: ExtentKind::Data,
        });
    }
    Ok(ImageMap::new(virtual_size, extents))
}

#[cfg(test)]
mod tests {
    use crate::format::reader::testing::{assert_converts_as_qemu_img, qemu_image, scratch};

    #[test]
    fn converts_as_qemu_img_through_the_seam() {
        let dir = scratch("vdi");
        let writes = ["-P 0xa1 0 64k", "-P 0xb2 2M 4k", "-P 0xc3 5M 100k"];
        let image = qemu_image(dir.path(), "vdi", "", "6M", &writes);
        assert_converts_as_qemu_img(&image);
    }
}
