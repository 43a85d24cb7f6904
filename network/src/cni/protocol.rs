//! The CNI execution protocol, plugin side: the `CNI_*` environment, the configuration on
//! stdin, spec versions and their reconciliation, and the result or error JSON on stdout
//! (CNI spec 1.1 with everything back to 0.1.0, as libcni's `skel` dispatches it).

use std::io::{Read, Write};
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::error::{CniError, code};
use super::result::CniResult;
use super::version::{SUPPORTED_VERSIONS, SpecVersion};

/// What the runtime asked for (`CNI_COMMAND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Status,
    Gc,
    Version,
}

impl Command {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "STATUS" => Command::Status,
            "GC" => Command::Gc,
            "VERSION" => Command::Version,
            _ => return None,
        })
    }

    /// The spelling in `CNI_COMMAND`, for delegating to an IPAM plugin.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Status => "STATUS",
            Command::Gc => "GC",
            Command::Version => "VERSION",
        }
    }
}

/// One invocation: the environment and the configuration it came with.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub command: Command,
    pub container_id: String,
    /// `CNI_NETNS`; empty when the runtime gave none (a DEL may do that).
    pub netns: String,
    pub ifname: String,
    /// `CNI_ARGS`, unparsed ("K=V;K2=V2").
    pub args: String,
    /// `CNI_PATH`, unparsed (':'-separated directories).
    pub path: String,
    /// The configuration bytes exactly as they came, for delegating to the IPAM plugin.
    pub stdin: Vec<u8>,
    /// The configuration, parsed.
    pub config: Value,
    /// The configuration's `cniVersion` ("0.1.0" when it has none, as libcni reads it).
    pub cni_version: String,
}

impl Invocation {
    /// The directories of `CNI_PATH`.
    pub fn path_dirs(&self) -> Vec<PathBuf> {
        self.path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect()
    }

    pub fn version(&self) -> SpecVersion {
        SpecVersion::parse(&self.cni_version).unwrap_or(SpecVersion::CURRENT)
    }
}

/// The commands of one plugin; the protocol checks everything generic before calling them.
pub trait Plugin {
    /// One line for a person who runs the plugin by hand.
    fn about(&self) -> String;
    fn add(&self, inv: &Invocation) -> Result<CniResult, CniError>;
    fn del(&self, inv: &Invocation) -> Result<(), CniError>;
    fn check(&self, inv: &Invocation) -> Result<(), CniError>;
    fn status(&self, inv: &Invocation) -> Result<(), CniError>;
    fn gc(&self, inv: &Invocation) -> Result<(), CniError>;
}

/// Runs one invocation of `plugin` end to end; the `Err` is what was printed to `stdout`
/// as the error object (the caller exits nonzero).
pub fn run(
    plugin: &dyn Plugin,
    getenv: &dyn Fn(&str) -> Option<String>,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), CniError> {
    let mut version_for_errors = SpecVersion::CURRENT.to_string();
    let outcome = dispatch(
        plugin,
        getenv,
        stdin,
        stdout,
        stderr,
        &mut version_for_errors,
    );
    if let Err(err) = &outcome {
        // Nothing more can be done if stdout is gone.
        let _ = write_json(stdout, &err.printable(&version_for_errors));
    }
    outcome
}

fn dispatch(
    plugin: &dyn Plugin,
    getenv: &dyn Fn(&str) -> Option<String>,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    version_for_errors: &mut String,
) -> Result<(), CniError> {
    let get = |name: &str| getenv(name).unwrap_or_default();
    let command_name = get("CNI_COMMAND");
    if command_name.is_empty() {
        describe_plugin(plugin, stderr);
        return Ok(());
    }
    let command = parse_command(&command_name)?;
    if command == Command::Version {
        return write_version_info(stdout);
    }

    check_required_env(command, &get)?;
    let container_id = get("CNI_CONTAINERID");
    check_container_id(&container_id)?;
    let ifname = get("CNI_IFNAME");
    check_ifname_env(&ifname)?;

    let (bytes, config) = read_config(stdin)?;
    let cni_version = config_version(&config)?;
    check_network_name(&config)?;
    check_version_supported(&cni_version)?;
    *version_for_errors = cni_version.clone();
    check_command_allowed(command, &cni_version)?;

    let inv = Invocation {
        command,
        container_id,
        netns: get("CNI_NETNS"),
        ifname,
        args: get("CNI_ARGS"),
        path: get("CNI_PATH"),
        stdin: bytes,
        config,
        cni_version,
    };
    run_command(plugin, &inv, &get, stdout)
}

