//! `GET /api/v1/namespaces/{ns}/pods/{name}/log`: what `kubectl logs` reads. The kubelet
//! serves it on a cluster; here the node agent keeps each pod's output in files
//! ([`crate::pod_files::container_log`], in the kubelet's record format, [`crate::cri_log`])
//! and the API server reads them, following a running container's log as it grows.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use serde_json::Value;
use tokio::sync::mpsc;

use super::errors::ApiError;
use super::objects::Objects;
use super::resources::ResourceType;
use crate::cri_log::Record;
use crate::pod_files::container_log;

/// How often a followed log is looked at for new output.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// How much is read and sent at a time.
const CHUNK: usize = 64 << 10;

/// The query of a log request (Kubernetes' `PodLogOptions`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<u64>,
    /// Each line prefixed with the time it was written (`--timestamps`).
    pub timestamps: bool,
    /// Only lines written from then on (`--since`, `--since-time`).
    pub since: Option<Timestamp>,
}

impl LogOptions {
    pub fn parse(query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let invalid = |name: &str, value: &str, must: &str| {
            ApiError::BadRequest(format!("{name}: Invalid value: {value:?}: {must}"))
        };
        let number = |name: &str| -> Result<Option<i64>, ApiError> {
            query
                .get(name)
                .map(|v| {
                    v.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                        invalid(name, v, "must be a number greater than or equal to 0")
                    })
                })
                .transpose()
        };
        let since_seconds = number("sinceSeconds")?;
        let since_time = query
            .get("sinceTime")
            .filter(|t| !t.is_empty())
            .map(|t| {
                t.parse::<Timestamp>()
                    .map_err(|_| invalid("sinceTime", t, "must be an RFC 3339 time"))
            })
            .transpose()?;
        let since = match (since_seconds, since_time) {
            (Some(_), Some(_)) => {
                return Err(ApiError::BadRequest(
                    "at most one of sinceTime or sinceSeconds may be specified".into(),
                ));
            }
            (Some(0), None) => {
                return Err(invalid("sinceSeconds", "0", "must be greater than 0"));
            }
            (Some(seconds), None) => Some(
                Timestamp::now()
                    .checked_sub(jiff::SignedDuration::from_secs(seconds))
                    .unwrap_or(Timestamp::MIN),
            ),
            (None, time) => time,
        };
        Ok(Self {
            container: query.get("container").filter(|c| !c.is_empty()).cloned(),
            follow: super::query::is_true(query.get("follow")),
            previous: super::query::is_true(query.get("previous")),
            tail_lines: number("tailLines")?.map(|n| n as usize),
            limit_bytes: number("limitBytes")?.map(|n| n as u64),
            timestamps: super::query::is_true(query.get("timestamps")),
            since,
        })
    }
}

/// What `kubectl logs` shows of `lines` of a log file (whole lines, the last one's newline
/// optional): each record's output, with its time when asked (once per line, as the kubelet:
/// `mid_line` says whether the last record shown was a part of a longer line), from `since`
/// on. A line in another format is shown as it is.
pub fn render(lines: &[u8], options: &LogOptions, mid_line: &mut bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.len());
    if lines.is_empty() {
        return out;
    }
    let body = lines.strip_suffix(b"\n").unwrap_or(lines);
    for line in body.split(|b| *b == b'\n') {
        let Some(record) = Record::parse(line) else {
            out.extend_from_slice(line);
            out.push(b'\n');
            continue;
        };
        let early = |since: &Timestamp| record.timestamp().is_some_and(|t| t < *since);
        if options.since.as_ref().is_some_and(early) {
            continue;
        }
        if options.timestamps && !*mid_line {
            out.extend_from_slice(record.time.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(record.content);
        if !record.partial {
            out.push(b'\n');
        }
        *mid_line = record.partial;
    }
    out
}

/// The file to read for `pod` and the name of the container it is of, or the error the
/// kubelet would give.
pub fn log_file(
    state_dir: &Path,
    pod: &Value,
    options: &LogOptions,
) -> Result<(PathBuf, String), ApiError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let containers = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let container = match &options.container {
        Some(wanted) => containers
            .iter()
            .find(|c| c["name"] == wanted.as_str())
            .ok_or_else(|| {
                ApiError::BadRequest(format!("container {wanted} is not valid for pod {name}"))
            })?,
        None => match containers.as_slice() {
            [only] => only,
            _ => {
                let names: Vec<&str> = containers
                    .iter()
                    .filter_map(|c| c["name"].as_str())
                    .collect();
                return Err(ApiError::BadRequest(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    names.join(" ")
                )));
            }
        },
    };
    let container_name = container["name"].as_str().unwrap_or_default();
    let path = container_log(state_dir, uid, container_name, options.previous);
    if path.exists() {
        return Ok((path, container_name.to_string()));
    }
    Err(ApiError::BadRequest(if options.previous {
        format!("previous terminated container \"{container_name}\" in pod \"{name}\" not found")
    } else {
        let reason = container_status(pod, container_name)["state"]["waiting"]["reason"]
            .as_str()
            .unwrap_or("ContainerCreating")
            .to_string();
        format!("container \"{container_name}\" in pod \"{name}\" is waiting to start: {reason}")
    }))
}

