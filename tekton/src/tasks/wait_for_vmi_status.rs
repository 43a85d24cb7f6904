//! wait-for-vmi-status: watches one VirtualMachineInstance and ends when its success
//! condition holds (exit 0) or its failure condition does (exit 2), checking the success
//! condition first on every change, deletion included. With neither condition it ends at
//! once; otherwise it waits as long as the TaskRun's timeout lets it, as upstream.

use clap::Args;
use futures_util::StreamExt;
use kube::runtime::watcher::{self, Event};

use crate::condition::Condition;
use crate::failure::{FailWith, TaskFailure, TaskResult};
use crate::objects::{Cluster, Kind};

/// Upstream's exit codes.
mod exit {
    pub const INVALID_ARGUMENTS: i32 = -1;
    pub const WATCH_FAILED: i32 = -2;
    pub const FAILURE_CONDITION: i32 = 2;
}

#[derive(Args, Debug, Default)]
pub struct WaitForVmiStatusArgs {
    /// Name of the VirtualMachineInstance.
    #[arg(long = "vmi-name", env = "VMI_NAME", default_value = "")]
    name: String,
    /// Its namespace [default: the active namespace].
    #[arg(long = "vmi-namespace", env = "VMI_NAMESPACE", default_value = "")]
    namespace: String,
    /// Label-selector condition over the VMI's fields that ends the task successfully.
    #[arg(
        long = "success-condition",
        env = "SUCCESS_CONDITION",
        default_value = ""
    )]
    success_condition: String,
    /// Label-selector condition over the VMI's fields that fails the task.
    #[arg(
        long = "failure-condition",
        env = "FAILURE_CONDITION",
        default_value = ""
    )]
    failure_condition: String,
    /// More logging.
    #[arg(long)]
    debug: bool,
}

/// The checked flags.
#[derive(Debug)]
struct Wait {
    name: String,
    namespace: String,
    success: Option<Condition>,
    failure: Option<Condition>,
    /// The failure condition as given, for the message.
    failure_text: String,
}

/// What a state of the VMI decides.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Succeeded,
    Failed,
    Undecided,
}

impl Wait {
    fn verdict(&self, vmi: &serde_json::Value) -> Verdict {
        if self.success.as_ref().is_some_and(|c| c.matches(vmi)) {
            Verdict::Succeeded
        } else if self.failure.as_ref().is_some_and(|c| c.matches(vmi)) {
            Verdict::Failed
        } else {
            Verdict::Undecided
        }
    }
}

pub async fn run(args: WaitForVmiStatusArgs) -> TaskResult {
    let invalid = |m: String| TaskFailure::new(exit::INVALID_ARGUMENTS, m);
    let (name, namespace) = check_names(&args).map_err(invalid)?;
    let success = parse(&args.success_condition, "success-condition").map_err(invalid)?;
    let failure = parse(&args.failure_condition, "failure-condition").map_err(invalid)?;
    if success.is_none() && failure.is_none() {
        return Ok(());
    }
    let cluster = Cluster::connect().await.fail_with(exit::WATCH_FAILED, "")?;
    let wait = Wait {
        namespace: cluster.namespace_or_active(&namespace),
        name,
        success,
        failure,
        failure_text: args.failure_condition.trim().to_owned(),
    };
    watch(&cluster, &wait).await
}

fn check_names(args: &WaitForVmiStatusArgs) -> Result<(String, String), String> {
    let name = args.name.trim();
    let namespace = args.namespace.trim();
    if name.is_empty() {
        return Err("vmi-name should not be empty".into());
    }
    for (option, value) in [("vmi-name", name), ("vmi-namespace", namespace)] {
        if !value.is_empty() && !api::validation::is_dns1123_subdomain(value) {
            return Err(format!(
                "invalid {option} value: {}",
                api::validation::DNS1123_SUBDOMAIN_MESSAGE
            ));
        }
    }
    Ok((name.to_owned(), namespace.to_owned()))
}

fn parse(text: &str, option: &str) -> Result<Option<Condition>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    Condition::parse(text)
        .map(Some)
        .map_err(|e| format!("{option}: {e}"))
}

async fn watch(cluster: &Cluster, wait: &Wait) -> TaskResult {
    let api = cluster.api(Kind::VirtualMachineInstance, &wait.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", wait.name));
    let mut events = std::pin::pin!(watcher::watcher(api, config));
    while let Some(event) = events.next().await {
        let vmi = match event {
            Ok(Event::Apply(vmi) | Event::InitApply(vmi) | Event::Delete(vmi)) => vmi,
            Ok(Event::Init | Event::InitDone) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "watching the VMI; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        let vmi = serde_json::to_value(vmi).fail_with(exit::WATCH_FAILED, "")?;
        match wait.verdict(&vmi) {
            Verdict::Succeeded => return Ok(()),
            Verdict::Failed => {
                return Err(TaskFailure::new(
                    exit::FAILURE_CONDITION,
                    format!(
                        "failure condition {:?} is met by VMI {}/{} (phase {})",
                        wait.failure_text,
                        wait.namespace,
                        wait.name,
                        vmi["status"]["phase"].as_str().unwrap_or("unknown")
                    ),
                ));
            }
            Verdict::Undecided => {}
        }
    }
    Err(TaskFailure::new(
        exit::WATCH_FAILED,
        "the watch of the VMI ended",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(name: &str, success: &str, failure: &str) -> WaitForVmiStatusArgs {
        WaitForVmiStatusArgs {
            name: name.into(),
            success_condition: success.into(),
            failure_condition: failure.into(),
            ..Default::default()
        }
    }

    #[test]
    fn names_are_checked_as_upstream() {
        assert_eq!(
            check_names(&args(" ", "", "")).unwrap_err(),
            "vmi-name should not be empty"
        );
        assert!(
            check_names(&args("Bad_Name", "", ""))
                .unwrap_err()
                .starts_with("invalid vmi-name value: a lowercase RFC 1123")
        );
        assert_eq!(
            check_names(&args(" vm1 ", "", "")).unwrap(),
            ("vm1".into(), String::new())
        );
    }

    #[test]
    fn success_is_checked_before_failure() {
        let wait = Wait {
            name: "vm1".into(),
            namespace: "ns".into(),
            success: parse("status.phase in (Running, Failed)", "success-condition").unwrap(),
            failure: parse("status.phase == Failed", "failure-condition").unwrap(),
            failure_text: "status.phase == Failed".into(),
        };
        assert_eq!(
            wait.verdict(&json!({"status": {"phase": "Failed"}})),
            Verdict::Succeeded
        );
        assert_eq!(
            wait.verdict(&json!({"status": {"phase": "Pending"}})),
            Verdict::Undecided
        );
        let failing = Wait {
            success: None,
            ..wait
        };
        assert_eq!(
            failing.verdict(&json!({"status": {"phase": "Failed"}})),
            Verdict::Failed
        );
    }

    #[test]
    fn a_bad_condition_names_its_option() {
        let error = parse("status.phase in Running", "failure-condition").unwrap_err();
        assert!(
            error.starts_with("failure-condition: could not parse condition"),
            "{error}"
        );
    }
}
