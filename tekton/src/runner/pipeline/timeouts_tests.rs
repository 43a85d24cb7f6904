use super::*;
use api::tekton::pipelinerun::TimeoutFields;

fn fields(pipeline: Option<&str>, tasks: Option<&str>, finally: Option<&str>) -> TimeoutFields {
    TimeoutFields {
        pipeline: pipeline.map(String::from),
        tasks: tasks.map(String::from),
        finally: finally.map(String::from),
    }
}

const MIN: u64 = 60;

#[test]
fn sections_are_derived_from_the_pipeline_timeout_and_the_other_section() {
    let t = Timeouts::of(Some(&fields(Some("2h"), None, Some("30m"))));
    assert_eq!(t.pipeline, Duration::from_secs(120 * MIN));
    assert_eq!(t.tasks, Some(Duration::from_secs(90 * MIN)));
    assert_eq!(t.finally, Some(Duration::from_secs(30 * MIN)));
    let t = Timeouts::of(None);
    assert_eq!(
        (t.pipeline, t.tasks, t.finally),
        (DEFAULT_TIMEOUT, None, None)
    );
    let t = Timeouts::of(Some(&fields(Some("0s"), None, Some("30m"))));
    assert_eq!(t.tasks, None, "no derivation from no timeout");
}

#[test]
fn a_task_run_gets_the_section_timeout_only_when_zero_or_over_the_default() {
    let t = Timeouts::of(Some(&fields(Some("3h"), Some("2h"), None)));
    assert_eq!(t.for_task_run(false), Some(Duration::from_secs(120 * MIN)));
    // finally = 3h - 2h = 1h, not over the default: the TaskRun keeps its own.
    assert_eq!(t.for_task_run(true), None);
    let t = Timeouts::of(Some(&fields(Some("1h"), Some("20m"), None)));
    assert_eq!(t.for_task_run(false), None);
    let t = Timeouts::of(Some(&fields(Some("0s"), Some("0s"), None)));
    assert_eq!(t.for_task_run(false), Some(Duration::ZERO));
}

#[test]
fn a_clock_runs_out_strictly_after_its_timeout() {
    let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let at = |s: &str| s.parse::<Timestamp>().unwrap();
    let hour = Some(Duration::from_secs(60 * MIN));
    assert!(!Timeouts::elapsed(
        hour,
        Some(start),
        at("2026-01-01T01:00:00Z")
    ));
    assert!(Timeouts::elapsed(
        hour,
        Some(start),
        at("2026-01-01T01:00:01Z")
    ));
    assert!(!Timeouts::elapsed(
        Some(Duration::ZERO),
        Some(start),
        at("2030-01-01T00:00:00Z")
    ));
    assert!(!Timeouts::elapsed(hour, None, at("2030-01-01T00:00:00Z")));
    assert_eq!(
        remaining(
            Duration::from_secs(60 * MIN),
            start,
            at("2026-01-01T00:59:00Z")
        ),
        Some(Duration::from_secs(60))
    );
}
