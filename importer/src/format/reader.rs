//! The seam between the pipeline and the disk image formats that carry their own size and
//! map (qcow2, VMDK, VHD, VHDX, VDI): [`open`] reads an image's header and the tables that
//! map its disk, and the [`FormatReader`] it returns writes the disk's data to a pool. The
//! pipeline sizes the target in between and never matches on a format itself.
//!
//! Raw images (and ISO images, which are raw) are not behind this seam: their size is known
//! only once the stream ends, where a fixed VHD's footer may also turn up.

use std::io::Read;
use std::sync::Arc;

use super::extent::{ImageMap, MetaRead, RandomMeta, StreamPrefix, clamp_to_source, read_extents};
use super::qcow2::sequential::HoldLimits;
use super::qcow2::{self, Qcow2Header};
use super::{DiskFormat, vdi, vhd, vhdx, vmdk};
use crate::error::ImportError;
use crate::progress::Progress;
use crate::source::RandomAccess;
use crate::write_pool::WritePool;

/// How far into a stream a format's tables may lie (they are at its start in practice).
const STREAM_METADATA_LIMIT: usize = 64 << 20;

/// Where a reader reads the image.
pub enum Input<'a> {
    /// The image's bytes in order from the first (decompressed, counted, checksummed as the
    /// pipeline set them up); its head has been peeked, not consumed.
    Stream {
        reader: &'a mut dyn Read,
        hold: &'a HoldLimits,
    },
    /// The image file at any offset: only what the disk uses is read.
    Random {
        source: &'a dyn RandomAccess,
        progress: &'a Arc<Progress>,
    },
}

/// An opened image: its virtual size known, its data still to be read.
pub trait FormatReader {
    /// The size of the disk the image holds.
    fn virtual_size(&self) -> u64;

    /// Writes the disk's allocated data to `pool` (what is not written reads as zeros), and
    /// reads a stream to its end so that every byte passes the checksum.
    fn convert(self: Box<Self>, pool: &WritePool) -> Result<(), ImportError>;
}

/// Whether an image of `format` whose first bytes are `head` is read from the stream even
/// where the source allows random access (a streamOptimized VMDK is a stream by design).
pub fn needs_stream(format: DiskFormat, head: &[u8]) -> bool {
    format == DiskFormat::Vmdk
        && vmdk::SparseHeader::parse(head).is_ok_and(|h| h.is_stream_optimized())
}

/// Opens an image of `format` (as detected from `head`, its first bytes): parses its header
/// and reads the tables that map its disk from `input`.
pub fn open<'a>(
    format: DiskFormat,
    head: &[u8],
    input: Input<'a>,
) -> Result<Box<dyn FormatReader + 'a>, ImportError> {
    match format {
        DiskFormat::Qcow2 => Ok(Box::new(Qcow2Reader::open(head, input)?)),
        DiskFormat::Vmdk => {
            let header = vmdk::SparseHeader::parse(head)?;
            if header.is_stream_optimized() {
                let Input::Stream { reader, .. } = input else {
                    return Err(ImportError::InvalidImage(
                        "a streamOptimized VMDK is read as a stream".into(),
                    ));
                };
                return Ok(Box::new(VmdkStreamReader { header, reader }));
            }
            Ok(Box::new(MappedReader::open(input, |meta| {
                vmdk::map(meta, &header)
            })?))
        }
        DiskFormat::Vhd => Ok(Box::new(MappedReader::open(input, vhd::map)?)),
        DiskFormat::Vhdx => Ok(Box::new(MappedReader::open(input, vhdx::map)?)),
        DiskFormat::Vdi => Ok(Box::new(MappedReader::open(input, vdi::map)?)),
        other => Err(ImportError::UnsupportedFormat(other)),
    }
}

/// qcow2: the header gives the size; the L1/L2 tables are walked as the data is read.
struct Qcow2Reader<'a> {
    header: Qcow2Header,
    input: Input<'a>,
}

