//! What CDI's worker pods (the importer and the upload server) read from their environment
//! alike.

use anyhow::{Context, Result, bail};
use api::cdi::pod_contract::env::{self as worker_env};
use api::quantity::parse_bytes;

/// Images on filesystem volumes are sized in whole MiB, as CDI sizes them.
const ALIGN: u64 = 1 << 20;

/// The variable `name`, unless it is unset or empty.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The size of the disk image on a filesystem volume: the quantity in the variable
/// `size_var` less FILESYSTEM_OVERHEAD, aligned down to 1 MiB, as CDI sizes it. None when
/// the variable is unset, and for a block device, which keeps its own size.
pub fn filesystem_image_size(size_var: &str, block: bool) -> Result<Option<u64>> {
    let Some(text) = env(size_var) else {
        return Ok(None);
    };
    let requested = parse_bytes(&text).with_context(|| size_var.to_string())?;
    if block {
        return Ok(None);
    }
    let overhead: f64 = env(worker_env::FILESYSTEM_OVERHEAD)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    if !(0.0..1.0).contains(&overhead) {
        bail!("FILESYSTEM_OVERHEAD {overhead} is outside [0, 1)");
    }
    let usable = ((1.0 - overhead) * requested as f64).floor() as u64 / ALIGN * ALIGN;
    tracing::info!(requested, usable, "image size");
    Ok(Some(usable))
}
