//! Where an image's data lives, format by format reduced to one shape: extents, each a run of
//! image-file bytes that belongs at a virtual offset. Format readers build extents from their
//! tables; this module moves them to the write pool, by offset with coalesced reads when the
//! source allows it, or in file order from a stream.

use std::io::{self, Read};
use std::ops::Range;
use std::sync::Arc;

use super::cluster::BlockCodec;
use crate::error::ImportError;
use crate::progress::{CountingReader, Progress};
use crate::source::RandomAccess;
use crate::write_pool::{BATCH_BYTES, Batch, Block, BlockKind, WritePool};

/// Gaps up to this size between wanted ranges are read through rather than skipped with a
/// new request.
const COALESCE_GAP: u64 = 1 << 20;

/// The largest uncompressed extent handed to the write pool.
pub const MAX_DATA_EXTENT: u64 = 1 << 20;

/// A run of image-file bytes that holds data for the virtual range starting at `virt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub host: u64,
    pub host_len: u64,
    pub virt: u64,
    pub kind: ExtentKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtentKind {
    /// Uncompressed: `host_len` bytes go to the target as they are.
    Data,
    /// One compressed block that decodes to `decoded_len` bytes, of which the first
    /// `out_len` belong to the image (the last block may run past the virtual size).
    Compressed {
        codec: BlockCodec,
        decoded_len: u64,
        out_len: u64,
    },
}

impl Extent {
    pub fn host_end(&self) -> u64 {
        self.host + self.host_len
    }
}

/// What a format reader found: the image's virtual size and where its data is.
#[derive(Debug, Clone, Default)]
pub struct ImageMap {
    pub virtual_size: u64,
    /// Sorted by host offset.
    pub extents: Vec<Extent>,
}

impl ImageMap {
    /// Sorts the extents by host offset and splits uncompressed ones into pieces of at most
    /// [`MAX_DATA_EXTENT`], so that a format's large blocks (VHDX allows 256 MiB) never need
    /// more than a pool buffer.
    pub fn new(virtual_size: u64, extents: Vec<Extent>) -> Self {
        let mut split = Vec::with_capacity(extents.len());
        for extent in extents {
            match extent.kind {
                ExtentKind::Data if extent.host_len > MAX_DATA_EXTENT => {
                    let mut done = 0;
                    while done < extent.host_len {
                        let len = MAX_DATA_EXTENT.min(extent.host_len - done);
                        split.push(Extent {
                            host: extent.host + done,
                            host_len: len,
                            virt: extent.virt + done,
                            ..extent
                        });
                        done += len;
                    }
                }
                _ => split.push(extent),
            }
        }
        split.sort_unstable_by_key(|e| (e.host, e.virt));
        Self {
            virtual_size,
            extents: split,
        }
    }
}

/// The write-pool block for an extent whose bytes sit at `range` of a batch buffer.
pub(crate) fn block_for(extent: &Extent, range: Range<usize>) -> Block {
    let kind = match extent.kind {
        ExtentKind::Data => BlockKind::Data,
        ExtentKind::Compressed {
            codec,
            decoded_len,
            out_len,
        } => BlockKind::Compressed {
            codec,
            block_size: decoded_len as usize,
            len: out_len as usize,
        },
    };
    Block {
        range,
        offset: extent.virt,
        kind,
    }
}

/// Reads of image metadata while a format maps its tables.
pub trait MetaRead {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ImportError>;
    /// The image file's size, when known.
    fn size(&self) -> Option<u64>;
}

/// Metadata from a random-access source.
pub struct RandomMeta<'a> {
    pub source: &'a dyn RandomAccess,
    pub progress: &'a Progress,
}

impl MetaRead for RandomMeta<'_> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ImportError> {
        let end = offset.saturating_add(buf.len() as u64);
        if end > self.source.size() {
            return Err(ImportError::Truncated(format!(
                "metadata at {offset:#x}..{end:#x} lies beyond the end of the image ({} bytes)",
                self.source.size()
            )));
        }
        self.source
            .read_exact_at(offset, buf)
            .map_err(ImportError::from_read)?;
        self.progress.add(buf.len() as u64);
        Ok(())
    }

    fn size(&self) -> Option<u64> {
        Some(self.source.size())
    }
}

