//! `ferrovirt clone-source`: the source pod of a host-assisted clone, in CDI's place of
//! `cdi-cloner`. It reads CDI's environment (CLIENT_KEY, CLIENT_CERT, SERVER_CA_CERT,
//! UPLOAD_URL, OWNER_UID, PREALLOCATION), streams the source volume to the target's upload
//! server over mutual TLS, serves `kubevirt_cdi_clone_progress_total` meanwhile, and leaves
//! CDI's termination message ("Clone Complete"). The stream is the volume's raw bytes, read
//! hole-aware and zstd-encoded (see `importer::clone_stream`), sent as `blockdevice-clone`
//! whatever the volume mode, so a filesystem volume may be cloned to a block one and back.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use api::cdi::pod_contract::env::{CloneSourceEnv, ProcessEnv, clone_source};
use api::cdi::pod_contract::{
    BLOCK_DEVICE_PATH, CLONE_SOURCE_MOUNT, DISK_IMAGE_FILE, FailureReason, NO_DISK_IMAGE,
    TERMINATION_LOG_PATH, WorkerFailure,
};
use api::pod_contract::{TERMINATION_LOG_ENV, env, in_pod};
use bytes::Bytes;
use clap::Args;
use importer::clone_stream::{self, VolumeReader, WIRE_ENCODING};
use importer::metrics::{ProgressMetric, serve_progress_as};
use importer::progress::Progress;
use uploadproxy::routes::{
    BLOCKDEVICE_CLONE, CONTENT_TYPE_HEADER, FILESYSTEM_CLONE, OFFSET_HEADER,
};

/// Compressed bytes in flight between the reading thread and the request body.
const CHUNK: usize = 1 << 20;
const CHANNEL_DEPTH: usize = 8;

/// CDI's cloner flags.
#[derive(Args, Debug)]
pub struct CloneSourceArgs {
    /// `filesystem-clone` (the volume holds disk.img) or `blockdevice-clone`.
    #[arg(long, default_value = "filesystem-clone")]
    content_type: String,
    /// Where the source volume is: the mount point, or the device.
    #[arg(long)]
    mount: Option<String>,
    /// Approximate bytes to send (CDI's flag; the volume's own size is used).
    #[arg(long)]
    upload_bytes: Option<u64>,
}

pub async fn run(args: CloneSourceArgs) -> Result<()> {
    let termination_log = env(TERMINATION_LOG_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| in_pod(TERMINATION_LOG_PATH));
    let vars = CloneSourceEnv::from_env(&ProcessEnv);
    let result = match &vars {
        Ok(vars) => clone(&args, vars).await,
        Err(err) => Err(err.clone().into()),
    };
    let preallocation = vars.is_ok_and(|vars| vars.volume.preallocation);
    let message = match &result {
        Ok(()) if preallocation => "Clone Complete, Preallocation applied".to_string(),
        Ok(()) => "Clone Complete".to_string(),
        Err(err) => {
            let reason = if err.chain().any(|cause| cause.is::<NoDiskImage>()) {
                FailureReason::NoDiskImage
            } else {
                FailureReason::Other
            };
            WorkerFailure::new(reason, format!("Unable to clone: {err:#}")).termination_message()
        }
    };
    if let Err(err) = std::fs::write(&termination_log, &message) {
        tracing::warn!(path = %termination_log.display(), %err, "cannot write the termination message");
    }
    result
}

/// A filesystem source volume with no disk image (an archive's contents): no retry helps.
#[derive(Debug, thiserror::Error)]
#[error("the source volume has no {DISK_IMAGE_FILE} (at {}): {NO_DISK_IMAGE}, not archive contents", path.display())]
struct NoDiskImage {
    path: PathBuf,
}

/// The file or device holding the source volume's bytes.
fn source_path(args: &CloneSourceArgs) -> Result<PathBuf> {
    match args.content_type.as_str() {
        FILESYSTEM_CLONE => {
            let mount = in_pod(args.mount.as_deref().unwrap_or(CLONE_SOURCE_MOUNT));
            let image = mount.join(DISK_IMAGE_FILE);
            if !image.exists() {
                return Err(NoDiskImage { path: image }.into());
            }
            Ok(image)
        }
        BLOCKDEVICE_CLONE => Ok(in_pod(args.mount.as_deref().unwrap_or(BLOCK_DEVICE_PATH))),
        other => {
            bail!("content type {other:?} is not one of {FILESYSTEM_CLONE} or {BLOCKDEVICE_CLONE}")
        }
    }
}

