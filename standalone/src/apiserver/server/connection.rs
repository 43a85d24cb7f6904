//! The listener: TLS connections served with the handler until the server stops.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch as shutdown_signal;
use tokio_rustls::TlsAcceptor;

use super::Handler;

/// How long a connection may finish its request once the server stops; a watch still
/// streaming after that is cut.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Serves `handler` on `listener` with TLS until `shutdown` changes.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handler: Arc<Handler>,
    mut shutdown: shutdown_signal::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(conn) => conn,
            Err(err) => {
                tracing::warn!(%err, "accept failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let mut stopping = shutdown.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(stream).await {
                Ok(tls) => tls,
                Err(err) => {
                    tracing::debug!(%peer, %err, "TLS handshake failed");
                    return;
                }
            };
            let service = service_fn(move |request| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler.handle(request).await) }
            });
            let io = StopAwareIo::new(tls, stopping.clone());
            let connection = http1::Builder::new()
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = stopped(&mut stopping) => {}
            }
            // Idle keep-alive connections close now, a request in flight may finish, and a
            // watch is cut after the grace period (its client sees the stream end).
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection).await;
        });
    }
}

/// Resolves once the server stops (or its handle is dropped).
async fn stopped(shutdown: &mut shutdown_signal::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopped| *stopped).await;
}

/// A connection's stream that reads as ended once the server stops, so a connection an
/// aggregated API took over with an upgrade (a WebSocket console) ends with the server:
/// its service sees the client close. Writes pass through, so a response can finish.
struct StopAwareIo<T> {
    inner: T,
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    stopped: bool,
}

impl<T> StopAwareIo<T> {
    fn new(inner: T, mut shutdown: shutdown_signal::Receiver<bool>) -> Self {
        StopAwareIo {
            inner,
            stop: Box::pin(async move { stopped(&mut shutdown).await }),
            stopped: false,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StopAwareIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.stopped && this.stop.as_mut().poll(cx).is_ready() {
            this.stopped = true;
        }
        if this.stopped {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StopAwareIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
