//! A gRPC channel to a CSI driver's unix socket, for tests, benchmarks and tools.

use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// Connects to the CSI driver listening on `socket`.
pub async fn connect_unix(socket: impl Into<PathBuf>) -> Result<Channel, tonic::transport::Error> {
    let socket = socket.into();
    // The URI is required by the API and ignored: every connection goes to the socket.
    Endpoint::from_static("http://csi.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
}
