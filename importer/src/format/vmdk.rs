//! VMDK (VMware): monolithicSparse, mapped through its grain directory and grain tables,
//! and streamOptimized (the OVA export form), whose deflated grains are read in file order by
//! their markers, so it converts from any stream. Descriptor-only files (monolithicFlat and
//! split extents) name other files and are refused with the file to import instead.

use std::io::{self, Read};

use super::DiskFormat;
use super::cluster::BlockCodec;
use super::extent::{BatchBuilder, Extent, ExtentKind, ImageMap, MetaRead, skip};
use crate::error::ImportError;
use crate::format::fields::{le16, le32, le64};
use crate::write_pool::WritePool;

const HEADER_LEN: usize = 512;
const FLAG_COMPRESSED: u32 = 1 << 16;
const FLAG_MARKERS: u32 = 1 << 17;
const COMPRESSION_DEFLATE: u16 = 1;
const GD_AT_END: u64 = u64::MAX;
const MARKER_EOS: u32 = 0;
const MAX_GRAIN_BYTES: u64 = 2 << 20;
const MAX_TABLE_BYTES: u64 = 64 << 20;

fn invalid(field: &str, reason: impl std::fmt::Display) -> ImportError {
    ImportError::InvalidFormat {
        format: DiskFormat::Vmdk,
        reason: format!("{field}: {reason}"),
    }
}

fn unsupported(reason: impl Into<String>) -> ImportError {
    ImportError::UnsupportedVariant {
        format: DiskFormat::Vmdk,
        reason: reason.into(),
    }
}

/// The sparse extent header (`KDMV`).
#[derive(Debug, Clone)]
pub struct SparseHeader {
    flags: u32,
    capacity: u64,
    grain_sectors: u64,
    gtes_per_gt: u64,
    gd_offset: u64,
    overhead: u64,
    compression: u16,
}

impl SparseHeader {
    /// Parses the header that starts `head`; descriptor-only files are refused here.
    pub fn parse(head: &[u8]) -> Result<Self, ImportError> {
        if head.starts_with(b"# Disk DescriptorFile") {
            return Err(descriptor_only(head));
        }
        if head.len() < HEADER_LEN || &head[..4] != b"KDMV" {
            return Err(unsupported(
                "only monolithicSparse and streamOptimized VMDKs are supported",
            ));
        }
        let version = le32(head, 4);
        if !(1..=3).contains(&version) {
            return Err(invalid("version", version));
        }
        let header = SparseHeader {
            flags: le32(head, 8),
            capacity: le64(head, 12),
            grain_sectors: le64(head, 20),
            gtes_per_gt: u64::from(le32(head, 44)),
            gd_offset: le64(head, 56),
            overhead: le64(head, 64),
            compression: le16(head, 77),
        };
        let grain = header.grain_sectors.saturating_mul(512);
        if !header.grain_sectors.is_power_of_two() || !(4096..=MAX_GRAIN_BYTES).contains(&grain) {
            return Err(invalid(
                "grainSize",
                format!("{} sectors", header.grain_sectors),
            ));
        }
        if header.gtes_per_gt == 0 || header.gtes_per_gt > 8192 {
            return Err(invalid("numGTEsPerGT", header.gtes_per_gt));
        }
        if header.capacity > (1 << 41) {
            return Err(invalid("capacity", format!("{} sectors", header.capacity)));
        }
        if header.compressed() && header.compression != COMPRESSION_DEFLATE {
            return Err(invalid("compressAlgorithm", header.compression));
        }
        if let Some(parent) = descriptor_value(head, "parentCID").filter(|cid| cid != "ffffffff") {
            return Err(unsupported(format!(
                "it is a delta disk (parentCID {parent}) and needs its parent"
            )));
        }
        Ok(header)
    }

    pub fn virtual_size(&self) -> u64 {
        self.capacity * 512
    }

