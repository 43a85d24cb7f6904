//! What an admission check that looks beyond its object reads of the cluster and asks of
//! it: the embedded API server's request (`standalone`) and a kube client (`ferrovirt`'s
//! webhook servers) are both a [`Cluster`], so such checks are written once.

use serde_json::Value;

use crate::Refusal;

/// What the checks read of the cluster and ask of it. A resource the cluster does not
/// serve has no objects.
// Implemented by the embedded API server's request and by the webhook servers' kube client,
// and called with those concrete types, whose futures are Send.
#[allow(async_fn_in_trait)]
pub trait Cluster {
    /// The object `namespace/name` of `group`/`plural` ("" for cluster-scoped), if any.
    async fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, Refusal>;
    /// How many objects of `group`/`plural` there are in all namespaces, counting no
    /// further than `limit`, of those `selector` selects (a label selector in its text
    /// form; "" selects all).
    async fn count(
        &self,
        group: &str,
        plural: &str,
        selector: &str,
        limit: usize,
    ) -> Result<usize, Refusal>;
    /// Creates `object` in `namespace` with `dryRun=All`, so that the API server's
    /// validation and admission judge it; returns the warnings, or the refusal as the API
    /// server reports it.
    async fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal>;
    /// Updates `object` with `dryRun=All`, so that its own admission judges it; returns
    /// the warnings, or the refusal as the API server reports it.
    async fn dry_run_update(
        &self,
        group: &str,
        plural: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal>;
}
