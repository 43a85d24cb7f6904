//! Uploads through the proxy to an upload server, with curl and reqwest as clients: every
//! route, raw, qcow2 and xz-compressed qcow2 images, each ending byte-identical to
//! `qemu-img convert -O raw` (the fixtures' reference digests).

use crate::common;

use common::{Harness, Options, sha256};
use ferrovirt_tests::{fixture, reference_sha256};
use importer::ContentType;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_upload_with_curl_raw() {
    let harness = Harness::start(Options::default()).await;
    let auth = format!("Authorization: Bearer {}", harness.token());
    let image = fixture("raw.img");
    let result = harness.curl(&[
        "-H",
        &auth,
        "-X",
        "POST",
        "-T",
        image.to_str().unwrap(),
        &harness.url("/v1beta1/upload"),
    ]);
    assert_eq!(result.status, 200, "{} {}", result.body, result.stderr);
    // A sync upload answers once the volume is complete.
    assert_eq!(sha256(&harness.disk()), reference_sha256("raw.img"));
    // A finished upload server takes no more.
    let again = harness.curl(&["-H", &auth, "-d", "x", &harness.url("/v1beta1/upload")]);
    assert_eq!(again.status, 409, "{}", again.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_upload_with_reqwest_qcow2() {
    let harness = Harness::start(Options::default()).await;
    // Clients discover async support with HEAD.
    let head = harness
        .client()
        .head(harness.url("/v1beta1/upload-async"))
        .bearer_auth(harness.token())
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    let body = tokio::fs::read(fixture("v3.qcow2")).await.unwrap();
    let response = harness
        .client()
        .post(harness.url("/v1beta1/upload-async"))
        .bearer_auth(harness.token())
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    harness.completed().await;
    assert_eq!(sha256(&harness.disk()), reference_sha256("v3.qcow2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_upload_with_curl_qcow2_xz() {
    let harness = Harness::start(Options::default()).await;
    let auth = format!("Authorization: Bearer {}", harness.token());
    let file = format!("file=@{}", fixture("v3.qcow2.xz").display());
    let result = harness.curl(&[
        "-H",
        &auth,
        "-F",
        "comment=ignored",
        "-F",
        &file,
        &harness.url("/v1beta1/upload-form"),
    ]);
    assert_eq!(result.status, 200, "{} {}", result.body, result.stderr);
    assert_eq!(sha256(&harness.disk()), reference_sha256("v3.qcow2.xz"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_async_upload_with_curl_raw_and_alpha_alias() {
    let harness = Harness::start(Options::default()).await;
    let auth = format!("Authorization: Bearer {}", harness.token());
    let file = format!("file=@{}", fixture("raw.img").display());
    let result = harness.curl(&[
        "-H",
        &auth,
        "-F",
        &file,
        &harness.url("/v1alpha1/upload-form-async"),
    ]);
    assert_eq!(result.status, 200, "{} {}", result.body, result.stderr);
    harness.completed().await;
    assert_eq!(sha256(&harness.disk()), reference_sha256("raw.img"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_upload_with_reqwest_streamed_qcow2_xz() {
    let harness = Harness::start(Options::default()).await;
    // A streamed body (chunked), as a client reading a file as it goes sends it.
    let file = tokio::fs::File::open(fixture("zstd.qcow2.xz"))
        .await
        .unwrap();
    let stream = tokio_util_stream(file);
    let response = harness
        .upload_request()
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    assert_eq!(sha256(&harness.disk()), reference_sha256("zstd.qcow2.xz"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_pvc_rewrites_to_the_archive_route() {
    let harness = Harness::start(Options {
        content_type: ContentType::Archive,
        ..Options::default()
    })
    .await;
    let auth = format!("Authorization: Bearer {}", harness.token());
    let image = fixture("small.tar");
    // The client uses the ordinary route; the PVC's content type sends it to the archive one.
    let result = harness.curl(&[
        "-H",
        &auth,
        "-X",
        "POST",
        "-T",
        image.to_str().unwrap(),
        &harness.url("/v1beta1/upload"),
    ]);
    assert_eq!(result.status, 200, "{} {}", result.body, result.stderr);
    let archive = harness.dir.join("archive");
    assert_eq!(
        std::fs::read_to_string(archive.join("hello.txt")).unwrap(),
        "hello from ferrovirt\n"
    );
    assert_eq!(
        std::fs::metadata(archive.join("disk.img")).unwrap().len(),
        1 << 20
    );
    assert!(!harness.disk().exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_content_type_header_on_the_server() {
    let harness = Harness::start(Options::default()).await;
    let auth = format!("Authorization: Bearer {}", harness.token());
    let image = fixture("small.tar.gz");
    let result = harness.curl(&[
        "-H",
        &auth,
        "-H",
        "x-cdi-content-type: archive",
        "-X",
        "POST",
        "-T",
        image.to_str().unwrap(),
        &harness.url("/v1beta1/upload"),
    ]);
    assert_eq!(result.status, 200, "{} {}", result.body, result.stderr);
    assert!(harness.dir.join("archive/hello.txt").exists());
}

/// A file as a stream of 64 KiB chunks.
fn tokio_util_stream(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static {
    use tokio::io::AsyncReadExt;
    futures_util::stream::unfold(file, |mut file| async move {
        let mut buf = vec![0u8; 64 << 10];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(buf), file))
            }
            Err(err) => Some((Err(err), file)),
        }
    })
}

/// A clone stream is the volume's bytes as they are: a disk that starts like a gzip file and
/// ends like a fixed VHD is written unchanged, not decompressed or trimmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_stream_is_written_verbatim() {
    let harness = Harness::start(Options::default()).await;
    let auth = format!("Authorization: Bearer {}", harness.token());
    let volume = harness.dir.join("volume.vhd");
    let made = std::process::Command::new("qemu-img")
        .args(["create", "-q", "-f", "vpc", "-o", "subformat=fixed"])
        .arg(&volume)
        .arg("4M")
        .status()
        .expect("qemu-img");
    assert!(made.success());
    {
        use std::io::{Seek, Write};
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(&volume)
            .unwrap();
        file.write_all(&[0x1f, 0x8b, 0x08, 0x00]).unwrap();
        file.seek(std::io::SeekFrom::Start(1 << 20)).unwrap();
        file.write_all(b"data in the middle").unwrap();
    }
    let wire = harness.dir.join("volume.zst");
    let encoded = std::process::Command::new("zstd")
        .args(["-q", "-f", "-o"])
        .arg(&wire)
        .arg(&volume)
        .status()
        .expect("zstd");
    assert!(encoded.success());

    // A small body: the server refuses before reading it, and a large one could still be
    // in flight through the proxy when it answers.
    let unencoded = harness.curl(&[
        "-H",
        &auth,
        "-H",
        "x-cdi-content-type: blockdevice-clone",
        "-X",
        "POST",
        "--data-binary",
        "raw bytes, not zstd",
        &harness.url("/v1beta1/upload"),
    ]);
    assert_eq!(unencoded.status, 400, "{}", unencoded.body);
    assert!(
        unencoded.body.contains("Content-Encoding: zstd"),
        "{}",
        unencoded.body
    );

    let result = harness.curl(&[
        "-H",
        &auth,
        "-H",
        "x-cdi-content-type: blockdevice-clone",
        "-H",
        "Content-Encoding: zstd",
        "-X",
        "POST",
        "-T",
        wire.to_str().unwrap(),
        &harness.url("/v1beta1/upload"),
    ]);
    assert_eq!(result.status, 200, "{} {}", result.body, result.stderr);
    assert_eq!(sha256(&harness.disk()), sha256(&volume));
}
