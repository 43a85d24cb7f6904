//! The step entrypoint of a TaskRun's pod on `ferrovirt up` (`ferrovirt task step`), doing
//! for one step what Tekton's `entrypoint` binary does (tektoncd/pipeline
//! `pkg/entrypoint/entrypointer.go`): the pod's containers start side by side, so each step
//! waits for the file the step before it posts, runs its command, posts its own file (with
//! `.err` when it failed, so that the steps after it are skipped) and leaves its results and
//! its start time in its termination message, where the runner reads them as Tekton's
//! controller does. Written here rather than run as Tekton's binary: on one machine a step
//! may run only a command of this binary, never what a TaskRun's author names.

use std::path::{Path, PathBuf};
use std::time::Duration;

use api::pod_contract::in_pod;
use serde::{Deserialize, Serialize};

use crate::failure::{TaskFailure, TaskResult};
use crate::results::TEKTON_RESULTS_DIR;

/// How often a waiting step looks for the file of the step before it.
const WAIT_POLL: Duration = Duration::from_millis(100);
/// The kubelet's limit on a termination message, which Tekton's writer keeps to.
pub const MAX_TERMINATION_MESSAGE: usize = 4096;
/// Tekton's time format in a termination message (Go's `2006-01-02T15:04:05.000Z07:00`).
const TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.3fZ";

/// What a step does when its command fails: fail the TaskRun (and skip the steps after it),
/// or record the exit code and go on.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    #[value(name = "stopAndFail")]
    StopAndFail,
    #[value(name = "continue")]
    Continue,
}

/// `ferrovirt task step`: one step of a TaskRun's pod.
#[derive(clap::Args, Debug)]
pub struct StepArgs {
    /// The file whose appearance starts this step (the step before it posts it); a
    /// `.err` beside it means that step failed and this one is skipped.
    #[arg(long = "wait-file")]
    pub wait_file: Option<String>,
    /// The file this step posts when it ends (`.err` appended when it failed).
    #[arg(long = "post-file")]
    pub post_file: Option<String>,
    /// Where the step's termination message goes.
    #[arg(long = "termination-path", default_value = "/tekton/termination")]
    pub termination_path: String,
    /// The Task's result names, read from the results directory when the step ends.
    #[arg(long = "results", value_delimiter = ',')]
    pub results: Vec<String>,
    #[arg(long = "results-dir", default_value = TEKTON_RESULTS_DIR)]
    pub results_dir: String,
    /// Where the step's exit code is written (`exitCode`), as `$(steps.NAME.exitCode.path)`.
    #[arg(long = "step-metadata-dir")]
    pub step_metadata_dir: Option<String>,
    #[arg(long = "on-error", value_enum, default_value = "stopAndFail")]
    pub on_error: OnError,
    /// The step's timeout, as Tekton writes it (`1m30s`); none or 0 for none.
    #[arg(long = "timeout")]
    pub timeout: Option<String>,
    /// The command: arguments of this binary (`task NAME ...`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// One entry of a termination message, as Tekton's `RunResult` marshals it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    pub key: String,
    pub value: String,
    /// 1 a Task result, 3 Tekton's own (StartedAt, ExitCode, Reason).
    #[serde(rename = "type", default)]
    pub result_type: u8,
}

pub const TASK_RUN_RESULT: u8 = 1;
pub const INTERNAL_RESULT: u8 = 3;

/// How the step's command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Exited(i32),
    TimedOut,
    /// The step before it failed: this one did not run.
    Skipped,
}

