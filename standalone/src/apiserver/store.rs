//! Objects and their change log in SQLite: one transaction per write, one global
//! monotonically increasing resourceVersion, and the recent changes kept so that a watch
//! resumed from a resourceVersion (even across a restart) misses no event.
//!
//! SQLite rather than redb: the server needs ordered range scans by (resource, namespace,
//! name), a second table for the change log written in the same transaction, and a file
//! that `sqlite3` can open when something looks wrong. WAL mode with `synchronous=NORMAL`:
//! a committed write survives a crash of the process (what `ferrovirt up` restarts after),
//! and the server does not wait on an fsync per write.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::broadcast;

use super::errors::ApiError;

/// How many changes the log keeps; a watch from before them gets 410 Gone.
const EVENT_RETENTION: u64 = 100_000;

/// The log is trimmed to [`EVENT_RETENTION`] once per this many writes.
const COMPACT_EVERY: u64 = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    fn parse(s: &str) -> EventType {
        match s {
            "ADDED" => EventType::Added,
            "DELETED" => EventType::Deleted,
            _ => EventType::Modified,
        }
    }
}

/// One committed change. For DELETED, `object` is the last state, at the deleting version.
#[derive(Clone, Debug)]
pub struct ChangeEvent {
    pub rv: u64,
    pub resource: String,
    pub namespace: String,
    pub kind: EventType,
    pub object: Arc<Value>,
}

/// Where an object is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectKey {
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    fn from_row(row: &rusqlite::Row<'_>) -> Result<Self, rusqlite::Error> {
        Ok(ObjectKey {
            resource: row.get(0)?,
            namespace: row.get(1)?,
            name: row.get(2)?,
        })
    }
}

/// What a write decided, given the current object.
pub enum Change {
    Put(Value),
    Delete,
    /// Nothing to write; the current object is the answer.
    Keep,
}

/// Whether a write is committed or only worked out: a server-side dry run (`dryRun=All`)
/// goes through every step of a write but the last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Persist {
    #[default]
    Commit,
    DryRun,
}

/// The outcome of a write: the stored object (or, after a delete, its last state).
pub struct Written {
    pub object: Value,
    pub event: Option<EventType>,
}

/// A page of objects read in key order.
pub struct Scan {
    pub items: Vec<Value>,
    /// The resourceVersion the page is consistent with.
    pub resource_version: u64,
    /// Whether objects `keep` accepts follow the page.
    pub more: bool,
    /// How many stored objects of the resource, accepted or not, follow the page.
    pub remaining: Option<usize>,
}

pub struct Store {
    conn: Mutex<Connection>,
    changes: broadcast::Sender<Arc<ChangeEvent>>,
    /// How many changes the log keeps, and how often (in writes) it is trimmed to that.
    retention: u64,
    compact_every: u64,
}

impl Store {
    pub fn open(path: &Path) -> Result<Store, ApiError> {
        Self::open_with_retention(path, EVENT_RETENTION, COMPACT_EVERY)
    }

