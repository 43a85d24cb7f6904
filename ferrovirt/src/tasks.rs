//! `ferrovirt task NAME`: the KubeVirt tekton tasks (the `tekton` crate), each ending with
//! its upstream exit code; create-vm-from-manifest's `virtctl` parameter is this binary's
//! `create vm`.

use std::process::ExitCode;

/// Runs `command` on a runtime of its own and exits as upstream's task binary would.
pub fn run(command: tekton::TaskCommand) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let virtctl = |flags: &[String]| crate::virtctl::manifest_from_flags(flags);
    let result = runtime.block_on(tekton::run(command, &virtctl));
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::from(failure.exit_status())
        }
    }
}
