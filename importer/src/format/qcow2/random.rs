//! qcow2 from a random-access source: L1, then the L2 tables, then data clusters in
//! physical order with coalesced reads. L2 tables are taken in groups of bounded size, so
//! memory does not grow with the image.

use std::io::{self, Read};
use std::sync::Arc;

use super::table::{self, Extent, ExtentKind};
use super::{Qcow2Header, block_for};
use crate::error::ImportError;
use crate::progress::{CountingReader, Progress};
use crate::source::RandomAccess;
use crate::write_pool::{BATCH_BYTES, Batch, WritePool};

/// Gaps up to this size between wanted ranges are read through rather than skipped with a
/// new request.
const COALESCE_GAP: u64 = 1 << 20;
/// How much L2 table data one group holds in memory.
const L2_GROUP_BYTES: u64 = 8 << 20;

pub fn convert(
    source: &dyn RandomAccess,
    header: &Qcow2Header,
    pool: &WritePool,
    progress: &Arc<Progress>,
) -> Result<(), ImportError> {
    let size = source.size();
    let mut l1 = vec![0u8; header.l1_bytes() as usize];
    if header.l1_offset + header.l1_bytes() > size {
        return Err(ImportError::Truncated(format!(
            "the L1 table at {:#x} lies beyond the end of the image ({size} bytes)",
            header.l1_offset
        )));
    }
    source
        .read_exact_at(header.l1_offset, &mut l1)
        .map_err(ImportError::from_read)?;
    progress.add(l1.len() as u64);
    let tables = table::l2_tables(header, &l1)?;
    let per_group = (L2_GROUP_BYTES / header.cluster_size()).max(1) as usize;
    for group in tables.chunks(per_group) {
        let extents = group_extents(source, header, group, progress)?;
        read_extents(source, header, &extents, pool, progress)?;
    }
    Ok(())
}

/// Reads a group of L2 tables and returns their extents in file order.
fn group_extents(
    source: &dyn RandomAccess,
    header: &Qcow2Header,
    group: &[(u64, u64)],
    progress: &Arc<Progress>,
) -> Result<Vec<Extent>, ImportError> {
    let cluster = header.cluster_size();
    let mut ordered = group.to_vec();
    ordered.sort_unstable();
    let pieces: Vec<(u64, u64)> = ordered
        .iter()
        .map(|&(offset, _)| (offset, cluster))
        .collect();
    check_within(&pieces, source.size(), "L2 table")?;
    let mut extents = Vec::new();
    let mut table_buf = vec![0u8; cluster as usize];
    let mut index = 0;
    for_each_piece(source, &pieces, progress, |stream| {
        stream.read_exact(&mut table_buf)?;
        let (_, first_virt) = ordered[index];
        index += 1;
        table::l2_extents(header, &table_buf, first_virt, &mut extents)
            .map_err(ImportError::into_io)
    })?;
    clamp_to_source(&mut extents, source.size())?;
    extents.sort_unstable_by_key(|e| (e.host, e.virt));
    Ok(extents)
}

/// Compressed clusters may claim sectors past the end of the file (qemu reads those as
/// zeros); data clusters there mean the image is truncated.
fn clamp_to_source(extents: &mut [Extent], size: u64) -> Result<(), ImportError> {
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

fn check_within(pieces: &[(u64, u64)], size: u64, what: &str) -> Result<(), ImportError> {
    match pieces.iter().find(|(offset, len)| offset + len > size) {
        Some((offset, _)) => Err(ImportError::Truncated(format!(
            "{what} at host offset {offset:#x} lies beyond the end of the image ({size} bytes)"
        ))),
        None => Ok(()),
    }
}

/// Streams sorted, non-overlapping `(offset, len)` pieces, one coalesced range request per
/// run of nearby pieces; `visit` reads exactly one piece's bytes from the stream it is given.
fn for_each_piece(
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

fn skip(stream: &mut dyn Read, len: u64) -> Result<(), ImportError> {
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
fn read_extents(
    source: &dyn RandomAccess,
    header: &Qcow2Header,
    extents: &[Extent],
    pool: &WritePool,
    progress: &Arc<Progress>,
) -> Result<(), ImportError> {
    let pieces: Vec<(u64, u64)> = extents.iter().map(|e| (e.host, e.host_len)).collect();
    let mut i = 0;
    while i < extents.len() {
        let (run_stop, run_end) = run_end(&pieces, i);
        let mut stream: Option<Box<dyn Read + Send + '_>> = None;
        let mut pos = u64::MAX;
        while i < run_stop {
            let (batch_stop, batch_end) = batch_end(extents, i, run_stop);
            let batch_start = extents[i].host;
            if batch_start < pos {
                // Packed compressed clusters can share a sector across a batch boundary.
                let fresh = source
                    .read_range(batch_start, run_end - batch_start)
                    .map_err(ImportError::from_read)?;
                stream = Some(Box::new(CountingReader::new(fresh, progress.clone())));
                pos = batch_start;
            }
            let stream = stream.as_mut().expect("opened above");
            skip(stream, batch_start - pos)?;
            let mut buf = pool.buffer()?;
            buf.resize((batch_end - batch_start) as usize, 0);
            stream
                .read_exact(&mut buf)
                .map_err(ImportError::from_read)?;
            let blocks = extents[i..batch_stop]
                .iter()
                .map(|e| {
                    let at = (e.host - batch_start) as usize;
                    block_for(header, e, at..at + e.host_len as usize)
                })
                .collect();
            pool.submit(Batch { buf, blocks })?;
            pos = batch_end;
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
