//! Times as Kubernetes writes them in objects (`metav1.Time`: RFC 3339, whole seconds, UTC).

/// `time` as an object's timestamp field holds it.
pub fn rfc3339(time: jiff::Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// An object's timestamp field, or `None` when it is not RFC 3339.
pub fn parse(text: &str) -> Option<jiff::Timestamp> {
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_to_the_second_and_read_back() {
        let time: jiff::Timestamp = "2026-11-29T07:40:01.75Z".parse().unwrap();
        assert_eq!(rfc3339(time), "2026-11-29T07:40:01Z");
        assert_eq!(
            parse("2026-11-29T07:40:01Z").map(rfc3339).as_deref(),
            Some("2026-11-29T07:40:01Z")
        );
        assert_eq!(parse("yesterday"), None);
    }
}
