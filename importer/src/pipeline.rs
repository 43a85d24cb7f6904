//! One import, phase by phase: open the source, identify what it holds, size the target,
//! convert, commit. Each phase is one function; each failure is an [`ImportError`].

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use crate::checksum::{Checksum, ChecksumTee};
use crate::decompress::{Decompressed, decompress, decompress_declared};
use crate::error::ImportError;
use crate::format::detect::{Compression, detect_format};
use crate::format::qcow2::sequential::HoldLimits;
use crate::format::raw::Tail;
use crate::format::reader::{self, Input};
use crate::format::{DiskFormat, raw, vmdk};
use crate::progress::{CountingReader, Progress};
use crate::sink::{SparseSink, Target};
use crate::source::http::HttpOptions;
use crate::source::registry::{self, RegistryOptions};
use crate::source::s3::{self, S3Options};
use crate::source::{OpenedSource, file, http};
use crate::write_pool::WritePool;

/// What the source holds, as CDI's `contentType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentType {
    /// A disk image, converted to raw.
    #[default]
    Kubevirt,
    /// A tar archive, extracted into a directory.
    Archive,
    /// A volume copied verbatim by a host-assisted clone: the clone source's transport
    /// compression (zstd) is removed and the bytes are written as they are. Nothing inside is
    /// probed, so a disk whose bytes look like an image, a compressed file or a VHD footer is
    /// copied unchanged.
    Clone,
}

impl std::str::FromStr for ContentType {
    type Err = ImportError;

    fn from_str(text: &str) -> Result<Self, ImportError> {
        match text {
            "kubevirt" | "" => Ok(Self::Kubevirt),
            "archive" => Ok(Self::Archive),
            other => Err(ImportError::InvalidSource(
                other.into(),
                "content type must be kubevirt or archive".into(),
            )),
        }
    }
}

/// What to import and where.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// A local path, or an `http://` / `https://` URL.
    pub source: String,
    /// A file to create (or replace) or a block device; for an archive, a directory.
    pub target: PathBuf,
    pub content_type: ContentType,
    /// The size the target should have; never less than the image's virtual size.
    pub size: Option<u64>,
    /// Expected checksum of the bytes as transferred.
    pub checksum: Option<Checksum>,
    pub http: HttpOptions,
    /// For registry sources: the platform (`os/arch[/variant]`) to pick from a multi-arch
    /// index; this machine's by default.
    pub platform: Option<String>,
    /// Treat http(s) URLs as S3 objects (signed with the credentials); `s3://` always is.
    pub s3: Option<S3Options>,
    pub preallocate: bool,
    pub hold: HoldLimits,
    pub progress: Arc<Progress>,
}

