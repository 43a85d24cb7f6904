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

/// Formats `path` as ext4 unless it already is one. No reserved blocks (the volume's owner gets
/// all of it), lazy inode table and journal initialisation (fast on large sparse images).
pub fn ensure_ext4(path: &Path) -> Result<bool> {
    if has_ext4(path)? {
        return Ok(false);
    }
    run(
        "mkfs.ext4",
        &[
            "-q".as_ref(),
            "-F".as_ref(),
            "-m".as_ref(),
            "0".as_ref(),
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
