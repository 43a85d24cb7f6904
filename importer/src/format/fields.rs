//! Fixed-width integers read out of on-disk headers and tables, at byte offsets the caller
//! has already bounds-checked (the formats' header structs are read whole).

fn array<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    bytes[at..at + N].try_into().expect("slice of N bytes")
}

pub fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(array(bytes, at))
}

pub fn be64(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(array(bytes, at))
}

pub fn le16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(array(bytes, at))
}

pub fn le32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(array(bytes, at))
}

pub fn le64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(array(bytes, at))
}
