//! Raw images: the stream is the disk, written in pool-sized batches at increasing offsets.

use std::io::Read;

use crate::error::ImportError;
use crate::stream::read_full;
use crate::write_pool::{BATCH_BYTES, Batch, Block, BlockKind, WritePool};

/// Copies the whole stream to the target; returns its length.
pub fn convert(reader: &mut dyn Read, pool: &WritePool) -> Result<u64, ImportError> {
    let mut offset = 0u64;
    loop {
        let mut buf = pool.buffer()?;
        buf.resize(BATCH_BYTES, 0);
        let n = read_full(reader, &mut buf).map_err(ImportError::from_read)?;
        if n == 0 {
            return Ok(offset);
        }
        buf.truncate(n);
        pool.submit(Batch {
            buf,
            blocks: vec![Block {
                range: 0..n,
                offset,
                kind: BlockKind::Data,
            }],
        })?;
        offset += n as u64;
        if n < BATCH_BYTES {
            return Ok(offset);
        }
    }
}
