//! IPAM delegation: the plugin named by `ipam.type` is found in `CNI_PATH` and run with the
//! same environment and the same configuration on stdin, `CNI_COMMAND` set to the command
//! delegated (what libcni's `invoke.DelegateAdd` and friends do). Its error object is passed
//! on unchanged.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command as Process, Stdio};

use serde_json::Value;

use super::error::{CniError, code};
use super::protocol::{Command, Invocation};
use super::result::CniResult;

/// The IPAM plugin of one invocation.
pub struct Ipam<'a> {
    plugin: &'a str,
    inv: &'a Invocation,
}

impl<'a> Ipam<'a> {
    /// The IPAM plugin the configuration names, if it names one.
    pub fn of(inv: &'a Invocation) -> Result<Option<Self>, CniError> {
        match inv.config.get("ipam") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(ipam)) => match ipam.get("type") {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(t)) if t.is_empty() => Ok(None),
                Some(Value::String(t)) => Ok(Some(Ipam { plugin: t, inv })),
                Some(other) => Err(CniError::config(format!(
                    "\"ipam.type\" must be a string, not {other}"
                ))),
            },
            Some(other) => Err(CniError::config(format!(
                "\"ipam\" must be an object, not {other}"
            ))),
        }
    }

    pub fn name(&self) -> &str {
        self.plugin
    }

    /// Where the plugin is: the first `CNI_PATH` directory that has it.
    pub fn find(&self) -> Result<PathBuf, CniError> {
        if self.plugin.contains('/') || self.plugin == "." || self.plugin == ".." {
            return Err(CniError::config(format!(
                "\"ipam.type\" {:?} is not a plugin name (it must not contain '/')",
                self.plugin
            )));
        }
        let dirs = self.inv.path_dirs();
        dirs.iter()
            .map(|dir| dir.join(self.plugin))
            .find(|candidate| candidate.is_file())
            .ok_or_else(|| {
                CniError::config(format!(
                    "\"ipam.type\" {:?}: no such IPAM plugin in CNI_PATH ({})",
                    self.plugin, self.inv.path
                ))
            })
    }

    /// Runs the plugin with `command` and returns its stdout.
    fn exec(&self, command: Command) -> Result<Vec<u8>, CniError> {
        let path = self.find()?;
        let mut child = Process::new(&path)
            .env("CNI_COMMAND", command.as_str())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| CniError::internal(format!("cannot run IPAM plugin {path:?}: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A plugin that exits without reading its stdin is judged by its output below.
            let _ = stdin.write_all(&self.inv.stdin);
        }
        let output = child.wait_with_output().map_err(|e| {
            CniError::internal(format!("cannot wait for IPAM plugin {path:?}: {e}"))
        })?;
        if !output.stderr.is_empty() {
            let _ = std::io::stderr().write_all(&output.stderr);
        }
        if output.status.success() {
            return Ok(output.stdout);
        }
        Err(self.failure(&output.stdout, &output.stderr, output.status))
    }

    /// The error a failed plugin printed, or one made from what it left.
    fn failure(&self, stdout: &[u8], stderr: &[u8], status: std::process::ExitStatus) -> CniError {
        if let Ok(Value::Object(err)) = serde_json::from_slice::<Value>(stdout) {
            if let Some(code) = err.get("code").and_then(Value::as_u64) {
                let text = |key: &str| {
                    err.get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                return CniError {
                    code: u32::try_from(code).unwrap_or(code::INTERNAL),
                    msg: text("msg"),
                    details: text("details"),
                };
            }
        }
        let said = if stdout.is_empty() { stderr } else { stdout };
        CniError::internal(format!(
            "IPAM plugin {:?} failed ({status}): {}",
            self.plugin,
            String::from_utf8_lossy(said).trim()
        ))
    }

    /// ADD: the addresses, routes and DNS the plugin allocated.
    pub fn add(&self) -> Result<CniResult, CniError> {
        let stdout = self.exec(Command::Add)?;
        let value: Value = serde_json::from_slice(&stdout).map_err(|e| {
            CniError::new(
                code::DECODING_FAILURE,
                format!(
                    "IPAM plugin {:?} printed a result that is not JSON: {e}",
                    self.plugin
                ),
            )
        })?;
        CniResult::from_value(
            &value,
            &format!("the result of IPAM plugin {:?}", self.plugin),
            self.inv.version(),
        )
    }

    pub fn del(&self) -> Result<(), CniError> {
        self.exec(Command::Del).map(drop)
    }

    pub fn check(&self) -> Result<(), CniError> {
        self.exec(Command::Check).map(drop)
    }

    pub fn status(&self) -> Result<(), CniError> {
        self.exec(Command::Status).map(drop)
    }

    pub fn gc(&self) -> Result<(), CniError> {
        self.exec(Command::Gc).map(drop)
    }
}
