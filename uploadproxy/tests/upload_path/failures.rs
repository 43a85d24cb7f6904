//! Uploads that must not succeed, and the status codes they get: a second upload while one
//! is in progress (503), a checksum mismatch (500, nothing left behind), an image that does
//! not fit (400 naming both sizes).

use crate::common;

use std::sync::Arc;

use common::{Harness, Options, sha256};
use ferrovirt_tests::{fixture, reference_sha256};
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_upload_during_one_is_503() {
    let harness = Harness::start(Options::default()).await;
    let data = std::fs::read(fixture("raw.img")).unwrap();
    let release = Arc::new(Notify::new());
    // The first upload sends 1 MiB, then waits.
    let first = {
        let (head, tail) = data.split_at(1 << 20);
        let (head, tail) = (head.to_vec(), tail.to_vec());
        let release = release.clone();
        let stream = futures_util::stream::unfold(0, move |step| {
            let (head, tail, release) = (head.clone(), tail.clone(), release.clone());
            async move {
                match step {
                    0 => Some((Ok::<_, std::io::Error>(head), 1)),
                    1 => {
                        release.notified().await;
                        Some((Ok(tail), 2))
                    }
                    _ => None,
                }
            }
        });
        let request = harness
            .upload_request()
            .body(reqwest::Body::wrap_stream(stream));
        tokio::spawn(request.send())
    };
    while harness.server.committed() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let auth = format!("Authorization: Bearer {}", harness.token());
    let second = harness.curl(&["-H", &auth, "-d", "second", &harness.url("/v1beta1/upload")]);
    assert_eq!(second.status, 503, "{}", second.body);
    release.notify_one();
    let response = first.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(sha256(&harness.disk()), reference_sha256("raw.img"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checksum_mismatch_fails_and_a_match_succeeds() {
    let harness = Harness::start(Options::default()).await;
    let image = fixture("v3.qcow2.xz");
    let auth = format!("Authorization: Bearer {}", harness.token());
    let upload = |checksum: String| {
        harness.curl(&[
            "-H",
            &auth,
            "-H",
            &format!("X-Checksum: {checksum}"),
            "-X",
            "POST",
            "-T",
            image.to_str().unwrap(),
            &harness.url("/v1beta1/upload"),
        ])
    };
    let wrong = upload(format!("sha256:{}", "0".repeat(64)));
    assert_eq!(wrong.status, 500, "{}", wrong.body);
    assert!(wrong.body.contains("checksum mismatch"), "{}", wrong.body);
    assert!(!harness.disk().exists(), "a failed upload leaves no image");
    // The failed upload frees the server for another try.
    let right = upload(format!("sha256:{}", sha256(&image)));
    assert_eq!(right.status, 200, "{}", right.body);
    assert_eq!(sha256(&harness.disk()), reference_sha256("v3.qcow2.xz"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_larger_than_the_volume_is_400() {
    let harness = Harness::start(Options {
        server: |config| config.image_size = Some(1 << 20),
        ..Options::default()
    })
    .await;
    let auth = format!("Authorization: Bearer {}", harness.token());
    let image = fixture("v3.qcow2");
    let result = harness.curl(&[
        "-H",
        &auth,
        "-X",
        "POST",
        "-T",
        image.to_str().unwrap(),
        &harness.url("/v1beta1/upload"),
    ]);
    assert_eq!(result.status, 400, "{}", result.body);
    assert!(result.body.contains("1048576"), "{}", result.body);
    assert!(result.body.contains("virtual size"), "{}", result.body);
}
