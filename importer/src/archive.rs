//! contentType `archive`: a tar stream (compressed or not; decompression happens upstream)
//! extracted into a filesystem volume. Every entry is checked before anything is written:
//! paths that leave the target (`..`, absolute), symlinks that point out of it, hard links to
//! files outside it, and device nodes or FIFOs are refused with the entry's name. File modes
//! are kept; owners are not.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

use crate::error::ImportError;

/// What was extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extracted {
    pub entries: u64,
    pub bytes: u64,
}

fn refused(entry: &Path, why: &str) -> ImportError {
    ImportError::UnsafeArchive {
        entry: entry.display().to_string(),
        reason: why.to_string(),
    }
}

/// Extracts the tar stream `reader` into the existing directory `dir`.
pub fn extract(reader: impl Read, dir: &Path) -> Result<Extracted, ImportError> {
    let target_err = |source: std::io::Error| ImportError::Target {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.is_dir() {
        return Err(target_err(std::io::Error::other(
            "an archive is extracted into an existing directory",
        )));
    }
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(false);
    archive.set_overwrite(true);
    let mut done = Extracted::default();
    for entry in archive.entries().map_err(ImportError::from_read)? {
        let mut entry = entry.map_err(ImportError::from_read)?;
        let path = entry.path().map_err(ImportError::from_read)?.into_owned();
        let inside = inside_path(&path)
            .ok_or_else(|| refused(&path, "its path leaves the target directory"))?;
        match entry.header().entry_type() {
            EntryType::Regular
            | EntryType::Continuous
            | EntryType::Directory
            | EntryType::GNUSparse => {}
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(ImportError::from_read)?
                    .unwrap_or_default();
                let base = inside.parent().unwrap_or(Path::new(""));
                if link.is_absolute() || inside_path(&base.join(&link)).is_none() {
                    return Err(refused(
                        &path,
                        &format!(
                            "it is a symlink to {} outside the target directory",
                            link.display()
                        ),
                    ));
                }
            }
            EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(ImportError::from_read)?
                    .unwrap_or_default();
                if inside_path(&link).is_none() {
                    return Err(refused(
                        &path,
                        &format!(
                            "it is a hard link to {} outside the target directory",
                            link.display()
                        ),
                    ));
                }
            }
            EntryType::Char | EntryType::Block => {
                return Err(refused(&path, "it is a device node"));
            }
            EntryType::Fifo => return Err(refused(&path, "it is a FIFO")),
            // Metadata entries (pax headers, long names) are consumed by the tar reader.
            _ => continue,
        }
        if !entry
            .unpack_in(dir)
            .map_err(|e| refused(&path, &e.to_string()))?
        {
            return Err(refused(&path, "its path leaves the target directory"));
        }
        done.entries += 1;
        done.bytes += entry.size();
    }
    Ok(done)
}

/// The path with `.` removed, if it stays inside the directory it is relative to.
fn inside_path(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_with(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        build(&mut builder);
        builder.into_inner().unwrap()
    }

    fn header(kind: EntryType, size: u64, mode: u32) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(mode);
        h
    }

    #[test]
    fn extracts_files_dirs_links_and_modes() {
        let data = tar_with(|b| {
            b.append_data(&mut header(EntryType::Directory, 0, 0o755), "sub", &[][..])
                .unwrap();
            b.append_data(
                &mut header(EntryType::Regular, 5, 0o750),
                "sub/run.sh",
                &b"hello"[..],
            )
            .unwrap();
            b.append_link(
                &mut header(EntryType::Symlink, 0, 0o777),
                "sub/link",
                "run.sh",
            )
            .unwrap();
            b.append_link(
                &mut header(EntryType::Symlink, 0, 0o777),
                "up",
                "sub/../sub/run.sh",
            )
            .unwrap();
        });
        let dir = tempfile::tempdir().unwrap();
        let done = extract(&data[..], dir.path()).unwrap();
        assert_eq!(done.entries, 4);
        assert_eq!(
            std::fs::read(dir.path().join("sub/link")).unwrap(),
            b"hello"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("sub/run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
    }

    fn assert_refused(data: Vec<u8>, needle: &str) {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("target");
        std::fs::create_dir(&dir).unwrap();
        let err = extract(&data[..], &dir).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
        let outside: Vec<_> = std::fs::read_dir(outer.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            outside,
            vec![std::ffi::OsString::from("target")],
            "something was written outside"
        );
    }

    /// Writes a raw header with a path the tar builder would refuse to write.
    fn raw_entry(path: &str, kind: EntryType, link: Option<&str>, body: &[u8]) -> Vec<u8> {
        let mut h = header(kind, body.len() as u64, 0o644);
        let name = &mut h.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        if let Some(link) = link {
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_cksum();
        let mut out = h.as_bytes().to_vec();
        out.extend_from_slice(body);
        out.resize(out.len().next_multiple_of(512) + 1024, 0);
        out
    }

    #[test]
    fn refuses_escapes_and_devices() {
        assert_refused(
            raw_entry("../evil", EntryType::Regular, None, b"x"),
            "archive entry ../evil refused: its path leaves",
        );
        assert_refused(
            raw_entry("a/../../evil", EntryType::Regular, None, b"x"),
            "leaves the target",
        );
        assert_refused(
            raw_entry("/etc/evil", EntryType::Regular, None, b"x"),
            "leaves the target",
        );
        assert_refused(
            raw_entry("out", EntryType::Symlink, Some("../../etc"), b""),
            "symlink to ../../etc outside",
        );
        assert_refused(
            raw_entry("abs", EntryType::Symlink, Some("/etc/passwd"), b""),
            "symlink to /etc/passwd outside",
        );
        assert_refused(
            raw_entry("hard", EntryType::Link, Some("../x"), b""),
            "hard link to ../x outside",
        );
        assert_refused(raw_entry("dev", EntryType::Block, None, b""), "device node");
        assert_refused(raw_entry("fifo", EntryType::Fifo, None, b""), "FIFO");
    }
}
