//! L1 and L2 table entries, decoded into extents: where the bytes of a virtual range live in
//! the image file. Zero and unallocated clusters produce no extent at all (the target reads
//! zeros wherever nothing is written).

use super::header::{Qcow2Header, invalid};
use crate::error::ImportError;
use crate::format::extent::{Extent, ExtentKind};

const OFFSET_MASK: u64 = 0x00ff_ffff_ffff_fe00;
const FLAG_COMPRESSED: u64 = 1 << 62;
const FLAG_ZERO: u64 = 1;
const SUBCLUSTERS: u64 = 32;

/// The L2 table offsets of an L1 table, with the virtual offset each table starts at.
pub fn l2_tables(header: &Qcow2Header, l1: &[u8]) -> Result<Vec<(u64, u64)>, ImportError> {
    let span = header.cluster_size() * header.l2_entries();
    let mut tables = Vec::new();
    for (index, raw) in l1.chunks_exact(8).enumerate() {
        let entry = u64::from_be_bytes(raw.try_into().expect("8 bytes"));
        let offset = entry & OFFSET_MASK;
        if offset == 0 {
            continue;
        }
        if !offset.is_multiple_of(header.cluster_size()) {
            return Err(invalid(format!(
                "L1 entry {index} points at unaligned L2 table offset {offset:#x}"
            )));
        }
        tables.push((offset, index as u64 * span));
    }
    Ok(tables)
}

/// Appends the extents of one L2 table, which maps virtual offsets from `first_virt`.
/// Physically and virtually contiguous uncompressed clusters are merged into one extent.
pub fn l2_extents(
    header: &Qcow2Header,
    table: &[u8],
    first_virt: u64,
    out: &mut Vec<Extent>,
) -> Result<(), ImportError> {
    let cluster = header.cluster_size();
    let entry_bytes = header.l2_entry_bytes() as usize;
    for (index, raw) in table.chunks_exact(entry_bytes).enumerate() {
        let virt = first_virt + index as u64 * cluster;
        if virt >= header.virtual_size {
            break;
        }
        let entry = u64::from_be_bytes(raw[..8].try_into().expect("8 bytes"));
        let bitmap = header
            .extended_l2
            .then(|| u64::from_be_bytes(raw[8..16].try_into().expect("8 bytes")));
        decode_entry(header, entry, bitmap, virt, out)?;
    }
    Ok(())
}

fn decode_entry(
    header: &Qcow2Header,
    entry: u64,
    bitmap: Option<u64>,
    virt: u64,
    out: &mut Vec<Extent>,
) -> Result<(), ImportError> {
    let cluster = header.cluster_size();
    let in_image = (header.virtual_size - virt).min(cluster);
    if entry & FLAG_COMPRESSED != 0 {
        let (host, host_len) = compressed_location(header, entry);
        out.push(Extent {
            host,
            host_len,
            virt,
            kind: ExtentKind::Compressed {
                codec: header.codec,
                decoded_len: cluster,
                out_len: in_image,
            },
        });
        return Ok(());
    }
    let host = entry & OFFSET_MASK;
    if !host.is_multiple_of(cluster) {
        return Err(invalid(format!(
            "L2 entry for virtual offset {virt:#x} points at unaligned host offset {host:#x}"
        )));
    }
    match bitmap {
        None => {
            let zero = entry & FLAG_ZERO != 0;
            if zero && header.version < 3 {
                return Err(invalid(format!(
                    "zero flag on virtual offset {virt:#x} in a version 2 image"
                )));
            }
            if host != 0 && !zero {
                push_data(out, host, in_image, virt);
            }
        }
        Some(bitmap) => decode_subclusters(header, host, bitmap, virt, in_image, out)?,
    }
    Ok(())
}

/// Where a compressed cluster's bytes are: qemu stores the offset in the low bits and the
/// count of 512-byte sectors it touches (minus one) above them.
fn compressed_location(header: &Qcow2Header, entry: u64) -> (u64, u64) {
    let shift = 62 - (header.cluster_bits - 8);
    let host = entry & ((1u64 << shift) - 1);
    let sectors = ((entry >> shift) & ((1u64 << (header.cluster_bits - 8)) - 1)) + 1;
    (host, sectors * 512 - (host & 511))
}