/// A stream whose leading bytes are kept as they are read, so that a format can read its
/// metadata in any order as long as it sits within `limit` bytes of the start (it does in
/// images written by qemu, VirtualBox, Hyper-V and VMware). The data behind it is then
/// streamed by [`StreamPrefix::copy_extents`].
pub struct StreamPrefix<'r> {
    reader: &'r mut dyn Read,
    kept: Vec<u8>,
    limit: usize,
}

impl<'r> StreamPrefix<'r> {
    pub fn new(reader: &'r mut dyn Read, limit: usize) -> Self {
        Self {
            reader,
            kept: Vec::new(),
            limit,
        }
    }

    /// Reads the stream up to `end`; false if that is past the limit of what may be kept.
    fn fill_to(&mut self, end: u64) -> Result<bool, ImportError> {
        if end > self.limit as u64 {
            return Ok(false);
        }
        let (have, end) = (self.kept.len(), end as usize);
        if end > have {
            self.kept.resize(end, 0);
            let n = crate::stream::read_full(self.reader, &mut self.kept[have..])
                .map_err(ImportError::from_read)?;
            self.kept.truncate(have + n);
        }
        Ok(true)
    }

    /// Streams the extents (sorted by host offset) to the pool, then drains the stream so
    /// that every byte passes the checksum.
    pub fn copy_extents(self, extents: &[Extent], pool: &WritePool) -> Result<(), ImportError> {
        let StreamPrefix { reader, kept, .. } = self;
        let kept_len = kept.len() as u64;
        let mut batch = BatchBuilder::new(pool);
        let mut pos = kept_len;
        for extent in extents {
            batch.add(extent, |out| {
                if extent.host < kept_len {
                    out.extend_from_slice(&kept[extent.host as usize..kept_len.min(extent.host_end()) as usize]);
                }
                let from = extent.host.max(kept_len);
                if from >= extent.host_end() {
                    return Ok(());
                }
                if from < pos {
                    return Err(ImportError::InvalidImage(format!(
                        "data for virtual offset {:#x} comes before its table in the stream; import it from a file or an HTTP server with Range support",
                        extent.virt
                    )));
                }
                skip(reader, from - pos)?;
                let want = extent.host_end() - from;
                let got = reader.take(want).read_to_end(out).map_err(ImportError::from_read)? as u64;
                pos = from + got;
                if got < want && extent.kind == ExtentKind::Data {
                    return Err(ImportError::Truncated(format!(
                        "data for virtual offset {:#x} at host offset {from:#x} lies beyond the end of the image",
                        extent.virt
                    )));
                }
                Ok(())
            })?;
        }
        batch.flush()?;
        io::copy(reader, &mut io::sink()).map_err(ImportError::from_read)?;
        Ok(())
    }
}

impl MetaRead for StreamPrefix<'_> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ImportError> {
        let end = offset.saturating_add(buf.len() as u64);
        if !self.fill_to(end)? {
            return Err(ImportError::InvalidImage(format!(
                "metadata at {offset:#x} lies more than {} MiB into a stream; import it from a file or an HTTP server with Range support",
                self.limit >> 20
            )));
        }
        let kept = self
            .kept
            .get(offset as usize..end as usize)
            .ok_or_else(|| {
                ImportError::Truncated(format!(
                    "metadata at {offset:#x}..{end:#x} lies beyond the end of the image"
                ))
            })?;
        buf.copy_from_slice(kept);
        Ok(())
    }

    fn size(&self) -> Option<u64> {
        None
    }
}
/// Compressed clusters may claim sectors past the end of the file (qemu reads those as
/// zeros); data clusters there mean the image is truncated.
pub(crate) fn clamp_to_source(extents: &mut [Extent], size: u64) -> Result<(), ImportError> {
    for extent in extents.iter_mut().filter(|e| e.host_end() > size) {
        match extent.kind {
            ExtentKind::Compressed { .. } if extent.host < size => {
                extent.host_len = size - extent.host
            }
            _ => {
                return Err(ImportError::Truncated(format!(
                    "data for virtual offset {:#x} is at host offset {:#x}, beyond the end of the image ({size} bytes)",
                    extent.virt, extent.host
                )));
            }
        }
    }
    Ok(())
}

