//! The store's state on disk: a snapshot of every record plus an append-only log of the changes
//! made since, one JSON line each.
//!
//! A change costs one `fdatasync` of the log, and concurrent changes share it (group commit): a
//! caller that finds a sync under way waits for it and usually finds its own line already
//! covered. Records in one file per object cost five fsyncs a change (the file, its rename, the
//! directory); this is what makes the driver's calls cheap while every acknowledged change
//! still survives a kill -9 or a power cut.
//!
//! Written by hand because it is small and specific: the log is replayed onto the snapshot at
//! open, a torn last line (a write cut short, never acknowledged) is dropped, and the snapshot
//! is rewritten and the log emptied when it has grown long. Replaying a log onto a snapshot
//! that already holds its changes gives the same state, so a crash between the two steps of a
//! compaction is harmless.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, IoContext, Result};
use crate::persist::{Readers, write_file};

const SNAPSHOT_NAME: &str = "records.json";
const LOG_NAME: &str = "changes.jsonl";

/// Appended but perhaps not yet durable: [`Journal::commit`] makes it so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

struct Log {
    file: File,
    /// Lines written since the journal was opened.
    written: u64,
    /// Lines in the log file (since the last compaction).
    lines: u64,
}

/// A snapshot and its log, in one directory.
pub struct Journal {
    snapshot_path: PathBuf,
    log_path: PathBuf,
    /// Lock order: `synced` before `log`.
    synced: Mutex<u64>,
    log: Mutex<Log>,
    /// A handle on the same file, synced without holding `log`, so appends go on meanwhile.
    sync_handle: Mutex<File>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing is left half-done under these locks when a holder panics.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Journal {
    /// Opens the journal in `dir` (created if missing) and rebuilds the state: the snapshot,
    /// or `S::default()`, with every logged change applied by `apply`, in order.
    pub fn open<S, E>(dir: &Path, mut apply: impl FnMut(&mut S, E)) -> Result<(Self, S)>
    where
        S: Default + DeserializeOwned,
        E: DeserializeOwned,
    {
        std::fs::create_dir_all(dir).at("create", dir)?;
        let snapshot_path = dir.join(SNAPSHOT_NAME);
        let log_path = dir.join(LOG_NAME);
        let mut state = match read_if_present(&snapshot_path)? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|err| Error::State {
                path: snapshot_path.clone(),
                detail: err.to_string(),
            })?,
            None => S::default(),
        };
        let bytes = read_if_present(&log_path)?.unwrap_or_default();
        // Only whole lines count: a last line without its newline was never acknowledged.
        let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let mut lines = 0;
        for (number, line) in bytes[..whole].split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let change = serde_json::from_slice(line).map_err(|err| Error::State {
                path: log_path.clone(),
                detail: format!("line {}: {err}", number + 1),
            })?;
            apply(&mut state, change);
            lines += 1;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .at("open", &log_path)?;
        if whole < bytes.len() {
            tracing::warn!(log = %log_path.display(), "dropping a torn last line of the journal");
            file.set_len(whole as u64).at("truncate", &log_path)?;
            file.sync_data().at("fsync", &log_path)?;
        }
        let sync_handle = file.try_clone().at("open", &log_path)?;
        let journal = Journal {
            snapshot_path,
            log_path,
            synced: Mutex::new(0),
            log: Mutex::new(Log {
                file,
                written: 0,
                lines,
            }),
            sync_handle: Mutex::new(sync_handle),
        };
        Ok((journal, state))
    }

    /// Writes `change` to the log; it is durable once [`Self::commit`] returns. Callers append
    /// in the order they change their in-memory state (under the lock that guards it).
    pub fn append<E: Serialize>(&self, change: &E) -> Result<Ticket> {
        let mut line = serde_json::to_vec(change).map_err(|err| Error::State {
            path: self.log_path.clone(),
            detail: err.to_string(),
        })?;
        line.push(b'\n');
        let mut log = lock(&self.log);
        // One write of a whole line (O_APPEND): a crash leaves at most a torn last line.
        log.file.write_all(&line).at("write", &self.log_path)?;
        log.written += 1;
        log.lines += 1;
        Ok(Ticket(log.written))
    }

    /// Everything appended so far, for a caller that must not answer before it is durable.
    pub fn written(&self) -> Ticket {
        Ticket(lock(&self.log).written)
    }

    /// Returns once the change of `ticket` (and every one before it) is on disk. One caller
    /// syncs for all who wait meanwhile.
    pub fn commit(&self, ticket: Ticket) -> Result<()> {
        let mut synced = lock(&self.synced);
        if *synced >= ticket.0 {
            return Ok(());
        }
        let upto = lock(&self.log).written;
        lock(&self.sync_handle)
            .sync_data()
            .at("fsync", &self.log_path)?;
        *synced = upto;
        Ok(())
    }

    /// Lines in the log since the last compaction.
    pub fn lines(&self) -> u64 {
        lock(&self.log).lines
    }

    /// Replaces the snapshot with `state` and empties the log. `state` must hold every change
    /// appended so far (the caller holds the lock its appends are made under).
    pub fn compact<S: Serialize>(&self, state: &S) -> Result<()> {
        let mut synced = lock(&self.synced);
        let mut log = lock(&self.log);
        let bytes = serde_json::to_vec(state).map_err(|err| Error::State {
            path: self.snapshot_path.clone(),
            detail: err.to_string(),
        })?;
        write_file(&self.snapshot_path, &bytes, Readers::Owner).at("write", &self.snapshot_path)?;
        // The snapshot holds everything logged: the log may go, and what was waiting for a
        // sync is durable.
        log.file.set_len(0).at("truncate", &self.log_path)?;
        log.file.sync_data().at("fsync", &self.log_path)?;
        log.lines = 0;
        *synced = log.written;
        Ok(())
    }
}

