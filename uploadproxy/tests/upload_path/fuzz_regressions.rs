//! The fuzz targets' seeds and findings, replayed through `uploadproxy::fuzzing` (see
//! docs/reliability.md).

use ferrovirt_tests::fuzz::replay;

#[test]
fn upload_forms() {
    replay("upload_form", uploadproxy::fuzzing::form);
}

#[test]
fn upload_tokens() {
    replay("upload_token", uploadproxy::fuzzing::token);
}
