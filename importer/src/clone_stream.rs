//! The sending half of a host-assisted clone: a volume's bytes, read extent by extent and
//! zstd-compressed for the wire. Holes of a sparse file are not read: they are produced as
//! zeros, which zstd turns into a few bytes per block, and the receiving sink leaves them as
//! holes again. CDI pipes `tar -S` or the device through snappy; a single zstd stream of the
//! raw bytes gives the same sparseness on the wire with one format for files and devices.
//!
//! The hole walk is written here, not taken from a crate: it is `SEEK_DATA`/`SEEK_HOLE` over
//! positioned reads, which is what makes the copy cost the data rather than the size.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::Path;
use std::sync::Arc;

use rustix::fs::SeekFrom;

use crate::error::ImportError;
use crate::progress::Progress;

/// The zstd level of the wire stream: a fast one. The encoder on one core bounds a clone
/// (docs/performance.md): on disk data level -1 is 60 % faster than level 1 for 10 % more
/// bytes, and zero runs compress to almost nothing at any level.
pub const WIRE_ZSTD_LEVEL: i32 = -1;

/// The `Content-Encoding` of a clone stream.
pub const WIRE_ENCODING: &str = "zstd";

/// A volume (a disk image file or a block device) read as its raw bytes, holes as zeros
/// without reading them.
pub struct VolumeReader {
    file: File,
    size: u64,
    position: u64,
    /// The next data extent at or after `position` (empty before the first lookup).
    extent: Range<u64>,
    progress: Arc<Progress>,
}

impl VolumeReader {
    /// Opens `path` read-only; its size is the file's length or the device's.
    pub fn open(path: &Path, progress: Arc<Progress>) -> Result<Self, ImportError> {
        let open_error = |source| ImportError::OpenSource {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(open_error)?;
        let metadata = file.metadata().map_err(open_error)?;
        let size = if metadata.file_type().is_block_device() {
            rustix::fs::seek(&file, SeekFrom::End(0)).map_err(|e| open_error(e.into()))?
        } else {
            metadata.len()
        };
        progress.set_total(size);
        Ok(Self {
            file,
            size,
            position: 0,
            extent: 0..0,
            progress,
        })
    }

    /// The volume's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The data extent at or after `from`; `size..size` when only a hole is left. A file
    /// system (or device) that cannot tell holes reports everything as data.
    fn next_extent(&self, from: u64) -> io::Result<Range<u64>> {
        match rustix::fs::seek(&self.file, SeekFrom::Data(from)) {
            Ok(start) => {
                let end = rustix::fs::seek(&self.file, SeekFrom::Hole(start)).unwrap_or(self.size);
                Ok(start.min(self.size)..end.min(self.size))
            }
            Err(rustix::io::Errno::NXIO) => Ok(self.size..self.size),
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::OPNOTSUPP) => Ok(from..self.size),
            Err(err) => Err(err.into()),
        }
    }
}

impl Read for VolumeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.position >= self.size || buf.is_empty() {
            return Ok(0);
        }
        if self.extent.end <= self.position {
            self.extent = self.next_extent(self.position)?;
        }
        let n = if self.position < self.extent.start {
            let n = clamp(buf.len(), self.extent.start - self.position);
            buf[..n].fill(0);
            n
        } else {
            let n = clamp(buf.len(), self.extent.end - self.position);
            let read = self.file.read_at(&mut buf[..n], self.position)?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the volume ended at byte {} of {}",
                        self.position, self.size
                    ),
                ));
            }
            read
        };
        self.position += n as u64;
        self.progress.add(n as u64);
        Ok(n)
    }
}

fn clamp(len: usize, left: u64) -> usize {
    usize::try_from(left).map_or(len, |left| len.min(left))
}

/// The wire stream of a volume: its bytes, zstd-compressed, with zstd's content checksum
/// (a stream resumed after an interruption is checked end to end by the decoder).
pub fn encode(volume: VolumeReader) -> Result<impl Read + Send, ImportError> {
    let encoder_error = |source| {
        ImportError::ReadSource(std::io::Error::other(format!(
            "starting the zstd encoder: {source}"
        )))
    };
    let mut encoder =
        zstd::stream::read::Encoder::new(volume, WIRE_ZSTD_LEVEL).map_err(encoder_error)?;
    encoder.include_checksum(true).map_err(encoder_error)?;
    Ok(encoder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, Write};

    #[test]
    fn holes_read_as_zeros_and_data_as_written() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let size = 8 << 20;
        file.as_file().set_len(size).unwrap();
        file.seek(io::SeekFrom::Start(3 << 20)).unwrap();
        file.write_all(&[0xab; 5000]).unwrap();
        file.seek(io::SeekFrom::Start(size - 1)).unwrap();
        file.write_all(&[7]).unwrap();
        file.flush().unwrap();

        let progress = Progress::new();
        let mut reader = VolumeReader::open(file.path(), progress.clone()).unwrap();
        assert_eq!(reader.size(), size);
        // The hole before the first data is skipped, not read (where the file system tells
        // holes at all; one that does not reports everything as data).
        let first = reader.next_extent(0).unwrap();
        if first != (0..size) {
            assert!(first.start > 0 && first.start <= 3 << 20, "{first:?}");
            assert!(first.end < size, "{first:?}");
        }
        let mut copy = Vec::new();
        reader.read_to_end(&mut copy).unwrap();
        assert_eq!(copy, std::fs::read(file.path()).unwrap());
        assert_eq!(progress.transferred(), size);

        let reader = VolumeReader::open(file.path(), Progress::new()).unwrap();
        let mut wire = Vec::new();
        encode(reader).unwrap().read_to_end(&mut wire).unwrap();
        assert!(
            wire.len() < 64 << 10,
            "8 MiB, mostly holes, took {} bytes",
            wire.len()
        );
        assert_eq!(zstd::decode_all(&wire[..]).unwrap(), copy);
        // A restarted source resumes by sending the stream again: it must be the same bytes.
        let again = VolumeReader::open(file.path(), Progress::new()).unwrap();
        let mut second = Vec::new();
        encode(again).unwrap().read_to_end(&mut second).unwrap();
        assert_eq!(second, wire);
    }
}
