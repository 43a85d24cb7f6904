//! From hostpath errors to the gRPC status codes the CSI specification prescribes, and the
//! blocking-call bridge every handler uses.

use ferrovirt_hostpath::Error;
use tonic::Status;

/// The CSI status for a store error.
pub fn to_status(err: Error) -> Status {
    let message = err.to_string();
    match err {
        Error::InvalidArgument(_) => Status::invalid_argument(message),
        Error::NotFound(_) => Status::not_found(message),
        Error::AlreadyExists(_) => Status::already_exists(message),
        Error::OutOfRange(_) => Status::out_of_range(message),
        Error::ResourceExhausted { .. } => Status::resource_exhausted(message),
        Error::FailedPrecondition(_) => Status::failed_precondition(message),
        Error::Io { .. } | Error::Command { .. } | Error::State { .. } => {
            tracing::error!(error = %message, "storage operation failed");
            Status::internal(message)
        }
    }
}

/// Runs a blocking store operation off the async threads and maps its error.
pub async fn blocking<T, F>(op: F) -> Result<T, Status>
where
    F: FnOnce() -> Result<T, Error> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|err| Status::internal(format!("storage task failed: {err}")))?
        .map_err(to_status)
}

/// `InvalidArgument` unless `value` is non-empty.
pub fn required(value: &str, what: &str) -> Result<(), Status> {
    if value.is_empty() {
        return Err(Status::invalid_argument(format!("{what} is required")));
    }
    Ok(())
}
