//! What every reconcile of a DataVolume shares, and how one fails.

use std::sync::Arc;

use std::time::Duration;

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

use super::pvc;
use crate::config::ControllerConfig;

/// Errors of the DataVolume controller; the variant names show in the logs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
    /// The object has no namespace.
    #[error("DataVolume {0} has no namespace")]
    MissingNamespace(String),
    /// The PVC could not be derived from the DataVolume.
    #[error(transparent)]
    Pvc(#[from] pvc::PvcError),
    /// An upload server's certificate could not be issued.
    #[error("upload server certificate: {0}")]
    Certificate(String),
    /// A clone source's client certificate could not be issued.
    #[error("clone source certificate: {0}")]
    CloneCertificate(String),
    /// No single CDI CR says where worker pods run.
    #[error(transparent)]
    ActiveCdi(#[from] super::settings::TooManyActiveCdis),
}

/// What every reconcile shares.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Publishes events on DataVolumes.
    pub recorder: Recorder,
    /// Images and names of the worker pods.
    pub config: Arc<ControllerConfig>,
    /// Scrapes the workers' progress.
    pub http: reqwest::Client,
}

impl Context {
    /// The context of a controller reporting as `config.reporter`.
    pub fn new(client: Client, config: Arc<ControllerConfig>) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: config.reporter.clone(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap_or_default();
        Context {
            client,
            recorder,
            config,
            http,
        }
    }
}
