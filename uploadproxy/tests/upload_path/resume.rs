//! Resumable uploads (beyond CDI): a connection cut in the middle leaves the pipeline waiting;
//! HEAD tells how many bytes the server committed and a POST with `Upload-Offset` continues,
//! for raw images and for streamed formats (xz-compressed qcow2) alike. An upload nobody
//! resumes fails after the idle timeout and can be started again.

use crate::common;

use futures_util::StreamExt;
use std::time::Duration;

use common::{Harness, Options, sha256};
use ferrovirt_tests::{fixture, reference_sha256};

/// Sends `data[..cut]` and then, once those bytes have had time to arrive, breaks the
/// connection (the body stream fails).
async fn cut_upload(harness: &Harness, route: &str, data: &[u8], cut: usize) {
    let chunks: Vec<std::io::Result<Vec<u8>>> = data[..cut]
        .chunks(64 << 10)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let cut = futures_util::stream::once(async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Err(std::io::Error::other("client cut"))
    });
    let result = harness
        .client()
        .post(harness.url(route))
        .bearer_auth(harness.token())
        .header("Content-Length", data.len())
        .body(reqwest::Body::wrap_stream(
            futures_util::stream::iter(chunks).chain(cut),
        ))
        .send()
        .await;
    assert!(result.is_err(), "the cut request cannot succeed");
}

/// Asks where the upload stands and sends the rest from there, as a resuming client does.
async fn resume(harness: &Harness, route: &str, data: &[u8]) -> (u16, String, u64) {
    for _ in 0..100 {
        let head = harness
            .client()
            .head(harness.url(route))
            .bearer_auth(harness.token())
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), 200);
        let offset: u64 = head.headers()["upload-offset"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let response = harness
            .client()
            .post(harness.url(route))
            .bearer_auth(harness.token())
            .header("Upload-Offset", offset)
            .body(data[offset as usize..].to_vec())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        // Until the server has noticed the cut, the old request still holds the upload.
        if status == 503 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        return (status, response.text().await.unwrap(), offset);
    }
    panic!("the upload never became resumable");
}

async fn cut_and_resume(name: &str, route: &str, cut: usize) {
    let harness = Harness::start(Options::default()).await;
    let data = std::fs::read(fixture(name)).unwrap();
    cut_upload(&harness, route, &data, cut).await;
    let (status, body, offset) = resume(&harness, route, &data).await;
    assert_eq!(status, 200, "{body}");
    assert!(offset > 0, "the server kept the bytes before the cut");
    harness.completed().await;
    assert_eq!(sha256(&harness.disk()), reference_sha256(name));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_raw_upload_resumes() {
    cut_and_resume("raw.img", "/v1beta1/upload", 13 << 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_qcow2_xz_upload_resumes_mid_stream() {
    // The xz decoder and the qcow2 reader wait in the middle of the stream for the rest.
    cut_and_resume("v3.qcow2.xz", "/v1beta1/upload-async", 1_000_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_needs_the_offset() {
    let harness = Harness::start(Options::default()).await;
    let data = std::fs::read(fixture("raw.img")).unwrap();
    cut_upload(&harness, "/v1beta1/upload", &data, 5 << 20).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let committed = harness.server.committed();
    assert!(committed > 0);
    // Without Upload-Offset, or past what the server has: 409 with the offset to use.
    let auth = format!("Authorization: Bearer {}", harness.token());
    for extra in [&[][..], &["-H", "Upload-Offset: 999999999"][..]] {
        let mut args = vec!["-H", auth.as_str(), "-d", "x", "-D", "-"];
        args.extend_from_slice(extra);
        let url = harness.url("/v1beta1/upload");
        args.push(&url);
        let result = harness.curl(&args);
        assert_eq!(result.status, 409, "{}", result.body);
        assert!(
            result
                .body
                .to_ascii_lowercase()
                .contains(&format!("upload-offset: {committed}")),
            "{}",
            result.body
        );
    }
    let (status, body, _) = resume(&harness, "/v1beta1/upload", &data).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sha256(&harness.disk()), reference_sha256("raw.img"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_upload_fails_and_starts_again() {
    let harness = Harness::start(Options {
        server: |config| config.idle_timeout = Duration::from_millis(500),
        ..Options::default()
    })
    .await;
    let data = std::fs::read(fixture("v3.qcow2")).unwrap();
    cut_upload(&harness, "/v1beta1/upload", &data, 4 << 20).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(harness.server.committed(), 0);
    let response = harness
        .upload_request()
        .header("Upload-Offset", 4 << 20)
        .body(data[4 << 20..].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    assert_eq!(response.headers()["upload-offset"], "0");
    let body = response.text().await.unwrap();
    assert!(body.contains("upload abandoned"), "{body}");
    assert!(
        !harness.disk().exists(),
        "nothing is left of the failed upload"
    );
    let response = harness.upload_request().body(data).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(sha256(&harness.disk()), reference_sha256("v3.qcow2"));
}

/// A clone source restarted in the middle of its stream sends it again from the start with
/// `Upload-Offset: 0` (its zstd stream is the same bytes each time): the server skips what it
/// has and the volume ends as the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_clone_stream_resumes_from_its_start() {
    let harness = Harness::start(Options::default()).await;
    let raw = fixture("raw.img");
    let encoded = std::process::Command::new("zstd")
        .args(["-q", "-c", "--fast=1"])
        .arg(&raw)
        .output()
        .expect("zstd");
    assert!(encoded.status.success());
    let wire = encoded.stdout;
    let clone_post = || {
        harness
            .upload_request()
            .header("x-cdi-content-type", "blockdevice-clone")
            .header("Content-Encoding", "zstd")
            .header("Upload-Offset", 0)
    };
    let cut = wire.len() / 2;
    let first: Vec<std::io::Result<Vec<u8>>> = wire[..cut]
        .chunks(16 << 10)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let broken = futures_util::stream::once(async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Err(std::io::Error::other("the source pod died"))
    });
    let result = clone_post()
        .body(reqwest::Body::wrap_stream(
            futures_util::stream::iter(first).chain(broken),
        ))
        .send()
        .await;
    assert!(result.is_err(), "the cut stream cannot succeed");
    for _ in 0..100 {
        let response = clone_post().body(wire.clone()).send().await.unwrap();
        let status = response.status().as_u16();
        if status == 503 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let body = response.text().await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(harness.server.committed() > 0);
        assert_eq!(sha256(&harness.disk()), reference_sha256("raw.img"));
        return;
    }
    panic!("the stream never became resumable");
}
