//! `ferrovirt importer`: a drop-in for CDI's cdi-importer container. It reads the same
//! environment (IMPORTER_SOURCE, IMPORTER_ENDPOINT, ...), writes `/data/disk.img` or the block
//! device `/dev/cdi-block-volume`, and leaves the same termination message: JSON with
//! "Import Complete" on success, the error text (and exit status 1) on failure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use api::cdi::pod_contract::env::{ImporterEnv, ProcessEnv, SourceCredentials};
use api::cdi::pod_contract::{
    BLOCK_DEVICE_PATH, CompletionMessage, DATA_IMAGE_PATH, FailureReason, TERMINATION_LOG_PATH,
    WorkerFailure,
};
use api::pod_contract::{TERMINATION_LOG_ENV, env, in_pod};
use importer::source::http::{Credentials, parse_header};
use importer::source::s3::S3Options;
use importer::{Checksum, ContentType, ImportError, ImportRequest};

const SECRET_HEADERS_DIR: &str = "/extraheaders";

/// The paths of the pod's volumes; overridable so the contract can be exercised outside a pod.
struct PodPaths {
    data_file: PathBuf,
    block_device: PathBuf,
    termination_log: PathBuf,
    secret_headers: PathBuf,
}

impl PodPaths {
    fn from_env() -> Self {
        let path = |var: &str, default: &str| {
            std::env::var(var)
                .map(PathBuf::from)
                .unwrap_or_else(|_| in_pod(default))
        };
        Self {
            data_file: path("FERROVIRT_IMPORTER_WRITE_PATH", DATA_IMAGE_PATH),
            block_device: path("FERROVIRT_IMPORTER_BLOCK_PATH", BLOCK_DEVICE_PATH),
            termination_log: path(TERMINATION_LOG_ENV, TERMINATION_LOG_PATH),
            secret_headers: path("FERROVIRT_IMPORTER_SECRET_HEADERS_DIR", SECRET_HEADERS_DIR),
        }
    }
}

/// A request the importer refuses before it starts: no retry can change it.
#[derive(Debug, thiserror::Error)]
enum InvalidRequest {
    #[error("Cannot create empty disk with content type archive")]
    BlankArchive,
    #[error("Unknown data source: {0} (supported: http, registry, s3, none)")]
    UnknownSource(String),
}

/// A blank image asked larger than its volume.
#[derive(Debug, thiserror::Error)]
#[error("target too small: {size} bytes requested, {available} available")]
struct BlankTooLarge {
    size: u64,
    available: u64,
}

pub async fn run() -> Result<()> {
    let paths = PodPaths::from_env();
    let result = import(&paths).await;
    let message = match &result {
        Ok(preallocated) => serde_json::to_string(&CompletionMessage {
            scratch_space_required: Some(false),
            preallocation_applied: Some(*preallocated),
            message: Some("Import Complete".to_string()),
            ..Default::default()
        })?,
        Err(err) => WorkerFailure::new(
            failure_reason(err),
            format!("Unable to process data: {err:#}"),
        )
        .termination_message(),
    };
    if let Err(err) = std::fs::write(&paths.termination_log, &message) {
        tracing::warn!(path = %paths.termination_log.display(), %err, "cannot write the termination message");
    }
    result.map(|_| ())
}

/// Runs the import the environment describes; returns whether preallocation was applied.
async fn import(paths: &PodPaths) -> Result<bool> {
    wait_for_ready_file().await?;
    let vars = ImporterEnv::from_env(&ProcessEnv)?;
    let source = vars.source.clone().unwrap_or_else(|| "http".into());
    let content_type: ContentType = vars.content_type.clone().unwrap_or_default().parse()?;
    let preallocate = vars.volume.preallocation;
    let block = paths.block_device.exists();
    let target = if block {
        paths.block_device.clone()
    } else {
        paths.data_file.clone()
    };
    let size = vars.volume.filesystem_image_size(block)?;
    match source.as_str() {
        "http" | "registry" | "s3" => {}
        "none" if content_type == ContentType::Archive => {
            return Err(InvalidRequest::BlankArchive.into());
        }
        "none" => return create_blank(&target, block, size, preallocate),
        other => return Err(InvalidRequest::UnknownSource(other.to_string()).into()),
    }
    let endpoint = vars
        .endpoint
        .context("endpoint \"IMPORTER_ENDPOINT\" is missing or blank")?;
    let mut request = ImportRequest::new(endpoint, target);
    request.content_type = content_type;
    request.size = size.filter(|_| content_type == ContentType::Kubevirt);
    request.preallocate = preallocate;
    request.checksum = vars.checksum.map(|c| c.parse::<Checksum>()).transpose()?;
    // The ConfigMap is mounted in the pod; under the pod root when run by the local node agent.
    request.http.cert_dir = vars.cert_dir.map(|dir| in_pod(&dir));
    request.http.insecure_tls = vars.insecure_tls;
    if source == "s3" {
        request.s3 = Some(S3Options {
            endpoint: env("AWS_ENDPOINT_URL"),
            region: env("AWS_REGION"),
        });
    }
    // CDI names only the architecture; registry images are linux ones.
    request.platform = vars
        .registry_architecture
        .map(|arch| format!("linux/{arch}"));
    request.http.headers = extra_headers(&vars.extra_headers, &paths.secret_headers)?;
    if let Some(SourceCredentials::Values {
        access_key_id,
        secret_key,
    }) = vars.credentials
    {
        request.http.credentials = Some(Credentials {
            username: access_key_id,
            password: secret_key,
        });
    }
    if let Some(addr) = vars.metrics_address {
        let addr = addr
            .parse()
            .with_context(|| format!("IMPORTER_METRICS_ADDR {addr:?}"))?;
        importer::metrics::serve_progress(addr, vars.volume.owner_uid, request.progress.clone())
            .await?;
    }
    let outcome = importer::import(request).await?;
    if let Some(done) = env("IMPORTER_DONE_FILE") {
        std::fs::File::create_new(&done).with_context(|| format!("creating done file {done}"))?;
    }
    Ok(outcome.preallocated)
}

