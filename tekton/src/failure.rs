//! How a task ends when it fails: upstream's exit code for the failure and a message that
//! names the problem.

/// A failed task: the exit code upstream's binary uses for this failure (negative codes are
/// Go's `os.Exit(-n)`, which the process reports as `256 - n`) and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TaskFailure {
    /// Upstream's code, as its binary passes it to `os.Exit`.
    pub code: i32,
    /// What went wrong.
    pub message: String,
}

impl TaskFailure {
    /// A failure with `code` and `message`.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The process exit status: the code's low byte, as the kernel keeps it.
    pub fn exit_status(&self) -> u8 {
        self.code.rem_euclid(256) as u8
    }
}

/// `Result` of a task step.
pub type TaskResult<T = ()> = Result<T, TaskFailure>;

/// Maps an error to a failure with `code`.
pub trait FailWith<T> {
    /// The error as a failure with `code`, its message prefixed by `context` if non-empty.
    fn fail_with(self, code: i32, context: &str) -> TaskResult<T>;
}

impl<T, E: std::fmt::Display> FailWith<T> for Result<T, E> {
    fn fail_with(self, code: i32, context: &str) -> TaskResult<T> {
        self.map_err(|e| {
            let message = if context.is_empty() {
                e.to_string()
            } else {
                format!("{context}: {e}")
            };
            TaskFailure::new(code, message)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_codes_exit_as_go_reports_them() {
        assert_eq!(TaskFailure::new(-1, "x").exit_status(), 255);
        assert_eq!(TaskFailure::new(-3, "x").exit_status(), 253);
        assert_eq!(TaskFailure::new(4, "x").exit_status(), 4);
    }
}
