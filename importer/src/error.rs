//! The import pipeline's error type: one variant per cause a user can act on, each with a
//! message that names the problem (they end up verbatim in DataVolume conditions).

use std::io;
use std::path::PathBuf;

use crate::format::DiskFormat;

/// Everything that can make an import fail.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("invalid source {0:?}: {1}")]
    InvalidSource(String, String),
    #[error("cannot open source {path}: {source}")]
    OpenSource { path: PathBuf, source: io::Error },
    #[error("cannot resolve host {host:?}: {reason}")]
    Dns { host: String, reason: String },
    #[error("HTTP request to {url} failed: {reason}")]
    Http { url: String, reason: String },
    #[error("HTTP {status} from {url}")]
    HttpStatus { url: String, status: String },
    #[error(
        "connection to {url} dropped after {offset} bytes and the server does not support Range requests, so the transfer cannot resume"
    )]
    CannotResume { url: String, offset: u64 },
    #[error("no bytes from {url} for {idle:?} after {offset} bytes: the server stalled, giving up")]
    Stalled {
        url: String,
        offset: u64,
        idle: std::time::Duration,
    },
    #[error("transfer from {url} failed at byte {offset} after {attempts} attempts: {reason}")]
    Interrupted {
        url: String,
        offset: u64,
        attempts: u32,
        reason: String,
    },
    #[error("{url} changed while it was being downloaded (resumed at byte {offset})")]
    SourceChanged { url: String, offset: u64 },
    #[error("invalid header {0:?}: {1}")]
    InvalidHeader(String, String),
    #[error("invalid TLS configuration: {0}")]
    Tls(String),
    #[error("reading source: {0}")]
    ReadSource(io::Error),
    #[error("{0} images are not supported yet; convert it to raw or qcow2 first")]
    UnsupportedFormat(DiskFormat),
    #[error("decompressing {codec} stream: {source}")]
    Decompress {
        codec: &'static str,
        source: io::Error,
    },
    #[error("invalid image: {0}")]
    InvalidImage(String),
    #[error("invalid {format} image: {reason}")]
    InvalidFormat { format: DiskFormat, reason: String },
    #[error("unsupported {format} image: {reason}")]
    UnsupportedVariant { format: DiskFormat, reason: String },
    #[error("image is truncated: {0}")]
    Truncated(String),
    #[error("archive entry {entry} refused: {reason}")]
    UnsafeArchive { entry: String, reason: String },
    #[error(
        "requested size {requested} is too small for the image's virtual size {virtual_size}: a larger volume is required"
    )]
    RequestedSizeTooSmall { requested: u64, virtual_size: u64 },
    #[error(
        "target too small to contain image: needs {needed} bytes, {available} available on {target}"
    )]
    TargetTooSmall {
        target: PathBuf,
        needed: u64,
        available: u64,
    },
    #[error("image is larger than the requested size {limit}: data found at offset {offset}")]
    ImageLargerThanTarget { limit: u64, offset: u64 },
    #[error("target {path}: {source}")]
    Target { path: PathBuf, source: io::Error },
    #[error("invalid checksum {0:?}: {1}")]
    InvalidChecksum(String, String),
    #[error("checksum mismatch: expected {algorithm}:{expected}, calculated {algorithm}:{actual}")]
    ChecksumMismatch {
        algorithm: &'static str,
        expected: String,
        actual: String,
    },
    #[error("spill file for out-of-order qcow2 clusters: {0}")]
    Spill(io::Error),
    #[error("metrics endpoint {addr}: {source}")]
    Metrics { addr: String, source: io::Error },
    #[error("import was cancelled")]
    Cancelled,
    #[error("registry {reference}: {reason}")]
    Registry { reference: String, reason: String },
}

impl ImportError {
    /// Wraps an I/O error from reading the (possibly decompressed) source stream, unwrapping
    /// pipeline errors that were smuggled through `io::Error` by `Read` adapters.
    pub(crate) fn from_read(err: io::Error) -> Self {
        match err.downcast::<ImportError>() {
            Ok(inner) => inner,
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => {
                ImportError::Truncated("the stream ended early".into())
            }
            Err(err) => ImportError::ReadSource(err),
        }
    }

    /// Carries an `ImportError` through a `std::io::Read` adapter; see [`Self::from_read`].
    pub(crate) fn into_io(self) -> io::Error {
        io::Error::other(self)
    }
}

pub type Result<T, E = ImportError> = std::result::Result<T, E>;

/// An error and every cause under it on one line, so "error sending request" says why. A
/// cause the message already ends with (an error that prints its source) is not repeated.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let full = ImportError::Target {
            path: PathBuf::from("/data/disk.img"),
            source: io::Error::from_raw_os_error(28),
        };
        assert_eq!(
            error_chain(&full),
            "target /data/disk.img: No space left on device (os error 28)"
        );
        let wrapped = io::Error::other(ImportError::Cancelled);
        assert_eq!(error_chain(&wrapped), "import was cancelled");
    }
}
