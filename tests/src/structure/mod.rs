//! The house rules of the source tree, checked by the test suite: no module cycles, no
//! production file over [`MAX_FILE_LINES`] lines, no production function over
//! [`MAX_FN_LINES`] lines unless it is a data table named in [`DATA_TABLES`].
//!
//! "Production" means what is compiled outside `cfg(test)`: a crate's `src/` less its test
//! modules and `#[test]` functions. Integration tests, benches, fuzz targets and build
//! scripts are not measured.
//!
//! Run it alone with `cargo test -p ferrovirt-tests structure`; a failure lists every
//! offence with its place.

mod graph;
mod source;

use std::fmt;
use std::path::{Path, PathBuf};

pub use source::SourceFile;

/// The most lines a production file may have (test modules not counted).
pub const MAX_FILE_LINES: usize = 1000;

/// The most lines a production function may have, from its `fn` to its closing brace.
pub const MAX_FN_LINES: usize = 120;

/// Functions allowed over [`MAX_FN_LINES`] because they are data (a table written as code),
/// as `(file, function, why)`. Each entry is a decision a reviewer can read.
pub const DATA_TABLES: &[(&str, &str, &str)] = &[];

/// One breach of the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offence {
    /// Modules that use each other's items, directly or through others.
    Cycle {
        crate_dir: String,
        modules: Vec<String>,
    },
    /// A production file over [`MAX_FILE_LINES`].
    LongFile { file: String, lines: usize },
    /// A production function over [`MAX_FN_LINES`] that is not a data table.
    LongFunction {
        file: String,
        line: usize,
        name: String,
        lines: usize,
    },
    /// A source file the parser refused.
    Unparsable { file: String, error: String },
}

impl fmt::Display for Offence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Offence::Cycle { crate_dir, modules } => {
                write!(f, "module cycle in {crate_dir}: {}", modules.join(" -> "))
            }
            Offence::LongFile { file, lines } => write!(
                f,
                "{file}: {lines} production lines (at most {MAX_FILE_LINES}): make it a folder"
            ),
            Offence::LongFunction {
                file,
                line,
                name,
                lines,
            } => write!(
                f,
                "{file}:{line}: fn {name} is {lines} lines (at most {MAX_FN_LINES}): split it into named steps"
            ),
            Offence::Unparsable { file, error } => write!(f, "{file}: cannot parse: {error}"),
        }
    }
}

/// Every offence in the crates of the workspace at `root` (each directory with a
/// `Cargo.toml` and a `src/`, but `fuzz/` and `target/`).
pub fn check_workspace(root: &Path) -> std::io::Result<Vec<Offence>> {
    let mut offences = Vec::new();
    for crate_dir in crate_dirs(root)? {
        offences.extend(check_crate(root, &crate_dir)?);
    }
    Ok(offences)
}

/// Every offence in one crate.
pub fn check_crate(root: &Path, crate_dir: &Path) -> std::io::Result<Vec<Offence>> {
    let mut offences = Vec::new();
    let mut files = Vec::new();
    for path in rust_files(&crate_dir.join("src"))? {
        let shown = shown_path(root, &path);
        let text = std::fs::read_to_string(&path)?;
        match SourceFile::parse(crate_dir, &path, &text) {
            Ok(file) => files.push((shown, file)),
            Err(error) => offences.push(Offence::Unparsable { file: shown, error }),
        }
    }
    let test_modules: Vec<Vec<String>> = files
        .iter()
        .flat_map(|(_, file)| file.test_modules.clone())
        .collect();
    files.retain(|(_, file)| !test_modules.iter().any(|t| file.module.starts_with(t)));
    for (shown, file) in &files {
        offences.extend(size_offences(shown, file));
    }
    let files: Vec<SourceFile> = files.into_iter().map(|(_, file)| file).collect();
    for modules in graph::cycles(&files) {
        offences.push(Offence::Cycle {
            crate_dir: shown_path(root, crate_dir),
            modules,
        });
    }
    Ok(offences)
}

fn size_offences(shown: &str, file: &SourceFile) -> Vec<Offence> {
    let mut offences = Vec::new();
    if file.production_lines > MAX_FILE_LINES {
        offences.push(Offence::LongFile {
            file: shown.to_string(),
            lines: file.production_lines,
        });
    }
    for function in &file.functions {
        let is_table = DATA_TABLES
            .iter()
            .any(|(f, name, _)| *f == shown && *name == function.name);
        if function.lines > MAX_FN_LINES && !is_table {
            offences.push(Offence::LongFunction {
                file: shown.to_string(),
                line: function.line,
                name: function.name.clone(),
                lines: function.lines,
            });
        }
    }
    offences
}

fn crate_dirs(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let dir = entry?.path();
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || name == "fuzz" || name == "target" {
            continue;
        }
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            dirs.push(dir);
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn rust_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn shown_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests;
