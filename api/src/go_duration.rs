//! Durations as Go's `time.ParseDuration` (and so `metav1.Duration`) reads them: "48h",
//! "1h30m", "2.5s", "-1m", and as Go's `Duration.String` writes them ("1h0m0s"): the
//! operators' CRs carry them as strings, and Tekton's messages quote them.

use std::sync::LazyLock;
use std::time::Duration;

use jiff::SignedDuration;
use regex::Regex;

/// Go's syntax only: jiff's parser also takes "48 hours" or "PT48H", which Go refuses.
static GO_DURATION: LazyLock<Regex> = LazyLock::new(|| {
    let number = r"([0-9]+(\.[0-9]*)?|\.[0-9]+)";
    Regex::new(&format!(r"^[-+]?(0|({number}(ns|us|µs|μs|ms|s|m|h))+)$")).expect("a valid pattern")
});

/// `text` as a duration, a negative one as zero; `None` if Go would not parse it.
pub fn parse(text: &str) -> Option<Duration> {
    if !GO_DURATION.is_match(text) {
        return None;
    }
    // Go's one unitless duration, which jiff wants a unit for.
    if text.trim_start_matches(['-', '+']) == "0" {
        return Some(Duration::ZERO);
    }
    let duration = text.parse::<SignedDuration>().ok()?;
    Some(Duration::try_from(duration).unwrap_or_default())
}

/// `duration` as Go's `Duration.String` writes it: "0s", "1h0m0s", "1m30s", "1.5s", and below
/// a second "500ms", "1.5µs", "20ns".
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (unit, per) = match nanos {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, per));
    }
    let seconds = nanos / 1_000_000_000;
    let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
    let rest = decimal(nanos % 60_000_000_000, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{rest}s"),
        (0, _) => format!("{minutes}m{rest}s"),
        _ => format!("{hours}h{minutes}m{rest}s"),
    }
}

/// `value / per` in decimal, with no trailing zeros in its fraction.
fn decimal(value: u128, per: u128) -> String {
    let (whole, fraction) = (value / per, value % per);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_go_writes_them() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(600), "10m0s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_nanos(1500), "1.5µs"),
            (Duration::from_nanos(20), "20ns"),
            (Duration::from_secs(26 * 3600 + 61), "26h1m1s"),
        ];
        for (duration, go) in cases {
            assert_eq!(format(duration), go, "{duration:?}");
            assert_eq!(parse(go), Some(duration), "{go}");
        }
    }

    #[test]
    fn go_syntax_only() {
        assert_eq!(parse("48h"), Some(Duration::from_secs(48 * 3600)));
        assert_eq!(parse("1h30m0s"), Some(Duration::from_secs(5400)));
        assert_eq!(parse("0"), Some(Duration::ZERO));
        assert_eq!(parse("-5m"), Some(Duration::ZERO));
        assert_eq!(parse("48 hours"), None);
        assert_eq!(parse("PT48H"), None);
        assert_eq!(parse("48"), None);
    }
}
