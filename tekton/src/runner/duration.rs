//! Durations in a run's spec and in Tekton's messages: a TaskRun's `timeout` and a
//! PipelineRun's `timeouts` are Go durations, and Tekton quotes them back as Go prints them
//! (`TaskRun "x" failed to finish within "1h0m0s"`).

use std::time::Duration;

pub use api::tekton::DEFAULT_TIMEOUT;

/// A run's timeout as written (`None` when it names none: the default), or why not.
pub fn timeout(text: Option<&str>) -> Result<Duration, String> {
    match text {
        None => Ok(DEFAULT_TIMEOUT),
        Some(text) => api::go_duration::parse(text)
            .ok_or_else(|| format!("invalid timeout {text:?}: not a Go duration")),
    }
}

/// The message of a TaskRun that ran out of time, as Tekton writes it.
pub fn task_run_timed_out(name: &str, timeout: Duration) -> String {
    format!(
        "TaskRun {name:?} failed to finish within {:?}",
        api::go_duration::format(timeout)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_a_go_duration_quoted_back_as_go_prints_it() {
        assert_eq!(timeout(None), Ok(DEFAULT_TIMEOUT));
        assert_eq!(timeout(Some("90s")), Ok(Duration::from_secs(90)));
        assert!(timeout(Some("soon")).unwrap_err().contains("\"soon\""));
        assert_eq!(
            task_run_timed_out("wait", DEFAULT_TIMEOUT),
            r#"TaskRun "wait" failed to finish within "1h0m0s""#
        );
    }
}
