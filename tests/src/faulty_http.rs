//! An HTTP/1.1 server on 127.0.0.1 that serves one body and misbehaves on purpose: it stalls
//! at a byte, or announces a Content-Length shorter or longer than the body it sends. Small
//! and hand-rolled on std so each fault is exactly what the test asks for.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// What goes wrong with every answer.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Sends the body up to this absolute offset, then nothing more while the connection
    /// stays open (until the server is dropped).
    StallAt(u64),
    /// Announces `len - n` bytes and sends the whole body, then closes.
    ShortContentLength(u64),
    /// Announces `len + n` bytes, sends the whole body, then closes.
    LongContentLength(u64),
}

/// The server; stopped (its connections closed) on drop.
pub struct FaultyHttpServer {
    port: u16,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    body: Vec<u8>,
    fault: Fault,
    ranges: bool,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
}

impl FaultyHttpServer {
    /// Serves `body` at every path with `fault`; with `ranges`, announces `Accept-Ranges:
    /// bytes` and answers `Range: bytes=a-[b]` with 206 (416 past the end of the body).
    pub fn start(body: Vec<u8>, fault: Fault, ranges: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the faulty server");
        let port = listener.local_addr().expect("its address").port();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            body,
            fault,
            ranges,
            stop: stop.clone(),
            requests: requests.clone(),
        });
        let acceptor = std::thread::spawn(move || {
            while !shared.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let shared = shared.clone();
                        std::thread::spawn(move || serve(stream, &shared));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        FaultyHttpServer {
            port,
            stop,
            requests,
            acceptor: Some(acceptor),
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for FaultyHttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Answers one request on `stream` (no keep-alive).
fn serve(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut range_start = None;
    let mut range_end = None;
    let mut first = true;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = line.trim_end();
        if line.is_empty() && !first {
            break;
        }
        first = false;
        let lower = line.to_ascii_lowercase();
        if let Some(spec) = lower.strip_prefix("range: bytes=") {
            let (a, b) = spec.split_once('-').unwrap_or((spec, ""));
            range_start = a.trim().parse::<u64>().ok();
            range_end = b.trim().parse::<u64>().ok().map(|b| b + 1);
        }
    }
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let len = shared.body.len() as u64;
    let mut out = stream;
    let (status, start, end) = match range_start.filter(|_| shared.ranges) {
        Some(start) if start >= len => {
            let _ = out.write_all(
                format!(
                    "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            );
            return;
        }
        Some(start) => (
            "206 Partial Content",
            start,
            range_end.unwrap_or(len).min(len),
        ),
        None => ("200 OK", 0, len),
    };
    let announced = match shared.fault {
        Fault::ShortContentLength(n) => (end - start).saturating_sub(n),
        Fault::LongContentLength(n) => end - start + n,
        Fault::StallAt(_) => end - start,
    };
    let mut head =
        format!("HTTP/1.1 {status}\r\nContent-Length: {announced}\r\nConnection: close\r\n");
    if shared.ranges {
        head.push_str("Accept-Ranges: bytes\r\nETag: \"faulty\"\r\n");
    }
    if status.starts_with("206") {
        head.push_str(&format!(
            "Content-Range: bytes {start}-{}/{len}\r\n",
            end.max(start + 1) - 1
        ));
    }
    head.push_str("\r\n");
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    let stop_at = match shared.fault {
        Fault::StallAt(at) => end.min(at.max(start)),
        _ => end,
    };
    for chunk in shared.body[start as usize..stop_at as usize].chunks(64 << 10) {
        if out.write_all(chunk).is_err() {
            return;
        }
    }
    let _ = out.flush();
    if let Fault::StallAt(_) = shared.fault {
        // Hold the connection open, sending nothing.
        while !shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
