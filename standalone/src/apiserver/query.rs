//! A request's query parameters as kube-apiserver reads them: the map of a query string,
//! booleans as Go parses them, and `dryRun`.

use std::collections::HashMap;

use super::errors::ApiError;
use super::store::Persist;

/// A query string as a map, later values winning.
pub(super) fn query_params(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it (the API server's parser):
/// Python's client sends `watch=True`.
pub(super) fn is_true(value: Option<&String>) -> bool {
    matches!(
        value.map(String::as_str),
        Some("1" | "t" | "T" | "true" | "True" | "TRUE")
    )
}

/// The `dryRun` query parameter: absent or empty commits, `All` is a dry run, anything else
/// is refused as kube-apiserver refuses it.
pub(super) fn persist_of(query: &HashMap<String, String>) -> Result<Persist, ApiError> {
    dry_run(query.get("dryRun").map_or("", String::as_str))
}

/// One `dryRun` value (of the query or of a DeleteOptions body).
pub(super) fn dry_run(value: &str) -> Result<Persist, ApiError> {
    match value {
        "" => Ok(Persist::Commit),
        "All" => Ok(Persist::DryRun),
        other => Err(ApiError::BadRequest(format!(
            "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
        ))),
    }
}
