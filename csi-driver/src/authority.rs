//! Clients that name the socket as the HTTP/2 `:authority`.
//!
//! Python's grpcio sends a unix socket's path as the request's `:authority`
//! (grpc/grpc#38142), which is not a URI authority: h2, under tonic, refuses the request as
//! malformed and resets its stream ("Stream removed" on the client). h2 has no switch for
//! this, so each connection of the CSI socket passes through [`relay`], which rewrites the
//! client's header blocks: an `:authority` that does not parse becomes `localhost`, what
//! gRPC's Go and C++ clients send for a unix socket.
//!
//! Written here because no crate does it: HPACK's compression state spans a connection, so a
//! block cannot be patched in place. Every block the client sends is decoded with the
//! client's state and encoded again with a state of our own, which h2's decoder follows; all
//! other frames, and everything the server sends, pass unchanged.

use std::io;

use loona_hpack::{Decoder, Encoder};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::UnixStream;
use tonic::codegen::http::uri::Authority;

/// What a client sends first on an HTTP/2 connection.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The largest frame payload every HTTP/2 peer accepts without a setting.
const MAX_FRAME: usize = 16_384;
/// What a client's invalid authority is replaced with.
const LOCALHOST: &[u8] = b"localhost";

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// The server's end of a connection whose header blocks are rewritten on their way from
/// `client`; a task relays both directions until either side closes.
pub fn relay(client: UnixStream) -> DuplexStream {
    let (server_end, relay_end) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let (mut from_client, mut to_client) = client.into_split();
        let (mut from_server, mut to_server) = tokio::io::split(relay_end);
        let up = async {
            let result = rewrite(&mut from_client, &mut to_server).await;
            let _ = to_server.shutdown().await;
            result
        };
        let down = async {
            let result = tokio::io::copy(&mut from_server, &mut to_client).await;
            let _ = to_client.shutdown().await;
            result.map(drop)
        };
        let (up, down) = tokio::join!(up, down);
        if let Err(err) = up.and(down) {
            tracing::debug!(%err, "CSI connection ended");
        }
    });
    server_end
}

/// One HTTP/2 frame's header.
struct FrameHeader {
    kind: u8,
    flags: u8,
    stream: u32,
    len: usize,
}

/// A header block still waiting for its CONTINUATION frames.
struct PendingBlock {
    stream: u32,
    end_stream: bool,
    fragment: Vec<u8>,
}

/// Copies the client's side of a connection, re-encoding its header blocks.
async fn rewrite<R, W>(from: &mut R, to: &mut W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut preface = [0u8; PREFACE.len()];
    from.read_exact(&mut preface).await?;
    to.write_all(&preface).await?;
    if &preface != PREFACE {
        // Not HTTP/2 with prior knowledge: the server will say so; nothing to rewrite.
        tokio::io::copy(from, to).await?;
        return Ok(());
    }
    let mut blocks = BlockRewriter::default();
    let mut pending: Option<PendingBlock> = None;
    while let Some(header) = read_frame_header(from).await? {
        let mut payload = vec![0u8; header.len];
        from.read_exact(&mut payload).await?;
        if pending.is_some() && header.kind != CONTINUATION {
            return Err(protocol_error(
                "a header block interrupted by another frame",
            ));
        }
        let fragment = match header.kind {
            HEADERS => {
                let fragment = headers_fragment(&header, &payload)?;
                pending = Some(PendingBlock {
                    stream: header.stream,
                    end_stream: header.flags & END_STREAM != 0,
                    fragment: fragment.to_vec(),
                });
                None
            }
            CONTINUATION => Some(payload),
            _ => {
                to.write_all(&encode_frame_header(&header)).await?;
                to.write_all(&payload).await?;
                continue;
            }
        };
        let block = pending
            .as_mut()
            .ok_or_else(|| protocol_error("CONTINUATION without a header block"))?;
        block.fragment.extend(fragment.unwrap_or_default());
        if header.flags & END_HEADERS != 0 {
            let block = pending.take().expect("checked above");
            let encoded = blocks.rewrite(&block.fragment)?;
            write_header_block(to, &block, &encoded).await?;
        }
    }
    Ok(())
}

/// The next frame's header, or `None` at a clean end of the stream.
async fn read_frame_header<R: AsyncRead + Unpin>(from: &mut R) -> io::Result<Option<FrameHeader>> {
    let mut raw = [0u8; 9];
    match from.read_exact(&mut raw).await {
        Ok(_) => {}
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err),
    }
    Ok(Some(FrameHeader {
        len: usize::from(raw[0]) << 16 | usize::from(raw[1]) << 8 | usize::from(raw[2]),
        kind: raw[3],
        flags: raw[4],
        stream: u32::from_be_bytes([raw[5], raw[6], raw[7], raw[8]]) & 0x7fff_ffff,
    }))
}

