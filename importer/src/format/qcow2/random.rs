//! qcow2 from a random-access source: L1, then the L2 tables, then data clusters in
//! physical order with coalesced reads. L2 tables are taken in groups of bounded size, so
//! memory does not grow with the image.

use std::sync::Arc;

use super::Qcow2Header;
use super::table;
use crate::error::ImportError;
use crate::format::extent::{Extent, check_within, clamp_to_source, for_each_piece, read_extents};
use crate::progress::Progress;
use crate::source::RandomAccess;
use crate::write_pool::WritePool;
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
        read_extents(source, &extents, pool, progress)?;
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
