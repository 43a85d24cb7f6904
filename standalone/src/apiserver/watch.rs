//! Watches: a stream of `{"type": ..., "object": ...}` lines for one resource, starting from
//! a resourceVersion (replayed from the change log, 410 Gone when it no longer reaches back)
//! or from a synthetic ADDED of everything that exists, then following new changes, with
//! bookmarks and the request's timeout. Objects that stop matching the selector are sent
//! as DELETED, as the API server does.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::errors::ApiError;
use super::objects::{ListOptions, Objects, with_version};
use super::resources::ResourceType;
use super::store::{ChangeEvent, EventType};

pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);

/// Turns a stored object into what the client asked for (the object, or a Table row).
pub type Render = Arc<dyn Fn(Value) -> Value + Send + Sync>;

pub struct WatchRequest {
    pub rt: ResourceType,
    pub version: String,
    pub namespace: Option<String>,
    pub filter: ListOptions,
    pub resource_version: Option<String>,
    pub bookmarks: bool,
    pub timeout: Duration,
    pub render: Render,
}

/// Starts the watch; the receiver yields serialized event lines until the watch ends.
pub fn start(objects: Arc<Objects>, request: WatchRequest) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel(64);
    let changes = objects.store.subscribe();
    tokio::spawn(async move {
        let mut watch = Watch {
            objects,
            request,
            tx,
            known: HashSet::new(),
            last_rv: 0,
        };
        if let Err(err) = watch.run(changes).await {
            let status = err.status();
            let _ = watch
                .send_raw(json!({"type": "ERROR", "object": status}))
                .await;
        }
    });
    rx
}

struct Watch {
    objects: Arc<Objects>,
    request: WatchRequest,
    tx: mpsc::Sender<Bytes>,
    /// Keys the client has been told exist (only tracked for filtered watches).
    known: HashSet<(String, String)>,
    last_rv: u64,
}

enum Wake {
    Timeout,
    Bookmark,
    Change(Result<Arc<ChangeEvent>, broadcast::error::RecvError>),
}

/// The client went away; the watch ends quietly.
struct Disconnected;

impl Watch {
    async fn run(
        &mut self,
        mut changes: broadcast::Receiver<Arc<ChangeEvent>>,
    ) -> Result<(), ApiError> {
        if self.replay().await.is_err() {
            return Ok(());
        }
        let deadline = tokio::time::sleep(self.request.timeout);
        tokio::pin!(deadline);
        let mut bookmarks = tokio::time::interval(BOOKMARK_INTERVAL);
        bookmarks.tick().await;
        let key = self.request.rt.storage_key();
        let mut seen_rv = self.last_rv;
        let tx = self.tx.clone();
        let with_bookmarks = self.request.bookmarks;
        loop {
            let wake = tokio::select! {
                _ = &mut deadline => Wake::Timeout,
                _ = bookmarks.tick(), if with_bookmarks => Wake::Bookmark,
                _ = tx.closed() => Wake::Timeout,
                change = changes.recv() => Wake::Change(change),
            };
            let sent = match wake {
                Wake::Timeout => return Ok(()),
                Wake::Bookmark => self.bookmark(seen_rv.max(self.last_rv)).await,
                Wake::Change(Ok(event)) => {
                    seen_rv = seen_rv.max(event.rv);
                    if event.resource == key && event.rv > self.last_rv {
                        self.send_change(&event).await
                    } else {
                        Ok(())
                    }
                }
                Wake::Change(Err(broadcast::error::RecvError::Lagged(_))) => self.catch_up().await,
                Wake::Change(Err(broadcast::error::RecvError::Closed)) => return Ok(()),
            };
            if sent.is_err() {
                return Ok(());
            }
        }
    }

    /// The initial events: everything that exists, or the logged changes since the
    /// requested resourceVersion.
    async fn replay(&mut self) -> Result<(), Disconnected> {
        let from = self
            .request
            .resource_version
            .as_deref()
            .filter(|rv| !rv.is_empty() && *rv != "0")
            .map(|rv| rv.parse::<u64>());
        match from {
            Some(Ok(rv)) => {
                self.last_rv = rv;
                self.catch_up().await
            }
            Some(Err(_)) => {
                let err =
                    ApiError::BadRequest("resourceVersion: Invalid value: not a number".into());
                self.send_raw(json!({"type": "ERROR", "object": err.status()}))
                    .await?;
                // An ERROR event ends a watch.
                Err(Disconnected)
            }
            None => self.send_existing().await,
        }
    }

    async fn send_existing(&mut self) -> Result<(), Disconnected> {
        let page = match self.objects.list(
            &self.request.rt,
            self.request.namespace.as_deref(),
            &self.request.filter,
        ) {
            Ok(page) => page,
            Err(err) => {
                self.send_raw(json!({"type": "ERROR", "object": err.status()}))
                    .await?;
                return Err(Disconnected);
            }
        };
        self.last_rv = page.resource_version;
        for object in page.items {
            self.remember(&object, true);
            self.send("ADDED", object).await?;
        }
        Ok(())
    }

    async fn catch_up(&mut self) -> Result<(), Disconnected> {
        match self
            .objects
            .store
            .changes_since(&self.request.rt.storage_key(), self.last_rv)
        {
            Ok(events) => {
                for event in events {
                    self.send_change(&event).await?;
                }
                Ok(())
            }
            Err(err) => {
                self.send_raw(json!({"type": "ERROR", "object": err.status()}))
                    .await?;
                Err(Disconnected)
            }
        }
    }

