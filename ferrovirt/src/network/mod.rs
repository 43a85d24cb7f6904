//! Secondary networks on a cluster and on `ferrovirt up`: the MAC pool (kubemacpool) with its
//! webhook, and bridge-marker.

pub mod bridge_marker;
pub mod macpool;
