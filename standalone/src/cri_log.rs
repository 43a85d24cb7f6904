//! Containers' logs in the kubelet's (CRI) format: one record per line of output,
//! `TIME STREAM TAG CONTENT`, with the time in RFC 3339 to the nanosecond, the stream
//! `stdout` or `stderr`, and the tag `F` for a full line or `P` for a part of a long one.
//! The node agent writes them ([`relay`]); the API server reads them back for `kubectl logs`
//! ([`Record::parse`]), which is how `--timestamps`, `--since` and `--since-time` are served.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

/// The longest content of one record, as the kubelet's: a longer line is split into
/// partial records.
const MAX_CONTENT: usize = 16 * 1024;

/// One record of a log.
#[derive(Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// When the line was written, as written in the record.
    pub time: &'a str,
    /// `stdout` or `stderr`.
    pub stream: &'a str,
    /// Whether this is a part of a longer line (the content then has no newline).
    pub partial: bool,
    /// The output, without the line's newline.
    pub content: &'a [u8],
}

impl<'a> Record<'a> {
    /// A record from one line of a log file (without its newline); `None` for a line in
    /// another format.
    pub fn parse(line: &'a [u8]) -> Option<Self> {
        let mut fields = line.splitn(4, |b| *b == b' ');
        let time = std::str::from_utf8(fields.next()?).ok()?;
        let stream = std::str::from_utf8(fields.next()?).ok()?;
        let partial = match fields.next()? {
            b"F" => false,
            b"P" => true,
            _ => return None,
        };
        if !matches!(stream, "stdout" | "stderr") {
            return None;
        }
        Some(Record {
            time,
            stream,
            partial,
            content: fields.next().unwrap_or_default(),
        })
    }

    /// Its time, if it parses.
    pub fn timestamp(&self) -> Option<Timestamp> {
        self.time.parse().ok()
    }
}

/// Copies `output` (a container's stdout or stderr, named `stream`) into `log` as records,
/// until `output` ends. Each record is one write, so two streams share a log.
pub fn relay(
    output: impl Read,
    stream: &str,
    log: &Arc<Mutex<std::fs::File>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(output);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .by_ref()
            .take(MAX_CONTENT as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let full = line.last() == Some(&b'\n');
        let content = line.strip_suffix(b"\n").unwrap_or(&line);
        // A line cut at the limit goes on in the next record; output that ends without a
        // newline is a full last line.
        let partial = !full && n == MAX_CONTENT;
        let record = encode(&Timestamp::now().to_string(), stream, partial, content);
        let mut file = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        file.write_all(&record)?;
    }
}

/// One record as a line of the file.
fn encode(time: &str, stream: &str, partial: bool, content: &[u8]) -> Vec<u8> {
    let tag = if partial { "P" } else { "F" };
    let mut record = format!("{time} {stream} {tag} ").into_bytes();
    record.extend_from_slice(content);
    record.push(b'\n');
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relayed(output: &[u8]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let file = Arc::new(Mutex::new(std::fs::File::create(&path).unwrap()));
        relay(output, "stderr", &file).unwrap();
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn every_line_becomes_a_record_that_parses_back() {
        let log = relayed(b"first line\n\nlast without newline");
        let records: Vec<Record> = log
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| Record::parse(l).expect("a record"))
            .collect();
        let contents: Vec<&[u8]> = records.iter().map(|r| r.content).collect();
        assert_eq!(contents, [&b"first line"[..], b"", b"last without newline"]);
        assert!(records.iter().all(|r| r.stream == "stderr" && !r.partial));
        let time = records[0].timestamp().expect("an RFC 3339 time");
        assert!(Timestamp::now().duration_since(time).as_secs() < 60);
    }

    #[test]
    fn a_long_line_is_split_into_partial_records() {
        let long = vec![b'x'; MAX_CONTENT * 2 + 10];
        let mut output = long.clone();
        output.push(b'\n');
        let log = relayed(&output);
        let records: Vec<Record> = log
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| Record::parse(l).unwrap())
            .collect();
        let tags: Vec<bool> = records.iter().map(|r| r.partial).collect();
        assert_eq!(tags, [true, true, false]);
        let joined: Vec<u8> = records.iter().flat_map(|r| r.content.to_vec()).collect();
        assert_eq!(joined, long);
    }

    #[test]
    fn lines_of_another_format_are_not_records() {
        assert_eq!(Record::parse(b"plain output"), None);
        assert_eq!(Record::parse(b"2024-01-01T00:00:00Z stdout X text"), None);
        assert_eq!(Record::parse(b"2024-01-01T00:00:00Z other F text"), None);
        let record = Record::parse(b"2024-01-01T00:00:00.5Z stdout F a b c").unwrap();
        assert_eq!(record.content, b"a b c");
        assert!(record.timestamp().is_some());
    }
}