    async fn send_change(&mut self, event: &ChangeEvent) -> Result<(), Disconnected> {
        self.last_rv = self.last_rv.max(event.rv);
        let object = &*event.object;
        if let Some(ns) = &self.request.namespace {
            if &event.namespace != ns {
                return Ok(());
            }
        }
        let filtered = !self.is_unfiltered();
        let matches = self.request.filter.labels.matches(object)
            && self.request.filter.fields.matches(object);
        let key = object_key(object);
        let kind = match (matches, event.kind) {
            (true, EventType::Deleted) => {
                self.known.remove(&key);
                "DELETED"
            }
            (true, kind) => {
                let fresh = filtered && self.known.insert(key);
                if fresh && kind == EventType::Modified {
                    "ADDED"
                } else {
                    kind.as_str()
                }
            }
            (false, _) if filtered && self.known.remove(&key) => "DELETED",
            (false, _) => return Ok(()),
        };
        self.send(kind, object.clone()).await
    }

    fn is_unfiltered(&self) -> bool {
        self.request.filter.labels.is_empty() && self.request.filter.fields.is_empty()
    }

    fn remember(&mut self, object: &Value, present: bool) {
        if !self.is_unfiltered() && present {
            self.known.insert(object_key(object));
        }
    }

    async fn bookmark(&mut self, rv: u64) -> Result<(), Disconnected> {
        let rt = &self.request.rt;
        let object = json!({
            "kind": rt.kind,
            "apiVersion": rt.api_version(&self.request.version),
            "metadata": {"resourceVersion": rv.to_string()},
        });
        self.send_raw(json!({"type": "BOOKMARK", "object": object}))
            .await
    }

    async fn send(&mut self, kind: &str, object: Value) -> Result<(), Disconnected> {
        let object = match with_version(&self.request.rt, &self.request.version, object) {
            Ok(object) => object,
            Err(err) => {
                return self
                    .send_raw(json!({"type": "ERROR", "object": err.status()}))
                    .await;
            }
        };
        let rendered = (self.request.render)(object);
        self.send_raw(json!({"type": kind, "object": rendered}))
            .await
    }

    async fn send_raw(&self, event: Value) -> Result<(), Disconnected> {
        let mut line = event.to_string().into_bytes();
        line.push(b'\n');
        self.tx
            .send(Bytes::from(line))
            .await
            .map_err(|_| Disconnected)
    }
}

fn object_key(object: &Value) -> (String, String) {
    let meta = &object["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_string(),
        meta["name"].as_str().unwrap_or_default().to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::Registry;
    use crate::apiserver::store::Store;

    /// A server's objects whose change log keeps only the last 10 changes.
    fn short_memory(dir: &std::path::Path) -> (Arc<Objects>, ResourceType) {
        let store = Store::open_with_retention(&dir.join("db"), 10, 5).unwrap();
        let objects = Objects::new(store, Registry::with_builtins());
        let namespaces = objects.registry.find("", "v1", "namespaces").unwrap();
        objects
            .create(
                &namespaces,
                "v1",
                "",
                json!({"metadata": {"name": "default"}}),
            )
            .unwrap();
        let config_maps = objects.registry.find("", "v1", "configmaps").unwrap();
        for i in 0..30 {
            let cm = json!({"metadata": {"name": format!("cm-{i}")}});
            objects.create(&config_maps, "v1", "default", cm).unwrap();
        }
        (Arc::new(objects), config_maps)
    }

    fn request(rt: &ResourceType, resource_version: &str) -> WatchRequest {
        WatchRequest {
            rt: rt.clone(),
            version: "v1".into(),
            namespace: Some("default".into()),
            filter: ListOptions::default(),
            resource_version: Some(resource_version.into()),
            bookmarks: false,
            timeout: Duration::from_secs(20),
            render: Arc::new(|object| object),
        }
    }

    async fn next_line(lines: &mut mpsc::Receiver<Bytes>) -> Option<Value> {
        tokio::time::timeout(Duration::from_secs(10), lines.recv())
            .await
            .expect("a watch line or the end within 10s")
            .map(|line| serde_json::from_slice(&line).unwrap())
    }

    #[tokio::test]
    async fn a_watch_from_before_the_log_gets_410_gone_and_ends() {
        let dir = tempfile::tempdir().unwrap();
        let (objects, config_maps) = short_memory(dir.path());
        let mut lines = start(objects, request(&config_maps, "3"));
        let event = next_line(&mut lines).await.expect("an ERROR event");
        assert_eq!(event["type"], "ERROR");
        assert_eq!(event["object"]["kind"], "Status");
        assert_eq!(event["object"]["code"], 410);
        assert_eq!(event["object"]["reason"], "Expired");
        assert!(next_line(&mut lines).await.is_none(), "the watch ends");
    }

    #[tokio::test]
    async fn a_watch_from_a_recent_version_replays_what_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (objects, config_maps) = short_memory(dir.path());
        let current = objects.store.current_rv().unwrap();
        let from = (current - 3).to_string();
        let mut lines = start(objects, request(&config_maps, &from));
        for i in 27..30 {
            let event = next_line(&mut lines).await.expect("a replayed event");
            assert_eq!(event["type"], "ADDED");
            assert_eq!(event["object"]["metadata"]["name"], format!("cm-{i}"));
        }
    }

    #[tokio::test]
    async fn an_unparsable_version_is_an_error_that_ends_the_watch() {
        let dir = tempfile::tempdir().unwrap();
        let (objects, config_maps) = short_memory(dir.path());
        let mut lines = start(objects, request(&config_maps, "yesterday"));
        let event = next_line(&mut lines).await.expect("an ERROR event");
        assert_eq!(event["object"]["code"], 400);
        assert!(next_line(&mut lines).await.is_none(), "the watch ends");
    }
}
