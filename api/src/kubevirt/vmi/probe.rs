//! `spec.livenessProbe` and `spec.readinessProbe` of a VirtualMachineInstance: a pod probe
//! that may also ask the guest agent.

use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, TCPSocketAction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A health check of the guest: one action and its timing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// A command run in the guest through the guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    /// Failures in a row that make the probe fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i32>,
    /// A ping of the guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_agent_ping: Option<GuestAgentPing>,
    /// An HTTP GET to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HTTPGetAction>,
    /// Seconds after start before the first probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay_seconds: Option<i32>,
    /// Seconds between probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<i32>,
    /// Successes in a row that make the probe pass again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i32>,
    /// A TCP connection to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TCPSocketAction>,
    /// Seconds before one probe times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
}

/// Probe by pinging the guest agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct GuestAgentPing {}
