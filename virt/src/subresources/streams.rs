//! The serial console, VNC and port-forward as WebSockets: the launcher's unix socket for
//! the console and VNC, a TCP connection to the VMI's address for port-forward, bridged
//! byte for byte in binary frames under the subprotocol `plain.kubevirt.io`, which is what
//! `virtctl console`, `virtctl vnc` and `virtctl port-forward` speak.

use std::path::PathBuf;

use api::kubevirt::vmi::condition_types;
use api::kubevirt::{VirtualMachine, VirtualMachineInstance, VirtualMachineInstancePhase};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Path, State};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use kube::Api;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{StatusError, Subresources, fetch_vmi, launcher};
use crate::launcher::DomainStatus;
use crate::launcher::control::proto::{EmptyRequest, ForwardPortRequest};

/// KubeVirt's subprotocol for raw bytes.
pub const PLAIN_PROTOCOL: &str = "plain.kubevirt.io";

#[derive(Clone, Copy)]
enum Stream {
    Console,
    Vnc,
}

pub async fn console(
    state: State<Subresources>,
    path: Path<(String, String, String)>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, StatusError> {
    open(state, path, upgrade, Stream::Console).await
}

pub async fn vnc(
    state: State<Subresources>,
    path: Path<(String, String, String)>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, StatusError> {
    open(state, path, upgrade, Stream::Vnc).await
}

async fn open(
    State(state): State<Subresources>,
    Path((_, namespace, name)): Path<(String, String, String)>,
    upgrade: WebSocketUpgrade,
    stream: Stream,
) -> Result<Response, StatusError> {
    let vmi = fetch_vmi(&state.client, &namespace, &name).await?;
    // virt-api's answers: a failed VMI is a conflict, one not running yet a bad request
    // (which virtctl console keeps retrying until its timeout).
    match vmi.status.as_ref().and_then(|s| s.phase) {
        Some(VirtualMachineInstancePhase::Running) => {}
        Some(VirtualMachineInstancePhase::Failed) => {
            return Err(StatusError::conflict(
                "virtualmachineinstance",
                &name,
                "VMI is in failed status",
            ));
        }
        _ => return Err(StatusError::bad_request("VMI is not running".into())),
    }
    let socket = stream_socket(&state, &vmi, stream).await?;
    let unix = crate::unix_path::connect(&socket)
        .await
        .map_err(|e| StatusError::internal(format!("cannot reach {}: {e}", socket.display())))?;
    Ok(upgrade
        .protocols([PLAIN_PROTOCOL])
        .on_upgrade(move |ws| bridge(ws, unix)))
}

/// The launcher's socket for the stream, from its domain report.
async fn stream_socket(
    state: &Subresources,
    vmi: &api::kubevirt::VirtualMachineInstance,
    stream: Stream,
) -> Result<PathBuf, StatusError> {
    let mut launcher = launcher(state, vmi).await?;
    let domain = launcher
        .get_domain(EmptyRequest {})
        .await
        .map_err(|s| StatusError::internal(s.message().to_owned()))?
        .into_inner()
        .domain;
    let domain: DomainStatus = serde_json::from_str(&domain)
        .map_err(|e| StatusError::internal(format!("the launcher's domain report: {e}")))?;
    let (socket, what) = match stream {
        Stream::Console => (domain.console_socket, "serial console"),
        Stream::Vnc => (domain.vnc_socket, "VNC display"),
    };
    socket.ok_or_else(|| StatusError::bad_request(format!("the VMI has no {what}")))
}

/// The path of a `portforward` request: `.../{name}/portforward/{port}[/{protocol}]`.
#[derive(Deserialize)]
pub struct ForwardPath {
    namespace: String,
    name: String,
    port: String,
    #[serde(default)]
    protocol: Option<String>,
}

/// `virtualmachineinstances/{name}/portforward/{port}[/{protocol}]`.
pub async fn vmi_port_forward(
    State(state): State<Subresources>,
    Path(path): Path<ForwardPath>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, StatusError> {
    let vmi = fetch_vmi(&state.client, &path.namespace, &path.name).await?;
    port_forward(&state, &vmi, &path, upgrade).await
}

/// `virtualmachines/{name}/portforward/...`: to the VM's instance.
pub async fn vm_port_forward(
    State(state): State<Subresources>,
    Path(path): Path<ForwardPath>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, StatusError> {
    let vm = Api::<VirtualMachine>::namespaced(state.client.clone(), &path.namespace)
        .get_opt(&path.name)
        .await?
        .ok_or_else(|| StatusError::not_found("virtualmachine", &path.name))?;
    if vm.status.as_ref().and_then(|s| s.created) != Some(true) {
        return Err(StatusError::conflict(
            "virtualmachine",
            &path.name,
            "VMI is not started",
        ));
    }
    let vmi = fetch_vmi(&state.client, &path.namespace, &path.name).await?;
    port_forward(&state, &vmi, &path, upgrade).await
}

/// Connects to the port at the VMI's first address (for masquerade, the pod's, where the
/// launcher forwards it to the guest) and bridges it to the WebSocket.
async fn port_forward(
    state: &Subresources,
    vmi: &VirtualMachineInstance,
    path: &ForwardPath,
    upgrade: WebSocketUpgrade,
) -> Result<Response, StatusError> {
    let port = path
        .port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            StatusError::bad_request(format!(
                "port {:?} is not a port number (1-65535)",
                path.port
            ))
        })?;
    match path.protocol.as_deref().unwrap_or("tcp") {
        "tcp" => {}
        "udp" => {
            return Err(StatusError::bad_request(
                "udp port-forward is not supported by this server; use tcp".into(),
            ));
        }
        other => {
            return Err(StatusError::bad_request(format!(
                "unknown protocol {other:?}: tcp or udp"
            )));
        }
    }
    if vmi.condition_holds(condition_types::PAUSED) {
        return Err(StatusError::conflict(
            "virtualmachineinstance",
            &path.name,
            "VMI is paused",
        ));
    }
    if vmi.phase() != Some(VirtualMachineInstancePhase::Running) {
        return Err(StatusError::bad_request("VMI is not running".into()));
    }
    let interface = vmi
        .status
        .as_ref()
        .and_then(|s| s.interfaces.as_ref())
        .and_then(|i| i.first())
        .ok_or_else(|| StatusError::bad_request("no network interfaces are present".into()))?;
    let ip = interface.ip_address.as_deref().ok_or_else(|| {
        StatusError::bad_request("the VMI's first interface has no address yet".into())
    })?;
    if is_masquerade(vmi, interface.name.as_deref()) {
        forward_on_pod_address(state, vmi, port).await?;
    }
    let address = match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        _ => format!("{ip}:{port}"),
    };
    let tcp = TcpStream::connect(&address)
        .await
        .map_err(|e| StatusError::internal(format!("dialing VM: {address}: {e}")))?;
    Ok(upgrade
        .protocols([PLAIN_PROTOCOL])
        .on_upgrade(move |ws| bridge(ws, tcp)))
}

/// Whether the spec interface `name` is bound with masquerade.
fn is_masquerade(vmi: &VirtualMachineInstance, name: Option<&str>) -> bool {
    vmi.spec
        .domain
        .devices
        .interfaces
        .iter()
        .flatten()
        .find(|i| Some(i.name.as_str()) == name)
        .is_some_and(|i| i.binding_methods().first() == Some(&"masquerade"))
}

/// Asks the VMI's launcher to make the guest's `port` reachable on the pod's address.
async fn forward_on_pod_address(
    state: &Subresources,
    vmi: &VirtualMachineInstance,
    port: u16,
) -> Result<(), StatusError> {
    let mut launcher = launcher(state, vmi).await?;
    let answer = launcher
        .forward_port(ForwardPortRequest {
            protocol: "tcp".into(),
            port: port.into(),
        })
        .await
        .map_err(|s| StatusError::internal(s.message().to_owned()))?
        .into_inner();
    if answer.success {
        Ok(())
    } else {
        Err(StatusError::internal(answer.message))
    }
}

/// Copies bytes both ways until either side closes.
async fn bridge(ws: WebSocket, stream: impl AsyncRead + AsyncWrite + Send + 'static) {
    let (mut ws_out, mut ws_in) = ws.split();
    let (mut stream_in, mut stream_out) = tokio::io::split(stream);
    let to_client = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match stream_in.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let frame = Message::Binary(buf[..n].to_vec().into());
                    if ws_out.send(frame).await.is_err() {
                        break;
                    }
                }
            }
        }
        // A normal closure: virtctl takes it for the end of the stream, where a close
        // without a status is an error to it.
        let normal = CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        };
        let _ = ws_out.send(Message::Close(Some(normal))).await;
    };
    let to_guest = async {
        while let Some(Ok(message)) = ws_in.next().await {
            let bytes = match message {
                Message::Binary(bytes) => bytes.to_vec(),
                Message::Text(text) => text.as_str().as_bytes().to_vec(),
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) => continue,
            };
            if stream_out.write_all(&bytes).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        () = to_client => {}
        () = to_guest => {}
    }
}
