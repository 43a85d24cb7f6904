#![no_main]

use importer::format::DiskFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| importer::fuzzing::image_of_format(data, DiskFormat::Vmdk));