/// Run by hand: say what this is, as libcni's skel does.
fn describe_plugin(plugin: &dyn Plugin, stderr: &mut dyn Write) {
    let _ = writeln!(stderr, "{}", plugin.about());
    let _ = writeln!(
        stderr,
        "CNI protocol versions supported: {}",
        SUPPORTED_VERSIONS.join(", ")
    );
}

/// `CNI_COMMAND`, refused when it names no command.
fn parse_command(command_name: &str) -> Result<Command, CniError> {
    Command::parse(command_name).ok_or_else(|| {
        CniError::new(
            code::INVALID_ENVIRONMENT,
            format!("unknown CNI_COMMAND: {command_name}"),
        )
    })
}

/// VERSION's answer: the current version and every supported one.
fn write_version_info(stdout: &mut dyn Write) -> Result<(), CniError> {
    let info = serde_json::json!({
        "cniVersion": SpecVersion::CURRENT.to_string(),
        "supportedVersions": SUPPORTED_VERSIONS,
    });
    write_json(stdout, &info)
}

/// The `CNI_*` variables `command` cannot run without, all named when any is missing.
fn check_required_env(command: Command, get: &dyn Fn(&str) -> String) -> Result<(), CniError> {
    let required: &[&str] = match command {
        Command::Add | Command::Check => {
            &["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"]
        }
        Command::Del => &["CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"],
        Command::Status | Command::Gc | Command::Version => &["CNI_PATH"],
    };
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|name| get(name).is_empty())
        .collect();
    if !missing.is_empty() {
        return Err(CniError::new(
            code::INVALID_ENVIRONMENT,
            format!("required env variables [{}] missing", missing.join(",")),
        ));
    }
    Ok(())
}

/// `CNI_CONTAINERID`, when given, must be an identifier.
fn check_container_id(container_id: &str) -> Result<(), CniError> {
    if !container_id.is_empty() && !valid_identifier(container_id) {
        return Err(CniError::new(
            code::INVALID_ENVIRONMENT,
            "invalid characters in CNI_CONTAINERID: it must start with a letter or digit, \
             followed by letters, digits, '_', '.' or '-'",
        )
        .with_details(container_id));
    }
    Ok(())
}

/// `CNI_IFNAME`, when given, must be a Linux interface name.
fn check_ifname_env(ifname: &str) -> Result<(), CniError> {
    if !ifname.is_empty() {
        if let Err(why) = check_interface_name(ifname) {
            return Err(CniError::new(
                code::INVALID_ENVIRONMENT,
                format!("CNI_IFNAME {ifname:?}: {why}"),
            ));
        }
    }
    Ok(())
}

/// The configuration on stdin: its bytes as they came, and parsed (a JSON object).
fn read_config(stdin: &mut dyn Read) -> Result<(Vec<u8>, Value), CniError> {
    let mut bytes = Vec::new();
    stdin.read_to_end(&mut bytes).map_err(|e| {
        CniError::new(
            code::IO_FAILURE,
            format!("error reading the network configuration from stdin: {e}"),
        )
    })?;
    let config: Value = serde_json::from_slice(&bytes).map_err(|e| {
        CniError::new(
            code::DECODING_FAILURE,
            format!("the network configuration is not valid JSON: {e}"),
        )
    })?;
    if !config.is_object() {
        return Err(CniError::new(
            code::DECODING_FAILURE,
            "the network configuration must be a JSON object",
        ));
    }
    Ok((bytes, config))
}

/// The configuration's `cniVersion`, "0.1.0" when it has none (as libcni reads it).
fn config_version(config: &Value) -> Result<String, CniError> {
    match config.get("cniVersion") {
        None | Some(Value::Null) => Ok("0.1.0".to_owned()),
        Some(Value::String(v)) if v.is_empty() => Ok("0.1.0".to_owned()),
        Some(Value::String(v)) => Ok(v.clone()),
        Some(other) => Err(CniError::new(
            code::DECODING_FAILURE,
            format!("\"cniVersion\" must be a string, not {other}"),
        )),
    }
}

/// The configuration's `name`: required, a string, an identifier.
fn check_network_name(config: &Value) -> Result<(), CniError> {
    match config.get("name") {
        None | Some(Value::Null) => Err(CniError::config(
            "missing network name: \"name\" is required",
        )),
        Some(Value::String(name)) if name.is_empty() => Err(CniError::config(
            "missing network name: \"name\" is required",
        )),
        Some(Value::String(name)) if !valid_identifier(name) => Err(CniError::config(
            "invalid characters found in network name \"name\": it must start with a letter \
             or digit, followed by letters, digits, '_', '.' or '-'",
        )
        .with_details(name.clone())),
        Some(Value::String(_)) => Ok(()),
        Some(other) => Err(CniError::config(format!(
            "\"name\" must be a string, not {other}"
        ))),
    }
}

