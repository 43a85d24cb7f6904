//! Every fixture imported from a local file must be byte-identical to `qemu-img convert -O
//! raw`; broken and unsupported images must fail with a message naming the cause.

use std::path::Path;

use ferrovirt_tests::{
    TempDir, fixture, reference_images, reference_sha256, reference_size, sha256_file,
};
use importer::format::DiskFormat;
use importer::{ContentType, ImportError, ImportRequest, import};

async fn import_to(source: &Path, target: &Path) -> Result<importer::ImportOutcome, ImportError> {
    import(ImportRequest::new(source.to_str().unwrap(), target)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_matches_qemu_img() {
    let names = reference_images();
    assert!(
        names.len() >= 30,
        "expected the full fixture set, found {names:?}"
    );
    let dir = TempDir::new("file-fixtures");
    for batch in names.chunks(4) {
        let mut tasks = tokio::task::JoinSet::new();
        for name in batch {
            let (name, target) = (name.clone(), dir.join(name));
            tasks.spawn(async move {
                let outcome = import_to(&fixture(&name), &target).await;
                (name, target, outcome)
            });
        }
        while let Some(done) = tasks.join_next().await {
            let (name, target, outcome) = done.unwrap();
            let outcome = outcome.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                std::fs::metadata(&target).unwrap().len(),
                reference_size(&name),
                "{name}: size"
            );
            assert_eq!(
                sha256_file(&target).unwrap(),
                reference_sha256(&name),
                "{name}: content differs from qemu-img"
            );
            let by_tables = [".qcow2", ".vmdk", ".vhd", ".vhdx", ".vdi"]
                .iter()
                .any(|ext| name.ends_with(ext));
            // A flat VMDK is followed to its raw extent; the others are streamed by design.
            let streamed_anyway =
                ["stream.vmdk", "fixed.vhd", "flat.vmdk"].contains(&name.as_str());
            assert_eq!(
                outcome.random_access,
                by_tables && !streamed_anyway,
                "{name}: access mode"
            );
            std::fs::remove_file(&target).unwrap();
        }
    }
}

#[tokio::test]
async fn output_is_sparse() {
    let dir = TempDir::new("sparse");
    let target = dir.join("out.raw");
    import_to(&fixture("v3.qcow2"), &target).await.unwrap();
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&target).unwrap();
    assert!(
        meta.blocks() * 512 < meta.len() * 3 / 4,
        "zero regions were written: {} of {} bytes allocated",
        meta.blocks() * 512,
        meta.len()
    );
    assert_eq!(meta.mode() & 0o777, 0o660);
}

#[tokio::test]
async fn requested_size_grows_the_target_and_preallocates() {
    let dir = TempDir::new("resize");
    let target = dir.join("out.raw");
    let mut request = ImportRequest::new(fixture("zlib.qcow2").to_str().unwrap(), &target);
    request.size = Some(64 << 20);
    request.preallocate = true;
    let outcome = import(request).await.unwrap();
    assert_eq!(outcome.target_size, 64 << 20);
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&target).unwrap();
    assert_eq!(meta.len(), 64 << 20);
    assert!(meta.blocks() * 512 >= 64 << 20, "preallocation left holes");
    // The image is a prefix; the rest reads as zeros.
    let data = std::fs::read(&target).unwrap();
    let reference = reference_size("zlib.qcow2") as usize;
    assert!(data[reference..].iter().all(|&b| b == 0));
}

async fn expect_failure(name: &str, needle: &str) -> ImportError {
    let dir = TempDir::new("failure");
    let target = dir.join("out.raw");
    let err = import_to(&fixture(name), &target).await.expect_err(name);
    assert!(
        err.to_string().contains(needle),
        "{name}: {err:?} lacks {needle:?}"
    );
    assert!(!target.exists(), "{name}: a failed import left a target");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "{name}: staging file left behind"
    );
    err
}

#[tokio::test]
async fn malformed_and_unsupported_images_fail_clearly() {
    expect_failure("bad-l1.qcow2", "L1 table size of 2147483647 entries").await;
    expect_failure("backing.qcow2", "backing file \"base.qcow2\"").await;
    expect_failure("encrypted.qcow2", "encrypted").await;
    expect_failure("truncated.qcow2", "truncated").await;
    let err = expect_failure("small.tar", "tar archive images are not supported").await;
    assert!(matches!(
        err,
        ImportError::UnsupportedFormat(DiskFormat::Tar)
    ));
}

#[tokio::test]
async fn formats_are_reported() {
    let dir = TempDir::new("formats");
    for (name, format) in [
        ("sparse.vmdk", DiskFormat::Vmdk),
        ("stream.vmdk.gz", DiskFormat::Vmdk),
        ("fixed.vhd", DiskFormat::Vhd),
        ("dynamic.vhd.xz", DiskFormat::Vhd),
        ("fixed.vhdx", DiskFormat::Vhdx),
        ("static.vdi", DiskFormat::Vdi),
    ] {
        let outcome = import_to(&fixture(name), &dir.join(name))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(outcome.format, format, "{name}");
        assert_eq!(outcome.virtual_size, reference_size(name), "{name}");
    }
}