/// Runs the step; fails with its command's exit code when the step fails.
pub async fn run(args: StepArgs) -> TaskResult {
    let termination = in_pod(&args.termination_path);
    let waited = match &args.wait_file {
        Some(wait) => wait_for(&in_pod(wait)).await,
        None => Ok(()),
    };
    // Tekton records the start once the wait is over, whether the step then runs or not.
    let mut message = vec![internal("StartedAt", &now())];
    let outcome = match waited {
        Err(()) => Outcome::Skipped,
        Ok(()) => run_command(&args).await?,
    };
    let (failed, exit_code) = judge(outcome, args.on_error);
    match outcome {
        Outcome::Skipped => message.push(internal("Reason", "Skipped")),
        Outcome::TimedOut => message.push(internal("Reason", "TimeoutExceeded")),
        Outcome::Exited(code) if code != 0 && args.on_error == OnError::Continue => {
            message.push(internal("ExitCode", &code.to_string()));
        }
        Outcome::Exited(_) => {}
    }
    if let (Some(dir), Some(code)) = (&args.step_metadata_dir, exit_code) {
        write(&in_pod(dir).join("exitCode"), &code.to_string())?;
    }
    if let Some(post) = &args.post_file {
        let post = in_pod(post);
        let post = if failed { with_err(&post) } else { post };
        write(&post, "")?;
    }
    let mut results = read_results(&in_pod(&args.results_dir), &args.results)?;
    results.append(&mut message);
    write_termination_message(&termination, &results)?;
    match (failed, outcome) {
        (false, _) => Ok(()),
        (true, Outcome::Exited(code)) => Err(TaskFailure::new(
            code,
            format!("step command {:?} exited with code {code}", args.command),
        )),
        (true, Outcome::TimedOut) => Err(TaskFailure::new(
            1,
            format!(
                "step command {:?} exceeded its timeout {}",
                args.command,
                args.timeout.as_deref().unwrap_or_default()
            ),
        )),
        (true, Outcome::Skipped) => Err(TaskFailure::new(
            1,
            "skipped: the step before this one failed",
        )),
    }
}

/// Whether the step failed, and the exit code to record for `$(steps.X.exitCode.path)`
/// (none where Tekton writes none: a failure that stops the TaskRun).
fn judge(outcome: Outcome, on_error: OnError) -> (bool, Option<i32>) {
    match outcome {
        Outcome::Exited(0) => (false, Some(0)),
        Outcome::Exited(code) if on_error == OnError::Continue => (false, Some(code)),
        Outcome::Exited(_) | Outcome::TimedOut | Outcome::Skipped => (true, None),
    }
}

