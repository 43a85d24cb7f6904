//! Blocking work (conversion, file reads) run off the async threads.

use crate::error::ImportError;

/// Runs `work` on tokio's blocking threads and returns what it returns. A panic there is a
/// bug and goes on as one in the caller, rather than becoming an error that reads like a
/// source that failed; a task dropped at runtime shutdown is a cancelled import.
pub(crate) async fn run<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ImportError> + Send + 'static,
) -> Result<T, ImportError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(_) => Err(ImportError::Cancelled),
    }
}