pub(crate) fn check_within(
    pieces: &[(u64, u64)],
    size: u64,
    what: &str,
) -> Result<(), ImportError> {
    match pieces.iter().find(|(offset, len)| offset + len > size) {
        Some((offset, _)) => Err(ImportError::Truncated(format!(
            "{what} at host offset {offset:#x} lies beyond the end of the image ({size} bytes)"
        ))),
        None => Ok(()),
    }
}

/// Streams sorted `(offset, len)` pieces, one coalesced range request per run of nearby
/// pieces (a piece overlapping the one before it gets a request of its own); `visit` reads
/// exactly one piece's bytes from the stream it is given.
pub(crate) fn for_each_piece(
    source: &dyn RandomAccess,
    pieces: &[(u64, u64)],
    progress: &Arc<Progress>,
    mut visit: impl FnMut(&mut dyn Read) -> io::Result<()>,
) -> Result<(), ImportError> {
    let mut i = 0;
    while i < pieces.len() {
        let end = run_end(pieces, i);
        let (start, _) = pieces[i];
        let mut stream = CountingReader::new(
            source
                .read_range(start, end.1 - start)
                .map_err(ImportError::from_read)?,
            progress.clone(),
        );
        let mut pos = start;
        for &(offset, len) in &pieces[i..end.0] {
            if offset < pos {
                // A piece the run has already passed (two table entries naming one cluster,
                // which qemu reads too): read it again on its own.
                let mut again = source
                    .read_range(offset, len)
                    .map_err(ImportError::from_read)?;
                visit(&mut again).map_err(ImportError::from_read)?;
                continue;
            }
            skip(&mut stream, offset - pos)?;
            visit(&mut stream).map_err(ImportError::from_read)?;
            pos = offset + len;
        }
        i = end.0;
    }
    Ok(())
}

/// The index after the run of pieces starting at `i` whose gaps are at most
/// [`COALESCE_GAP`], and the byte offset where that run ends.
fn run_end(pieces: &[(u64, u64)], i: usize) -> (usize, u64) {
    let mut end = pieces[i].0 + pieces[i].1;
    let mut j = i + 1;
    while j < pieces.len() && pieces[j].0 <= end + COALESCE_GAP {
        end = end.max(pieces[j].0 + pieces[j].1);
        j += 1;
    }
    (j, end)
}

pub(crate) fn skip(stream: &mut dyn Read, len: u64) -> Result<(), ImportError> {
    if len > 0 {
        let skipped =
            io::copy(&mut stream.take(len), &mut io::sink()).map_err(ImportError::from_read)?;
        if skipped < len {
            return Err(ImportError::Truncated(
                "the source ended inside a requested range".into(),
            ));
        }
    }
    Ok(())
}

