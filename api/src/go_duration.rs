//! Durations as Go's `time.ParseDuration` (and so `metav1.Duration`) reads them: "48h",
//! "1h30m", "2.5s", "-1m". The operators' CRs carry them as strings.

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

#[cfg(test)]
mod tests {
    use super::*;

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