    fn compressed(&self) -> bool {
        self.flags & FLAG_COMPRESSED != 0
    }

    /// streamOptimized: deflated grains preceded by markers, read in file order.
    pub fn is_stream_optimized(&self) -> bool {
        self.compressed() && self.flags & FLAG_MARKERS != 0
    }

    fn grain_bytes(&self) -> u64 {
        self.grain_sectors * 512
    }
}

/// The one flat extent a descriptor-only VMDK (monolithicFlat) names: its file, relative
/// to the descriptor. `None` for anything else (sparse or split extents, offsets).
pub fn flat_extent(descriptor: &[u8]) -> Option<String> {
    if !descriptor.starts_with(b"# Disk DescriptorFile") {
        return None;
    }
    let text = String::from_utf8_lossy(descriptor);
    let extents: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("RW ") || l.starts_with("RDONLY "))
        .collect();
    let [line] = extents.as_slice() else {
        return None;
    };
    // RW <sectors> FLAT "<file>" <offset>
    let mut quoted = line.split('"');
    let (kind, file, offset) = (quoted.next()?, quoted.next()?, quoted.next()?.trim());
    let flat_at_start =
        kind.split_whitespace().nth(2) == Some("FLAT") && (offset.is_empty() || offset == "0");
    (flat_at_start && !file.is_empty()).then(|| file.to_string())
}

