//! The pod network of one machine: each pod gets a loopback address of its own (all of
//! 127.0.0.0/8 answers on Linux with no configuration), so pods listen on the ports their
//! containers declare without clashing. Each running platform claims a /16 of its own,
//! `127.<block>.0.0`, by holding an exclusive lock on a file named after it in the
//! temporary directory: two platforms on one machine (parallel tests, say) never hand out
//! the same address, and a block is free again when its holder exits, however it exits.
//!
//! Addresses outlive a restart of the platform, as a pod's IP outlives a kubelet restart:
//! the block is recorded in the node's state directory and claimed again first, and a pod
//! that already has an address in the block gets it back. Other pods (a clone's source pod,
//! say) were told that address; a new one would leave them calling a stranger.

use std::collections::HashSet;
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferrovirt_hostpath::persist::{Readers, write_file};
use rustix::fs::{FlockOperation, flock};

/// The blocks tried, in order: 127.1/16 first (127.0/16 holds 127.0.0.1).
const BLOCKS: std::ops::RangeInclusive<u8> = 1..=254;
/// Addresses a block hands out before it wraps (x.y.0.0 and the last ones are skipped).
const ADDRESSES: u32 = 65_534;
/// The file in the node's state directory naming the block it held last.
const RECORD: &str = "pod-network";

/// A claimed /16 and the addresses handed out in it.
pub struct PodNetwork {
    block: u8,
    addresses: Mutex<Addresses>,
    /// Held open for the lock's sake.
    _lock: File,
}

#[derive(Default)]
struct Addresses {
    /// Where the search for a free address goes on from.
    next: u32,
    in_use: HashSet<Ipv4Addr>,
}

impl PodNetwork {
    /// Claims the block recorded in `state_dir` if it is free, else the first free one, and
    /// records the block claimed.
    pub fn claim(state_dir: &Path) -> std::io::Result<Self> {
        let recorded = recorded_block(state_dir);
        let network = Self::claim_first(recorded.into_iter().chain(BLOCKS))?;
        if recorded != Some(network.block) {
            let record = format!("{}\n", network.block);
            write_file(&state_dir.join(RECORD), record.as_bytes(), Readers::Anyone)?;
        }
        Ok(network)
    }

    fn claim_first(blocks: impl Iterator<Item = u8>) -> std::io::Result<Self> {
        let mut last_error = None;
        for block in blocks {
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
                    addresses: Mutex::new(Addresses::default()),
                    _lock: file,
                });
            }
        }
        Err(last_error.unwrap_or_else(|| {
            std::io::Error::other("every 127.N.0.0/16 pod network is held by another platform")
        }))
    }

    /// An address for a pod: `previous` (the one it had) when that is in this block and no
    /// other pod holds it, else the next free one. Held until [`Self::release`].
    pub fn assign(&self, previous: Option<Ipv4Addr>) -> Ipv4Addr {
        let mut addresses = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ip) = previous.filter(|ip| self.contains(*ip)) {
            if addresses.in_use.insert(ip) {
                return ip;
            }
        }
        // 127.B.0.2 onwards: .0.0 and .0.1 are left out.
        for _ in 0..ADDRESSES {
            let ip = self.address(addresses.next);
            addresses.next = (addresses.next + 1) % ADDRESSES;
            if addresses.in_use.insert(ip) {
                return ip;
            }
        }
        // Every address is held (65 534 pods at once): share one rather than fail the pod.
        self.address(addresses.next)
    }

    /// Frees an address whose pod has ended.
    pub fn release(&self, ip: Ipv4Addr) {
        let mut addresses = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        addresses.in_use.remove(&ip);
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let [a, b, c, d] = ip.octets();
        let n = u32::from(c) << 8 | u32::from(d);
        a == 127 && b == self.block && (2..ADDRESSES + 2).contains(&n)
    }

    fn address(&self, index: u32) -> Ipv4Addr {
        let n = index % ADDRESSES + 2;
        Ipv4Addr::new(127, self.block, (n >> 8) as u8, (n & 0xff) as u8)
    }
}

/// The block the node with state directory `state_dir` held last.
pub fn recorded_block(state_dir: &Path) -> Option<u8> {
    std::fs::read_to_string(state_dir.join(RECORD))
        .ok()
        .and_then(|s| s.trim().parse::<u8>().ok())
        .filter(|b| BLOCKS.contains(b))
}

/// The file whose lock holds `block`.
pub fn lock_path(block: u8) -> PathBuf {
    std::env::temp_dir().join(format!("ferrovirt-pod-network-127.{block}.lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pod-network-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn two_platforms_get_different_blocks_and_a_freed_block_is_reused() {
        let first = PodNetwork::claim(&state_dir("first")).unwrap();
        let second = PodNetwork::claim(&state_dir("second")).unwrap();
        assert_ne!(first.block, second.block);
        let a = first.assign(None);
        let b = first.assign(None);
        assert_ne!(a, b);
        assert_eq!(a.octets()[..2], [127, first.block]);
        let freed = second.block;
        let held = File::options().write(true).open(lock_path(freed)).unwrap();
        assert!(flock(&held, FlockOperation::NonBlockingLockExclusive).is_err());
        drop(second);
        assert!(flock(&held, FlockOperation::NonBlockingLockExclusive).is_ok());
    }

    #[test]
    fn a_restarted_platform_claims_its_recorded_block_and_pods_keep_their_addresses() {
        let dir = state_dir("restart");
        let first = PodNetwork::claim(&dir).unwrap();
        let recorded = std::fs::read_to_string(dir.join(RECORD)).unwrap();
        assert_eq!(recorded.trim(), first.block.to_string());
        drop(first);
        // A block far above those other platforms take (they take the lowest free one).
        std::fs::write(dir.join(RECORD), "231\n").unwrap();
        let again = PodNetwork::claim(&dir).unwrap();
        assert_eq!(again.block, 231, "the recorded block is claimed first");
        let server = Ipv4Addr::new(127, 231, 1, 7);
        assert_eq!(again.assign(Some(server)), server);
    }

    #[test]
    fn an_address_is_handed_to_one_pod_at_a_time() {
        let network = PodNetwork::claim(&state_dir("unique")).unwrap();
        let first = network.assign(None);
        let kept = network.assign(Some(first));
        assert_ne!(kept, first, "another pod holds it");
        assert!(network.contains(kept));
        network.release(first);
        assert_eq!(network.assign(Some(first)), first);
        let foreign = Ipv4Addr::new(127, network.block.wrapping_add(1), 0, 2);
        assert!(network.contains(network.assign(Some(foreign))));
    }
}
