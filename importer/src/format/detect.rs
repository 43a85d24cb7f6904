//! Recognises compressions and disk formats from their magic bytes, never from file names.

use super::DiskFormat;

/// How many leading bytes detection looks at. ISO 9660 puts its signature at 32769.
pub const PROBE_LEN: usize = 32 * 1024 + 6;

/// Stream compressions, detected before the format and possibly nested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Xz,
    Zstd,
    Bzip2,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Xz => "xz",
            Self::Zstd => "zstd",
            Self::Bzip2 => "bzip2",
        }
    }
}

/// The compression whose magic starts `head`, if any.
pub fn detect_compression(head: &[u8]) -> Option<Compression> {
    if head.starts_with(&[0x1f, 0x8b, 0x08]) {
        Some(Compression::Gzip)
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        Some(Compression::Xz)
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some(Compression::Zstd)
    } else if head.len() >= 10
        && head.starts_with(b"BZh")
        && (b'1'..=b'9').contains(&head[3])
        && head[4..10] == [0x31, 0x41, 0x59, 0x26, 0x53, 0x59]
    {
        Some(Compression::Bzip2)
    } else {
        None
    }
}

/// The disk format of an uncompressed image starting with `head`. Anything unrecognised
/// is raw, as with qemu-img.
pub fn detect_format(head: &[u8]) -> DiskFormat {
    let at = |offset: usize, magic: &[u8]| head.get(offset..offset + magic.len()) == Some(magic);
    if at(0, b"QFI\xfb") {
        // The version follows the magic; 1 is the old qcow format.
        return match head.get(4..8) {
            Some([0, 0, 0, 1]) => DiskFormat::Qcow1,
            _ => DiskFormat::Qcow2,
        };
    }
    if at(0, b"KDMV") || at(0, b"COWD") || at(0, b"# Disk DescriptorFile") {
        return DiskFormat::Vmdk;
    }
    if at(0, b"vhdxfile") {
        return DiskFormat::Vhdx;
    }
    if at(0, b"conectix") {
        return DiskFormat::Vhd;
    }
    if at(0x40, &0xbeda_107f_u32.to_le_bytes()) {
        return DiskFormat::Vdi;
    }
    if at(0, b"LUKS\xba\xbe") {
        return DiskFormat::Luks;
    }
    if at(257, b"ustar") {
        return DiskFormat::Tar;
    }
    if at(0x8001, b"CD001") {
        return DiskFormat::Iso;
    }
    DiskFormat::Raw
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_at(offset: usize, magic: &[u8]) -> Vec<u8> {
        let mut head = vec![0u8; PROBE_LEN];
        head[offset..offset + magic.len()].copy_from_slice(magic);
        head
    }

    #[test]
    fn formats() {
        assert_eq!(
            detect_format(&with_at(0, b"QFI\xfb\0\0\0\x03")),
            DiskFormat::Qcow2
        );
        assert_eq!(
            detect_format(&with_at(0, b"QFI\xfb\0\0\0\x01")),
            DiskFormat::Qcow1
        );
        assert_eq!(detect_format(&with_at(0, b"KDMV")), DiskFormat::Vmdk);
        assert_eq!(detect_format(&with_at(0, b"vhdxfile")), DiskFormat::Vhdx);
        assert_eq!(detect_format(&with_at(0, b"conectix")), DiskFormat::Vhd);
        assert_eq!(
            detect_format(&with_at(0x40, &[0x7f, 0x10, 0xda, 0xbe])),
            DiskFormat::Vdi
        );
        assert_eq!(detect_format(&with_at(257, b"ustar")), DiskFormat::Tar);
        assert_eq!(detect_format(&with_at(0x8001, b"CD001")), DiskFormat::Iso);
        assert_eq!(detect_format(&[0u8; 100]), DiskFormat::Raw);
        assert_eq!(detect_format(b""), DiskFormat::Raw);
    }

    #[test]
    fn compressions() {
        assert_eq!(
            detect_compression(&[0x1f, 0x8b, 8, 0]),
            Some(Compression::Gzip)
        );
        assert_eq!(detect_compression(b"\xfd7zXZ\0\0"), Some(Compression::Xz));
        assert_eq!(
            detect_compression(&[0x28, 0xb5, 0x2f, 0xfd]),
            Some(Compression::Zstd)
        );
        assert_eq!(detect_compression(b"BZh91AY&SY"), Some(Compression::Bzip2));
        assert_eq!(detect_compression(b"BZh9 not bzip"), None);
        assert_eq!(detect_compression(b"QFI\xfb"), None);
    }
}
