//! qcow2 to raw while streaming, with no scratch space. Two ways in:
//! - [`random`]: the source can be read at any offset, so the tables are read first and then
//!   the clusters that hold data, in the order they sit in the file, with coalesced reads;
//! - [`sequential`]: the source is a stream (compressed, or a server without Range), so the
//!   image is decoded in file order and only clusters met before their table are held back.

mod header;
pub mod random;
pub mod sequential;
mod table;

pub use header::Qcow2Header;
