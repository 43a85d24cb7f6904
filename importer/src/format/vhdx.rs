//! VHDX (Hyper-V): two headers, a region table locating the block allocation table (BAT)
//! and the metadata region, and payload blocks mapped by the BAT, with a sector-bitmap entry
//! interleaved after every "chunk" of payload entries.

use super::DiskFormat;
use super::extent::{Extent, ExtentKind, ImageMap, MetaRead};
use crate::error::ImportError;
use crate::format::fields::{le16, le32, le64};

const HEADER_OFFSETS: [u64; 2] = [64 << 10, 128 << 10];
const REGION_TABLE_OFFSET: u64 = 192 << 10;
const BAT_REGION: &str = "2DC27766-F623-4200-9D64-115E9BFD4A08";
const METADATA_REGION: &str = "8B7CA206-4790-4B9A-B8FE-575F050F886E";
const FILE_PARAMETERS: &str = "CAA16737-FA36-4D43-B3B6-33F0AA44E76B";
const VIRTUAL_DISK_SIZE: &str = "2FA54224-CD1B-4876-B211-5DBED83BF4B8";
const LOGICAL_SECTOR_SIZE: &str = "8141BF1D-A96F-4709-BA47-F233A8FAAB5F";
const PAYLOAD_FULLY_PRESENT: u64 = 6;
const PAYLOAD_PARTIALLY_PRESENT: u64 = 7;
const MAX_BAT_BYTES: u64 = 64 << 20;

fn invalid(field: &str, reason: impl std::fmt::Display) -> ImportError {
    ImportError::InvalidFormat {
        format: DiskFormat::Vhdx,
        reason: format!("{field}: {reason}"),
    }
}

/// A GUID as VHDX stores it: the first three fields little-endian, the rest as written.
fn guid(text: &str) -> [u8; 16] {
    let hex: Vec<u8> = text
        .split('-')
        .flat_map(|part| {
            part.as_bytes().chunks(2).map(|pair| {
                u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex")
            })
        })
        .collect();
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&[hex[3], hex[2], hex[1], hex[0]]);
    out[4..6].copy_from_slice(&[hex[5], hex[4]]);
    out[6..8].copy_from_slice(&[hex[7], hex[6]]);
    out[8..].copy_from_slice(&hex[8..16]);
    out
}

pub fn map(meta: &mut dyn MetaRead) -> Result<ImageMap, ImportError> {
    check_headers(meta)?;
    let (bat_region, metadata_region) = regions(meta)?;
    let params = read_metadata(meta, metadata_region)?;
    let chunk_ratio = ((1u64 << 23) * params.logical_sector_size) / params.block_size;
    let blocks = params.virtual_size.div_ceil(params.block_size);
    let bat_entries = if blocks == 0 {
        0
    } else {
        blocks + (blocks - 1) / chunk_ratio
    };
    if bat_entries * 8 > bat_region.1.min(MAX_BAT_BYTES) {
        return Err(invalid(
            "BAT",
            format!(
                "region of {} bytes cannot map {blocks} blocks",
                bat_region.1
            ),
        ));
    }
    let mut bat = vec![0u8; bat_entries as usize * 8];
    meta.read_at(bat_region.0, &mut bat)?;
    let mut extents = Vec::new();
    for block in 0..blocks {
        let index = (block + block / chunk_ratio) as usize;
        let entry = le64(&bat, index * 8);
        let virt = block * params.block_size;
        match entry & 7 {
            PAYLOAD_FULLY_PRESENT => {
                let host = entry >> 20 << 20;
                let len = params.block_size.min(params.virtual_size - virt);
                extents.push(Extent {
                    host,
                    host_len: len,
                    virt,
                    kind: ExtentKind::Data,
                });
            }
            PAYLOAD_PARTIALLY_PRESENT => {
                return Err(ImportError::UnsupportedVariant {
                    format: DiskFormat::Vhdx,
                    reason: "it is a differencing disk and needs its parent".into(),
                });
            }
            // Not present, undefined, zero, unmapped: all read as zeros without a parent.
            _ => {}
        }
    }
    Ok(ImageMap::new(params.virtual_size, extents))
}

/// Both headers must be sane and the current one must have no log to replay: a log means
/// the image was not closed cleanly and its tables may be stale.
fn check_headers(meta: &mut dyn MetaRead) -> Result<(), ImportError> {
    let mut current: Option<(u64, [u8; 80])> = None;
    for offset in HEADER_OFFSETS {
        let mut h = [0u8; 80];
        meta.read_at(offset, &mut h)?;
        if &h[..4] != b"head" {
            continue;
        }
        let sequence = le64(&h, 8);
        if current.is_none_or(|(seq, _)| sequence > seq) {
            current = Some((sequence, h));
        }
    }
    let (_, header) =
        current.ok_or_else(|| invalid("header", "neither header copy has the 'head' signature"))?;
    if le16(&header, 66) != 1 {
        return Err(invalid("header version", le16(&header, 66)));
    }
    if header[48..64].iter().any(|&b| b != 0) {
        return Err(ImportError::UnsupportedVariant {
            format: DiskFormat::Vhdx,
            reason: "its log must be replayed first (the image was not closed cleanly); open it once with Hyper-V or `qemu-img check -r all`".into(),
        });
    }
    Ok(())
}

