//! Authentication: the admin token (and whom it impersonates) or a service account's token.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, header};

use super::Handler;
use crate::apiserver::errors::ApiError;
use crate::apiserver::identity::UserInfo;
use crate::apiserver::service_account_token::ServiceAccountRef;

/// The admin token's user, or the one it impersonates.
pub(super) fn impersonated(headers: &header::HeaderMap) -> Result<UserInfo, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    let groups = values("impersonate-group");
    match values("impersonate-user").first() {
        Some(name) => Ok(UserInfo::impersonated(name, groups)),
        None if groups.is_empty() => Ok(UserInfo::admin()),
        None => Err(ApiError::BadRequest(
            "requested impersonation of groups without impersonating a user".into(),
        )),
    }
}

impl Handler {
    /// The user of a request: the admin token's (or the user it impersonates, `kubectl
    /// --as`, `--as-group`), or a service account's from a token this server issued.
    pub(super) async fn authenticate(
        self: &Arc<Self>,
        request: &Request<Incoming>,
    ) -> Result<UserInfo, ApiError> {
        let headers = request.headers();
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(ApiError::Unauthorized)?;
        let impersonating =
            headers.contains_key("impersonate-user") || headers.contains_key("impersonate-group");
        if constant_time_eq(token.as_bytes(), self.token.as_bytes()) {
            return impersonated(headers);
        }
        let account = self
            .service_accounts
            .verify(token)
            .ok_or(ApiError::Unauthorized)?;
        let handler = self.clone();
        let lookup = account.clone();
        let current = tokio::task::spawn_blocking(move || handler.service_account(&lookup))
            .await
            .map_err(ApiError::internal)?;
        // A deleted (or deleted and recreated) account's tokens are revoked.
        if !current.is_ok_and(|uid| uid == account.uid) {
            return Err(ApiError::Unauthorized);
        }
        if impersonating {
            return Err(ApiError::Forbidden(format!(
                "users \"{}\" is forbidden: this server lets only the admin token impersonate",
                account.user_name()
            )));
        }
        Ok(UserInfo::impersonated(&account.user_name(), vec![]))
    }

    /// The uid of a stored service account.
    pub(super) fn service_account(&self, account: &ServiceAccountRef) -> Result<String, ApiError> {
        let accounts = self
            .objects
            .registry
            .find("", "v1", "serviceaccounts")
            .ok_or(ApiError::NoSuchResource)?;
        let stored = self
            .objects
            .get(&accounts, &account.namespace, &account.name)?;
        Ok(crate::apiserver::object::uid(&stored).to_string())
    }
}

/// Compares secrets without an early exit that would time how much matched.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
