//! The CI staleness check of the generated operator manifests: each operator's
//! `deploy/DIR/operator.yaml`, and `deploy/hco/`'s files made from them, must equal what
//! `hco-bundle` writes now.

use std::path::PathBuf;

use operators::install::hco_bundle::{GENERATED, REGENERATE};
use operators::install::operator_manifests;

#[test]
fn the_generated_operator_manifests_are_current() {
    let deploy = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut stale = Vec::new();
    for manifest in operator_manifests::all() {
        let expected = manifest.render().expect("renders");
        match std::fs::read_to_string(deploy.join(manifest.path())) {
            Ok(committed) if committed == expected => {}
            _ => stale.push(format!("deploy/{}", manifest.path())),
        }
    }
    for generated in GENERATED {
        let source = std::fs::read_to_string(deploy.join(generated.source))
            .unwrap_or_else(|e| panic!("reading deploy/{}: {e}", generated.source));
        let expected = generated.render(&source).expect("renders");
        let path = deploy.join("hco").join(generated.file);
        let is_link = path.symlink_metadata().is_ok_and(|m| m.is_symlink());
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == expected && !is_link => {}
            _ => stale.push(format!("deploy/hco/{}", generated.file)),
        }
    }
    assert!(
        stale.is_empty(),
        "stale: {}; run `{REGENERATE}`",
        stale.join(", ")
    );
}
