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

#[cfg(test)]
mod tests {
    use crate::format::reader::testing::{assert_converts_as_qemu_img, qemu_image, scratch};

    #[test]
    fn converts_as_qemu_img_through_the_seam() {
        let dir = scratch("qcow2");
        let writes = [
            "-P 0xa1 0 64k",
            "-P 0xb2 1M 4k",
            "-z 2M 64k",
            "-P 0xc3 8300k 100k",
        ];
        assert_converts_as_qemu_img(&qemu_image(dir.path(), "qcow2", "", "9M", &writes));
        // Small clusters (more tables than data) and compressed clusters.
        let small = scratch("qcow2-small-compressed");
        let writes = ["-P 0x11 0 4k", "-c -P 0x22 64k 4k", "-c -P 0x33 1M 4k"];
        let image = qemu_image(small.path(), "qcow2", "cluster_size=4096", "2M", &writes);
        assert_converts_as_qemu_img(&image);
    }
}
