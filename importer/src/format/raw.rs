//! Raw images: the stream is the disk, written in pool-sized batches at increasing offsets.
//! A fixed VHD is raw data followed by a 512-byte footer, and can only be recognised at the
//! end of the stream: the last bytes are held back until it is clear whether they are one.

use std::io::Read;

use super::vhd::{FOOTER_LEN, Footer};
use crate::error::ImportError;
use crate::stream::read_full;
use crate::write_pool::{BATCH_BYTES, Batch, Block, BlockKind, WritePool};

/// What the stream held.
pub struct RawOutcome {
    /// Bytes of disk data, excluding a VHD footer.
    pub length: u64,
    /// The footer of a fixed VHD, when the stream ended with one.
    pub vhd_footer: Option<Footer>,
}

/// What the end of a raw stream may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// An image file: it may be a fixed VHD, whose footer is recognised and removed.
    MayBeVhdFooter,
    /// A volume's bytes (a clone): all of it is data.
    Data,
}

/// Copies the whole stream to the target.
pub fn convert(
    reader: &mut dyn Read,
    pool: &WritePool,
    tail: Tail,
) -> Result<RawOutcome, ImportError> {
    let mut offset = 0u64;
    // The batch read last, not yet submitted: it holds the end of the stream.
    let mut pending: Option<(u64, Vec<u8>)> = None;
    loop {
        let mut buf = pool.buffer()?;
        buf.resize(BATCH_BYTES, 0);
        let n = read_full(reader, &mut buf).map_err(ImportError::from_read)?;
        buf.truncate(n);
        if n == 0 {
            break;
        }
        if n >= FOOTER_LEN || pending.is_none() {
            if let Some((at, data)) = pending.replace((offset, buf)) {
                submit(pool, at, data)?;
            }
        } else if let Some((_, last)) = pending.as_mut() {
            // A short final read: keep the stream's tail in one piece.
            last.extend_from_slice(&buf);
        }
        offset += n as u64;
        if n < BATCH_BYTES {
            break;
        }
    }
    let Some((at, mut last)) = pending else {
        return Ok(RawOutcome {
            length: 0,
            vhd_footer: None,
        });
    };
    let vhd_footer = (tail == Tail::MayBeVhdFooter)
        .then_some(&last)
        .and_then(|last| {
            last.len()
                .checked_sub(FOOTER_LEN)
                .map(|start| &last[start..])
        })
        .and_then(Footer::parse)
        .filter(Footer::is_fixed);
    if vhd_footer.is_some() {
        last.truncate(last.len() - FOOTER_LEN);
        offset -= FOOTER_LEN as u64;
    }
    submit(pool, at, last)?;
    Ok(RawOutcome {
        length: offset,
        vhd_footer,
    })
}

fn submit(pool: &WritePool, offset: u64, buf: Vec<u8>) -> Result<(), ImportError> {
    let block = Block {
        range: 0..buf.len(),
        offset,
        kind: BlockKind::Data,
    };
    pool.submit(Batch {
        buf,
        blocks: vec![block],
    })
}
