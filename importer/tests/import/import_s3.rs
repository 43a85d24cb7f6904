//! S3 imports against a real S3-compatible server on loopback (moto). The signature itself is
//! checked against AWS's published example in `source/s3.rs`; moto accepts any signature.

use ferrovirt_tests::s3::S3Server;
use ferrovirt_tests::{TempDir, fixture, reference_sha256, sha256_file};
use importer::source::http::Credentials;
use importer::source::s3::S3Options;
use importer::{ImportRequest, import};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_objects_import_by_offset_and_streamed() {
    let server = S3Server::start();
    for name in ["zlib.qcow2", "v3.qcow2.xz", "dynamic.vhdx"] {
        server.put("disks", &format!("images/{name}"), &fixture(name));
    }
    let dir = TempDir::new("s3");
    for (name, by_offset) in [
        ("zlib.qcow2", true),
        ("v3.qcow2.xz", false),
        ("dynamic.vhdx", true),
    ] {
        let target = dir.join(name);
        let mut request = ImportRequest::new(format!("s3://disks/images/{name}"), &target);
        request.s3 = Some(S3Options {
            endpoint: Some(server.endpoint()),
            region: Some("eu-west-1".into()),
        });
        request.http.credentials = Some(Credentials {
            username: "AKIDEXAMPLE".into(),
            password: "secret".into(),
        });
        let outcome = import(request)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(outcome.random_access, by_offset, "{name}");
        assert_eq!(
            sha256_file(&target).unwrap(),
            reference_sha256(name),
            "{name}"
        );
    }

    // Path-style http(s) URLs are S3 objects too when asked; a missing key names the cause.
    let mut request = ImportRequest::new(
        format!("{}/disks/images/nothing.qcow2", server.endpoint()),
        dir.join("x"),
    );
    request.s3 = Some(S3Options::default());
    let err = import(request).await.unwrap_err().to_string();
    assert!(err.contains("HTTP 404"), "{err}");
}