    /// A store whose change log keeps `retention` changes, trimmed every `compact_every`
    /// writes: small values let tests reach the 410 Gone horizon.
    pub fn open_with_retention(
        path: &Path,
        retention: u64,
        compact_every: u64,
    ) -> Result<Store, ApiError> {
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS objects (
                 resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
                 rv INTEGER NOT NULL, body TEXT NOT NULL,
                 PRIMARY KEY (resource, namespace, name));
             CREATE TABLE IF NOT EXISTS changes (
                 rv INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL,
                 type TEXT NOT NULL, body TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS changes_by_resource ON changes (resource, rv);
             CREATE TABLE IF NOT EXISTS uids (
                 uid TEXT PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL,
                 name TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS owner_refs (
                 owner_uid TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL,
                 name TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS owner_refs_by_owner ON owner_refs (owner_uid);
             CREATE INDEX IF NOT EXISTS owner_refs_by_object ON owner_refs (resource, namespace, name);
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
             INSERT OR IGNORE INTO meta VALUES ('rv', 1), ('compacted', 0);",
        )?;
        let (changes, _) = broadcast::channel(4096);
        Ok(Store {
            conn: Mutex::new(conn),
            changes,
            retention,
            compact_every: compact_every.max(1),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn current_rv(&self) -> Result<u64, ApiError> {
        Ok(meta(&self.conn(), "rv")?)
    }

    pub fn get(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let conn = self.conn();
        let body: Option<String> = conn
            .query_row(
                "SELECT body FROM objects WHERE resource=?1 AND namespace=?2 AND name=?3",
                params![resource, namespace, name],
                |row| row.get(0),
            )
            .optional()?;
        body.map(|b| parse(&b)).transpose()
    }

    /// Every object of `resource` (in `namespace`, or all), ordered by namespace and name,
    /// starting after `after`, with the resourceVersion the listing is consistent with.
    pub fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
    ) -> Result<(Vec<Value>, u64), ApiError> {
        let scan = self.scan(resource, namespace, after, None, &|_| true)?;
        Ok((scan.items, scan.resource_version))
    }

    /// The objects of `resource` (in `namespace`, or all) after `after` in key order that
    /// `keep` accepts, at most `limit` of them: a page read without decoding the objects
    /// beyond it.
    pub fn scan(
        &self,
        resource: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: Option<usize>,
        keep: &dyn Fn(&Value) -> bool,
    ) -> Result<Scan, ApiError> {
        let conn = self.conn();
        let resource_version = meta(&conn, "rv")?;
        let (after_ns, after_name) = after.unwrap_or(("", ""));
        let started = after.is_some();
        let mut stmt = conn.prepare_cached(
            "SELECT namespace, name, body FROM objects WHERE resource=?1
             AND (?2 IS NULL OR namespace=?2)
             AND (NOT ?5 OR (namespace, name) > (?3, ?4)) ORDER BY namespace, name",
        )?;
        let mut rows = stmt.query(params![resource, namespace, after_ns, after_name, started])?;
        let mut items = Vec::new();
        let mut last: Option<(String, String)> = None;
        let mut more = false;
        while let Some(row) = rows.next()? {
            let object = parse(&row.get::<_, String>(2)?)?;
            if !keep(&object) {
                continue;
            }
            if limit.is_some_and(|limit| items.len() >= limit) {
                more = true;
                break;
            }
            last = Some((row.get(0)?, row.get(1)?));
            items.push(object);
        }
        drop(rows);
        let remaining = match (more, &last) {
            (true, Some((last_ns, last_name))) => {
                let count: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM objects WHERE resource=?1
                     AND (?2 IS NULL OR namespace=?2) AND (namespace, name) > (?3, ?4)",
                    params![resource, namespace, last_ns, last_name],
                    |row| row.get(0),
                )?;
                Some(count as usize)
            }
            _ => None,
        };
        Ok(Scan {
            items,
            resource_version,
            more,
            remaining,
        })
    }

    /// The (resource, name) of every object in `namespace`: what deleting it removes.
    pub fn keys_in_namespace(&self, namespace: &str) -> Result<Vec<(String, String)>, ApiError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached("SELECT resource, name FROM objects WHERE namespace=?1")?;
        let rows = stmt.query_map(params![namespace], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Where the object with `uid` is stored, if it exists.
    pub fn find_uid(&self, uid: &str) -> Result<Option<ObjectKey>, ApiError> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT resource, namespace, name FROM uids WHERE uid=?1",
                params![uid],
                ObjectKey::from_row,
            )
            .optional()?)
    }

    /// The objects that name `uid` among their owner references.
    pub fn dependents(&self, uid: &str) -> Result<Vec<ObjectKey>, ApiError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT resource, namespace, name FROM owner_refs WHERE owner_uid=?1",
        )?;
        let rows = stmt.query_map(params![uid], ObjectKey::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The objects with owner references none of which names an existing object: what the
    /// garbage collector deletes.
    pub fn orphans(&self) -> Result<Vec<ObjectKey>, ApiError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT DISTINCT o.resource, o.namespace, o.name FROM owner_refs o
             WHERE NOT EXISTS (SELECT 1 FROM owner_refs o2 JOIN uids u ON u.uid = o2.owner_uid
                 WHERE o2.resource = o.resource AND o2.namespace = o.namespace AND o2.name = o.name)",
        )?;
        let rows = stmt.query_map([], ObjectKey::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Reads the current object, lets `decide` choose the change, and commits it with the
    /// next resourceVersion, all under one lock and one transaction.
    pub fn write<F>(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        decide: F,
    ) -> Result<Written, ApiError>
    where
        F: FnOnce(Option<Value>) -> Result<Change, ApiError>,
    {
        self.write_as(Persist::Commit, resource, namespace, name, decide)
    }

    /// [`Store::write`], or with [`Persist::DryRun`] what it would write, written nowhere:
    /// a new object has no resourceVersion yet, a changed one keeps its current one, as
    /// kube-apiserver answers a dry run.
    pub fn write_as<F>(
        &self,
        persist: Persist,
        resource: &str,
        namespace: &str,
        name: &str,
        decide: F,
    ) -> Result<Written, ApiError>
    where
        F: FnOnce(Option<Value>) -> Result<Change, ApiError>,
    {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let current: Option<String> = tx
            .query_row(
                "SELECT body FROM objects WHERE resource=?1 AND namespace=?2 AND name=?3",
                params![resource, namespace, name],
                |row| row.get(0),
            )
            .optional()?;
        let current = current.map(|b| parse(&b)).transpose()?;
        let existed = current.is_some();
        let change = decide(current.clone())?;
        if persist == Persist::DryRun {
            return preview(current, change);
        }
        let rv = meta(&tx, "rv")? + 1;
        let rv_sql = rv as i64;
        let (kind, mut object) = match change {
            Change::Keep => {
                return Ok(Written {
                    object: current.unwrap_or(Value::Null),
                    event: None,
                });
            }
            Change::Put(object) => {
                let kind = if existed {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (kind, object)
            }
            Change::Delete => match current {
                Some(object) => (EventType::Deleted, object),
                None => return Err(ApiError::internal("delete of a missing object")),
            },
        };
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let body = object.to_string();
        if kind == EventType::Deleted {
            tx.execute(
                "DELETE FROM objects WHERE resource=?1 AND namespace=?2 AND name=?3",
                params![resource, namespace, name],
            )?;
        } else {
            tx.execute(
                "INSERT OR REPLACE INTO objects VALUES (?1, ?2, ?3, ?4, ?5)",
                params![resource, namespace, name, rv_sql, body],
            )?;
        }
        index_ownership(&tx, resource, namespace, name, kind, &object)?;
        tx.execute(
            "INSERT INTO changes VALUES (?1, ?2, ?3, ?4, ?5)",
            params![rv_sql, resource, namespace, kind.as_str(), body],
        )?;
        tx.execute("UPDATE meta SET value=?1 WHERE key='rv'", params![rv_sql])?;
        if rv % self.compact_every == 0 && rv > self.retention {
            let horizon = (rv - self.retention) as i64;
            tx.execute("DELETE FROM changes WHERE rv <= ?1", params![horizon])?;
            tx.execute(
                "UPDATE meta SET value=?1 WHERE key='compacted'",
                params![horizon],
            )?;
        }
        tx.commit()?;
        let event = Arc::new(ChangeEvent {
            rv,
            resource: resource.to_string(),
            namespace: namespace.to_string(),
            kind,
            object: Arc::new(object.clone()),
        });
        // Sent while the connection is still locked, so receivers see changes in order.
        let _ = self.changes.send(event);
        drop(conn);
        Ok(Written {
            object,
            event: Some(kind),
        })
    }

    /// Subscribes to changes committed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ChangeEvent>> {
        self.changes.subscribe()
    }

    /// The logged changes of `resource` after `since`, or 410 Gone when the log no longer
    /// reaches back that far.
    pub fn changes_since(&self, resource: &str, since: u64) -> Result<Vec<ChangeEvent>, ApiError> {
        let conn = self.conn();
        let compacted = meta(&conn, "compacted")?;
        if since < compacted {
            return Err(ApiError::Gone(format!(
                "{since} (oldest available is {})",
                compacted + 1
            )));
        }
        let mut stmt = conn.prepare_cached(
            "SELECT rv, namespace, type, body FROM changes WHERE resource=?1 AND rv > ?2 ORDER BY rv",
        )?;
        let rows = stmt.query_map(params![resource, since as i64], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (rv, namespace, kind, body) = row?;
            out.push(ChangeEvent {
                rv: rv as u64,
                resource: resource.to_string(),
                namespace,
                kind: EventType::parse(&kind),
                object: Arc::new(parse(&body)?),
            });
        }
        Ok(out)
    }
}

/// Keeps the uid and owner-reference tables in step with the object.
fn index_ownership(
    tx: &rusqlite::Transaction<'_>,
    resource: &str,
    namespace: &str,
    name: &str,
    kind: EventType,
    object: &Value,
) -> Result<(), rusqlite::Error> {
    let key = params![resource, namespace, name];
    tx.execute(
        "DELETE FROM uids WHERE resource=?1 AND namespace=?2 AND name=?3",
        key,
    )?;
    tx.execute(
        "DELETE FROM owner_refs WHERE resource=?1 AND namespace=?2 AND name=?3",
        key,
    )?;
    if kind == EventType::Deleted {
        return Ok(());
    }
    if let Some(uid) = object["metadata"]["uid"].as_str() {
        tx.execute(
            "INSERT OR REPLACE INTO uids VALUES (?1, ?2, ?3, ?4)",
            params![uid, resource, namespace, name],
        )?;
    }
    let owners = object["metadata"]["ownerReferences"].as_array();
    for owner in owners.into_iter().flatten() {
        if let Some(uid) = owner["uid"].as_str() {
            tx.execute(
                "INSERT INTO owner_refs VALUES (?1, ?2, ?3, ?4)",
                params![uid, resource, namespace, name],
            )?;
        }
    }
    Ok(())
}

/// What committing `change` over `current` would answer, for a dry run.
fn preview(current: Option<Value>, change: Change) -> Result<Written, ApiError> {
    let (object, event) = match (change, current) {
        (Change::Keep, current) => (current.unwrap_or(Value::Null), None),
        (Change::Put(mut object), current) => {
            let event = match &current {
                Some(current) => {
                    object["metadata"]["resourceVersion"] =
                        current["metadata"]["resourceVersion"].clone();
                    EventType::Modified
                }
                None => {
                    if let Some(meta) = object["metadata"].as_object_mut() {
                        meta.remove("resourceVersion");
                    }
                    EventType::Added
                }
            };
            (object, Some(event))
        }
        (Change::Delete, Some(current)) => (current, Some(EventType::Deleted)),
        (Change::Delete, None) => return Err(ApiError::internal("delete of a missing object")),
    };
    Ok(Written { object, event })
}

fn meta(conn: &Connection, key: &str) -> Result<u64, rusqlite::Error> {
    conn.query_row("SELECT value FROM meta WHERE key=?1", params![key], |row| {
        row.get::<_, i64>(0)
    })
    .map(|v| v as u64)
}

fn parse(body: &str) -> Result<Value, ApiError> {
    serde_json::from_str(body).map_err(|e| ApiError::internal(format!("stored object: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(store: &Store, name: &str, value: i64) -> Value {
        store
            .write("/configmaps", "default", name, |_| {
                Ok(Change::Put(
                    json!({"metadata": {"name": name}, "data": {"v": value}}),
                ))
            })
            .unwrap()
            .object
    }

    #[test]
    fn versions_increase_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path).unwrap();
        let a = put(&store, "a", 1);
        let b = put(&store, "b", 2);
        let rv_a: u64 = a["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let rv_b: u64 = b["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(rv_b > rv_a);
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(store.current_rv().unwrap(), rv_b);
        assert_eq!(
            store.get("/configmaps", "default", "a").unwrap().unwrap(),
            a
        );
        let changes = store.changes_since("/configmaps", rv_a).unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].rv, rv_b);
        let c = put(&store, "c", 3);
        assert!(
            c["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                > rv_b
        );
    }

    #[test]
    fn the_log_is_compacted_and_older_versions_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = Store::open_with_retention(&path, 10, 5).unwrap();
        for i in 0..30 {
            put(&store, &format!("o{i}"), i);
        }
        let rv = store.current_rv().unwrap();
        assert_eq!(rv, 31, "versions start after 1");
        // Compacted at 30 down to the last 10 changes: 21..=30 remain, then 31.
        assert!(matches!(
            store.changes_since("/configmaps", 5),
            Err(ApiError::Gone(_))
        ));
        let recent = store.changes_since("/configmaps", 20).unwrap();
        assert_eq!(
            recent.iter().map(|c| c.rv).collect::<Vec<_>>(),
            (21..=31).collect::<Vec<_>>()
        );
        drop(store);
        // The horizon is stored: after a reopen old versions are still gone.
        let store = Store::open(&path).unwrap();
        assert!(matches!(
            store.changes_since("/configmaps", 19),
            Err(ApiError::Gone(_))
        ));
        assert_eq!(store.changes_since("/configmaps", 30).unwrap().len(), 1);
    }