async fn clone(args: &CloneSourceArgs, vars: &CloneSourceEnv) -> Result<()> {
    let path = source_path(args)?;
    let url = &vars.upload_url;
    let client = http_client(vars)?;
    let progress = Progress::new();
    let volume = VolumeReader::open(&path, progress.clone())?;
    let size = volume.size();
    tracing::info!(source = %path.display(), size, %url, "cloning");
    if let Some(addr) = &vars.metrics_address {
        let addr: SocketAddr = addr
            .parse()
            .with_context(|| format!("CLONER_METRICS_ADDR {addr:?}"))?;
        let owner = vars.volume.owner_uid.clone();
        serve_progress_as(ProgressMetric::Clone, addr, owner, progress.clone()).await?;
    }
    let (body, reading) = wire_body(volume)?;
    let response = client
        .post(url)
        .header(CONTENT_TYPE_HEADER, BLOCKDEVICE_CLONE)
        .header(reqwest::header::CONTENT_ENCODING, WIRE_ENCODING)
        // The stream of an unchanged (read-only) volume at one zstd level is the same bytes
        // each time: a restarted source resumes an interrupted attempt from the start, and
        // the server skips what it has already written.
        .header(OFFSET_HEADER, "0")
        .body(body)
        .send()
        .await;
    // A read error ends the body early; it is the cause, whatever the server then said.
    reading.await.context("the reading thread")??;
    let response = response.with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!("the upload server answered {status}: {}", text.trim());
    }
    progress.complete();
    tracing::info!(size, "clone complete");
    Ok(())
}

/// The request body: the volume's wire stream, produced by a blocking thread.
fn wire_body(volume: VolumeReader) -> Result<(reqwest::Body, tokio::task::JoinHandle<Result<()>>)> {
    let mut encoded = clone_stream::encode(volume)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(CHANNEL_DEPTH);
    let reading = tokio::task::spawn_blocking(move || -> Result<()> {
        loop {
            let mut chunk = vec![0u8; CHUNK];
            let n = match importer::stream::read_full(&mut encoded, &mut chunk) {
                Ok(n) => n,
                Err(err) => {
                    let message = err.to_string();
                    let _ = tx.blocking_send(Err(err));
                    bail!("reading the source volume: {message}");
                }
            };
            if n == 0 {
                return Ok(());
            }
            chunk.truncate(n);
            if tx.blocking_send(Ok(Bytes::from(chunk))).is_err() {
                // The request ended; its error tells why.
                return Ok(());
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Ok((reqwest::Body::wrap_stream(stream), reading))
}

/// An HTTPS client with the clone's client certificate that trusts only the upload servers'
/// CA, reaching UPLOAD_URL's host at FERROVIRT_UPLOAD_SERVER_ADDRESS when that is set.
fn http_client(vars: &CloneSourceEnv) -> Result<reqwest::Client> {
    let url = &vars.upload_url;
    let identity = uploadproxy::tls::Identity::from_pem(
        vars.client_cert.as_bytes(),
        vars.client_key.as_bytes(),
    )
    .context("CLIENT_CERT and CLIENT_KEY")?;
    let roots = uploadproxy::tls::roots_from_pem(vars.server_ca_cert.as_bytes())
        .context("SERVER_CA_CERT")?;
    let tls = uploadproxy::tls::client_config(roots, &identity)?;
    let mut builder = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .http1_only()
        .no_proxy()
        .connect_timeout(Duration::from_secs(10));
    if let Some(address) = &vars.upload_server_address {
        let address: SocketAddr = address.parse().with_context(|| {
            format!(
                "{} {address:?} (ip:port)",
                clone_source::UPLOAD_SERVER_ADDRESS
            )
        })?;
        let host = reqwest::Url::parse(url)
            .with_context(|| format!("UPLOAD_URL {url:?}"))?
            .host_str()
            .map(str::to_string)
            .with_context(|| format!("UPLOAD_URL {url:?} has no host"))?;
        builder = builder.resolve(&host, address);
    }
    Ok(builder.build()?)
}
