//! Kubernetes resource quantities ("10Gi", "512Mi", "1G", "1.5Gi", "1e9") as byte counts.
//!
//! Written here rather than taken from a crate: the available quantity crates pull in a
//! decimal-arithmetic stack for what is a dozen lines for byte sizes.

use crate::error::ImportError;

const SUFFIXES: &[(&str, u64)] = &[
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
];

/// Parses a quantity into bytes, rounding a fractional result up to a whole byte.
pub fn parse_quantity(text: &str) -> Result<u64, ImportError> {
    let invalid = |why: &str| ImportError::InvalidSize(text.to_string(), why.to_string());
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(invalid("empty"));
    }
    let (number, multiplier) = SUFFIXES
        .iter()
        .find_map(|(suffix, mult)| trimmed.strip_suffix(suffix).map(|n| (n, *mult)))
        .unwrap_or((trimmed, 1));
    let (mantissa, exponent) = match number.split_once(['e', 'E']) {
        Some((m, e)) if multiplier == 1 => {
            let exp: i32 = e.parse().map_err(|_| invalid("bad exponent"))?;
            (m, exp)
        }
        Some(_) => return Err(invalid("an exponent cannot be combined with a suffix")),
        None => (number, 0),
    };
    let value: f64 = mantissa.parse().map_err(|_| invalid("not a number"))?;
    if !value.is_finite() || value < 0.0 || mantissa.starts_with('+') {
        return Err(invalid("must be a non-negative number"));
    }
    let bytes = value * 10f64.powi(exponent) * multiplier as f64;
    if bytes > u64::MAX as f64 {
        return Err(invalid("too large"));
    }
    Ok(bytes.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_quantity;

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(parse_quantity("10Gi").unwrap(), 10 << 30);
        assert_eq!(parse_quantity("512Mi").unwrap(), 512 << 20);
        assert_eq!(parse_quantity("1G").unwrap(), 1_000_000_000);
        assert_eq!(parse_quantity("1.5Gi").unwrap(), 3 << 29);
        assert_eq!(parse_quantity("4096").unwrap(), 4096);
        assert_eq!(parse_quantity("1e9").unwrap(), 1_000_000_000);
        assert_eq!(parse_quantity("2k").unwrap(), 2000);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "Gi", "ten", "-1Gi", "1.2.3", "1e3Gi", "1Xi"] {
            assert!(parse_quantity(bad).is_err(), "{bad} accepted");
        }
    }
}
