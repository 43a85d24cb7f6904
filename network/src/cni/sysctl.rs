//! Kernel parameters under /proc/sys, named with '/' separators ("net/ipv6/conf/eth0/accept_ra")
//! so interface names with dots (VLAN interfaces) stay unambiguous. The /proc/sys/net tree a
//! thread sees is the one of its own network namespace, so call these on the thread that
//! entered the namespace.

use std::io;
use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(name.trim_start_matches('/'))
}

/// The value of a parameter, without its trailing newline.
pub fn get(name: &str) -> io::Result<String> {
    let value = std::fs::read_to_string(path(name))?;
    Ok(value.trim_end().to_owned())
}

/// Sets a parameter.
pub fn set(name: &str, value: &str) -> io::Result<()> {
    std::fs::write(path(name), value)
}

/// Sets a parameter the plugin only wishes for (the reference ignores these failures too):
/// a failure is logged, not returned.
pub fn set_best_effort(name: &str, value: &str) {
    if let Err(e) = set(name, value) {
        tracing::debug!("cannot set {name} to {value}: {e}");
    }
}
