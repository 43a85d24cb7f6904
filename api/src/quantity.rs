//! Kubernetes resource quantities (`10Gi`, `500M`, `1.5e9`) as exact byte counts, for size
//! checks in validation and for controllers that size volumes.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// One mebibyte, the smallest size a DataVolume may request.
pub const MIB: u128 = 1024 * 1024;

/// Parses a quantity into a whole number of units, rounding a fraction up (as Kubernetes does
/// when it converts a quantity to an integer). `None` when the text is not a quantity, is
/// negative, or overflows.
pub fn parse_quantity(text: &str) -> Option<u128> {
    let text = text.trim();
    let text = text.strip_prefix('+').unwrap_or(text);
    if text.starts_with('-') {
        return None;
    }
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    let mantissa: u128 = digits.parse().ok()?;
    // value = mantissa * 10^-fraction_len * base^exponent
    let (base, exponent): (u128, i32) = match suffix {
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
    };
    let fraction_len = u32::try_from(fraction.len()).ok()?;
    let mut numerator = mantissa;
    let mut denominator = 10u128.checked_pow(fraction_len)?;
    if exponent >= 0 {
        numerator = numerator.checked_mul(base.checked_pow(exponent.unsigned_abs())?)?;
    } else {
        denominator = denominator.checked_mul(base.checked_pow(exponent.unsigned_abs())?)?;
    }
    Some(numerator.div_ceil(denominator))
}

/// [`parse_quantity`] for a k8s-openapi [`Quantity`].
pub fn quantity_bytes(q: &Quantity) -> Option<u128> {
    parse_quantity(&q.0)
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
    fn rejects_garbage_and_negative_values() {
        assert_eq!(parse_quantity(""), None);
        assert_eq!(parse_quantity("Gi"), None);
        assert_eq!(parse_quantity("-1Gi"), None);
        assert_eq!(parse_quantity("10GB"), None);
        assert_eq!(parse_quantity("1.2.3"), None);
    }
}
