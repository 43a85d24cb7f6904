//! The ext4 filesystem inside a filesystem volume's image: detect, create, grow.
//!
//! The image is formatted on first stage, not at CreateVolume, so provisioning stays a metadata
//! operation; an image that already carries ext4 (restored from a snapshot, cloned) is never
//! formatted again.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use crate::error::{Error, IoContext, Result};

/// Whether the image or device at `path` holds an ext2/3/4 superblock.
pub fn has_ext4(path: &Path) -> Result<bool> {
    let file = File::open(path).at("open", path)?;
    let mut magic = [0u8; 2];
    // The superblock starts at byte 1024; its magic 0xEF53 is at offset 56, little-endian.
    match file.read_exact_at(&mut magic, 1024 + 56) {
        Ok(()) => Ok(magic == [0x53, 0xef]),
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(err) => Err(Error::io("read", path, err)),
    }
}

fn run(program: &str, args: &[&std::ffi::OsStr], ok_codes: &[i32]) -> Result<()> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|err| Error::Command {
            program: program.into(),
            detail: err.to_string(),
        })?;
    if !output.status.code().is_some_and(|c| ok_codes.contains(&c)) {
        return Err(Error::Command {
            program: program.into(),
            detail: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(())
}

const MIB: u64 = 1 << 20;

/// The ext4 journal for a filesystem of `bytes`: 1/256 of it, between 4 and 64 MiB.
fn journal_mib(bytes: u64) -> u64 {
    (bytes / 256 / MIB).clamp(4, 64)
}

/// How large the image of a filesystem volume is so that its ext4 filesystem offers at least
/// `capacity` bytes: a hostpath volume's capacity is what its user can write (on HPP it is a
/// directory), so the journal, inode tables and bitmaps come on top (1% plus 4 MiB covers
/// them with the options `ensure_ext4` formats with, with room for the files' extent trees).
pub fn image_len(capacity: u64) -> u64 {
    capacity
        .saturating_add(journal_mib(capacity) * MIB)
        .saturating_add(capacity / 100)
        .saturating_add(4 * MIB)
}

/// The largest capacity whose image (see [`image_len`]) is at most `len` bytes; 0 when not
/// even an empty filesystem's image fits.
pub fn capacity_within(len: u64) -> u64 {
    if image_len(0) > len {
        return 0;
    }
    // image_len grows with the capacity and is never below it: search [0, len].
    let (mut fits, mut too_big) = (0u64, len.saturating_add(1));
    while too_big - fits > 1 {
        let mid = fits + (too_big - fits) / 2;
        if image_len(mid) <= len {
            fits = mid;
        } else {
            too_big = mid;
        }
    }
    fits
}

/// Formats `path` as ext4 unless it already is one. No reserved blocks (the volume's owner gets
/// all of it), one inode per MiB (a volume holds a few large files: a disk image), a journal
/// sized as `image_len` budgets, lazy inode table and journal initialisation (fast on large
/// sparse images).
pub fn ensure_ext4(path: &Path) -> Result<bool> {
    if has_ext4(path)? {
        return Ok(false);
    }
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let journal = format!("size={}", journal_mib(len));
    run(
        "mkfs.ext4",
        &[
            "-q".as_ref(),
            "-F".as_ref(),
            "-m".as_ref(),
            "0".as_ref(),
            "-b".as_ref(),
            "4096".as_ref(),
            "-T".as_ref(),
            "largefile".as_ref(),
            "-J".as_ref(),
            journal.as_ref(),
            "-E".as_ref(),
            "nodiscard,lazy_itable_init=1,lazy_journal_init=1".as_ref(),
            path.as_os_str(),
        ],
        &[0],
    )?;
    Ok(true)
}

/// Grows the mounted ext4 filesystem on `device` to fill the device (online resize: the kernel
/// requires CAP_SYS_RESOURCE for it, which a privileged node plugin has).
pub fn grow_ext4_online(device: &Path) -> Result<()> {
    run("resize2fs", &[device.as_os_str()], &[0])
}

/// Grows the unmounted ext4 filesystem on `path` (image or device) to fill it: checks it first,
/// as resize2fs requires, then resizes. Needs no special capability.
pub fn grow_ext4_offline(path: &Path) -> Result<()> {
    // e2fsck -p: 0 clean, 1 errors corrected, 2 corrected and reboot advised (not for us).
    run(
        "e2fsck",
        &["-f".as_ref(), "-p".as_ref(), path.as_os_str()],
        &[0, 1, 2],
    )?;
    run("resize2fs", &[path.as_os_str()], &[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_within_is_the_largest_whose_image_fits() {
        assert_eq!(capacity_within(image_len(0) - 1), 0);
        for len in [image_len(0), 9 * MIB, 72 * MIB + 123, 3 << 30, 70 << 30] {
            let capacity = capacity_within(len);
            assert!(image_len(capacity) <= len, "{len}: {capacity}");
            assert!(image_len(capacity + 1) > len, "{len}: {capacity}");
        }
    }
}