/// Where reading starts: the last `tail_lines` lines of `text`'s end (`text` holding the
/// file's last bytes from `offset`), else the start of the file.
pub fn tail_start(text: &[u8], offset: u64, tail_lines: usize) -> u64 {
    if tail_lines == 0 {
        return offset + text.len() as u64;
    }
    // A final newline ends the last line rather than starting another.
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    match body
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, b)| **b == b'\n')
        .nth(tail_lines - 1)
    {
        Some((at, _)) => offset + at as u64 + 1,
        None => offset,
    }
}

/// Streams the log into `out` from where the options start it; with `follow`, goes on while
/// `running` says the container runs.
pub fn stream(
    path: PathBuf,
    options: LogOptions,
    running: impl Fn() -> bool + Send + 'static,
    out: mpsc::Sender<Bytes>,
) -> std::io::Result<()> {
    let mut file = std::fs::File::open(&path)?;
    let start = match options.tail_lines {
        Some(lines) => start_of_tail(&mut file, lines)?,
        None => 0,
    };
    // Reads go on from here; past the end they return what the container wrote since.
    file.seek(SeekFrom::Start(start))?;
    let mut left = options.limit_bytes.unwrap_or(u64::MAX);
    let mut send = |mut shown: Vec<u8>| -> bool {
        shown.truncate(usize::try_from(left).unwrap_or(usize::MAX));
        left -= shown.len() as u64;
        (shown.is_empty() || out.blocking_send(Bytes::from(shown)).is_ok()) && left > 0
    };
    let mut buf = vec![0u8; CHUNK];
    // Read but not shown yet: the start of a line still being written.
    let mut pending = Vec::new();
    let mut mid_line = false;
    loop {
        let n = file.read(&mut buf)?;
        if n > 0 {
            pending.extend_from_slice(&buf[..n]);
            let whole = pending
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |at| at + 1);
            let lines: Vec<u8> = pending.drain(..whole).collect();
            if !send(render(&lines, &options, &mut mid_line)) {
                return Ok(());
            }
            continue;
        }
        if !options.follow || !running() {
            // A last line without its newline: its writer stopped there.
            send(render(&pending, &options, &mut mid_line));
            return Ok(());
        }
        std::thread::sleep(FOLLOW_POLL);
        if out.is_closed() {
            return Ok(());
        }
    }
}

/// The offset of the last `lines` lines of `file`, read backwards in chunks.
fn start_of_tail(file: &mut std::fs::File, lines: usize) -> std::io::Result<u64> {
    let len = file.metadata()?.len();
    let mut window = CHUNK as u64;
    loop {
        let from = len.saturating_sub(window);
        let mut text = Vec::new();
        file.seek(SeekFrom::Start(from))?;
        file.read_to_end(&mut text)?;
        let start = tail_start(&text, from, lines);
        if start > from || from == 0 {
            return Ok(start);
        }
        window *= 2;
    }
}

/// The status the pod reports for its container `container` (null when it reports none).
fn container_status(pod: &Value, container: &str) -> Value {
    pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == container))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Whether the pod's container `container` runs now, as the store says.
