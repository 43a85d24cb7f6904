//! The fuzz targets' seeds and findings, replayed through `importer::fuzzing` (see
//! docs/reliability.md): a fixed crash stays fixed, and every seed passes the targets' checks.

use ferrovirt_tests::fuzz::replay;
use importer::format::DiskFormat;

#[test]
fn images_of_every_format() {
    replay("image", importer::fuzzing::image);
    for (target, format) in [
        ("qcow2", DiskFormat::Qcow2),
        ("vmdk", DiskFormat::Vmdk),
        ("vhd", DiskFormat::Vhd),
        ("vhdx", DiskFormat::Vhdx),
        ("vdi", DiskFormat::Vdi),
    ] {
        replay(target, |bytes| {
            assert_eq!(importer::format::detect::detect_format(bytes), format);
            importer::fuzzing::image_of_format(bytes, format);
        });
    }
}

#[test]
fn vmdk_descriptors() {
    replay("vmdk_descriptor", importer::fuzzing::vmdk_descriptor);
}

#[test]
fn archives() {
    replay("tar_archive", importer::fuzzing::archive);
    replay("oci_archive", importer::fuzzing::oci_archive);
}

#[test]
fn registry_manifests() {
    replay("registry_manifest", importer::fuzzing::manifest);
}