fn encode_frame_header(header: &FrameHeader) -> [u8; 9] {
    let len = header.len.to_be_bytes();
    let stream = header.stream.to_be_bytes();
    let n = len.len();
    [
        len[n - 3],
        len[n - 2],
        len[n - 1],
        header.kind,
        header.flags,
        stream[0],
        stream[1],
        stream[2],
        stream[3],
    ]
}

/// A HEADERS frame's block fragment, without its padding and priority fields (which the
/// rewritten frame leaves out: priorities are advisory and gRPC servers ignore them).
fn headers_fragment<'a>(header: &FrameHeader, payload: &'a [u8]) -> io::Result<&'a [u8]> {
    let mut fragment = payload;
    let mut padding = 0;
    if header.flags & PADDED != 0 {
        let (&pad, rest) = fragment
            .split_first()
            .ok_or_else(|| protocol_error("padded HEADERS frame without its pad length"))?;
        padding = usize::from(pad);
        fragment = rest;
    }
    if header.flags & PRIORITY != 0 {
        fragment = fragment
            .get(5..)
            .ok_or_else(|| protocol_error("HEADERS frame shorter than its priority fields"))?;
    }
    let end = fragment
        .len()
        .checked_sub(padding)
        .ok_or_else(|| protocol_error("HEADERS frame padding longer than the frame"))?;
    Ok(&fragment[..end])
}

/// A rewritten block as HEADERS and as many CONTINUATION frames as its size needs.
async fn write_header_block<W: AsyncWrite + Unpin>(
    to: &mut W,
    block: &PendingBlock,
    encoded: &[u8],
) -> io::Result<()> {
    let chunks: Vec<&[u8]> = if encoded.is_empty() {
        vec![encoded]
    } else {
        encoded.chunks(MAX_FRAME).collect()
    };
    let last = chunks.len() - 1;
    for (i, chunk) in chunks.into_iter().enumerate() {
        let mut flags = if i == last { END_HEADERS } else { 0 };
        if i == 0 && block.end_stream {
            flags |= END_STREAM;
        }
        let header = FrameHeader {
            kind: if i == 0 { HEADERS } else { CONTINUATION },
            flags,
            stream: block.stream,
            len: chunk.len(),
        };
        to.write_all(&encode_frame_header(&header)).await?;
        to.write_all(chunk).await?;
    }
    Ok(())
}

/// The client's HPACK state (decoding) and ours toward the server (encoding).
#[derive(Default)]
struct BlockRewriter {
    decoder: Decoder<'static>,
    encoder: Encoder<'static>,
}

impl BlockRewriter {
    /// One header block, decoded, its authority made valid, encoded again.
    fn rewrite(&mut self, block: &[u8]) -> io::Result<Vec<u8>> {
        let mut headers = self
            .decoder
            .decode(block)
            .map_err(|err| protocol_error(&format!("undecodable header block: {err}")))?;
        for (name, value) in &mut headers {
            if name == b":authority" && !is_authority(value) {
                tracing::debug!(
                    authority = %String::from_utf8_lossy(value),
                    "rewriting a client's invalid :authority to localhost"
                );
                *value = LOCALHOST.to_vec();
            }
        }
        Ok(self
            .encoder
            .encode(headers.iter().map(|(n, v)| (&n[..], &v[..]))))
    }
}

fn is_authority(value: &[u8]) -> bool {
    Authority::try_from(value).is_ok()
}

