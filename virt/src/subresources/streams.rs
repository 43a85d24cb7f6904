//! The serial console and VNC as WebSockets: the launcher's unix socket for the stream,
//! bridged byte for byte in binary frames under the subprotocol `plain.kubevirt.io`, which
//! is what `virtctl console` and `virtctl vnc` speak.

use std::path::PathBuf;

use api::kubevirt::VirtualMachineInstancePhase;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::{LAUNCHER_WAIT, StatusError, Subresources, fetch_vmi};
use crate::launcher::control::proto::EmptyRequest;

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
    let mut launcher = state
        .launchers
        .connect(vmi, LAUNCHER_WAIT)
        .await
        .map_err(|e| StatusError::internal(e.to_string()))?;
    let domain = launcher
        .get_domain(EmptyRequest {})
        .await
        .map_err(|s| StatusError::internal(s.message().to_owned()))?
        .into_inner()
        .domain;
    let domain: Value = serde_json::from_str(&domain).unwrap_or_default();
    let key = match stream {
        Stream::Console => "consoleSocket",
        Stream::Vnc => "vncSocket",
    };
    domain[key]
        .as_str()
        .map(PathBuf::from)
        .ok_or_else(|| StatusError::internal(format!("the domain has no {key}")))
}

/// Copies bytes both ways until either side closes.
async fn bridge(ws: WebSocket, unix: UnixStream) {
    let (mut ws_out, mut ws_in) = ws.split();
    let (mut unix_in, mut unix_out) = unix.into_split();
    let to_client = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match unix_in.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let frame = Message::Binary(buf[..n].to_vec().into());
                    if ws_out.send(frame).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = ws_out.close().await;
    };
    let to_guest = async {
        while let Some(Ok(message)) = ws_in.next().await {
            let bytes = match message {
                Message::Binary(bytes) => bytes.to_vec(),
                Message::Text(text) => text.as_str().as_bytes().to_vec(),
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) => continue,
            };
            if unix_out.write_all(&bytes).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        () = to_client => {}
        () = to_guest => {}
    }
}
