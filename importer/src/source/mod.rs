//! Where image bytes come from. Every source can be read front to back; some (a local file,
//! an HTTP server that honours Range) can also be read at any offset, which lets the qcow2
//! reader fetch metadata first and then only the clusters that hold data.

pub mod file;
pub mod http;
pub mod registry;
pub mod s3;
pub mod upload;

use std::io::{self, Read};
use std::sync::Arc;

/// A source readable at arbitrary offsets.
pub trait RandomAccess: Send + Sync {
    /// Total size in bytes.
    fn size(&self) -> u64;

    /// A stream of the bytes in `[offset, offset + len)`; long coalesced runs are read
    /// through one of these rather than with many small requests.
    fn read_range(&self, offset: u64, len: u64) -> io::Result<Box<dyn Read + Send + '_>>;

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read_range(offset, buf.len() as u64)?.read_exact(buf)
    }
}

/// A source opened for an import.
pub struct OpenedSource {
    /// The whole source from its first byte.
    pub stream: Box<dyn Read + Send>,
    /// Size in bytes, when the source tells.
    pub size: Option<u64>,
    /// Offset access, when the source supports it.
    pub random_access: Option<Arc<dyn RandomAccess>>,
}