impl<'a> Qcow2Reader<'a> {
    fn open(head: &[u8], input: Input<'a>) -> Result<Self, ImportError> {
        let header = Qcow2Header::parse(head)?;
        if header.dirty {
            tracing::warn!(
                "qcow2 image was not closed cleanly (dirty bit); its tables are used as they are"
            );
        }
        Ok(Self { header, input })
    }
}

impl FormatReader for Qcow2Reader<'_> {
    fn virtual_size(&self) -> u64 {
        self.header.virtual_size
    }

    fn convert(self: Box<Self>, pool: &WritePool) -> Result<(), ImportError> {
        match self.input {
            Input::Stream { reader, hold } => {
                qcow2::sequential::convert(reader, &self.header, pool, hold)
            }
            Input::Random { source, progress } => {
                qcow2::random::convert(source, &self.header, pool, progress)
            }
        }
    }
}

/// A streamOptimized VMDK: the header gives the size; grains follow in stream order.
struct VmdkStreamReader<'a> {
    header: vmdk::SparseHeader,
    reader: &'a mut dyn Read,
}

impl FormatReader for VmdkStreamReader<'_> {
    fn virtual_size(&self) -> u64 {
        self.header.virtual_size()
    }

    fn convert(self: Box<Self>, pool: &WritePool) -> Result<(), ImportError> {
        vmdk::convert_stream(self.reader, &self.header, pool)
    }
}

/// A format whose tables map the whole disk before any data is read (VHD, VHDX, VDI, a
/// sparse VMDK): the map is read first, then its extents are copied in host order.
struct MappedReader<'a> {
    map: ImageMap,
    data: MappedData<'a>,
}

enum MappedData<'a> {
    /// The stream with the prefix the tables were read from.
    Stream(StreamPrefix<'a>),
    Random {
        source: &'a dyn RandomAccess,
        progress: &'a Arc<Progress>,
    },
}

impl<'a> MappedReader<'a> {
    fn open(
        input: Input<'a>,
        map_tables: impl FnOnce(&mut dyn MetaRead) -> Result<ImageMap, ImportError>,
    ) -> Result<Self, ImportError> {
        match input {
            Input::Stream { reader, .. } => {
                let mut prefix = StreamPrefix::new(reader, STREAM_METADATA_LIMIT);
                let map = map_tables(&mut prefix)?;
                Ok(Self {
                    map,
                    data: MappedData::Stream(prefix),
                })
            }
            Input::Random { source, progress } => {
                let mut meta = RandomMeta { source, progress };
                let mut map = map_tables(&mut meta)?;
                clamp_to_source(&mut map.extents, source.size())?;
                Ok(Self {
                    map,
                    data: MappedData::Random { source, progress },
                })
            }
        }
    }
}

