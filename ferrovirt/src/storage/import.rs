//! `ferrovirt import SOURCE TARGET`: one import from the command line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use api::quantity::parse_bytes;
use clap::Args;
use importer::progress::report_on_stderr;
use importer::source::http::{Credentials, parse_header};
use importer::source::s3::S3Options;
use importer::{Checksum, ContentType, ImportRequest};

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A local path, an http:// or https:// URL, an s3://BUCKET/KEY object, a registry image (docker://host/repo:tag or
    /// @sha256:..., whose disk is the file under /disk) or an oci-archive:// path.
    source: String,
    /// The raw image to write: a file (created or replaced) or a block device; with
    /// `--content-type archive`, the directory to extract into.
    target: PathBuf,
    /// `kubevirt` (a disk image, converted to raw) or `archive` (a tar, extracted).
    #[arg(long, default_value = "kubevirt")]
    content_type: ContentType,
    /// Size of the target, as a Kubernetes quantity (10Gi, 512Mi); at least the image's virtual size.
    #[arg(long, value_parser = parse_size)]
    size: Option<u64>,
    /// Expected checksum of the source as transferred: md5, sha1, sha256 or sha512, as ALGO:HEX.
    #[arg(long)]
    checksum: Option<Checksum>,
    /// A directory of PEM CA certificates to trust for https sources.
    #[arg(long)]
    cert_dir: Option<PathBuf>,
    /// Do not verify the server's TLS certificate (for a registry: also allow plain HTTP).
    #[arg(long)]
    insecure_tls: bool,
    /// The platform to pick from a multi-arch registry image, os/arch[/variant]; this
    /// machine's by default.
    #[arg(long)]
    platform: Option<String>,
    /// Sign requests for an http(s) SOURCE as an S3 object (implied by s3://BUCKET/KEY).
    #[arg(long)]
    s3: bool,
    /// The endpoint of s3:// sources (an S3-compatible store); AWS by default.
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    s3_endpoint: Option<String>,
    /// The S3 signing region; taken from AWS host names, else us-east-1.
    #[arg(long, env = "AWS_REGION")]
    s3_region: Option<String>,
    /// An extra request header, 'Name: value' (repeatable).
    #[arg(long = "header", value_parser = parse_header_arg)]
    headers: Vec<(String, String)>,
    /// Allocate the whole target up front instead of leaving holes.
    #[arg(long)]
    preallocate: bool,
    /// A directory holding basic-auth credentials as the files `accessKeyId` and
    /// `secretKey` (a mounted Secret). The environment variables FERROVIRT_ACCESS_KEY_ID and
    /// FERROVIRT_SECRET_KEY are used otherwise. Credentials are never taken as flags.
    #[arg(long)]
    secret_dir: Option<PathBuf>,
    /// Serve Prometheus metrics (kubevirt_cdi_import_progress_total) on this address.
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// The ownerUID label of the progress metric.
    #[arg(long, default_value = "")]
    owner_uid: String,
}

fn parse_size(text: &str) -> Result<u64, String> {
    parse_bytes(text).map_err(|e| e.to_string())
}

fn parse_header_arg(text: &str) -> Result<(String, String), String> {
    parse_header(text).map_err(|e| e.to_string())
}

pub async fn run(args: ImportArgs) -> Result<()> {
    let mut request = ImportRequest::new(args.source, args.target);
    request.size = args.size;
    request.content_type = args.content_type;
    request.platform = args.platform;
    if args.s3
        || args.s3_endpoint.is_some()
        || args.s3_region.is_some()
        || request.source.starts_with("s3://")
    {
        request.s3 = Some(S3Options {
            endpoint: args.s3_endpoint,
            region: args.s3_region,
        });
    }
    request.checksum = args.checksum;
    request.preallocate = args.preallocate;
    request.http.cert_dir = args.cert_dir;
    request.http.insecure_tls = args.insecure_tls;
    request.http.headers = args.headers;
    request.http.credentials = credentials(args.secret_dir.as_deref())?;
    if let Some(addr) = args.metrics_addr {
        let bound =
            importer::metrics::serve_progress(addr, args.owner_uid, request.progress.clone())
                .await?;
        tracing::info!(%bound, "serving metrics");
    }
    let target = request.target.clone();
    let reporter = report_on_stderr(request.progress.clone());
    let outcome = importer::import(request).await;
    drop(reporter);
    let outcome = outcome?;
    if args.content_type == ContentType::Archive {
        println!(
            "extracted {} bytes into {}",
            outcome.virtual_size,
            target.display()
        );
        return Ok(());
    }
    let compressions: Vec<&str> = outcome.compressions.iter().map(|c| c.name()).collect();
    println!(
        "imported {}{} image of virtual size {} to {} ({} bytes{})",
        outcome.format,
        if compressions.is_empty() {
            String::new()
        } else {
            format!(" ({})", compressions.join(", "))
        },
        outcome.virtual_size,
        target.display(),
        outcome.target_size,
        if outcome.preallocated {
            ", preallocated"
        } else {
            ""
        },
    );
    Ok(())
}

/// Basic-auth credentials from a Secret-style directory, else from the environment.
fn credentials(secret_dir: Option<&Path>) -> Result<Option<Credentials>> {
    if let Some(dir) = secret_dir {
        let read = |name: &str| -> Result<String> {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok(text.trim_end_matches(['\r', '\n']).to_string())
        };
        return Ok(Some(Credentials {
            username: read("accessKeyId")?,
            password: read("secretKey")?,
        }));
    }
    match (
        std::env::var("FERROVIRT_ACCESS_KEY_ID"),
        std::env::var("FERROVIRT_SECRET_KEY"),
    ) {
        (Ok(username), Ok(password)) if !username.is_empty() => {
            Ok(Some(Credentials { username, password }))
        }
        _ => Ok(None),
    }
}