pub fn container_running(
    objects: &Arc<Objects>,
    pods: &ResourceType,
    ns: &str,
    name: &str,
    container: &str,
) -> bool {
    objects
        .get(pods, ns, name)
        .ok()
        .is_some_and(|pod| container_status(&pod, container)["state"]["running"].is_object())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tail_starts_at_the_nth_line_from_the_end() {
        let text = b"one\ntwo\nthree\n";
        assert_eq!(tail_start(text, 0, 1), 8);
        assert_eq!(tail_start(text, 0, 2), 4);
        assert_eq!(tail_start(text, 0, 3), 0);
        assert_eq!(tail_start(text, 0, 10), 0);
        assert_eq!(tail_start(text, 0, 0), 14);
        // A last line without its newline is a line.
        assert_eq!(tail_start(b"one\ntwo", 100, 1), 104);
    }

    #[test]
    fn options_parse_and_refuse_what_cannot_be_served() {
        let query = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let options = LogOptions::parse(&query(&[
            ("follow", "true"),
            ("tailLines", "5"),
            ("container", "c"),
        ]))
        .unwrap();
        assert_eq!(
            options,
            LogOptions {
                container: Some("c".into()),
                follow: true,
                previous: false,
                tail_lines: Some(5),
                limit_bytes: None,
                timestamps: false,
                since: None,
            }
        );
        for bad in [
            ("tailLines", "-1"),
            ("limitBytes", "x"),
            ("sinceSeconds", "0"),
            ("sinceTime", "yesterday"),
        ] {
            let err = LogOptions::parse(&query(&[bad])).unwrap_err().to_string();
            assert!(err.contains(bad.0), "{err}");
        }
        let both = query(&[("sinceSeconds", "5"), ("sinceTime", "2024-01-01T00:00:00Z")]);
        assert!(LogOptions::parse(&both).is_err());
        let since =
            LogOptions::parse(&query(&[("sinceSeconds", "60"), ("timestamps", "true")])).unwrap();
        assert!(since.timestamps);
        let ago = Timestamp::now()
            .duration_since(since.since.unwrap())
            .as_secs();
        assert!((59..=61).contains(&ago), "{ago}");
    }

    #[test]
    fn records_render_with_times_and_from_a_time() {
        let log = b"2024-01-01T00:00:01Z stdout F one\n\
2024-01-01T00:00:02.5Z stderr F two\n\
2024-01-01T00:00:03Z stdout P thr\n\
2024-01-01T00:00:03Z stdout F ee\n\
an old plain line\n";
        let plain = LogOptions::default();
        let render = |lines: &[u8], options: &LogOptions| render(lines, options, &mut false);
        assert_eq!(render(log, &plain), b"one\ntwo\nthree\nan old plain line\n");
        let since = LogOptions {
            since: Some("2024-01-01T00:00:02Z".parse().unwrap()),
            timestamps: true,
            ..LogOptions::default()
        };
        assert_eq!(
            String::from_utf8(render(log, &since)).unwrap(),
            "2024-01-01T00:00:02.5Z two\n2024-01-01T00:00:03Z three\nan old plain line\n"
        );
        assert_eq!(render(b"", &plain), b"");
        assert_eq!(
            render(b"2024-01-01T00:00:01Z stdout F cut", &plain),
            b"cut\n"
        );
    }

    #[test]
    fn the_file_or_the_kubelets_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let pod = json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {"containers": [{"name": "importer"}]},
            "status": {"containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]},
        });
        let none = LogOptions::default();
        let err = log_file(dir.path(), &pod, &none).unwrap_err().to_string();
        assert!(
            err.contains(
                "container \"importer\" in pod \"p\" is waiting to start: ContainerCreating"
            ),
            "{err}"
        );
        let other = LogOptions {
            container: Some("x".into()),
            ..LogOptions::default()
        };
        let err = log_file(dir.path(), &pod, &other).unwrap_err().to_string();
        assert!(err.contains("container x is not valid for pod p"), "{err}");
        let current = container_log(dir.path(), "u1", "importer", false);
        std::fs::create_dir_all(current.parent().unwrap()).unwrap();
        std::fs::write(&current, "hello\n").unwrap();
        assert_eq!(
            log_file(dir.path(), &pod, &none).unwrap(),
            (current, "importer".to_string())
        );
        let previous = LogOptions {
            previous: true,
            ..LogOptions::default()
        };
        let err = log_file(dir.path(), &pod, &previous)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("previous terminated container \"importer\" in pod \"p\" not found"),
            "{err}"
        );
    }
}
