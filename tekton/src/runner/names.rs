//! The names Tekton gives the objects a run makes: a child's name from its parent's and a
//! suffix, kept to 63 characters as knative's `kmeta.ChildName` keeps it (a TaskRun's pod is
//! `ChildName(taskRun, "-pod")`, a PipelineRun's TaskRun `ChildName(pipelineRun,
//! "-" + pipelineTask)`), and a step's container name.

use md5::{Digest, Md5};

/// The longest name a child may have (a DNS label).
const LONGEST: usize = 63;
/// How much of a long parent is kept before the hash of it.
const HEAD: usize = LONGEST - 32;

/// `parent` + `suffix`, or, where that is longer than 63 characters, the start of `parent`
/// with the MD5 of the parent (or of the whole, for a suffix of 31 characters or more) in hex.
pub fn child_name(parent: &str, suffix: &str) -> String {
    if parent.len() <= LONGEST.saturating_sub(suffix.len()) {
        return format!("{parent}{suffix}");
    }
    if HEAD <= suffix.len() {
        let hash = hex(&Md5::digest(format!("{parent}{suffix}").as_bytes()));
        let mut name = format!("{}{hash}", prefix(parent, HEAD));
        if name.len() < LONGEST {
            name.push_str(prefix(suffix, LONGEST - name.len()));
        }
        return trim_to_alphanumeric(&name).to_string();
    }
    let hash = hex(&Md5::digest(parent.as_bytes()));
    format!("{}{hash}{suffix}", prefix(parent, HEAD - suffix.len()))
}

/// The container of step `index` named `name` (`step-NAME`, or `step-unnamed-INDEX`), cut
/// to 63 characters with no trailing punctuation, as Tekton names it.
pub fn step_container_name(name: &str, index: usize) -> String {
    let full = if name.is_empty() {
        format!("step-unnamed-{index}")
    } else {
        format!("step-{name}")
    };
    trim_to_alphanumeric(prefix(&full, LONGEST)).to_string()
}

/// The first `len` bytes of `text` (Kubernetes names are ASCII), or all of it.
fn prefix(text: &str, len: usize) -> &str {
    text.get(..len).unwrap_or(text)
}

fn trim_to_alphanumeric(name: &str) -> &str {
    name.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_parent_keeps_its_name() {
        assert_eq!(child_name("build", "-pod"), "build-pod");
        let exactly = "a".repeat(59);
        assert_eq!(child_name(&exactly, "-pod"), format!("{exactly}-pod"));
    }

    #[test]
    fn a_long_parent_is_cut_and_hashed() {
        let parent = "a".repeat(60);
        let name = child_name(&parent, "-pod");
        // 27 characters of the parent, its MD5, the suffix.
        let hash = hex(&Md5::digest(parent.as_bytes()));
        assert_eq!(name, format!("{}{hash}-pod", "a".repeat(27)));
        assert_eq!(name.len(), 63);
    }

    #[test]
    fn a_long_suffix_hashes_the_whole() {
        let parent = "p".repeat(40);
        let suffix = format!("-{}", "s".repeat(40));
        let name = child_name(&parent, &suffix);
        let hash = hex(&Md5::digest(format!("{parent}{suffix}").as_bytes()));
        assert_eq!(name, format!("{}{hash}", "p".repeat(31)));
        // A short parent is padded with the suffix's start, less trailing punctuation.
        let name = child_name("pr", &format!("-{}", "x".repeat(70)));
        assert_eq!(name.len(), 63);
        assert!(name.starts_with("pr") && name.ends_with('x'), "{name}");
    }

    #[test]
    fn steps_are_named_as_tekton_names_their_containers() {
        assert_eq!(step_container_name("create-vm", 0), "step-create-vm");
        assert_eq!(step_container_name("", 2), "step-unnamed-2");
        let long = format!("{}-", "n".repeat(58));
        assert_eq!(
            step_container_name(&long, 0),
            format!("step-{}", "n".repeat(58))
        );
    }
}