impl FormatReader for MappedReader<'_> {
    fn virtual_size(&self) -> u64 {
        self.map.virtual_size
    }

    fn convert(self: Box<Self>, pool: &WritePool) -> Result<(), ImportError> {
        match self.data {
            MappedData::Stream(prefix) => prefix.copy_extents(&self.map.extents, pool),
            MappedData::Random { source, progress } => {
                read_extents(source, &self.map.extents, pool, progress)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_open(format: DiskFormat, head: &[u8]) -> Result<u64, ImportError> {
        let hold = HoldLimits::default();
        let mut bytes = head;
        let input = Input::Stream {
            reader: &mut bytes,
            hold: &hold,
        };
        open(format, head, input).map(|reader| reader.virtual_size())
    }

    #[test]
    fn formats_without_a_reader_are_refused_by_name() {
        for format in [
            DiskFormat::Raw,
            DiskFormat::Qcow1,
            DiskFormat::Luks,
            DiskFormat::Tar,
        ] {
            match stream_open(format, &[0; 512]) {
                Err(ImportError::UnsupportedFormat(refused)) => assert_eq!(refused, format),
                other => panic!("{format}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_header_that_does_not_parse_is_an_error_not_a_reader() {
        let mut head = vec![0u8; 512];
        head[..4].copy_from_slice(b"QFI\xfb");
        assert!(stream_open(DiskFormat::Qcow2, &head).is_err());
        head[..4].copy_from_slice(b"KDMV");
        assert!(stream_open(DiskFormat::Vmdk, &head).is_err());
    }
}

/// Test support for the per-format tests beside each reader: images made by qemu-img and
/// written with qemu-io, converted through [`open`] both ways, compared with what qemu-img
/// makes of them.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::Arc;

    use super::*;
    use crate::format::detect::detect_format;
    use crate::sink::{SparseSink, Target};

    /// A scratch directory for one test.
    pub fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("reader-{name}-"))
            .tempdir()
            .expect("a temporary directory")
    }

    fn run(command: &mut Command) {
        let output = command.output().unwrap_or_else(|e| {
            panic!("{command:?}: {e} (qemu-utils is installed by scripts/test)")
        });
        assert!(
            output.status.success(),
            "{command:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// An image of `format` (qemu-img's name) and `size` bytes made with `options`, with
    /// each of `writes` (qemu-io `write` arguments: `-P PATTERN OFFSET LENGTH`) applied.
    pub fn qemu_image(
        dir: &Path,
        format: &str,
        options: &str,
        size: &str,
        writes: &[&str],
    ) -> PathBuf {
        let path = dir.join(format!("image.{format}"));
        let mut create = Command::new("qemu-img");
        create.args(["create", "-q", "-f", format]);
        if !options.is_empty() {
            create.args(["-o", options]);
        }
        run(create.arg(&path).arg(size));
        if !writes.is_empty() {
            // One qemu-io for all: a streamOptimized VMDK is only written in one go.
            let mut io = Command::new("qemu-io");
            io.args(["-f", format]);
            for write in writes {
                io.arg("-c").arg(format!("write {write}"));
            }
            run(io.arg(&path));
        }
        path
    }

    /// What qemu-img makes of the image: its raw disk.
    pub fn reference(image: &Path) -> Vec<u8> {
        let raw = image.with_extension("reference.raw");
        run(Command::new("qemu-img")
            .args(["convert", "-O", "raw"])
            .arg(image)
            .arg(&raw));
        std::fs::read(raw).expect("the reference")
    }

    /// The image converted through the seam: from its bytes in order, or at random offsets.
    pub fn convert(image: &Path, random: bool) -> Vec<u8> {
        let bytes = std::fs::read(image).expect("the image");
        let format = detect_format(&bytes);
        let progress = Arc::new(Progress::new());
        let hold = HoldLimits::default();
        let opened = crate::source::file::open(image).expect("open the image");
        let source = opened.random_access.expect("a file is read at any offset");
        let mut stream: &[u8] = &bytes;
        let input = if random && !needs_stream(format, &bytes) {
            Input::Random {
                source: source.as_ref(),
                progress: &progress,
            }
        } else {
            Input::Stream {
                reader: &mut stream,
                hold: &hold,
            }
        };
        let reader = open(format, &bytes, input).expect("open through the seam");
        let size = reader.virtual_size();
        let target = image.with_extension("converted.raw");
        let sink = Arc::new(
            SparseSink::create(
                Target::inspect(&target).expect("the target"),
                Some(size),
                None,
                false,
            )
            .expect("the target"),
        );
        let pool = WritePool::new(sink.clone());
        let converted = reader.convert(&pool);
        pool.finish().expect("the writes");
        converted.expect("the conversion");
        Arc::into_inner(sink)
            .expect("the writers are finished")
            .commit(size)
            .expect("commit");
        std::fs::read(target).expect("the converted disk")
    }

    /// Both ways through the seam equal qemu-img's conversion.
    pub fn assert_converts_as_qemu_img(image: &Path) {
        let expected = reference(image);
        for random in [false, true] {
            let got = convert(image, random);
            assert_eq!(got.len(), expected.len(), "size (random access: {random})");
            assert!(got == expected, "content differs (random access: {random})");
        }
    }
}