/// The configuration's version must be one this plugin speaks.
fn check_version_supported(cni_version: &str) -> Result<(), CniError> {
    if !SUPPORTED_VERSIONS.contains(&cni_version) {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!("incompatible CNI versions: the configuration's cniVersion {cni_version:?} is not supported"),
        )
        .with_details(format!("config is {cni_version:?}, plugin supports {}", SUPPORTED_VERSIONS.join(", "))));
    }
    Ok(())
}

/// CHECK needs 0.4.0 and STATUS and GC 1.1.0: an older configuration does not allow them.
fn check_command_allowed(command: Command, cni_version: &str) -> Result<(), CniError> {
    let version = SpecVersion::parse(cni_version).unwrap_or(SpecVersion::CURRENT);
    let minimum = match command {
        Command::Check => Some(SpecVersion::V0_4),
        Command::Status | Command::Gc => Some(SpecVersion::V1_1),
        _ => None,
    };
    if let Some(minimum) = minimum {
        if !version.is_at_least(minimum) {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!(
                    "config version does not allow {}: cniVersion {cni_version:?} is older than {minimum}",
                    command.as_str()
                ),
            ));
        }
    }
    Ok(())
}

/// Hands the checked invocation to the plugin's command; ADD's result is printed in the
/// configuration's version.
fn run_command(
    plugin: &dyn Plugin,
    inv: &Invocation,
    get: &dyn Fn(&str) -> String,
    stdout: &mut dyn Write,
) -> Result<(), CniError> {
    match inv.command {
        Command::Add => {
            let override_netns = get("CNI_NETNS_OVERRIDE");
            if !matches!(override_netns.to_ascii_lowercase().as_str(), "1" | "true") {
                refuse_own_netns(&inv.netns)?;
            }
            let result = plugin.add(inv)?;
            write_json(stdout, &result.printable(&inv.cni_version)?)
        }
        Command::Del => plugin.del(inv),
        Command::Check => plugin.check(inv),
        Command::Status => plugin.status(inv),
        Command::Gc => plugin.gc(inv),
        Command::Version => unreachable!("answered above"),
    }
}

/// ADD into the plugin's own namespace would wire the host to itself: libcni refuses it.
fn refuse_own_netns(netns: &str) -> Result<(), CniError> {
    let Ok(target) = rustix::fs::stat(netns) else {
        // A missing or unreadable namespace is reported by the command itself.
        return Ok(());
    };
    let own = rustix::fs::stat("/proc/thread-self/ns/net").map_err(|e| {
        CniError::internal(format!(
            "cannot inspect the plugin's own network namespace: {e}"
        ))
    })?;
    if (target.st_dev, target.st_ino) == (own.st_dev, own.st_ino) {
        return Err(CniError::new(
            code::INVALID_NETNS,
            format!("CNI_NETNS {netns:?} is the plugin's own network namespace"),
        ));
    }
    Ok(())
}

/// Container IDs and network names: a letter or digit, then letters, digits, `_`, `.`, `-`.
pub fn valid_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A Linux interface name: 1 to 15 bytes, not "." or "..", without '/', ':' or whitespace.
pub fn check_interface_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an interface name must not be empty".to_owned());
    }
    if name.len() > 15 {
        return Err(format!(
            "an interface name has at most 15 characters, {name:?} has {}",
            name.len()
        ));
    }
    if name == "." || name == ".." {
        return Err("an interface name must not be \".\" or \"..\"".to_owned());
    }
    if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        return Err("an interface name must not contain '/', ':' or whitespace".to_owned());
    }
    Ok(())
}