/// Extended L2: 32 subclusters, each allocated (low bitmap half), zero (high half) or
/// unallocated. Runs of allocated subclusters become extents.
fn decode_subclusters(
    header: &Qcow2Header,
    host: u64,
    bitmap: u64,
    virt: u64,
    in_image: u64,
    out: &mut Vec<Extent>,
) -> Result<(), ImportError> {
    let (alloc, zero) = (bitmap as u32, (bitmap >> 32) as u32);
    if alloc & zero != 0 {
        return Err(invalid(format!(
            "subcluster both allocated and zero at virtual offset {virt:#x}"
        )));
    }
    if host == 0 && alloc != 0 {
        return Err(invalid(format!(
            "allocated subclusters without a host cluster at virtual offset {virt:#x}"
        )));
    }
    let sub = header.cluster_size() / SUBCLUSTERS;
    let mut index = 0u64;
    while index < SUBCLUSTERS {
        if alloc & (1 << index) == 0 {
            index += 1;
            continue;
        }
        let run = (alloc >> index).trailing_ones() as u64;
        let start = index * sub;
        if start < in_image {
            let len = (run * sub).min(in_image - start);
            push_data(out, host + start, len, virt + start);
        }
        index += run;
    }
    Ok(())
}

/// Merged extents stop growing at this size, so that any extent fits in one batch buffer.
const MAX_MERGED: u64 = 1 << 20;

fn push_data(out: &mut Vec<Extent>, host: u64, len: u64, virt: u64) {
    if let Some(last) = out.last_mut()
        && last.kind == ExtentKind::Data
        && last.host_len < MAX_MERGED
        && last.host_end() == host
        && last.virt + last.host_len == virt
    {
        last.host_len += len;
        return;
    }
    out.push(Extent {
        host,
        host_len: len,
        virt,
        kind: ExtentKind::Data,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::cluster::BlockCodec;

    fn header(extended_l2: bool, virtual_size: u64) -> Qcow2Header {
        Qcow2Header {
            version: 3,
            cluster_bits: 16,
            virtual_size,
            l1_offset: 0x30000,
            l1_entries: 1,
            codec: BlockCodec::Deflate,
            extended_l2,
            dirty: false,
        }
    }

    fn table(entries: &[u64]) -> Vec<u8> {
        entries.iter().flat_map(|e| e.to_be_bytes()).collect()
    }

    #[test]
    fn merges_contiguous_and_skips_zero_and_unallocated() {
        let h = header(false, 10 << 16);
        let t = table(&[0x50000, 0x60000, 0, 0x70000 | FLAG_ZERO, 0x90000]);
        let mut out = Vec::new();
        l2_extents(&h, &t, 0, &mut out).unwrap();
        assert_eq!(
            out,
            vec![
                Extent {
                    host: 0x50000,
                    host_len: 0x20000,
                    virt: 0,
                    kind: ExtentKind::Data
                },
                Extent {
                    host: 0x90000,
                    host_len: 0x10000,
                    virt: 4 << 16,
                    kind: ExtentKind::Data
                },
            ]
        );
    }

    #[test]
    fn clips_the_last_cluster_to_the_virtual_size() {
        let h = header(false, 65536 + 1000);
        let mut out = Vec::new();
        l2_extents(&h, &table(&[0x50000, 0x60000]), 0, &mut out).unwrap();
        assert_eq!(out[0].host_len, 65536 + 1000);
    }

    #[test]
    fn compressed_location_follows_qemu() {
        let h = header(false, 1 << 20);
        // 3 extra sectors at byte offset 0x12345: spans to the end of the 4th sector.
        let entry = FLAG_COMPRESSED | (3u64 << 54) | 0x12345;
        let mut out = Vec::new();
        l2_extents(&h, &table(&[entry]), 0, &mut out).unwrap();
        assert_eq!(out[0].host, 0x12345);
        assert_eq!(out[0].host_len, 4 * 512 - 0x145);
        assert_eq!(
            out[0].kind,
            ExtentKind::Compressed {
                codec: BlockCodec::Deflate,
                decoded_len: 65536,
                out_len: 65536
            }
        );
    }

    #[test]
    fn subclusters() {
        let h = header(true, 1 << 20);
        // Subclusters 0-1 allocated, 2 zero, 5 allocated.
        let bitmap = 0b100011u64 | (0b100u64 << 32);
        let t = table(&[0x50000, bitmap]);
        let mut out = Vec::new();
        l2_extents(&h, &t, 0, &mut out).unwrap();
        assert_eq!(
            out,
            vec![
                Extent {
                    host: 0x50000,
                    host_len: 4096,
                    virt: 0,
                    kind: ExtentKind::Data
                },
                Extent {
                    host: 0x50000 + 5 * 2048,
                    host_len: 2048,
                    virt: 5 * 2048,
                    kind: ExtentKind::Data
                },
            ]
        );
        let bad = table(&[0x50000, 1 | (1 << 32)]);
        assert!(l2_extents(&h, &bad, 0, &mut out).is_err());
    }
}
