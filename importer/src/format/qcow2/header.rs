//! The qcow2 header (versions 2 and 3) and everything the importer refuses in it.

use crate::error::ImportError;
use crate::format::DiskFormat;
use crate::format::cluster::BlockCodec;
use crate::format::fields::{be32, be64};

const MAGIC: &[u8; 4] = b"QFI\xfb";
const V2_HEADER_LEN: usize = 72;
const V3_MIN_HEADER_LEN: usize = 104;

const INCOMPAT_DIRTY: u64 = 1 << 0;
const INCOMPAT_CORRUPT: u64 = 1 << 1;
const INCOMPAT_DATA_FILE: u64 = 1 << 2;
const INCOMPAT_COMPRESSION: u64 = 1 << 3;
const INCOMPAT_EXTL2: u64 = 1 << 4;
const INCOMPAT_KNOWN: u64 =
    INCOMPAT_DIRTY | INCOMPAT_CORRUPT | INCOMPAT_DATA_FILE | INCOMPAT_COMPRESSION | INCOMPAT_EXTL2;

/// qemu's limits: 32 MiB of L1 table, 8 MiB of refcount table, 2^56 bytes of file.
const MAX_L1_BYTES: u64 = 32 << 20;
const MAX_REFTABLE_BYTES: u64 = 8 << 20;
const MAX_HOST_OFFSET: u64 = 1 << 56;

const EXT_END: u32 = 0;
const EXT_DATA_FILE: u32 = 0x4441_5441;

/// The parts of a qcow2 header the converter needs, validated.
#[derive(Debug, Clone)]
pub struct Qcow2Header {
    pub version: u32,
    pub cluster_bits: u32,
    pub virtual_size: u64,
    pub l1_offset: u64,
    /// L1 entries that cover the virtual size; entries past these are never read.
    pub l1_entries: u64,
    pub codec: BlockCodec,
    pub extended_l2: bool,
    pub dirty: bool,
}

pub(super) fn invalid(msg: impl Into<String>) -> ImportError {
    ImportError::InvalidFormat {
        format: DiskFormat::Qcow2,
        reason: msg.into(),
    }
}

fn unsupported(msg: impl Into<String>) -> ImportError {
    ImportError::UnsupportedVariant {
        format: DiskFormat::Qcow2,
        reason: msg.into(),
    }
}

impl Qcow2Header {
    /// Parses and validates the header from the first bytes of the image (the first cluster,
    /// or as much of it as exists).
    pub fn parse(head: &[u8]) -> Result<Self, ImportError> {
        if head.len() < V2_HEADER_LEN || &head[..4] != MAGIC {
            return Err(invalid(
                "header is shorter than 72 bytes or lacks the QFI\\xfb magic",
            ));
        }
        let version = be32(head, 4);
        if version != 2 && version != 3 {
            return Err(unsupported(format!(
                "version {version} (only 2 and 3 exist)"
            )));
        }
        let cluster_bits = be32(head, 20);
        if !(9..=21).contains(&cluster_bits) {
            return Err(invalid(format!(
                "cluster_bits {cluster_bits} is outside 9..=21"
            )));
        }
        let cluster_size = 1u64 << cluster_bits;
        if be32(head, 32) != 0 {
            return Err(unsupported("the image is encrypted (crypt_method is set)"));
        }
        let backing_offset = be64(head, 8);
        if backing_offset != 0 {
            let name = backing_name(head, backing_offset, be32(head, 16));
            return Err(unsupported(format!(
                "it has a backing file {name:?}; import a standalone image (qemu-img convert merges the chain)"
            )));
        }
        let (incompatible, header_len, codec) = if version == 3 {
            Self::parse_v3_fields(head, cluster_size)?
        } else {
            (0, V2_HEADER_LEN, BlockCodec::Deflate)
        };
        check_extensions(head, header_len, cluster_size)?;
        let extended_l2 = incompatible & INCOMPAT_EXTL2 != 0;
        if extended_l2 && cluster_bits < 14 {
            return Err(invalid(
                "extended L2 entries need clusters of at least 16 KiB",
            ));
        }
        let virtual_size = be64(head, 24);
        if virtual_size > MAX_HOST_OFFSET {
            return Err(invalid(format!(
                "virtual size {virtual_size} exceeds 2^56 bytes"
            )));
        }
        let header = Qcow2Header {
            version,
            cluster_bits,
            virtual_size,
            l1_offset: be64(head, 40),
            l1_entries: 0,
            codec,
            extended_l2,
            dirty: incompatible & INCOMPAT_DIRTY != 0,
        };
        header.with_checked_tables(be32(head, 36), be32(head, 56), be64(head, 48))
    }

