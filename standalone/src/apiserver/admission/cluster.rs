//! The embedded API server's admission request as the [`Cluster`] admission's checks read
//! (`admission::install_guards`), and an error of the API server passed on as a [`Refusal`].

use ::admission::Refusal;
use ::admission::cluster::Cluster;
use serde_json::Value;

use super::request::AdmissionRequest;
use crate::apiserver::ApiError;

/// An error of the API server passed on as a plugin's refusal: its status code, its
/// message, and an admission refusal's warnings.
impl From<ApiError> for Refusal {
    fn from(err: ApiError) -> Refusal {
        let refusal = Refusal::new(err.code(), err.to_string());
        match err {
            ApiError::Refused { warnings, .. } => Refusal {
                warnings,
                ..refusal
            },
            _ => refusal,
        }
    }
}

/// The embedded API server answers from its store: nothing here waits.
impl Cluster for AdmissionRequest<'_> {
    async fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, Refusal> {
        AdmissionRequest::get(self, group, plural, namespace, name).map_err(Refusal::from)
    }

    async fn count(
        &self,
        group: &str,
        plural: &str,
        selector: &str,
        limit: usize,
    ) -> Result<usize, Refusal> {
        let found = self.list_selected(group, plural, None, selector, limit);
        Ok(found.map_err(Refusal::from)?.len())
    }

    async fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal> {
        AdmissionRequest::dry_run_create(self, group, plural, namespace, object)
            .map_err(Refusal::from)
    }

    async fn dry_run_update(
        &self,
        group: &str,
        plural: &str,
        object: &Value,
    ) -> Result<Vec<String>, Refusal> {
        AdmissionRequest::dry_run_update(self, group, plural, object).map_err(Refusal::from)
    }
}
