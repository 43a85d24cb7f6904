//! Storage pools on one node: volumes with an enforced size, snapshots and clones (reflink where
//! the filesystem has it, sparse copy otherwise), block volumes on loop devices, and state that
//! survives a restart at any point.
//!
//! Every volume, filesystem or block, is one sparse image file at
//! `<pool>/csi/<volume id>/volume.img`. A filesystem volume is that image formatted ext4 (on
//! first stage) and loop-mounted, so it can never hold more than its size whatever the pool's
//! filesystem is; a block volume is the same image handed out as a loop device. Snapshots live
//! at `<pool>/csi-snapshots/<snapshot id>.img`. See `docs/csi.md` for why.

pub mod copy;
pub mod error;
pub mod filesystem;
pub mod journal;
pub mod loopdev;
pub mod mount;
pub mod oplock;
pub mod persist;
pub mod pool;
pub mod store;

pub use copy::CopyMethod;
pub use error::{Error, Result};
pub use pool::{Pool, PoolEntry, PoolOrigin, parse_pool_flag, parse_pools_json};
pub use store::{
    AccessType, CreateSnapshot, CreateVolume, HostPathStore, PoolRemoval, SnapshotRecord,
    VolumeMode, VolumeRecord, VolumeSource, VolumeStats,
};
