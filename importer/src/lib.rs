//! Ferrovirt's streaming disk-image import pipeline:
//!
//! ```text
//! source ──► checksum tee ──► decompress (auto, nested) ──► format reader ──► sparse sink
//! ```
//!
//! One pass, no scratch space, memory bounded by buffer sizes. [`import`] runs an import
//! described by an [`ImportRequest`]; the modules are its stages.

pub mod archive;
mod blocking;
pub mod checksum;
pub mod clone_stream;
pub mod decompress;
pub mod error;
pub mod format;
pub mod fuzzing;
pub mod metrics;
pub mod pipeline;
pub mod progress;
pub mod sink;
pub mod source;
pub mod stream;
pub mod write_pool;

pub use checksum::Checksum;
pub use error::{ImportError, error_chain};
pub use pipeline::{ContentType, ImportOutcome, ImportRequest, import};
pub use source::http::HttpOptions;
