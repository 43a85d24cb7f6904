//! The errors of the hostpath store. Each variant corresponds to one CSI error code, so the
//! driver maps them without reading messages.

use std::path::PathBuf;

/// A failed storage operation, with a message a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request itself is malformed (bad size range, unknown pool, unsupported capability).
    #[error("{0}")]
    InvalidArgument(String),
    /// The named volume, snapshot or path does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A volume or snapshot of that name exists with different properties.
    #[error("{0}")]
    AlreadyExists(String),
    /// The requested size cannot be satisfied within the given limits.
    #[error("{0}")]
    OutOfRange(String),
    /// The pool does not have the space: `requested` is what the volume's image needs (for a
    /// filesystem volume, more than its size), `available` what the pool can still give.
    #[error("storage pool {pool:?} has {available} bytes free; the image needs {requested} bytes")]
    ResourceExhausted {
        pool: String,
        requested: u64,
        available: u64,
    },
    /// The volume is in a state that does not allow the operation (for example, published).
    #[error("{0}")]
    FailedPrecondition(String),
    /// A system call on a path failed.
    #[error("{context} {path}: {source}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An external program (losetup, mkfs.ext4, resize2fs) failed.
    #[error("{program} failed: {detail}")]
    Command { program: String, detail: String },
    /// The persisted state could not be read or written.
    #[error("state file {path}: {detail}")]
    State { path: PathBuf, detail: String },
}

/// The result of a storage operation.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An I/O error on `path` while doing `context` ("create", "read", ...).
    pub fn io(context: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            context,
            path: path.into(),
            source,
        }
    }
}

/// Adds a path and a verb to an I/O result.
pub(crate) trait IoContext<T> {
    fn at(self, context: &'static str, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, context: &'static str, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| Error::io(context, path, source))
    }
}

impl<T> IoContext<T> for rustix::io::Result<T> {
    fn at(self, context: &'static str, path: &std::path::Path) -> Result<T> {
        self.map_err(|errno| Error::io(context, path, errno.into()))
    }
}
