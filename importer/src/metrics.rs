//! The importer's Prometheus endpoint. CDI's controllers scrape the importer pod for
//! `kubevirt_cdi_import_progress_total{ownerUID=...}`, a counter of percent done; it is kept
//! with the same name, label and unit, next to a plain byte counter.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, header};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::error::ImportError;
use crate::progress::Progress;

type Labels = Vec<(String, String)>;

/// Which of CDI's progress metrics a worker serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMetric {
    /// `kubevirt_cdi_import_progress_total`, the importer's.
    Import,
    /// `kubevirt_cdi_clone_progress_total`, the clone source's.
    Clone,
}

impl ProgressMetric {
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::Import => (
                "kubevirt_cdi_import_progress",
                "The import progress in percentage",
                "ferrovirt_import_transferred_bytes",
            ),
            Self::Clone => (
                "kubevirt_cdi_clone_progress",
                "The clone progress in percentage",
                "ferrovirt_clone_transferred_bytes",
            ),
        }
    }
}

/// Binds `addr` and serves the progress of this import until the process ends.
pub async fn serve_progress(
    addr: SocketAddr,
    owner_uid: String,
    progress: Arc<Progress>,
) -> Result<SocketAddr, ImportError> {
    serve_progress_as(ProgressMetric::Import, addr, owner_uid, progress).await
}

/// Binds `addr` and serves `progress` as `metric` until the process ends.
pub async fn serve_progress_as(
    metric: ProgressMetric,
    addr: SocketAddr,
    owner_uid: String,
    progress: Arc<Progress>,
) -> Result<SocketAddr, ImportError> {
    let (percent_name, percent_help, bytes_name) = metric.names();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ImportError::Metrics {
            addr: addr.to_string(),
            source,
        })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ImportError::Metrics {
            addr: addr.to_string(),
            source,
        })?;

    let percent = Family::<Labels, Counter<f64, AtomicU64>>::default();
    let bytes = Gauge::<i64>::default();
    let mut registry = Registry::default();
    registry.register(percent_name, percent_help, percent.clone());
    registry.register(bytes_name, "Source bytes transferred so far", bytes.clone());
    let registry = Arc::new(registry);

    let labels = vec![("ownerUID".to_string(), owner_uid)];
    tokio::spawn(async move {
        let mut reported = 0.0;
        loop {
            if let Some(now) = progress.percent().filter(|&p| p > reported) {
                percent.get_or_create(&labels).inc_by(now - reported);
                reported = now;
            }
            bytes.set(progress.transferred() as i64);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let registry = registry.clone();
            let service = service_fn(move |_request| {
                let mut body = String::new();
                let encoded = encode(&mut body, &registry);
                async move {
                    encoded.map_err(std::io::Error::other)?;
                    Response::builder()
                        .header(header::CONTENT_TYPE, "text/plain; version=0.0.4")
                        .body(Full::new(Bytes::from(body)))
                        .map_err(std::io::Error::other)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn serves_cdis_progress_metric() {
        let progress = Progress::new();
        progress.set_total(200);
        progress.add(100);
        let addr = serve_progress("127.0.0.1:0".parse().unwrap(), "uid-1".into(), progress)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        assert!(
            response.contains("kubevirt_cdi_import_progress_total{ownerUID=\"uid-1\"} 50.0"),
            "{response}"
        );
        assert!(
            response.contains("ferrovirt_import_transferred_bytes 100"),
            "{response}"
        );
    }
}
