//! A client that vanishes in the middle of its body, through the proxy and straight to the
//! upload server: the socket is dropped (reset, or closed with no TLS close_notify) after
//! half the body. The upload must not count as complete, both servers keep serving, and a
//! second, complete upload succeeds.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Harness, Options, sha256};
use ferrovirt_tests::{fixture, reference_sha256};
use rustls::pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How the client goes away.
#[derive(Clone, Copy, Debug)]
enum Vanish {
    /// TCP reset (SO_LINGER 0), as when the client's machine drops off the network.
    Reset,
    /// TCP FIN without TLS close_notify, as when the client process is killed.
    Close,
}

/// Opens TLS to `url` (an https://localhost:PORT base) with `config`, sends a POST of
/// `data.len()` bytes to `route` with `headers`, writes half of `data` and vanishes.
async fn vanish_mid_body(
    url: &str,
    config: rustls::ClientConfig,
    route: &str,
    headers: &str,
    data: &[u8],
    how: Vanish,
) {
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    if let Vanish::Reset = how {
        tcp.set_zero_linger().unwrap();
    }
    let connector = TlsConnector::from(Arc::new(config));
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let head = format!(
        "POST {route} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n{headers}\r\n",
        data.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&data[..data.len() / 2]).await.unwrap();
    tls.flush().await.unwrap();
    // Let the bytes arrive, then go away without a word.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (tcp, _) = tls.into_inner();
    drop(tcp);
}

fn proxy_client_config(harness: &Harness) -> rustls::ClientConfig {
    let roots = uploadproxy::tls::roots_from_pem(harness.pki.proxy_ca.pem.as_bytes()).unwrap();
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// Sends the whole image with `Upload-Offset: 0`, as a second client that knows nothing of
/// the first; asked again while the server still holds the vanished request (503).
async fn upload_whole(harness: &Harness, data: &[u8]) -> (u16, String) {
    for _ in 0..200 {
        let response = harness
            .upload_request()
            .header("Upload-Offset", 0)
            .body(data.to_vec())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        if status != 503 {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the upload server still holds the vanished client's request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_vanishing_through_the_proxy_leaves_no_complete_upload() {
    let image = "v3.qcow2";
    let data = std::fs::read(fixture(image)).unwrap();
    for how in [Vanish::Reset, Vanish::Close] {
        let harness = Harness::start(Options::default()).await;
        let auth = format!("Authorization: Bearer {}\r\n", harness.token());
        vanish_mid_body(
            &harness.proxy_url,
            proxy_client_config(&harness),
            "/v1beta1/upload",
            &auth,
            &data,
            how,
        )
        .await;
        // Half an upload is no disk, and the server counts no more than it got.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !harness.disk().exists(),
            "{how:?}: half an upload is no disk"
        );
        assert!(
            harness.server.committed() <= data.len() as u64 / 2,
            "{how:?}: more committed than was sent"
        );
        // A second client sends the whole image (from offset 0; the overlap with what the
        // server has is dropped) and gets the image.
        let (status, body) = upload_whole(&harness, &data).await;
        assert_eq!(status, 200, "{how:?}: {body}");
        assert_eq!(sha256(&harness.disk()), reference_sha256(image), "{how:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_vanishing_at_the_upload_server_is_abandoned_and_a_new_upload_succeeds() {
    let image = "v3.qcow2.xz";
    let data = std::fs::read(fixture(image)).unwrap();
    let harness = Harness::start(Options {
        server: |config| config.idle_timeout = Duration::from_millis(500),
        ..Options::default()
    })
    .await;
    // Straight to the upload server, as the proxy (its client certificate).
    vanish_mid_body(
        &harness.server_url,
        harness.pki.upstream_tls(common::CLIENT_NAME),
        "/v1beta1/upload",
        "",
        &data,
        Vanish::Reset,
    )
    .await;
    // Nobody resumes: after the idle timeout the upload is abandoned, nothing is left.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while harness.server.committed() != 0 {
        assert!(tokio::time::Instant::now() < deadline, "never abandoned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!harness.disk().exists(), "an abandoned upload left a disk");
    // The server still serves: a new, plain upload of the whole image succeeds.
    let response = harness.upload_request().body(data).send().await.unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    // The abandonment is reported once, to the first request after it (409, offset 0).
    let status = if status == 409 && body.contains("upload abandoned") {
        let data = std::fs::read(fixture(image)).unwrap();
        harness
            .upload_request()
            .body(data)
            .send()
            .await
            .unwrap()
            .status()
    } else {
        status
    };
    assert_eq!(status, 200, "{body}");
    assert_eq!(sha256(&harness.disk()), reference_sha256(image));
}
