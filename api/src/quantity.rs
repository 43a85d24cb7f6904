//! Kubernetes resource quantities (`10Gi`, `500M`, `1.5e9`) as exact byte counts: the one
//! parser of the project, for validation, for controllers that size volumes, for the CSI
//! driver's volume attributes and for the worker pods' sizes.
//!
//! Written here rather than taken from a crate: the quantity crates convert through a
//! decimal-arithmetic stack (or floats) for what is exact integer arithmetic on byte sizes.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// One mebibyte, the smallest size a DataVolume may request.
pub const MIB: u128 = 1024 * 1024;

/// Why a text is not a quantity this parser takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a valid quantity: {reason}")]
pub struct QuantityError {
    pub text: String,
    pub reason: &'static str,
}

/// Parses a quantity into a whole number of units, rounding a fraction up (as Kubernetes does
/// when it converts a quantity to an integer). `None` when the text is not a quantity, is
/// negative, or overflows; [`parse_exact`] says which.
pub fn parse_quantity(text: &str) -> Option<u128> {
    parse_exact(text).ok()
}

/// [`parse_quantity`] for a k8s-openapi [`Quantity`].
pub fn quantity_bytes(q: &Quantity) -> Option<u128> {
    parse_quantity(&q.0)
}

/// A quantity of bytes that fits a file size (`u64`).
pub fn parse_bytes(text: &str) -> Result<u64, QuantityError> {
    let value = parse_exact(text)?;
    u64::try_from(value).map_err(|_| QuantityError {
        text: text.to_string(),
        reason: "too large",
    })
}

/// [`parse_quantity`], saying why a text is refused.
pub fn parse_exact(text: &str) -> Result<u128, QuantityError> {
    let refuse = |reason| QuantityError {
        text: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    let unsigned = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if unsigned.starts_with('-') {
        return Err(refuse("must not be negative"));
    }
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err(refuse("no number"));
    }
    let mantissa: u128 = format!("{whole}{fraction}")
        .parse()
        .map_err(|_| refuse("not a decimal number"))?;
    let (base, exponent) = scale(suffix).ok_or_else(|| refuse("unknown suffix"))?;
    // value = mantissa * 10^-fraction_len * base^exponent
    let too_large = || refuse("too large");
    let fraction_len = u32::try_from(fraction.len()).map_err(|_| too_large())?;
    let mut numerator = mantissa;
    let mut denominator = 10u128.checked_pow(fraction_len).ok_or_else(too_large)?;
    let power = base
        .checked_pow(exponent.unsigned_abs())
        .ok_or_else(too_large)?;
    if exponent >= 0 {
        numerator = numerator.checked_mul(power).ok_or_else(too_large)?;
    } else {
        denominator = denominator.checked_mul(power).ok_or_else(too_large)?;
    }
    Ok(numerator.div_ceil(denominator))
}

/// The base and exponent a suffix stands for (`Gi` is 2^30, `k` 10^3, `e6` 10^6).
fn scale(suffix: &str) -> Option<(u128, i32)> {
    Some(match suffix {
        "" => (10, 0),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        "n" => (10, -9),
        "u" => (10, -6),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        s if s.starts_with(['e', 'E']) => (10, s[1..].parse().ok()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(parse_quantity("1Mi"), Some(MIB));
        assert_eq!(parse_quantity("10Gi"), Some(10 * 1024 * 1024 * 1024));
        assert_eq!(parse_quantity("500M"), Some(500_000_000));
        assert_eq!(parse_quantity("1k"), Some(1000));
        assert_eq!(parse_quantity("1048576"), Some(MIB));
        assert_eq!(parse_quantity("+2Ki"), Some(2048));
    }

    #[test]
    fn fractions_and_exponents_round_up() {
        assert_eq!(parse_quantity("1.5Gi"), Some(1536 * MIB));
        assert_eq!(parse_quantity("0.1Ki"), Some(103));
        assert_eq!(parse_quantity("1e3"), Some(1000));
        assert_eq!(parse_quantity("1E6"), Some(1_000_000));
        assert_eq!(parse_quantity("1500m"), Some(2));
    }

    #[test]
    fn rejects_garbage_and_negative_values_saying_why() {
        for (text, reason) in [
            ("", "no number"),
            ("Gi", "no number"),
            ("ten", "no number"),
            ("-1Gi", "must not be negative"),
            ("10GB", "unknown suffix"),
            ("1Xi", "unknown suffix"),
            ("1e3Gi", "unknown suffix"),
            ("1.2.3", "not a decimal number"),
            ("1e40", "too large"),
        ] {
            assert_eq!(
                parse_exact(text).map_err(|e| e.reason),
                Err(reason),
                "{text}"
            );
        }
        assert_eq!(
            parse_bytes("32Ei").unwrap_err().to_string(),
            "\"32Ei\" is not a valid quantity: too large"
        );
        assert_eq!(parse_bytes("1.5Gi"), Ok(3 << 29));
    }
}