#[tokio::test]
async fn a_requested_size_below_the_virtual_size_is_refused_before_writing() {
    let dir = TempDir::new("too-small");
    let target = dir.join("out.raw");
    let mut request = ImportRequest::new(fixture("v3.qcow2").to_str().unwrap(), &target);
    request.size = Some(1 << 20);
    let err = import(request).await.unwrap_err();
    let virtual_size = reference_size("v3.qcow2");
    assert_eq!(
        err.to_string(),
        format!(
            "requested size 1048576 is too small for the image's virtual size {virtual_size}: \
             a larger volume is required"
        )
    );
    assert!(!target.exists());
}

#[tokio::test]
async fn compressed_raw_larger_than_the_requested_size_fails() {
    let dir = TempDir::new("raw-limit");
    let target = dir.join("out.raw");
    let mut request = ImportRequest::new(fixture("raw.img.gz").to_str().unwrap(), &target);
    request.size = Some(8 << 20);
    let err = import(request).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("larger than the requested size 8388608"),
        "{err}"
    );
    assert!(!target.exists());
}

#[tokio::test]
async fn checksums_over_the_transferred_bytes() {
    let dir = TempDir::new("checksum");
    let target = dir.join("out.raw");
    let source = fixture("v3.qcow2.gz");
    let actual = sha256_file(&source).unwrap();
    let mut request = ImportRequest::new(source.to_str().unwrap(), &target);
    request.checksum = Some(format!("sha256:{actual}").parse().unwrap());
    import(request.clone()).await.unwrap();
    assert_eq!(
        sha256_file(&target).unwrap(),
        reference_sha256("v3.qcow2.gz")
    );

    // A wrong checksum fails, and the existing target is left as it was.
    let before = sha256_file(&target).unwrap();
    let wrong = format!("sha256:{}", "0".repeat(64));
    request.checksum = Some(wrong.parse().unwrap());
    let err = import(request.clone()).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("checksum mismatch: expected sha256:000"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(&format!("calculated sha256:{actual}")),
        "{err}"
    );
    assert_eq!(sha256_file(&target).unwrap(), before);

    // A plain qcow2 with a checksum is streamed in order so that every byte is hashed.
    let source = fixture("zstd.qcow2");
    let mut request = ImportRequest::new(source.to_str().unwrap(), dir.join("seq.raw"));
    request.checksum = Some(format!("md5:{}", md5_of(&source)).parse().unwrap());
    let outcome = import(request).await.unwrap();
    assert!(!outcome.random_access);
    assert_eq!(
        sha256_file(&dir.join("seq.raw")).unwrap(),
        reference_sha256("zstd.qcow2")
    );
}

fn md5_of(path: &Path) -> String {
    let out = std::process::Command::new("md5sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..32].to_string()
}

#[tokio::test]
async fn out_of_order_clusters_spill_to_a_file_when_memory_is_short() {
    let dir = TempDir::new("spill");
    let target = dir.join("out.raw");
    // Compressed, so the image can only be read in order: clusters before their tables.
    let mut request = ImportRequest::new(fixture("reordered.qcow2").to_str().unwrap(), &target);
    request.checksum = Some(
        format!(
            "sha256:{}",
            sha256_file(&fixture("reordered.qcow2")).unwrap()
        )
        .parse()
        .unwrap(),
    );
    request.hold.memory = 1 << 20;
    request.hold.spill_dir = Some(dir.path().to_path_buf());
    let outcome = import(request).await.unwrap();
    assert!(!outcome.random_access);
    assert_eq!(
        sha256_file(&target).unwrap(),
        reference_sha256("reordered.qcow2")
    );
}

#[tokio::test]
async fn missing_source_and_unknown_scheme() {
    let dir = TempDir::new("missing");
    let err = import_to(Path::new("/nonexistent/disk.qcow2"), &dir.join("o"))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot open source /nonexistent/disk.qcow2"),
        "{err}"
    );
    let err = import(ImportRequest::new("ftp://host/disk.img", dir.join("o")))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("unsupported scheme \"ftp\""),
        "{err}"
    );
}

#[tokio::test]
async fn archives_extract_into_a_directory() {
    let dir = TempDir::new("archive");
    let target = dir.join("volume");
    std::fs::create_dir(&target).unwrap();
    let mut request = ImportRequest::new(fixture("small.tar.gz").to_str().unwrap(), &target);
    request.content_type = ContentType::Archive;
    let outcome = import(request).await.unwrap();
    assert_eq!(outcome.format, DiskFormat::Tar);
    assert_eq!(
        std::fs::read_to_string(target.join("hello.txt")).unwrap(),
        "hello from ferrovirt\n"
    );
    assert_eq!(
        std::fs::metadata(target.join("disk.img")).unwrap().len(),
        1 << 20
    );

    // A traversal entry is refused and nothing lands outside the target.
    let evil_target = dir.join("evil-volume");
    std::fs::create_dir(&evil_target).unwrap();
    let mut request = ImportRequest::new(fixture("evil.tar").to_str().unwrap(), &evil_target);
    request.content_type = ContentType::Archive;
    let err = import(request).await.unwrap_err().to_string();
    assert_eq!(
        err,
        "archive entry ../evil.txt refused: its path leaves the target directory"
    );
    assert!(!dir.join("evil.txt").exists());

    // A disk image is not an archive.
    let mut request = ImportRequest::new(fixture("v3.qcow2").to_str().unwrap(), &evil_target);
    request.content_type = ContentType::Archive;
    let err = import(request).await.unwrap_err().to_string();
    assert!(
        err.contains("content type archive needs a tar archive, this is a qcow2 image"),
        "{err}"
    );
}
