//! The launcher's control socket: the gRPC `Cmd` service (modelled on KubeVirt's) on a
//! unix socket, each call turned into one [`Action`] for the launcher task. Failures are
//! answered as KubeVirt's launcher answers them: `success: false` and a message, not a
//! gRPC error, so the handler can put the message on the VMI.

use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Request, Response, Status};

use super::{Action, LauncherHandle, Reply};

/// The generated protobuf types and gRPC stubs.
pub mod proto {
    tonic::include_proto!("ferrovirt.launcher.v1");
}

use proto::cmd_client::CmdClient;
use proto::cmd_server::{Cmd, CmdServer};

struct CmdService {
    launcher: LauncherHandle,
}

impl CmdService {
    async fn run(&self, action: Action) -> (proto::Response, Option<Reply>) {
        match self.launcher.call(action).await {
            Ok(reply) => (
                proto::Response {
                    success: true,
                    message: String::new(),
                },
                Some(reply),
            ),
            Err(e) => {
                tracing::warn!(error = %e, kind = e.metric_label(), "launcher command failed");
                (
                    proto::Response {
                        success: false,
                        message: e.to_string(),
                    },
                    None,
                )
            }
        }
    }

    async fn simple(&self, action: Action) -> Result<Response<proto::Response>, Status> {
        Ok(Response::new(self.run(action).await.0))
    }
}

#[tonic::async_trait]
impl Cmd for CmdService {
    async fn sync_virtual_machine(
        &self,
        request: Request<proto::VmiRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        let json = request
            .into_inner()
            .vmi
            .map(|v| v.vmi_json)
            .ok_or_else(|| Status::invalid_argument("no VMI in the request"))?;
        let vmi = serde_json::from_slice(&json)
            .map_err(|e| Status::invalid_argument(format!("the VMI is not valid JSON: {e}")))?;
        self.simple(Action::Sync(Box::new(vmi))).await
    }

    async fn pause_virtual_machine(
        &self,
        _: Request<proto::EmptyRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        self.simple(Action::Pause).await
    }

    async fn unpause_virtual_machine(
        &self,
        _: Request<proto::EmptyRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        self.simple(Action::Unpause).await
    }

    async fn shutdown_virtual_machine(
        &self,
        request: Request<proto::ShutdownRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        let seconds = request.into_inner().grace_period_seconds;
        let grace = u64::try_from(seconds)
            .ok()
            .filter(|s| *s > 0)
            .map(Duration::from_secs);
        self.simple(Action::Shutdown(grace)).await
    }

    async fn kill_virtual_machine(
        &self,
        _: Request<proto::EmptyRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        self.simple(Action::Kill).await
    }

    async fn reset_virtual_machine(
        &self,
        _: Request<proto::EmptyRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        self.simple(Action::Reset).await
    }

    async fn soft_reboot_virtual_machine(
        &self,
        _: Request<proto::EmptyRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        self.simple(Action::SoftReboot).await
    }

    async fn get_domain(
        &self,
        _: Request<proto::EmptyRequest>,
    ) -> Result<Response<proto::DomainResponse>, Status> {
        let (response, reply) = self.run(Action::GetDomain).await;
        let domain = match reply {
            Some(Reply::Domain(status)) => serde_json::to_string(&status).unwrap_or_default(),
            _ => String::new(),
        };
        Ok(Response::new(proto::DomainResponse {
            response: Some(response),
            domain,
        }))
    }

    async fn get_guest_info(
        &self,
        _: Request<proto::EmptyRequest>,
    ) -> Result<Response<proto::GuestInfoResponse>, Status> {
        let (response, reply) = self.run(Action::GetGuestInfo).await;
        let guest_info_response = match reply {
            Some(Reply::GuestInfo(Some(info))) => serde_json::to_string(&info).unwrap_or_default(),
            _ => String::new(),
        };
        Ok(Response::new(proto::GuestInfoResponse {
            response: Some(response),
            guest_info_response,
        }))
    }

    async fn forward_port(
        &self,
        request: Request<proto::ForwardPortRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        let request = request.into_inner();
        let protocol = match request.protocol.as_str() {
            "tcp" => "tcp",
            "udp" => "udp",
            other => {
                return Err(Status::invalid_argument(format!(
                    "unknown protocol {other:?}: tcp or udp"
                )));
            }
        };
        let port = u16::try_from(request.port)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                Status::invalid_argument(format!("port {} is not in 1-65535", request.port))
            })?;
        self.simple(Action::ForwardPort { protocol, port }).await
    }

    async fn ping(
        &self,
        _: Request<proto::EmptyRequest>,
    ) -> Result<Response<proto::Response>, Status> {
        self.simple(Action::Ping).await
    }
}

/// Serves the control socket at `socket` until `shutdown` completes.
pub async fn serve(
    launcher: LauncherHandle,
    socket: PathBuf,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> std::io::Result<()> {
    if let Some(parent) = socket.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let _ = std::fs::remove_file(&socket);
    let listener = crate::unix_path::bind(&socket)?;
    listener.set_nonblocking(true)?;
    let listener = UnixListener::from_std(listener)?;
    tonic::transport::Server::builder()
        .add_service(CmdServer::new(CmdService { launcher }))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await
        .map_err(std::io::Error::other)
}

/// A client of the control socket at `socket`.
pub async fn connect(
    socket: impl Into<PathBuf>,
) -> Result<CmdClient<Channel>, tonic::transport::Error> {
    let socket = socket.into();
    // The URI is required by the API and ignored: every connection goes to the socket.
    let channel = Endpoint::from_static("http://launcher.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(crate::unix_path::connect(&socket).await?))
            }
        }))
        .await?;
    Ok(CmdClient::new(channel))
}
