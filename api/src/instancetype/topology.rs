//! The guest CPU topology of an instancetype's vCPUs under a preference's
//! `preferredCPUTopology` (KubeVirt's `pkg/instancetype/apply/cpu.go` and the preference's
//! spread rules).

use super::VirtualMachinePreferenceSpec;

/// Sockets, cores per socket and threads per core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Sockets.
    pub sockets: u32,
    /// Cores per socket.
    pub cores: u32,
    /// Threads per core.
    pub threads: u32,
}

/// How `spread` lays vCPUs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpreadAcross {
    /// Over sockets and cores (the default).
    SocketsCores,
    /// Over cores and threads.
    CoresThreads,
    /// Over sockets, cores and two threads per core.
    SocketsCoresThreads,
}

/// The topologies a preference may name, the older `prefer...` forms included.
pub const TOPOLOGIES: [&str; 10] = [
    "sockets",
    "cores",
    "threads",
    "spread",
    "any",
    "preferSockets",
    "preferCores",
    "preferThreads",
    "preferSpread",
    "preferAny",
];

/// The ratio `spread` uses when the preference gives none.
pub const DEFAULT_SPREAD_RATIO: u32 = 2;

/// The preference's topology, `sockets` when it names none.
pub fn preferred(preference: Option<&VirtualMachinePreferenceSpec>) -> &str {
    preference
        .and_then(|p| p.cpu.as_ref())
        .and_then(|c| c.preferred_cpu_topology.as_deref())
        .filter(|t| !t.is_empty())
        .unwrap_or("sockets")
}

/// Whether a topology spreads.
pub fn is_spread(topology: &str) -> bool {
    matches!(topology, "spread" | "preferSpread")
}

/// The spread's ratio and levels.
pub fn spread_options(preference: Option<&VirtualMachinePreferenceSpec>) -> (u32, SpreadAcross) {
    let options = preference
        .and_then(|p| p.cpu.as_ref())
        .and_then(|c| c.spread_options.as_ref());
    let ratio = options
        .and_then(|o| o.ratio)
        .or_else(|| {
            preference
                .and_then(|p| p.prefer_spread_socket_to_core_ratio)
                .filter(|r| *r != 0)
        })
        .unwrap_or(DEFAULT_SPREAD_RATIO);
    let across = match options.and_then(|o| o.across.as_deref()) {
        Some("CoresThreads") => SpreadAcross::CoresThreads,
        Some("SocketsCoresThreads") => SpreadAcross::SocketsCoresThreads,
        _ => SpreadAcross::SocketsCores,
    };
    (ratio, across)
}

impl Topology {
    /// `guest` vCPUs laid out as the preference prefers.
    pub fn of(guest: u32, preference: Option<&VirtualMachinePreferenceSpec>) -> Self {
        let mut t = Self {
            sockets: 1,
            cores: 1,
            threads: 1,
        };
        if guest <= 1 {
            return t;
        }
        match preferred(preference) {
            "cores" | "preferCores" => t.cores = guest,
            "threads" | "preferThreads" => t.threads = guest,
            topology if is_spread(topology) => {
                let (ratio, across) = spread_options(preference);
                let ratio = ratio.max(1);
                match across {
                    SpreadAcross::SocketsCores => {
                        t.cores = ratio;
                        t.sockets = guest / ratio;
                    }
                    SpreadAcross::CoresThreads => {
                        t.threads = ratio;
                        t.cores = guest / ratio;
                    }
                    SpreadAcross::SocketsCoresThreads => {
                        t.threads = 2;
                        t.cores = ratio;
                        t.sockets = guest / 2 / ratio;
                    }
                }
            }
            _ => t.sockets = guest,
        }
        t
    }
}