impl ImportRequest {
    pub fn new(source: impl Into<String>, target: impl Into<PathBuf>) -> Self {
        Self {
            source: source.into(),
            target: target.into(),
            content_type: ContentType::Kubevirt,
            size: None,
            checksum: None,
            http: HttpOptions::default(),
            platform: None,
            s3: None,
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
    import_from(request, source).await
}

/// Runs an import from a source the caller opened (an upload body, for one); `request.source`
/// only names it in messages.
pub async fn import_from(
    request: ImportRequest,
    source: OpenedSource,
) -> Result<ImportOutcome, ImportError> {
    crate::blocking::run(move || convert(&request, source)).await
}

async fn open_source(request: &ImportRequest) -> Result<OpenedSource, ImportError> {
    let source = &request.source;
    let is_http = source.starts_with("http://") || source.starts_with("https://");
    if source.starts_with("s3://") || (is_http && request.s3.is_some()) {
        return s3::open(
            source,
            &request.http,
            &request.s3.clone().unwrap_or_default(),
        )
        .await;
    }
    if is_http {
        return http::open(source, &request.http).await;
    }
    if source.starts_with("docker://") || source.starts_with("oci-archive://") {
        let options = RegistryOptions {
            credentials: request.http.credentials.clone(),
            cert_dir: request.http.cert_dir.clone(),
            insecure: request.http.insecure_tls,
            platform: request.platform.clone(),
        };
        return registry::open(source, &options).await;
    }
    if let Some((scheme, _)) = source.split_once("://") {
        return Err(ImportError::InvalidSource(
            source.clone(),
            format!(
                "unsupported scheme {scheme:?} (use a local path, http://, https://, s3://, docker:// or oci-archive://)"
            ),
        ));
    }
    let path = PathBuf::from(source.strip_prefix("file://").unwrap_or(source));
    crate::blocking::run(move || file::open(&follow_vmdk_descriptor(path)?)).await
}

/// A local monolithicFlat VMDK is a text descriptor naming a raw extent file beside it:
/// import that file. Anything else is returned as it is.
fn follow_vmdk_descriptor(path: PathBuf) -> Result<PathBuf, ImportError> {
    let mut head = [0u8; 4096];
    let n = std::fs::File::open(&path)
        .and_then(|mut f| crate::stream::read_full(&mut f, &mut head))
        .map_err(|source| ImportError::OpenSource {
            path: path.clone(),
            source,
        })?;
    Ok(match vmdk::flat_extent(&head[..n]) {
        Some(extent) => {
            let flat = path
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .join(extent);
            tracing::info!(descriptor = %path.display(), extent = %flat.display(), "following a monolithicFlat VMDK descriptor");
            flat
        }
        None => path,
    })
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
    if request.content_type == ContentType::Clone {
        let Decompressed { reader, layers } = decompress_declared(teed, Compression::Zstd)?;
        return convert_raw(request, reader, layers, None, Tail::Data);
    }
    let Decompressed { reader, layers } = decompress(teed)?;
    let format = detect_format(reader.head());
    tracing::info!(%format, compressions = ?layers, "identified image");
    if request.content_type == ContentType::Archive {
        return extract_archive(request, reader, format, layers);
    }
    if matches!(format, DiskFormat::Raw | DiskFormat::Iso) {
        return convert_raw(request, reader, layers, source_size, Tail::MayBeVhdFooter);
    }
    // Random access reads only what the disk uses, but a checksum covers every byte and a
    // compressed stream has no offsets: those read the stream in order.
    let random = random_access.filter(|_| {
        layers.is_empty()
            && request.checksum.is_none()
            && !reader::needs_stream(format, reader.head())
    });
    let head = reader.head().to_vec();
    match &random {
        Some(source) => {
            // The stream is not read: its connection is let go before the ranged reads.
            drop(reader);
            let input = Input::Random {
                source: source.as_ref(),
                progress: &request.progress,
            };
            convert_image(request, format, &head, input, layers, true)
        }
        None => {
            let mut reader = reader;
            let input = Input::Stream {
                reader: &mut reader,
                hold: &request.hold,
            };
            convert_image(request, format, &head, input, layers, false)
        }
    }
}

/// An image with a format reader: its tables read, the target sized, its data written.
fn convert_image(
    request: &ImportRequest,
    format: DiskFormat,
    head: &[u8],
    input: Input<'_>,
    layers: Vec<Compression>,
    random_access: bool,
) -> Result<ImportOutcome, ImportError> {
    let image = reader::open(format, head, input)?;
    let virtual_size = image.virtual_size();
    let target_size = write_image(request, virtual_size, |pool| image.convert(pool))?;
    Ok(outcome(
        request,
        format,
        layers,
        virtual_size,
        target_size,
        random_access,
    ))
}

/// contentType archive: the (decompressed) stream must be a tar, extracted into the target
/// directory.
fn extract_archive(
    request: &ImportRequest,
    reader: impl Read,
    format: DiskFormat,
    layers: Vec<Compression>,
) -> Result<ImportOutcome, ImportError> {
    if format != DiskFormat::Tar {
        return Err(ImportError::InvalidSource(
            request.source.clone(),
            format!("content type archive needs a tar archive, this is a {format} image"),
        ));
    }
    let extracted = crate::archive::extract(reader, &request.target)?;
    Ok(outcome(
        request,
        format,
        layers,
        extracted.bytes,
        extracted.bytes,
        false,
    ))
}

/// Raw data (and ISO images, which are raw): the stream is the disk. Its size may only be
/// known at the end, where a fixed VHD's footer is also found and removed.
fn convert_raw(
    request: &ImportRequest,
    mut reader: impl Read,
    layers: Vec<Compression>,
    source_size: Option<u64>,
    tail: Tail,
) -> Result<ImportOutcome, ImportError> {
    let known = if layers.is_empty() {
        source_size.map(sector_aligned)
    } else {
        None
    };
    let plan = plan_target(request, known)?;
    let block_device = matches!(plan.target, Target::BlockDevice { .. });
    let sink = Arc::new(SparseSink::create(
        plan.target,
        plan.size,
        plan.limit,
        request.preallocate,
    )?);
    let pool = WritePool::new(sink.clone());
    let written = raw::convert(&mut reader, &pool, tail);
    pool.finish()?;
    let written = written?;
    let (format, image_size) = match &written.vhd_footer {
        Some(footer) => (DiskFormat::Vhd, footer.virtual_size),
        None => (DiskFormat::Raw, sector_aligned(written.length)),
    };
    let target_size = match plan.size {
        Some(size) if block_device => size,
        _ => request.size.unwrap_or(image_size),
    };
    commit(sink, target_size)?;
    Ok(outcome(
        request,
        format,
        layers,
        image_size,
        target_size,
        false,
    ))
}

/// Sizes and opens the target for an image of known virtual size, runs `convert` against a
/// write pool on it, and commits the target if everything succeeded. Returns the final size.
fn write_image(
    request: &ImportRequest,
    virtual_size: u64,
    convert: impl FnOnce(&WritePool) -> Result<(), ImportError>,
) -> Result<u64, ImportError> {
    let plan = plan_target(request, Some(virtual_size))?;
    let target_size = plan.size.expect("virtual size is known");
    let sink = Arc::new(SparseSink::create(
        plan.target,
        plan.size,
        None,
        request.preallocate,
    )?);
    let pool = WritePool::new(sink.clone());
    let converted = convert(&pool);
    pool.finish()?;
    converted?;
    commit(sink, target_size)?;
    Ok(target_size)
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
