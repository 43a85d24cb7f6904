//! A PipelineRun's three timeouts (`timeouts.pipeline`, `.tasks`, `.finally`) as Tekton
//! reads and derives them (`PipelineTimeout`, `TasksTimeout`, `FinallyTimeout`), whether each
//! has run out, and the timeout a pipeline task's TaskRun is given.

use std::time::Duration;

use api::tekton::DEFAULT_TIMEOUT;
use api::tekton::pipelinerun::TimeoutFields;
use jiff::Timestamp;

/// The run's timeouts; `None` is none set (tasks, finally) and zero is no timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timeouts {
    /// Defaulted to 60 minutes when unset, as the webhook does.
    pub pipeline: Duration,
    pub tasks: Option<Duration>,
    pub finally: Option<Duration>,
}

fn parse(text: Option<&str>) -> Option<Duration> {
    text.and_then(api::go_duration::parse)
}

impl Timeouts {
    /// The timeouts of `spec.timeouts` (unparseable values count as unset: the webhook
    /// refuses them).
    pub fn of(fields: Option<&TimeoutFields>) -> Timeouts {
        let pipeline = fields
            .and_then(|f| parse(f.pipeline.as_deref()))
            .unwrap_or(DEFAULT_TIMEOUT);
        let set_pipeline = fields.and_then(|f| parse(f.pipeline.as_deref()));
        let tasks = fields.and_then(|f| parse(f.tasks.as_deref()));
        let finally = fields.and_then(|f| parse(f.finally.as_deref()));
        let derive = |other: Option<Duration>| match (set_pipeline, other) {
            (Some(p), Some(o)) if !p.is_zero() && !o.is_zero() => Some(p.saturating_sub(o)),
            _ => None,
        };
        Timeouts {
            pipeline,
            tasks: tasks.or_else(|| derive(finally)),
            finally: finally.or_else(|| derive(tasks)),
        }
    }

    /// Whether `timeout` (zero: none) measured from `start` has run out at `now`.
    pub fn elapsed(timeout: Option<Duration>, start: Option<Timestamp>, now: Timestamp) -> bool {
        match (timeout, start) {
            (Some(t), Some(start)) if !t.is_zero() => remaining(t, start, now).is_none(),
            _ => false,
        }
    }

    /// The timeout of a pipeline task's TaskRun when the pipeline task sets none: the
    /// section's, when it is zero or longer than the default (otherwise the default applies
    /// and the run's own clock cancels it in time).
    pub fn for_task_run(&self, finally: bool) -> Option<Duration> {
        let section = if finally { self.finally } else { self.tasks }?;
        (section.is_zero() || section > DEFAULT_TIMEOUT).then_some(section)
    }
}

/// How long is left of `timeout` from `start` at `now`, `None` once more than `timeout`
/// has passed (Tekton's `runtime > timeout`).
pub fn remaining(timeout: Duration, start: Timestamp, now: Timestamp) -> Option<Duration> {
    let spent = Duration::try_from(now.duration_since(start)).unwrap_or_default();
    timeout.checked_sub(spent)
}

#[cfg(test)]
#[path = "timeouts_tests.rs"]
mod tests;