/// Waits until `path` is posted; `Err` when the step before posted a failure instead.
async fn wait_for(path: &Path) -> Result<(), ()> {
    let failed = with_err(path);
    loop {
        if path.exists() {
            return Ok(());
        }
        if failed.exists() {
            return Err(());
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// Runs this binary with the step's command, its output the step's, within the timeout.
async fn run_command(args: &StepArgs) -> TaskResult<Outcome> {
    let timeout = match args.timeout.as_deref().filter(|t| !t.is_empty()) {
        Some(text) => Some(api::go_duration::parse(text).ok_or_else(|| {
            TaskFailure::new(
                1,
                format!("invalid step timeout {text:?}: not a Go duration"),
            )
        })?),
        None => None,
    }
    .filter(|t| !t.is_zero());
    let executable = std::env::current_exe()
        .map_err(|e| TaskFailure::new(1, format!("cannot find this binary: {e}")))?;
    let mut command = tokio::process::Command::new(&executable);
    command.args(&args.command).kill_on_drop(true);
    // The node agent stops a container by signalling this process, whose death must end the
    // step's command too (in a container, the runtime would end every process of it).
    // SAFETY: only calls prctl, which is async-signal-safe, between fork and exec.
    unsafe {
        command.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| TaskFailure::new(1, format!("starting {}: {e}", executable.display())))?;
    let waited = match timeout {
        Some(limit) => tokio::time::timeout(limit, child.wait()).await.ok(),
        None => Some(child.wait().await),
    };
    match waited {
        Some(status) => {
            let status = status.map_err(|e| TaskFailure::new(1, format!("waiting: {e}")))?;
            Ok(Outcome::Exited(status.code().unwrap_or(137)))
        }
        None => {
            let _ = child.kill().await;
            Ok(Outcome::TimedOut)
        }
    }
}

/// The Task's results the step's command wrote, in the order named; a missing one is left
/// out, as Tekton's entrypoint leaves it.
fn read_results(dir: &Path, names: &[String]) -> TaskResult<Vec<RunResult>> {
    let mut results = Vec::new();
    for name in names.iter().filter(|n| !n.is_empty()) {
        match std::fs::read_to_string(dir.join(name)) {
            Ok(value) => results.push(RunResult {
                key: name.clone(),
                value,
                result_type: TASK_RUN_RESULT,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(TaskFailure::new(
                    1,
                    format!("reading result {name} in {}: {e}", dir.display()),
                ));
            }
        }
    }
    Ok(results)
}

/// Writes the termination message, refusing one past the kubelet's limit as Tekton does.
fn write_termination_message(path: &Path, results: &[RunResult]) -> TaskResult {
    let text = serde_json::to_string(results)
        .map_err(|e| TaskFailure::new(1, format!("encoding the termination message: {e}")))?;
    if text.len() > MAX_TERMINATION_MESSAGE {
        return Err(TaskFailure::new(
            1,
            format!(
                "the step's results take {} bytes, more than a termination message holds ({MAX_TERMINATION_MESSAGE})",
                text.len()
            ),
        ));
    }
    write(path, &text)
}

/// Reads a step's termination message as the runner does.
pub fn parse_termination_message(text: &str) -> Result<Vec<RunResult>, serde_json::Error> {
    serde_json::from_str(text)
}

fn internal(key: &str, value: &str) -> RunResult {
    RunResult {
        key: key.into(),
        value: value.into(),
        result_type: INTERNAL_RESULT,
    }
}

fn with_err(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".err");
    PathBuf::from(name)
}

fn now() -> String {
    jiff::Timestamp::now().strftime(TIME_FORMAT).to_string()
}

fn write(path: &Path, text: &str) -> TaskResult {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| TaskFailure::new(1, format!("creating {}: {e}", dir.display())))?;
    }
    std::fs::write(path, text)
        .map_err(|e| TaskFailure::new(1, format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_fails_unless_it_exits_0_or_goes_on_after_errors() {
        use OnError::*;
        assert_eq!(judge(Outcome::Exited(0), StopAndFail), (false, Some(0)));
        assert_eq!(judge(Outcome::Exited(3), StopAndFail), (true, None));
        assert_eq!(judge(Outcome::Exited(3), Continue), (false, Some(3)));
        assert_eq!(judge(Outcome::TimedOut, Continue), (true, None));
        assert_eq!(judge(Outcome::Skipped, StopAndFail), (true, None));
    }

    #[test]
    fn results_are_read_in_order_and_a_missing_one_is_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("name"), "vm-1").unwrap();
        std::fs::write(dir.path().join("namespace"), "default").unwrap();
        let names = ["namespace", "missing", "name"].map(String::from);
        let results = read_results(dir.path(), &names).expect("read");
        let keys: Vec<&str> = results.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["namespace", "name"]);
        assert_eq!(results[1].value, "vm-1");
        assert_eq!(results[1].result_type, TASK_RUN_RESULT);
    }

    #[test]
    fn the_termination_message_is_tektons_json_and_kept_to_the_kubelets_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("termination");
        let results = vec![
            RunResult {
                key: "name".into(),
                value: "vm-1".into(),
                result_type: TASK_RUN_RESULT,
            },
            internal("StartedAt", "2026-11-29T04:00:00.000Z"),
        ];
        write_termination_message(&path, &results).expect("written");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            r#"[{"key":"name","value":"vm-1","type":1},{"key":"StartedAt","value":"2026-11-29T04:00:00.000Z","type":3}]"#
        );
        assert_eq!(parse_termination_message(&text).unwrap(), results);
        let big = vec![RunResult {
            key: "big".into(),
            value: "x".repeat(MAX_TERMINATION_MESSAGE),
            result_type: TASK_RUN_RESULT,
        }];
        let err = write_termination_message(&path, &big).unwrap_err();
        assert!(
            err.message
                .contains("more than a termination message holds"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_step_waits_for_the_one_before_and_is_skipped_after_a_failure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let post = dir.path().join("0").join("out");
        std::fs::create_dir_all(post.parent().unwrap()).unwrap();
        let waiting = tokio::spawn({
            let post = post.clone();
            async move { wait_for(&post).await }
        });
        tokio::time::sleep(WAIT_POLL * 2).await;
        assert!(!waiting.is_finished());
        std::fs::write(&post, "").unwrap();
        assert_eq!(waiting.await.unwrap(), Ok(()));
        let failed = dir.path().join("1").join("out");
        std::fs::create_dir_all(failed.parent().unwrap()).unwrap();
        std::fs::write(with_err(&failed), "").unwrap();
        assert_eq!(wait_for(&failed).await, Err(()));
    }
}