    fn parse_v3_fields(
        head: &[u8],
        cluster_size: u64,
    ) -> Result<(u64, usize, BlockCodec), ImportError> {
        if head.len() < V3_MIN_HEADER_LEN {
            return Err(invalid("version 3 header is shorter than 104 bytes"));
        }
        let incompatible = be64(head, 72);
        let unknown = incompatible & !INCOMPAT_KNOWN;
        if unknown != 0 {
            return Err(unsupported(format!(
                "unknown incompatible features {unknown:#x}"
            )));
        }
        if incompatible & INCOMPAT_DATA_FILE != 0 {
            return Err(unsupported("its data lives in an external data file"));
        }
        if incompatible & INCOMPAT_CORRUPT != 0 {
            tracing::warn!("qcow2 image is marked corrupt; converting what its tables say");
        }
        let refcount_order = be32(head, 96);
        if refcount_order > 6 {
            return Err(invalid(format!(
                "refcount_order {refcount_order} exceeds 6"
            )));
        }
        let header_len = be32(head, 100) as usize;
        if header_len < V3_MIN_HEADER_LEN
            || header_len as u64 > cluster_size
            || header_len > head.len()
        {
            return Err(invalid(format!(
                "header_length {header_len} is out of range"
            )));
        }
        let codec = if incompatible & INCOMPAT_COMPRESSION == 0 {
            BlockCodec::Deflate
        } else if header_len <= 104 {
            return Err(invalid(
                "compression type bit set but the header has no compression_type",
            ));
        } else {
            match head[104] {
                0 => BlockCodec::Deflate,
                1 => BlockCodec::Zstd,
                other => return Err(unsupported(format!("compression type {other}"))),
            }
        };
        Ok((incompatible, header_len, codec))
    }

    /// Checks the table sizes against what the virtual size needs, and fills `l1_entries`.
    fn with_checked_tables(
        mut self,
        l1_size: u32,
        reftable_clusters: u32,
        reftable_offset: u64,
    ) -> Result<Self, ImportError> {
        let cluster_size = self.cluster_size();
        let needed = self.virtual_size.div_ceil(cluster_size * self.l2_entries());
        let l1_size = u64::from(l1_size);
        if l1_size < needed {
            return Err(invalid(format!(
                "L1 table has {l1_size} entries but virtual size {} needs {needed}",
                self.virtual_size
            )));
        }
        // qemu grows the L1 table by half again at a time; anything far beyond is not a table
        // this virtual size can have, and reading it would be a memory bomb.
        let plausible = (needed * 2).max(cluster_size / 8);
        if l1_size > plausible || l1_size * 8 > MAX_L1_BYTES {
            return Err(invalid(format!(
                "L1 table size of {l1_size} entries is beyond what virtual size {} allows ({needed} needed)",
                self.virtual_size
            )));
        }
        let reftable_bytes = u64::from(reftable_clusters) * cluster_size;
        if reftable_bytes > MAX_REFTABLE_BYTES {
            return Err(invalid(format!(
                "refcount table of {reftable_clusters} clusters exceeds qemu's 8 MiB limit"
            )));
        }
        for (what, offset) in [
            ("L1 table", self.l1_offset),
            ("refcount table", reftable_offset),
        ] {
            if !offset.is_multiple_of(cluster_size) || offset >= MAX_HOST_OFFSET {
                return Err(invalid(format!(
                    "{what} offset {offset:#x} is not a valid cluster offset"
                )));
            }
        }
        if needed > 0 && self.l1_offset == 0 {
            return Err(invalid("L1 table offset is 0, inside the header"));
        }
        self.l1_entries = needed;
        Ok(self)
    }

    pub fn cluster_size(&self) -> u64 {
        1 << self.cluster_bits
    }

