//! The MAC address pool, as kubemacpool runs it: VirtualMachines get MAC addresses from a
//! configured range when they are admitted, so that no two VMs of the cluster share one.
//!
//! ```text
//!  ConfigMap kubemacpool-mac-range-config ──► range.rs   MacRange (RANGE_START..=RANGE_END)
//!  admission (embedded API server closure,    plan.rs    VmRequest: managed interfaces, MACs
//!   or the webhook /mutate-virtualmachines) ─►            set by hand, checks without a pool
//!                                             pool.rs    MacPool: holders, cursor, plan/apply,
//!  watches: Namespaces, VirtualMachines ────►            stored vs provisional holdings
//!                                             runtime.rs KubeMacPool: the pool behind a mutex,
//!                                                        namespace labels, readiness, watches
//!  watch: VirtualMachineInstances ──────────► collision.rs MACCollision events, the gauge
//!                                             metrics.rs  kmp_mac_collisions, …
//! ```

pub mod collision;
pub mod metrics;
pub mod plan;
pub mod pool;
pub mod range;
pub mod runtime;

use std::time::Duration;

pub use plan::{AllocationError, VmKey, VmRequest};
pub use pool::{MacPool, Stamp};
pub use range::{MacRange, RangeError};
pub use runtime::{AdmissionError, KubeMacPool, MacPoolConfig, Operation, OptMode};

/// The ConfigMap holding the range, in kubemacpool's namespace.
pub const RANGE_CONFIG_MAP: &str = "kubemacpool-mac-range-config";
/// The ConfigMap key of the range's first address.
pub const RANGE_START_KEY: &str = "RANGE_START";
/// The ConfigMap key of the range's last address.
pub const RANGE_END_KEY: &str = "RANGE_END";
/// The annotation an admission that allocated writes on the VirtualMachine.
pub const TRANSACTION_TIMESTAMP_ANNOTATION: &str = "kubemacpool.io/transaction-timestamp";
/// The VirtualMachine webhook's name, also the namespace label that opts in or out.
pub const VM_WEBHOOK: &str = "mutatevirtualmachines.kubemacpool.io";
/// The path the VirtualMachine webhook is served at.
pub const VM_WEBHOOK_PATH: &str = "/mutate-virtualmachines";
/// The MutatingWebhookConfiguration of kubemacpool's webhooks.
pub const WEBHOOK_CONFIGURATION: &str = "kubemacpool-mutator";
/// The Service in front of the webhook server.
pub const WEBHOOK_SERVICE: &str = "kubemacpool-service";
/// kubemacpool's default `--wait-time`.
pub const DEFAULT_WAIT_TIME: Duration = Duration::from_secs(600);
/// The wait time CNAO deploys kubemacpool with (`--wait-time=300`).
pub const CNAO_WAIT_TIME: Duration = Duration::from_secs(300);
/// The reason of the collision Events.
pub const COLLISION_REASON: &str = "MACCollision";
/// The component named on the Events.
pub const REPORTER: &str = "kubemacpool";