/// Prints `value` as libcni does (indented by four spaces), then a newline.
fn write_json(out: &mut dyn Write, value: &impl Serialize) -> Result<(), CniError> {
    let mut bytes = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    value
        .serialize(&mut serializer)
        .map_err(|e| CniError::internal(format!("cannot encode the output: {e}")))?;
    bytes.push(b'\n');
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .map_err(|e| CniError::new(code::IO_FAILURE, format!("cannot write to stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Recorder;

    impl Plugin for Recorder {
        fn about(&self) -> String {
            "test plugin".to_owned()
        }
        fn add(&self, inv: &Invocation) -> Result<CniResult, CniError> {
            assert_eq!(inv.command, Command::Add);
            Ok(CniResult::default())
        }
        fn del(&self, _: &Invocation) -> Result<(), CniError> {
            Ok(())
        }
        fn check(&self, _: &Invocation) -> Result<(), CniError> {
            Err(CniError::internal("checked"))
        }
        fn status(&self, _: &Invocation) -> Result<(), CniError> {
            Ok(())
        }
        fn gc(&self, _: &Invocation) -> Result<(), CniError> {
            Ok(())
        }
    }

    fn invoke(env: &[(&str, &str)], stdin: &str) -> (Result<(), CniError>, Value) {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut out = Vec::new();
        let mut err = Vec::new();
        let outcome = run(
            &Recorder,
            &|k| env.get(k).cloned(),
            &mut stdin.as_bytes(),
            &mut out,
            &mut err,
        );
        let printed = if out.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&out).unwrap()
        };
        (outcome, printed)
    }

    const ENV: &[(&str, &str)] = &[
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", "/nonexistent/netns"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/usr/lib/cni"),
    ];

    #[test]
    fn version_lists_supported_versions() {
        let (outcome, printed) = invoke(&[("CNI_COMMAND", "VERSION")], "");
        assert!(outcome.is_ok());
        assert_eq!(printed["cniVersion"], "1.1.0");
        assert_eq!(
            printed["supportedVersions"].as_array().unwrap().len(),
            SUPPORTED_VERSIONS.len()
        );
    }

    #[test]
    fn missing_environment_is_named() {
        let (outcome, printed) = invoke(&[("CNI_COMMAND", "ADD"), ("CNI_PATH", "/x")], "{}");
        let err = outcome.unwrap_err();
        assert_eq!(err.code, code::INVALID_ENVIRONMENT);
        assert_eq!(printed["code"], 4);
        let msg = printed["msg"].as_str().unwrap();
        assert!(
            msg.contains("CNI_CONTAINERID")
                && msg.contains("CNI_NETNS")
                && msg.contains("CNI_IFNAME"),
            "{msg}"
        );
    }

    #[test]
    fn unknown_command_and_bad_ifname() {
        let (outcome, _) = invoke(&[("CNI_COMMAND", "FROB")], "{}");
        assert_eq!(outcome.unwrap_err().code, code::INVALID_ENVIRONMENT);
        let mut env = ENV.to_vec();
        env[3] = ("CNI_IFNAME", "a/b");
        let (outcome, _) = invoke(&env, r#"{"cniVersion":"1.0.0","name":"n"}"#);
        assert!(outcome.unwrap_err().msg.contains("CNI_IFNAME"));
    }

    #[test]
    fn config_errors_name_the_field() {
        let (outcome, _) = invoke(ENV, "not json");
        assert_eq!(outcome.unwrap_err().code, code::DECODING_FAILURE);
        let (outcome, _) = invoke(ENV, r#"{"cniVersion":"1.0.0"}"#);
        let err = outcome.unwrap_err();
        assert_eq!(err.code, code::INVALID_CONFIG);
        assert!(err.msg.contains("\"name\""));
        let (outcome, printed) = invoke(ENV, r#"{"cniVersion":"9.9.9","name":"n"}"#);
        let err = outcome.unwrap_err();
        assert_eq!(err.code, code::INCOMPATIBLE_VERSION);
        assert!(err.msg.contains("cniVersion"));
        assert_eq!(printed["code"], 1);
    }

    #[test]
    fn check_needs_zero_four_and_add_prints_the_result_in_the_config_version() {
        let mut env = ENV.to_vec();
        env[0] = ("CNI_COMMAND", "CHECK");
        let (outcome, _) = invoke(&env, r#"{"cniVersion":"0.3.1","name":"n"}"#);
        assert_eq!(outcome.unwrap_err().code, code::INCOMPATIBLE_VERSION);
        let (outcome, printed) = invoke(&env, r#"{"cniVersion":"0.4.0","name":"n"}"#);
        assert_eq!(outcome.unwrap_err().msg, "checked");
        assert_eq!(printed["cniVersion"], "0.4.0");
        let (outcome, printed) = invoke(ENV, r#"{"cniVersion":"1.0.0","name":"n"}"#);
        assert!(outcome.is_ok());
        assert_eq!(
            printed,
            serde_json::json!({"cniVersion": "1.0.0", "dns": {}})
        );
    }

    #[test]
    fn versions_order() {
        assert!(SpecVersion::parse("0.3.1").unwrap() > SpecVersion::V0_3);
        assert!(SpecVersion::parse("1.0.0").unwrap().is_1x());
        assert_eq!(SpecVersion::parse("1.0"), None);
        assert_eq!(SpecVersion::parse("1.0.0.0"), None);
        for v in SUPPORTED_VERSIONS {
            assert_eq!(SpecVersion::parse(v).unwrap().to_string(), *v);
        }
    }
}
