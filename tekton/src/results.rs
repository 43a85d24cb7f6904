//! Task results as Tekton reads them: one file a result under the results directory
//! (`/tekton/results` in a TaskRun's pod), holding the value with no trailing newline.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// Where results go.
#[derive(Debug, Clone)]
pub struct Results {
    dir: PathBuf,
}

/// Tekton's results directory in a TaskRun's pod.
pub const TEKTON_RESULTS_DIR: &str = "/tekton/results";

impl Results {
    /// Results written under `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Writes result `name` (mode 0644, replaced if there).
    pub fn write(&self, name: &str, value: &str) -> std::io::Result<()> {
        let path = self.dir.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        file.write_all(value.as_bytes())
    }

    /// Writes each `(name, value)`, stopping at the first failure.
    pub fn write_all(&self, values: &[(&str, &str)]) -> std::io::Result<()> {
        values
            .iter()
            .try_for_each(|(name, value)| self.write(name, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_the_bare_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        let results = Results::new(dir.path());
        results
            .write_all(&[("name", "vm-1"), ("namespace", "default")])
            .expect("written");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("name")).unwrap(),
            "vm-1"
        );
        assert!(results.write("x", "y").is_ok());
        let missing = Results::new(dir.path().join("nope"));
        assert!(
            missing
                .write("name", "v")
                .unwrap_err()
                .to_string()
                .contains("nope")
        );
    }
}