    #[test]
    fn list_pages_in_key_order_and_deletes_log_last_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        for name in ["c", "a", "b"] {
            put(&store, name, 0);
        }
        let (items, _) = store
            .list("/configmaps", Some("default"), Some(("default", "a")))
            .unwrap();
        let names: Vec<_> = items
            .iter()
            .map(|o| o["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, vec![json!("b"), json!("c")]);
        for name in ["d", "e"] {
            put(&store, name, 1);
        }
        let everything = |_: &Value| true;
        let page = store
            .scan("/configmaps", None, None, Some(2), &everything)
            .unwrap();
        assert!(page.more);
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.remaining, Some(3));
        let ones = |o: &Value| o["data"]["v"] == 1;
        let page = store
            .scan("/configmaps", None, Some(("default", "a")), Some(1), &ones)
            .unwrap();
        assert_eq!(page.items[0]["metadata"]["name"], "d");
        assert!(page.more);
        let page = store
            .scan("/configmaps", None, Some(("default", "d")), Some(1), &ones)
            .unwrap();
        assert_eq!(page.items[0]["metadata"]["name"], "e");
        assert!(!page.more && page.remaining.is_none());
        let before = store.current_rv().unwrap();
        let deleted = store
            .write("/configmaps", "default", "b", |_| Ok(Change::Delete))
            .unwrap();
        assert_eq!(deleted.event, Some(EventType::Deleted));
        assert!(store.get("/configmaps", "default", "b").unwrap().is_none());
        let changes = store.changes_since("/configmaps", before).unwrap();
        assert_eq!(changes[0].kind, EventType::Deleted);
        assert_eq!(changes[0].object["data"]["v"], 0);
    }
}
