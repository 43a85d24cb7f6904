//! qcow2 to raw while streaming, with no scratch space. Two ways in:
//! - [`random`]: the source can be read at any offset, so the tables are read first and then
//!   the clusters that hold data, in the order they sit in the file, with coalesced reads;
//! - [`sequential`]: the source is a stream (compressed, or a server without Range), so the
//!   image is decoded in file order and only clusters met before their table are held back.

mod cluster;
mod header;
pub mod random;
pub mod sequential;
mod table;

pub use cluster::ClusterDecoder;
pub use header::{ClusterCodec, Qcow2Header};
pub use table::{Extent, ExtentKind};

use crate::write_pool::{Block, BlockKind};

/// The write-pool block for an extent whose bytes sit at `range` of a batch buffer.
fn block_for(header: &Qcow2Header, extent: &Extent, range: std::ops::Range<usize>) -> Block {
    let kind = match extent.kind {
        ExtentKind::Data => BlockKind::Data,
        ExtentKind::Compressed { out_len } => BlockKind::Compressed {
            codec: header.codec,
            cluster_size: header.cluster_size() as usize,
            len: out_len as usize,
        },
    };
    Block {
        range,
        offset: extent.virt,
        kind,
    }
}