    /// Bytes per L2 entry: 16 with extended L2 (entry plus subcluster bitmap), else 8.
    pub fn l2_entry_bytes(&self) -> u64 {
        if self.extended_l2 { 16 } else { 8 }
    }

    pub fn l2_entries(&self) -> u64 {
        self.cluster_size() / self.l2_entry_bytes()
    }

    /// Bytes of the L1 table that are read.
    pub fn l1_bytes(&self) -> u64 {
        self.l1_entries * 8
    }
}

fn backing_name(head: &[u8], offset: u64, len: u32) -> String {
    let start = offset as usize;
    head.get(start..start.saturating_add(len.min(1023) as usize))
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_else(|| "(name outside the first cluster)".into())
}

/// Walks the header extensions; an external data file named there is refused too.
fn check_extensions(head: &[u8], mut at: usize, cluster_size: u64) -> Result<(), ImportError> {
    let end = head.len().min(cluster_size as usize);
    while at + 8 <= end {
        let (kind, len) = (be32(head, at), be32(head, at + 4) as usize);
        if kind == EXT_END {
            return Ok(());
        }
        if kind == EXT_DATA_FILE {
            return Err(unsupported("its data lives in an external data file"));
        }
        at = at + 8 + len.div_ceil(8) * 8;
    }
    if at > end {
        return Err(invalid("header extensions run past the first cluster"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v3_header(virtual_size: u64, l1_size: u32) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..4].copy_from_slice(MAGIC);
        h[4..8].copy_from_slice(&3u32.to_be_bytes());
        h[20..24].copy_from_slice(&16u32.to_be_bytes());
        h[24..32].copy_from_slice(&virtual_size.to_be_bytes());
        h[36..40].copy_from_slice(&l1_size.to_be_bytes());
        h[40..48].copy_from_slice(&0x30000u64.to_be_bytes());
        h[48..56].copy_from_slice(&0x10000u64.to_be_bytes());
        h[56..60].copy_from_slice(&1u32.to_be_bytes());
        h[96..100].copy_from_slice(&4u32.to_be_bytes());
        h[100..104].copy_from_slice(&112u32.to_be_bytes());
        h
    }

    #[test]
    fn parses_a_plain_v3_header() {
        let h = Qcow2Header::parse(&v3_header(1 << 30, 2)).unwrap();
        assert_eq!(h.cluster_size(), 65536);
        assert_eq!(h.l1_entries, 2);
        assert_eq!(h.codec, BlockCodec::Deflate);
    }

    #[test]
    fn refuses_absurd_l1_and_backing_files() {
        let err = Qcow2Header::parse(&v3_header(1 << 30, 0x7fff_ffff)).unwrap_err();
        assert!(err.to_string().contains("L1 table size"), "{err}");
        let err = Qcow2Header::parse(&v3_header(1 << 30, 1)).unwrap_err();
        assert!(err.to_string().contains("needs 2"), "{err}");

        let mut h = v3_header(1 << 30, 2);
        h[8..16].copy_from_slice(&200u64.to_be_bytes());
        h[16..20].copy_from_slice(&9u32.to_be_bytes());
        h[200..209].copy_from_slice(b"base.img\0");
        let err = Qcow2Header::parse(&h).unwrap_err();
        assert!(err.to_string().contains("backing file \"base.img"), "{err}");
    }

    #[test]
    fn refuses_encryption_and_unknown_features() {
        let mut h = v3_header(1 << 20, 1);
        h[32..36].copy_from_slice(&2u32.to_be_bytes());
        assert!(
            Qcow2Header::parse(&h)
                .unwrap_err()
                .to_string()
                .contains("encrypted")
        );
        let mut h = v3_header(1 << 20, 1);
        h[72..80].copy_from_slice(&(1u64 << 40).to_be_bytes());
        assert!(
            Qcow2Header::parse(&h)
                .unwrap_err()
                .to_string()
                .contains("incompatible")
        );
        let mut h = v3_header(1 << 20, 1);
        h[72..80].copy_from_slice(&INCOMPAT_DATA_FILE.to_be_bytes());
        assert!(
            Qcow2Header::parse(&h)
                .unwrap_err()
                .to_string()
                .contains("data file")
        );
    }
}
