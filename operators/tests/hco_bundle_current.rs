//! The CI staleness check of `deploy/hco/`'s generated files: each must equal what
//! `hco-bundle` makes of its source now.

use std::path::PathBuf;

use operators::install::hco_bundle::{GENERATED, REGENERATE};

#[test]
fn the_generated_operator_manifests_are_current() {
    let deploy = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut stale = Vec::new();
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
