//! The pod network of one machine: each pod gets a loopback address of its own (all of
//! 127.0.0.0/8 answers on Linux with no configuration), so pods listen on the ports their
//! containers declare without clashing. Each running platform claims a /16 of its own,
//! `127.<block>.0.0`, by holding an exclusive lock on a file named after it in the
//! temporary directory: two platforms on one machine (parallel tests, say) never hand out
//! the same address, and a block is free again when its holder exits, however it exits.

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::fs::{FlockOperation, flock};

/// The blocks tried, in order: 127.1/16 first (127.0/16 holds 127.0.0.1).
const BLOCKS: std::ops::RangeInclusive<u8> = 1..=254;
/// Addresses a block hands out before it wraps (x.y.0.0 and the last ones are skipped).
const ADDRESSES: u32 = 65_534;

/// A claimed /16 and the next address in it.
pub struct PodNetwork {
    block: u8,
    next: AtomicU32,
    /// Held open for the lock's sake.
    _lock: File,
}

impl PodNetwork {
    /// Claims the first free block.
    pub fn claim() -> std::io::Result<Self> {
        let mut last_error = None;
        for block in BLOCKS {
            let path = lock_path(block);
            let file = match File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
            {
                Ok(file) => file,
                Err(err) => {
                    last_error = Some(err);
                    continue;
                }
            };
            if flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok() {
                tracing::info!(network = %format!("127.{block}.0.0/16"), "pod network claimed");
                return Ok(Self {
                    block,
                    next: AtomicU32::new(0),
                    _lock: file,
                });
            }
        }
        Err(last_error.unwrap_or_else(|| {
            std::io::Error::other("every 127.N.0.0/16 pod network is held by another platform")
        }))
    }

    /// The next pod address.
    pub fn next_address(&self) -> Ipv4Addr {
        // 127.B.0.2 onwards, as before: .0.0 and .0.1 are left out.
        let n = self.next.fetch_add(1, Ordering::Relaxed) % ADDRESSES + 2;
        Ipv4Addr::new(127, self.block, (n >> 8) as u8, (n & 0xff) as u8)
    }
}

fn lock_path(block: u8) -> PathBuf {
    std::env::temp_dir().join(format!("ferrovirt-pod-network-127.{block}.lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_platforms_get_different_blocks_and_a_freed_block_is_reused() {
        let first = PodNetwork::claim().unwrap();
        let second = PodNetwork::claim().unwrap();
        assert_ne!(first.block, second.block);
        let a = first.next_address();
        let b = first.next_address();
        assert_ne!(a, b);
        assert_eq!(a.octets()[..2], [127, first.block]);
        let freed = second.block;
        let held = File::options().write(true).open(lock_path(freed)).unwrap();
        assert!(flock(&held, FlockOperation::NonBlockingLockExclusive).is_err());
        drop(second);
        assert!(flock(&held, FlockOperation::NonBlockingLockExclusive).is_ok());
    }
}
