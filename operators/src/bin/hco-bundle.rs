//! Writes the generated operator manifests: each operator's `deploy/DIR/operator.yaml`
//! (`operators::install::operator_manifests`), then the files of `deploy/hco/` made from
//! them (`operators::install::hco_bundle`). `cargo run -p ferrovirt-operators --bin
//! hco-bundle` from the workspace root, or with the `deploy/` directory as its argument.

use std::path::PathBuf;

use operators::install::hco_bundle::GENERATED;
use operators::install::operator_manifests;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let deploy = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("deploy"));
    for manifest in operator_manifests::all() {
        let target = deploy.join(manifest.path());
        std::fs::write(&target, manifest.render()?)
            .map_err(|e| format!("writing {}: {e}", target.display()))?;
        println!("{}", target.display());
    }
    for generated in GENERATED {
        let source = deploy.join(generated.source);
        let text = std::fs::read_to_string(&source)
            .map_err(|e| format!("reading {}: {e}", source.display()))?;
        let target = deploy.join("hco").join(generated.file);
        // The file may be a symlink to its source still: replace the link, not the source.
        let _ = std::fs::remove_file(&target);
        std::fs::write(&target, generated.render(&text)?)
            .map_err(|e| format!("writing {}: {e}", target.display()))?;
        println!("{}", target.display());
    }
    Ok(())
}