fn protocol_error(message: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("HTTP/2 from a CSI client: {message}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let header = FrameHeader {
            kind,
            flags,
            stream,
            len: payload.len(),
        };
        [&encode_frame_header(&header)[..], payload].concat()
    }

    /// Runs the client's bytes through the rewrite; the server's decoded header blocks.
    async fn through(client: Vec<u8>) -> (Vec<u8>, Vec<Vec<(Vec<u8>, Vec<u8>)>>) {
        let mut out = Vec::new();
        rewrite(&mut &client[..], &mut out).await.unwrap();
        let mut decoder = Decoder::new();
        let mut blocks = Vec::new();
        let mut rest = &out[PREFACE.len()..];
        let mut block = Vec::new();
        while !rest.is_empty() {
            let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            let (kind, flags) = (rest[3], rest[4]);
            if kind == HEADERS || kind == CONTINUATION {
                block.extend_from_slice(&rest[9..9 + len]);
                if flags & END_HEADERS != 0 {
                    blocks.push(decoder.decode(&block).unwrap());
                    block.clear();
                }
            }
            rest = &rest[9 + len..];
        }
        (out, blocks)
    }

    #[tokio::test]
    async fn a_socket_path_authority_becomes_localhost_and_the_rest_is_kept() {
        let mut client_encoder = Encoder::new();
        let request = |encoder: &mut Encoder, authority: &[u8]| {
            encoder.encode([
                (&b":method"[..], &b"POST"[..]),
                (b":path", b"/csi.v1.Identity/GetPluginInfo"),
                (b":authority", authority),
                (b"content-type", b"application/grpc"),
            ])
        };
        let first = request(&mut client_encoder, b"unix:/csi/csi.sock");
        // The second block refers to the first's dynamic table entries.
        let second = request(&mut client_encoder, b"unix:/csi/csi.sock");
        let third = request(&mut client_encoder, b"localhost:1234");
        let data = frame(0x0, END_STREAM, 1, b"\0\0\0\0\0");
        let mut padded = vec![3];
        padded.extend_from_slice(&second);
        padded.extend_from_slice(&[0, 0, 0]);
        let (split_a, split_b) = third.split_at(third.len() / 2);
        let client = [
            PREFACE.to_vec(),
            frame(HEADERS, END_HEADERS, 1, &first),
            data.clone(),
            frame(HEADERS, END_HEADERS | PADDED | END_STREAM, 3, &padded),
            frame(HEADERS, 0, 5, split_a),
            frame(CONTINUATION, END_HEADERS, 5, split_b),
        ]
        .concat();
        let (out, blocks) = through(client).await;
        assert_eq!(blocks.len(), 3);
        let authority = |block: &[(Vec<u8>, Vec<u8>)]| {
            block
                .iter()
                .find(|(n, _)| n == b":authority")
                .map(|(_, v)| v.clone())
        };
        assert_eq!(authority(&blocks[0]).unwrap(), b"localhost");
        assert_eq!(authority(&blocks[1]).unwrap(), b"localhost");
        assert_eq!(authority(&blocks[2]).unwrap(), b"localhost:1234");
        assert_eq!(
            blocks[0][1],
            (
                b":path".to_vec(),
                b"/csi.v1.Identity/GetPluginInfo".to_vec()
            )
        );
        // The DATA frame passes unchanged, and END_STREAM stays on its HEADERS frame.
        assert!(out.windows(data.len()).any(|w| w == data));
        let second_headers = out
            .windows(9)
            .find(|w| w[3] == HEADERS && w[8] == 3)
            .unwrap();
        assert_eq!(second_headers[4], END_HEADERS | END_STREAM);
    }

    #[tokio::test]
    async fn a_big_block_is_split_into_continuations() {
        let value = vec![b'x'; 3 * MAX_FRAME];
        let block = Encoder::new().encode([(&b"x-big"[..], &value[..])]);
        let client = [PREFACE.to_vec(), frame(HEADERS, END_HEADERS, 1, &block)].concat();
        let (out, blocks) = through(client).await;
        assert_eq!(blocks[0][0].1, value);
        let continuations = out
            .windows(9)
            .filter(|w| w[3] == CONTINUATION && w[8] == 1)
            .count();
        assert!(continuations >= 3, "{continuations}");
    }

    #[tokio::test]
    async fn broken_frames_are_errors_not_panics() {
        let short_priority = [
            PREFACE.to_vec(),
            frame(HEADERS, END_HEADERS | PRIORITY, 1, &[0, 0]),
        ]
        .concat();
        assert!(
            rewrite(&mut &short_priority[..], &mut Vec::new())
                .await
                .is_err()
        );
        let orphan = [
            PREFACE.to_vec(),
            frame(CONTINUATION, END_HEADERS, 1, &[0x82]),
        ]
        .concat();
        assert!(rewrite(&mut &orphan[..], &mut Vec::new()).await.is_err());
        let interrupted = [
            PREFACE.to_vec(),
            frame(HEADERS, 0, 1, &[0x82]),
            frame(0x0, 0, 1, b"x"),
        ]
        .concat();
        assert!(
            rewrite(&mut &interrupted[..], &mut Vec::new())
                .await
                .is_err()
        );
        let garbage = [
            PREFACE.to_vec(),
            frame(HEADERS, END_HEADERS, 1, &[0xff, 0xff, 0xff]),
        ]
        .concat();
        assert!(rewrite(&mut &garbage[..], &mut Vec::new()).await.is_err());
        let http1 = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        let mut out = Vec::new();
        rewrite(&mut &http1[..], &mut out).await.unwrap();
        assert_eq!(out, http1);
    }
}
