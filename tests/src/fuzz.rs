//! Replaying fuzz inputs as tests: the seeds `fixtures/fuzz-seeds.sh` makes and what the fuzz
//! targets found (`fuzz/regressions/<target>/`), through the entry points the targets use.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::repo_root;

/// The seed corpora, generated once (and cached) by `fixtures/fuzz-seeds.sh`.
fn seeds() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = repo_root().join("target/fuzz-seeds");
        crate::run_fixture_script("fuzz-seeds.sh", &[dir.as_os_str()]);
        dir
    })
}

/// Runs `run` on every seed and every committed regression input of fuzz target `target`;
/// returns how many inputs ran. A target with no seeds is a mistake in the seed script.
pub fn replay(target: &str, run: impl Fn(&[u8])) -> usize {
    let regressions = repo_root().join("fuzz/regressions").join(target);
    let seeded = inputs(&seeds().join(target));
    assert!(
        !seeded.is_empty(),
        "fixtures/fuzz-seeds.sh made no seeds for {target}"
    );
    let all: Vec<PathBuf> = seeded.into_iter().chain(inputs(&regressions)).collect();
    for path in &all {
        let bytes = std::fs::read(path).expect("read a fuzz input");
        eprintln!("replaying {}", path.display());
        run(&bytes);
    }
    all.len()
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.expect("a directory entry").path())
            .collect(),
        Err(_) => Vec::new(),
    };
    paths.sort();
    paths
}