/// Where a region lies in the file: (offset, length).
type Region = (u64, u64);

/// The BAT region and the metadata region.
fn regions(meta: &mut dyn MetaRead) -> Result<(Region, Region), ImportError> {
    let mut table = vec![0u8; 64 << 10];
    meta.read_at(REGION_TABLE_OFFSET, &mut table)?;
    if &table[..4] != b"regi" {
        return Err(invalid("region table", "missing 'regi' signature"));
    }
    let count = le32(&table, 8) as usize;
    if count > 2047 {
        return Err(invalid("region table", format!("{count} entries")));
    }
    let (mut bat, mut metadata) = (None, None);
    for i in 0..count {
        let entry = &table[16 + i * 32..16 + (i + 1) * 32];
        let location = (le64(entry, 16), u64::from(le32(entry, 24)));
        if entry[..16] == guid(BAT_REGION) {
            bat = Some(location);
        } else if entry[..16] == guid(METADATA_REGION) {
            metadata = Some(location);
        } else if le32(entry, 28) & 1 != 0 {
            return Err(invalid(
                "region table",
                "an unknown region is marked required",
            ));
        }
    }
    Ok((
        bat.ok_or_else(|| invalid("region table", "no BAT region"))?,
        metadata.ok_or_else(|| invalid("region table", "no metadata region"))?,
    ))
}

struct Parameters {
    block_size: u64,
    virtual_size: u64,
    logical_sector_size: u64,
}

fn read_metadata(
    meta: &mut dyn MetaRead,
    (offset, len): (u64, u64),
) -> Result<Parameters, ImportError> {
    let mut table = vec![0u8; 64 << 10];
    meta.read_at(offset, &mut table)?;
    if &table[..8] != b"metadata" {
        return Err(invalid("metadata table", "missing 'metadata' signature"));
    }
    let count = usize::from(le16(&table, 10)).min(2047);
    let mut item = |id: &str, size: usize| -> Result<Vec<u8>, ImportError> {
        let wanted = guid(id);
        let entry = (0..count)
            .map(|i| &table[32 + i * 32..64 + i * 32])
            .find(|e| e[..16] == wanted)
            .ok_or_else(|| invalid("metadata", format!("item {id} is missing")))?;
        let (item_offset, item_len) = (u64::from(le32(entry, 16)), le32(entry, 20) as usize);
        if item_len < size || item_offset + size as u64 > len {
            return Err(invalid("metadata", format!("item {id} is out of range")));
        }
        let mut value = vec![0u8; size];
        meta.read_at(offset + item_offset, &mut value)?;
        Ok(value)
    };
    let params = item(FILE_PARAMETERS, 8)?;
    let virtual_size = le64(&item(VIRTUAL_DISK_SIZE, 8)?, 0);
    let logical_sector_size = u64::from(le32(&item(LOGICAL_SECTOR_SIZE, 4)?, 0));
    let block_size = u64::from(le32(&params, 0));
    if le32(&params, 4) & 2 != 0 {
        return Err(ImportError::UnsupportedVariant {
            format: DiskFormat::Vhdx,
            reason: "it is a differencing disk and needs its parent".into(),
        });
    }
    if !block_size.is_power_of_two() || !((1 << 20)..=(256 << 20)).contains(&block_size) {
        return Err(invalid("block size", block_size));
    }
    if logical_sector_size != 512 && logical_sector_size != 4096 {
        return Err(invalid("logical sector size", logical_sector_size));
    }
    if virtual_size > (64 << 40) {
        return Err(invalid("virtual disk size", virtual_size));
    }
    Ok(Parameters {
        block_size,
        virtual_size,
        logical_sector_size,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn guids_are_mixed_endian() {
        assert_eq!(
            super::guid("2DC27766-F623-4200-9D64-115E9BFD4A08"),
            [
                0x66, 0x77, 0xc2, 0x2d, 0x23, 0xf6, 0x00, 0x42, 0x9d, 0x64, 0x11, 0x5e, 0x9b, 0xfd,
                0x4a, 0x08
            ]
        );
    }

    #[test]
    fn converts_as_qemu_img_through_the_seam() {
        use crate::format::reader::testing::{assert_converts_as_qemu_img, qemu_image, scratch};
        let dir = scratch("vhdx");
        let writes = ["-P 0xa1 0 64k", "-P 0xb2 2M 4k", "-P 0xc3 9M 100k"];
        let image = qemu_image(dir.path(), "vhdx", "block_size=1M", "10M", &writes);
        assert_converts_as_qemu_img(&image);
    }
}
