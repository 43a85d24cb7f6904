//! The components as on a cluster, one binary: each runs as its own process or service under
//! its own account against an in-process API server (controllers, operators, webhooks, the MAC
//! pool's webhook, the template validator, Tekton's API, the TektonTasks operator).

#[path = "../admission_review/mod.rs"]
mod admission_review;
mod controller;
mod macpool_webhook;
mod tekton_api;
mod tekton_tasks_operator;
mod template_validator;
mod webhook;