fn descriptor_only(head: &[u8]) -> ImportError {
    let create_type = descriptor_value(head, "createType").unwrap_or_else(|| "unknown".into());
    let extent = String::from_utf8_lossy(head)
        .lines()
        .find_map(|line| {
            line.split('"')
                .nth(1)
                .filter(|_| line.starts_with("RW ") || line.starts_with("RDONLY "))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "its extent file".into());
    unsupported(format!(
        "this is a {create_type} descriptor whose data lives in {extent:?}; import that file (a flat extent is a raw image)"
    ))
}

/// `key="value"` from the embedded descriptor text, if present in `head`.
fn descriptor_value(head: &[u8], key: &str) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// A count of 512-byte sectors from the image, in bytes; refused when it overflows.
fn sectors(count: u64, field: &str) -> Result<u64, ImportError> {
    count
        .checked_mul(512)
        .ok_or_else(|| invalid(field, format!("{count} sectors is out of range")))
}

/// Maps a monolithicSparse extent through its grain directory and tables.
pub fn map(meta: &mut dyn MetaRead, header: &SparseHeader) -> Result<ImageMap, ImportError> {
    if header.gd_offset == GD_AT_END || header.compressed() {
        return Err(unsupported(
            "compressed grains are read by their markers (streamOptimized)",
        ));
    }
    let grain = header.grain_bytes();
    let gt_span = grain * header.gtes_per_gt;
    let virtual_size = header.virtual_size();
    let gd_entries = virtual_size.div_ceil(gt_span);
    if gd_entries * 4 + gd_entries * header.gtes_per_gt * 4 > MAX_TABLE_BYTES * 4 {
        return Err(invalid("capacity", "grain tables too large"));
    }
    let mut gd = vec![0u8; gd_entries as usize * 4];
    meta.read_at(sectors(header.gd_offset, "gdOffset")?, &mut gd)?;
    let mut table = vec![0u8; header.gtes_per_gt as usize * 4];
    let mut extents = Vec::new();
    for (gd_index, raw) in gd.chunks_exact(4).enumerate() {
        let gt_sector = u64::from(u32::from_le_bytes(raw.try_into().expect("4 bytes")));
        if gt_sector == 0 {
            continue;
        }
        meta.read_at(gt_sector * 512, &mut table)?;
        for (gt_index, raw) in table.chunks_exact(4).enumerate() {
            let sector = u64::from(u32::from_le_bytes(raw.try_into().expect("4 bytes")));
            let virt = gd_index as u64 * gt_span + gt_index as u64 * grain;
            // 0: unallocated, 1: a grain known to be zero.
            if sector <= 1 || virt >= virtual_size {
                continue;
            }
            let len = grain.min(virtual_size - virt);
            extents.push(Extent {
                host: sector * 512,
                host_len: len,
                virt,
                kind: ExtentKind::Data,
            });
        }
    }
    Ok(ImageMap::new(virtual_size, extents))
}

/// Converts a streamOptimized VMDK read from its first byte: after the header and the
/// overhead, each grain is a marker (LBA, compressed size) and its zlib data, padded to a
/// sector; metadata markers (grain tables, directory, footer) are skipped; EOS ends it.
pub fn convert_stream(
    reader: &mut dyn Read,
    header: &SparseHeader,
    pool: &WritePool,
) -> Result<(), ImportError> {
    let mut stream = Position {
        inner: reader,
        pos: 0,
    };
    skip(&mut stream, sectors(header.overhead.max(1), "overHead")?)?;
    let grain = header.grain_bytes();
    let virtual_size = header.virtual_size();
    let mut batch = BatchBuilder::new(pool);
    let mut marker = [0u8; 12];
    loop {
        let at = stream.pos;
        match crate::stream::read_full(&mut stream, &mut marker).map_err(ImportError::from_read)? {
            0 => break, // A stream that ends without an EOS marker: qemu accepts it too.
            12 => {}
            _ => {
                return Err(ImportError::Truncated(format!(
                    "VMDK marker at {at:#x} is cut off"
                )));
            }
        }
        let (value, size) = (le64(&marker, 0), u64::from(le32(&marker, 8)));
        if size == 0 {
            let mut rest = [0u8; 500];
            stream
                .read_exact(&mut rest)
                .map_err(ImportError::from_read)?;
            if le32(&rest, 0) == MARKER_EOS {
                break;
            }
            skip(&mut stream, sectors(value, "metadata marker")?)?;
            continue;
        }
        let virt = sectors(value, "grain marker LBA")?;
        if virt >= virtual_size || size > 2 * grain {
            return Err(invalid(
                "grain marker",
                format!("at {at:#x}: LBA {value}, {size} bytes"),
            ));
        }
        // The last grain may hold only what is left of the disk; decoding into a buffer of
        // exactly that size also accepts writers that compress a whole grain there.
        let len = grain.min(virtual_size - virt);
        let kind = ExtentKind::Compressed {
            codec: BlockCodec::Zlib,
            decoded_len: len,
            out_len: len,
        };
        let extent = Extent {
            host: at + 12,
            host_len: size,
            virt,
            kind,
        };
        batch.add(&extent, |out| {
            (&mut stream)
                .take(size)
                .read_to_end(out)
                .map_err(ImportError::from_read)?;
            Ok(())
        })?;
        let padding = (12 + size).next_multiple_of(512) - (12 + size);
        skip(&mut stream, padding)?;
    }
    batch.flush()?;
    io::copy(&mut stream, &mut io::sink()).map_err(ImportError::from_read)?;
    Ok(())
}

/// Tracks the offset of a stream, for markers' error messages.
struct Position<'r> {
    inner: &'r mut dyn Read,
    pos: u64,
}

impl Read for Position<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use crate::format::reader::testing::{assert_converts_as_qemu_img, qemu_image, scratch};

    #[test]
    fn converts_as_qemu_img_through_the_seam() {
        // Whole grains, in order: a streamOptimized image is written only that way.
        let writes = ["-P 0xa1 0 64k", "-P 0xb2 1M 64k", "-P 0xc3 3M 128k"];
        for subformat in ["monolithicSparse", "streamOptimized"] {
            let dir = scratch(subformat);
            let options = format!("subformat={subformat}");
            let image = qemu_image(dir.path(), "vmdk", &options, "4M", &writes);
            assert_converts_as_qemu_img(&image);
        }
    }
}
