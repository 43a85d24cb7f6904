//! The reading verbs: get, list (as objects or a Table) and watch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode, header};
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;

use super::http::{add_warnings, json_response};
use super::{Body, Call, Handler};
use crate::apiserver::errors::ApiError;
use crate::apiserver::objects::ListOptions;
use crate::apiserver::query::is_true;
use crate::apiserver::resources::ResourceType;
use crate::apiserver::selector::{FieldSelector, LabelSelector};
use crate::apiserver::table;
use crate::apiserver::watch::{self, WatchRequest};

/// The default watch length when the client gives no timeoutSeconds.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

impl Handler {
    /// One object, at the version the request names.
    pub(super) fn get(
        &self,
        rt: &ResourceType,
        call: &Call,
        name: &str,
    ) -> Result<Response<Body>, ApiError> {
        let path = &call.path;
        let ns = path.namespace.as_deref().unwrap_or("");
        let object = self.objects.get_at(rt, &path.version, ns, name)?;
        self.respond(rt, call, StatusCode::OK, object, Vec::new())
    }

    /// One object as the answer to a read or a write, with the write's warnings.
    pub(super) fn respond(
        &self,
        rt: &ResourceType,
        call: &Call,
        status: StatusCode,
        object: Value,
        warnings: Vec<String>,
    ) -> Result<Response<Body>, ApiError> {
        let mut response = json_response(status, &self.render_one(rt, &call.accept, object));
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    pub(super) fn render_one(&self, rt: &ResourceType, accept: &str, object: Value) -> Value {
        if table::wants_table(accept) {
            let meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
            table::render(rt, vec![object], meta)
        } else {
            object
        }
    }

    pub(super) fn list_options(
        rt: &ResourceType,
        query: &HashMap<String, String>,
    ) -> Result<ListOptions, ApiError> {
        let get = |key: &str| query.get(key).map(String::as_str).unwrap_or("");
        let fields = FieldSelector::parse(get("fieldSelector"))?;
        fields.check_selectable(&rt.group, &rt.kind)?;
        Ok(ListOptions {
            labels: LabelSelector::parse(get("labelSelector"))?,
            fields,
            limit: query.get("limit").and_then(|l| l.parse().ok()),
            continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
        })
    }

    pub(super) fn list(&self, rt: &ResourceType, call: &Call) -> Result<Response<Body>, ApiError> {
        let options = Self::list_options(rt, &call.query)?;
        let page = self
            .objects
            .list(rt, call.path.namespace.as_deref(), &options)?;
        let version = &call.path.version;
        let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
        if let Some(token) = page.continue_token {
            meta["continue"] = json!(token);
        }
        if let Some(remaining) = page.remaining {
            meta["remainingItemCount"] = json!(remaining);
        }
        let items: Vec<Value> = page
            .items
            .into_iter()
            .map(|o| crate::apiserver::objects::with_version(rt, version, o))
            .collect::<Result<_, _>>()?;
        let body = if table::wants_table(&call.accept) {
            table::render(rt, items, meta)
        } else {
            json!({
                "kind": format!("{}List", rt.kind),
                "apiVersion": rt.api_version(version),
                "metadata": meta,
                "items": items,
            })
        };
        Ok(json_response(StatusCode::OK, &body))
    }

    pub(super) fn watch(&self, rt: ResourceType, call: &Call) -> Result<Response<Body>, ApiError> {
        let filter = Self::list_options(&rt, &call.query)?;
        let timeout = call
            .query
            .get("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_WATCH_TIMEOUT);
        let as_table = table::wants_table(&call.accept);
        let table_type = rt.clone();
        let render: watch::Render = Arc::new(move |object| {
            if as_table {
                let meta = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
                table::render(&table_type, vec![object], meta)
            } else {
                object
            }
        });
        let request = WatchRequest {
            rt,
            version: call.path.version.clone(),
            namespace: call.path.namespace.clone(),
            filter,
            resource_version: call.query.get("resourceVersion").cloned(),
            bookmarks: is_true(call.query.get("allowWatchBookmarks")),
            timeout,
            render,
        };
        let lines = watch::start(self.objects.clone(), request);
        let body = StreamBody::new(ReceiverStream::new(lines).map(|line| Ok(Frame::data(line))));
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::TRANSFER_ENCODING, "chunked")
            .body(BodyExt::boxed(body))
            .map_err(ApiError::internal)
    }
}