/// Reads the extents (sorted by host offset; compressed ones may overlap) into batches.
pub(crate) fn read_extents(
    source: &dyn RandomAccess,
    extents: &[Extent],
    pool: &WritePool,
    progress: &Arc<Progress>,
) -> Result<(), ImportError> {
    let pieces: Vec<(u64, u64)> = extents.iter().map(|e| (e.host, e.host_len)).collect();
    // Packed compressed clusters share sectors, so a batch can start inside the bytes of the
    // one before; those are kept rather than fetched again with a new request.
    let max_overlap = extents.iter().map(|e| e.host_len).max().unwrap_or(0) as usize;
    let open = |start: u64, end: u64| -> Result<Box<dyn Read + Send + '_>, ImportError> {
        let stream = source
            .read_range(start, end - start)
            .map_err(ImportError::from_read)?;
        Ok(Box::new(CountingReader::new(stream, progress.clone())))
    };
    let mut i = 0;
    while i < extents.len() {
        let (run_stop, run_end) = run_end(&pieces, i);
        let mut pos = extents[i].host;
        let mut stream = open(pos, run_end)?;
        let mut tail: Vec<u8> = Vec::new();
        while i < run_stop {
            let (batch_stop, batch_end) = batch_end(extents, i, run_stop);
            let batch_start = extents[i].host;
            let mut buf = pool.buffer()?;
            buf.clear();
            if batch_start < pos {
                let back = (pos - batch_start) as usize;
                if back <= tail.len() {
                    buf.extend_from_slice(&tail[tail.len() - back..]);
                } else {
                    stream = open(batch_start, run_end)?;
                    pos = batch_start;
                }
            }
            skip(&mut stream, batch_start.saturating_sub(pos))?;
            let from = pos.max(batch_start);
            let kept = buf.len();
            buf.resize(kept + (batch_end - from) as usize, 0);
            stream
                .read_exact(&mut buf[kept..])
                .map_err(ImportError::from_read)?;
            pos = batch_end;
            tail.clear();
            tail.extend_from_slice(&buf[buf.len().saturating_sub(max_overlap)..]);
            let blocks = extents[i..batch_stop]
                .iter()
                .map(|e| {
                    let at = (e.host - batch_start) as usize;
                    block_for(e, at..at + e.host_len as usize)
                })
                .collect();
            pool.submit(Batch { buf, blocks })?;
            i = batch_stop;
        }
    }
    Ok(())
}

/// The extents from `i` that fit in one batch buffer, and where their bytes end.
fn batch_end(extents: &[Extent], i: usize, stop: usize) -> (usize, u64) {
    let start = extents[i].host;
    let mut end = extents[i].host_end();
    let mut j = i + 1;
    while j < stop && extents[j].host_end().max(end) - start <= BATCH_BYTES as u64 {
        end = end.max(extents[j].host_end());
        j += 1;
    }
    (j, end)
}

/// Gathers extents into pool buffers and submits them when full.
pub(crate) struct BatchBuilder<'a> {
    pool: &'a WritePool,
    buf: Option<Vec<u8>>,
    blocks: Vec<Block>,
}

impl<'a> BatchBuilder<'a> {
    pub(crate) fn new(pool: &'a WritePool) -> Self {
        Self {
            pool,
            buf: None,
            blocks: Vec::new(),
        }
    }

    pub(crate) fn add(
        &mut self,
        extent: &Extent,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        let len = extent.host_len as usize;
        if self
            .buf
            .as_ref()
            .is_some_and(|buf| buf.len() + len > BATCH_BYTES)
        {
            self.flush()?;
        }
        let buf = match &mut self.buf {
            Some(buf) => buf,
            None => {
                let mut fresh = self.pool.buffer()?;
                fresh.clear();
                self.buf.insert(fresh)
            }
        };
        let start = buf.len();
        fill(buf)?;
        self.blocks.push(block_for(extent, start..buf.len()));
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> Result<(), ImportError> {
        if let Some(buf) = self.buf.take() {
            self.pool.submit(Batch {
                buf,
                blocks: std::mem::take(&mut self.blocks),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_split_to_fit_a_pool_buffer() {
        let block = Extent {
            host: 8 << 20,
            host_len: 32 << 20,
            virt: 0,
            kind: ExtentKind::Data,
        };
        let map = ImageMap::new(32 << 20, vec![block]);
        assert_eq!(map.extents.len(), 32);
        assert!(
            map.extents
                .iter()
                .all(|e| e.host_len == MAX_DATA_EXTENT && e.host - e.virt == 8 << 20)
        );
        assert_eq!(map.extents.last().unwrap().virt, 31 << 20);
    }
}
