//! `console` and `vnc`: a WebSocket to the VMI's `console` or `vnc` subresource under the
//! subprotocol `plain.kubevirt.io` (raw bytes in binary frames), through the API server
//! with the kubeconfig's credentials. The console puts the terminal in raw mode and leaves
//! on Ctrl+]; `vnc --proxy-only` serves the stream on a local port for a VNC viewer.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::{Session, Target};

const PLAIN_PROTOCOL: &str = "plain.kubevirt.io";
/// Ctrl+], the escape sequence virtctl's console uses.
const ESCAPE: u8 = 0x1d;

#[derive(Args, Debug)]
pub struct ConsoleArgs {
    #[command(flatten)]
    target: Target,
    /// Seconds to keep trying while the VMI is not running yet.
    #[arg(long, default_value_t = 5)]
    timeout: u64,
}

#[derive(Args, Debug)]
pub struct VncArgs {
    #[command(flatten)]
    target: Target,
    /// Only serve the VNC stream on a local port (no viewer is started).
    #[arg(long)]
    proxy_only: bool,
    /// The local port [default: a free one, printed as JSON].
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The local address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    address: String,
}

pub(super) type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Opens the WebSocket of the VMI's `verb` subresource.
async fn open(session: &Session, verb: &str) -> Result<Socket> {
    open_path(session, &session.path("virtualmachineinstances", verb)).await
}

/// Opens the WebSocket of the subresource at `path`.
pub(super) async fn open_path(session: &Session, path: &str) -> Result<Socket> {
    let key = tokio_tungstenite::tungstenite::handshake::client::generate_key();
    let request = http::Request::get(path)
        .header(http::header::CONNECTION, "Upgrade")
        .header(http::header::UPGRADE, "websocket")
        .header(http::header::SEC_WEBSOCKET_VERSION, "13")
        .header(http::header::SEC_WEBSOCKET_KEY, &key)
        .header(http::header::SEC_WEBSOCKET_PROTOCOL, PLAIN_PROTOCOL)
        .body(kube::client::Body::empty())
        .context("building the request")?;
    let response = session
        .client
        .send(request)
        .await
        .with_context(|| format!("connecting to {path}"))?;
    if response.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        let status = response.status();
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .map(|b| b.to_bytes().to_vec())
            .unwrap_or_default();
        return Err(super::Refused::new(status, &body).into());
    }
    let upgraded = hyper::upgrade::on(response)
        .await
        .context("upgrading the connection")?;
    Ok(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, None).await)
}

pub async fn console(args: ConsoleArgs) -> Result<()> {
    let session = Session::open(&args.target).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    // "Not running yet" (400) and a node side not ready yet (502-504: the launcher's
    // console socket not there) are worth waiting out; a missing VMI or a refusal is final.
    let transient = |err: &anyhow::Error| {
        err.downcast_ref::<super::Refused>()
            .is_some_and(|r| matches!(r.status.as_u16(), 400 | 502..=504))
    };
    let socket = loop {
        match open(&session, "console").await {
            Ok(socket) => break socket,
            Err(err) if tokio::time::Instant::now() < deadline && transient(&err) => {
                tracing::debug!(%err, "the console is not there yet");
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            Err(err) => return Err(err),
        }
    };
    eprintln!(
        "Successfully connected to {} console. The escape sequence is ^]",
        session.name
    );
    let _raw = RawTerminal::enter();
    bridge(socket, tokio::io::stdin(), tokio::io::stdout(), true).await;
    eprintln!();
    Ok(())
}

pub async fn vnc(args: VncArgs) -> Result<()> {
    if !args.proxy_only {
        bail!("only --proxy-only is supported: start a VNC viewer on the printed port");
    }
    let session = Session::open(&args.target).await?;
    let listener = TcpListener::bind((args.address.as_str(), args.port))
        .await
        .with_context(|| format!("listening on {}:{}", args.address, args.port))?;
    let port = listener.local_addr()?.port();
    println!("{}", serde_json::json!({"port": port}));
    loop {
        let (tcp, _) = listener.accept().await.context("accepting a VNC client")?;
        let socket = open(&session, "vnc").await?;
        let (read, write) = tcp.into_split();
        tokio::spawn(bridge(socket, read, write, false));
    }
}

/// Copies between the WebSocket and a local reader/writer until either side ends (or, for
/// a console, until Ctrl+] is typed).
pub(super) async fn bridge(
    socket: Socket,
    mut input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
    escape: bool,
) {
    let (mut to_remote, mut from_remote) = socket.split();
    let upstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match input.read(&mut buf).await {
                // With nothing more to send, keep showing what comes until the far end
                // closes (`console < /dev/null` follows the output).
                Ok(0) | Err(_) if escape => std::future::pending().await,
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            let (chunk, leave) = match chunk.iter().position(|b| escape && *b == ESCAPE) {
                Some(at) => (&chunk[..at], true),
                None => (chunk, false),
            };
            if !chunk.is_empty()
                && to_remote
                    .send(Message::Binary(chunk.to_vec().into()))
                    .await
                    .is_err()
            {
                break;
            }
            if leave {
                break;
            }
        }
        let normal = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = to_remote.send(Message::Close(Some(normal))).await;
    };
    let downstream = async {
        while let Some(Ok(message)) = from_remote.next().await {
            let bytes = match message {
                Message::Binary(bytes) => bytes.to_vec(),
                Message::Text(text) => text.as_bytes().to_vec(),
                Message::Close(_) => break,
                _ => continue,
            };
            if output.write_all(&bytes).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
}

/// The terminal in raw mode while it lives, restored on drop; nothing when stdin is not a
/// terminal.
struct RawTerminal {
    saved: Option<rustix::termios::Termios>,
}

impl RawTerminal {
    fn enter() -> Self {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Self { saved: None };
        }
        let Ok(saved) = rustix::termios::tcgetattr(&stdin) else {
            return Self { saved: None };
        };
        let mut raw = saved.clone();
        raw.make_raw();
        let _ = rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &raw);
        Self { saved: Some(saved) }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                saved,
            );
        }
    }
}
