//! One import, phase by phase: open the source, identify what it holds, size the target,
//! convert, commit. Each phase is one function; each failure is an [`ImportError`].

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use crate::checksum::{Checksum, ChecksumTee};
use crate::decompress::{Decompressed, decompress};
use crate::error::ImportError;
use crate::format::detect::{Compression, detect_format};
use crate::format::qcow2::sequential::HoldLimits;
use crate::format::qcow2::{self, Qcow2Header};
use crate::format::{DiskFormat, raw};
use crate::progress::{CountingReader, Progress};
use crate::sink::{SparseSink, Target};
use crate::source::http::HttpOptions;
use crate::source::{OpenedSource, RandomAccess, file, http};
use crate::write_pool::WritePool;

/// What to import and where.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// A local path, or an `http://` / `https://` URL.
    pub source: String,
    /// A file to create (or replace) or a block device.
    pub target: PathBuf,
    /// The size the target should have; never less than the image's virtual size.
    pub size: Option<u64>,
    /// Expected checksum of the bytes as transferred.
    pub checksum: Option<Checksum>,
    pub http: HttpOptions,
    pub preallocate: bool,
    pub hold: HoldLimits,
    pub progress: Arc<Progress>,
}

impl ImportRequest {
    pub fn new(source: impl Into<String>, target: impl Into<PathBuf>) -> Self {
        Self {
            source: source.into(),
            target: target.into(),
            size: None,
            checksum: None,
            http: HttpOptions::default(),
            preallocate: false,
            hold: HoldLimits::default(),
            progress: Progress::new(),
        }
    }
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOutcome {
    pub format: DiskFormat,
    /// Compressions removed from the stream, outermost first.
    pub compressions: Vec<Compression>,
    /// The image's virtual size (for raw, the length of the stream).
    pub virtual_size: u64,
    /// The target's final size.
    pub target_size: u64,
    /// Whether qcow2 clusters were fetched by offset rather than streamed.
    pub random_access: bool,
    pub preallocated: bool,
}

/// Runs an import to completion. Blocking work runs off the async threads.
pub async fn import(request: ImportRequest) -> Result<ImportOutcome, ImportError> {
    let source = open_source(&request).await?;
    tokio::task::spawn_blocking(move || convert(&request, source))
        .await
        .map_err(|e| ImportError::ReadSource(std::io::Error::other(e)))?
}

async fn open_source(request: &ImportRequest) -> Result<OpenedSource, ImportError> {
    let source = &request.source;
    if source.starts_with("http://") || source.starts_with("https://") {
        return http::open(source, &request.http).await;
    }
    if let Some((scheme, _)) = source.split_once("://") {
        return Err(ImportError::InvalidSource(
            source.clone(),
            format!("unsupported scheme {scheme:?} (use a local path, http:// or https://)"),
        ));
    }
    let path = PathBuf::from(source.strip_prefix("file://").unwrap_or(source));
    tokio::task::spawn_blocking(move || file::open(&path))
        .await
        .map_err(|e| ImportError::ReadSource(std::io::Error::other(e)))?
}

/// The blocking part: identify, plan, convert, commit.
fn convert(request: &ImportRequest, source: OpenedSource) -> Result<ImportOutcome, ImportError> {
    if let Some(size) = source.size {
        request.progress.set_total(size);
    }
    let OpenedSource {
        stream,
        size: source_size,
        random_access,
    } = source;
    let counted: Box<dyn Read + Send> =
        Box::new(CountingReader::new(stream, request.progress.clone()));
    let teed: Box<dyn Read + Send> = match &request.checksum {
        Some(sum) => Box::new(ChecksumTee::new(counted, sum.clone())),
        None => counted,
    };
    let Decompressed { mut reader, layers } = decompress(teed)?;
    let format = detect_format(reader.head());
    tracing::info!(%format, compressions = ?layers, "identified image");
    let plain = layers.is_empty();

    match format {
        DiskFormat::Raw | DiskFormat::Iso => {
            let known = if plain {
                source_size.map(sector_aligned)
            } else {
                None
            };
            let plan = plan_target(request, known)?;
            let sink = Arc::new(SparseSink::create(
                plan.target,
                plan.size,
                plan.limit,
                request.preallocate,
            )?);
            let pool = WritePool::new(sink.clone());
            let written = raw::convert(&mut reader, &pool);
            pool.finish()?;
            let length = sector_aligned(written?);
            let target_size = plan.size.unwrap_or(length.max(request.size.unwrap_or(0)));
            commit(sink, target_size)?;
            Ok(outcome(request, format, layers, length, target_size, false))
        }
        DiskFormat::Qcow2 => {
            let header = Qcow2Header::parse(reader.head())?;
            if header.dirty {
                tracing::warn!(
                    "qcow2 image was not closed cleanly (dirty bit); its tables are used as they are"
                );
            }
            let plan = plan_target(request, Some(header.virtual_size))?;
            let target_size = plan.size.expect("virtual size is known");
            let sink = Arc::new(SparseSink::create(
                plan.target,
                plan.size,
                None,
                request.preallocate,
            )?);
            let pool = WritePool::new(sink.clone());
            // The checksum covers every byte, so it needs the whole stream read in order.
            let random = random_access.filter(|_| plain && request.checksum.is_none());
            let converted = match &random {
                Some(source) => {
                    drop(reader);
                    qcow2::random::convert(
                        source.as_ref() as &dyn RandomAccess,
                        &header,
                        &pool,
                        &request.progress,
                    )
                }
                None => qcow2::sequential::convert(&mut reader, &header, &pool, &request.hold),
            };
            pool.finish()?;
            converted?;
            commit(sink, target_size)?;
            Ok(outcome(
                request,
                format,
                layers,
                header.virtual_size,
                target_size,
                random.is_some(),
            ))
        }
        other => Err(ImportError::UnsupportedFormat(other)),
    }
}

/// Like qemu, a raw image's size is taken in whole 512-byte sectors: an odd tail is padded
/// with zeros, so the result matches `qemu-img convert -O raw` byte for byte.
fn sector_aligned(len: u64) -> u64 {
    len.div_ceil(512) * 512
}

fn outcome(
    request: &ImportRequest,
    format: DiskFormat,
    compressions: Vec<Compression>,
    virtual_size: u64,
    target_size: u64,
    random_access: bool,
) -> ImportOutcome {
    request.progress.complete();
    ImportOutcome {
        format,
        compressions,
        virtual_size,
        target_size,
        random_access,
        preallocated: request.preallocate,
    }
}

fn commit(sink: Arc<SparseSink>, size: u64) -> Result<(), ImportError> {
    let sink = Arc::into_inner(sink).expect("writers are finished");
    sink.commit(size)
}

/// The target and its size, decided before any byte is written.
struct TargetPlan {
    target: Target,
    /// The final size, when it is known now.
    size: Option<u64>,
    /// A bound on writes when the image's size is not known yet.
    limit: Option<u64>,
}

fn plan_target(
    request: &ImportRequest,
    virtual_size: Option<u64>,
) -> Result<TargetPlan, ImportError> {
    let target = Target::inspect(&request.target)?;
    if let (Some(requested), Some(virtual_size)) = (request.size, virtual_size)
        && requested < virtual_size
    {
        return Err(ImportError::RequestedSizeTooSmall {
            requested,
            virtual_size,
        });
    }
    let size = match &target {
        // A block device keeps its size; it must hold the image and the requested size.
        Target::BlockDevice { size, .. } => Some(*size),
        Target::File { .. } => request.size.or(virtual_size),
    };
    let needed = request.size.max(virtual_size);
    if let Some(needed) = needed
        && needed > target.capacity()
    {
        return Err(ImportError::TargetTooSmall {
            target: target.path().to_path_buf(),
            needed,
            available: target.capacity(),
        });
    }
    let limit = if virtual_size.is_none() { size } else { None };
    Ok(TargetPlan {
        target,
        size,
        limit,
    })
}