/// A file's bytes, or `None` when there is no such file.
fn read_if_present(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(Error::io("read", path, err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type State = BTreeMap<String, u32>;

    #[derive(serde::Serialize, serde::Deserialize)]
    enum Change {
        Put(String, u32),
        Remove(String),
    }

    fn apply(state: &mut State, change: Change) {
        match change {
            Change::Put(k, v) => {
                state.insert(k, v);
            }
            Change::Remove(k) => {
                state.remove(&k);
            }
        }
    }

    fn open(dir: &Path) -> (Journal, State) {
        Journal::open(dir, apply).unwrap()
    }

    #[test]
    fn changes_replay_in_order_after_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let (journal, _) = open(tmp.path());
        for change in [
            Change::Put("a".into(), 1),
            Change::Put("b".into(), 2),
            Change::Remove("a".into()),
            Change::Put("b".into(), 3),
        ] {
            let ticket = journal.append(&change).unwrap();
            journal.commit(ticket).unwrap();
        }
        drop(journal);
        let (journal, state) = open(tmp.path());
        assert_eq!(state, BTreeMap::from([("b".to_string(), 3)]));
        assert_eq!(journal.lines(), 4);
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_a_corrupt_one_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (journal, _) = open(tmp.path());
        journal.append(&Change::Put("a".into(), 1)).unwrap();
        drop(journal);
        let log = tmp.path().join(LOG_NAME);
        let mut file = OpenOptions::new().append(true).open(&log).unwrap();
        file.write_all(br#"{"Put":["b","#).unwrap();
        let (journal, state) = open(tmp.path());
        assert_eq!(state, BTreeMap::from([("a".to_string(), 1)]));
        // The torn line is gone: what is appended next starts a line of its own.
        journal.append(&Change::Put("c".into(), 3)).unwrap();
        drop(journal);
        let (_, state) = open(tmp.path());
        assert_eq!(state.len(), 2);
        std::fs::write(&log, b"{\"Put\":[\"a\",1]}\nnot json\n{\"Remove\":\"a\"}\n").unwrap();
        let err = Journal::open::<State, Change>(tmp.path(), apply)
            .err()
            .expect("a corrupt line in the middle is an error");
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn compaction_keeps_the_state_and_empties_the_log() {
        let tmp = tempfile::tempdir().unwrap();
        let (journal, mut state) = open(tmp.path());
        for i in 0..10 {
            let change = Change::Put(format!("k{}", i % 3), i);
            journal.append(&change).unwrap();
            apply(&mut state, change);
        }
        journal.compact(&state).unwrap();
        assert_eq!(journal.lines(), 0);
        assert_eq!(
            std::fs::metadata(tmp.path().join(LOG_NAME)).unwrap().len(),
            0
        );
        let ticket = journal.append(&Change::Remove("k0".into())).unwrap();
        journal.commit(ticket).unwrap();
        drop(journal);
        let (_, reopened) = open(tmp.path());
        assert_eq!(reopened.len(), 2);
        assert_eq!(reopened["k1"], 7);
    }

    #[test]
    fn concurrent_commits_share_syncs_and_all_land() {
        let tmp = tempfile::tempdir().unwrap();
        let (journal, _) = open(tmp.path());
        std::thread::scope(|scope| {
            for t in 0..8 {
                let journal = &journal;
                scope.spawn(move || {
                    for i in 0..50 {
                        let ticket = journal.append(&Change::Put(format!("{t}-{i}"), i)).unwrap();
                        journal.commit(ticket).unwrap();
                    }
                });
            }
        });
        drop(journal);
        let (_, state) = open(tmp.path());
        assert_eq!(state.len(), 400);
    }
}
