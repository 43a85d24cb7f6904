//! `ferrovirt cli-download`: HCO's CLI download server (the `virt-artifacts-server` behind
//! the `hyperconverged-cluster-cli-download` Service), serving this binary as `virtctl`,
//! whose verbs it speaks, at the path upstream serves it from:
//! `/<arch>/linux/virtctl.tar.gz`, a gzip-compressed tar holding the executable `virtctl`.
//!
//! The archive is made as it is sent (no copy on disk, a few buffers in memory): a blocking
//! task writes the tar through gzip into a bounded channel that is the response body.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use api::pod_contract::POD_IP_ENV;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use flate2::Compression;
use flate2::write::GzEncoder;
use tokio::sync::mpsc;

/// The port HCO's download Service targets.
pub const PORT: u16 = 8080;

#[derive(clap::Args)]
pub struct CliDownloadArgs {
    /// Address to serve on [default: the pod's address, else 0.0.0.0, port 8080].
    #[arg(long)]
    listen: Option<SocketAddr>,
}

/// The architecture as Kubernetes names it (`amd64`, `arm64`, ...).
fn kubernetes_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The one path served: `/<arch>/linux/virtctl.tar.gz`.
pub fn archive_path() -> String {
    format!("/{}/linux/virtctl.tar.gz", kubernetes_arch())
}

pub async fn run(args: CliDownloadArgs) -> anyhow::Result<()> {
    let listen = match args.listen {
        Some(listen) => listen,
        None => {
            let ip = std::env::var(POD_IP_ENV).unwrap_or_else(|_| "0.0.0.0".into());
            SocketAddr::new(ip.parse().context("the pod's address")?, PORT)
        }
    };
    let executable = std::env::current_exe().context("finding this executable")?;
    let index = format!("{}\n", archive_path());
    let app = Router::new()
        .route(
            &archive_path(),
            get(move || archive_response(executable.clone())),
        )
        .route("/", get(move || async move { index }))
        .route("/healthz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    tracing::info!(%listen, path = %archive_path(), "serving the CLI");
    axum::serve(listener, app).await.context("serving")?;
    Ok(())
}

async fn archive_response(executable: PathBuf) -> Response {
    let (sender, receiver) = mpsc::channel::<io::Result<Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let mut body = io::BufWriter::with_capacity(256 << 10, ChannelWriter(sender.clone()));
        if let Err(err) = write_archive(&executable, &mut body) {
            tracing::warn!(%err, "the CLI archive was cut short");
            // The client sees the body end in an error, not a short archive that looks whole.
            let _ = sender.blocking_send(Err(err));
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/gzip")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Writes a gzip-compressed tar holding `executable` as `virtctl` (mode 0755) to `out`.
pub fn write_archive(executable: &Path, out: impl Write) -> io::Result<()> {
    let gzip = GzEncoder::new(out, Compression::fast());
    let mut tar = tar::Builder::new(gzip);
    let mut file = std::fs::File::open(executable)?;
    let mut header = tar::Header::new_gnu();
    header.set_size(file.metadata()?.len());
    header.set_mode(0o755);
    header.set_mtime(0);
    header.set_cksum();
    tar.append_data(&mut header, "virtctl", &mut file)?;
    tar.into_inner()?.finish()?.flush()
}

/// The response body as a `Write`: each buffer is sent to the client's stream, waiting
/// while the client is slower than the compressor.
struct ChannelWriter(mpsc::Sender<io::Result<Bytes>>);

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_archive_holds_the_executable_as_virtctl() {
        let dir = std::env::temp_dir().join(format!("cli-download-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let executable = dir.join("ferrovirt");
        std::fs::write(&executable, b"#!/bin/sh\necho hi\n").expect("write");
        let mut archive = Vec::new();
        write_archive(&executable, &mut archive).expect("archive");
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&archive[..]));
        let mut entries = tar.entries().expect("entries");
        let mut entry = entries.next().expect("one entry").expect("entry");
        assert_eq!(entry.path().expect("path").to_str(), Some("virtctl"));
        assert_eq!(entry.header().mode().expect("mode"), 0o755);
        let mut content = String::new();
        entry.read_to_string(&mut content).expect("content");
        assert_eq!(content, "#!/bin/sh\necho hi\n");
        assert!(entries.next().is_none());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn the_path_is_upstreams() {
        if cfg!(target_arch = "x86_64") {
            assert_eq!(archive_path(), "/amd64/linux/virtctl.tar.gz");
        }
    }
}