/// Why the import failed, as far as retrying goes: from the typed error, never its text.
fn failure_reason(err: &anyhow::Error) -> FailureReason {
    for cause in err.chain() {
        if cause.is::<InvalidRequest>() {
            return FailureReason::InvalidRequest;
        }
        if cause.is::<BlankTooLarge>() {
            return FailureReason::TargetTooSmall;
        }
        if let Some(import) = cause.downcast_ref::<ImportError>() {
            return import_failure_reason(import);
        }
    }
    FailureReason::Other
}

/// Which import errors no retry can fix: the source is not what the DataVolume says, or the
/// volume is too small for it.
fn import_failure_reason(err: &ImportError) -> FailureReason {
    use ImportError as E;
    match err {
        E::ChecksumMismatch { .. } => FailureReason::ChecksumMismatch,
        E::RequestedSizeTooSmall { .. } | E::TargetTooSmall { .. } => FailureReason::TargetTooSmall,
        E::InvalidSource(..)
        | E::OpenSource { .. }
        | E::Dns { .. }
        | E::Http { .. }
        | E::HttpStatus { .. }
        | E::CannotResume { .. }
        | E::Stalled { .. }
        | E::Interrupted { .. }
        | E::SourceChanged { .. }
        | E::InvalidHeader(..)
        | E::Tls(_)
        | E::ReadSource(_)
        | E::UnsupportedFormat(_)
        | E::Decompress { .. }
        | E::InvalidImage(_)
        | E::InvalidFormat { .. }
        | E::UnsupportedVariant { .. }
        | E::Truncated(_)
        | E::UnsafeArchive { .. }
        | E::ImageLargerThanTarget { .. }
        | E::Target { .. }
        | E::InvalidChecksum(..)
        | E::Spill(_)
        | E::Metrics { .. }
        | E::Cancelled
        | E::Registry { .. } => FailureReason::Other,
    }
}

/// Extra headers: the `IMPORTER_EXTRA_HEADER_<n>` variables, then one header per file of
/// the secret headers directory (hidden entries, as a mounted Secret's `..data`, skipped).
fn extra_headers(from_env: &[String], secret_dir: &Path) -> Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    for value in from_env {
        headers.push(parse_header(value)?);
    }
    let Ok(entries) = std::fs::read_dir(secret_dir) else {
        return Ok(headers);
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        let files_in = if file.is_dir() {
            dir_files(&file)
        } else {
            vec![file]
        };
        for path in files_in {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            headers.push(parse_header(text.trim())?);
        }
    }
    Ok(headers)
}

fn dir_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.') && e.path().is_file())
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// A blank disk (source "none"): a sparse raw image of the requested size, or, on a block
/// device, nothing beyond zeroing.
fn create_blank(target: &Path, block: bool, size: Option<u64>, preallocate: bool) -> Result<bool> {
    let sink_target = importer::sink::Target::inspect(target)?;
    let size = if block {
        Some(sink_target.capacity())
    } else {
        size
    };
    let Some(size) = size else {
        bail!("IMPORTER_IMAGE_SIZE is required for a blank image")
    };
    if size > sink_target.capacity() {
        return Err(BlankTooLarge {
            size,
            available: sink_target.capacity(),
        }
        .into());
    }
    let sink = importer::sink::SparseSink::create(sink_target, Some(size), None, preallocate)?;
    sink.commit(size)?;
    Ok(preallocate)
}

async fn wait_for_ready_file() -> Result<()> {
    let Some(ready) = env("IMPORTER_READY_FILE") else {
        return Ok(());
    };
    for _ in 0..60 {
        if Path::new(&ready).exists() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    bail!("Timeout waiting for file {ready}")
}
