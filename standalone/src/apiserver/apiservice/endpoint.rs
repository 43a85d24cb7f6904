//! Where an APIService's backend listens, resolved as kube-aggregator resolves it with
//! `--enable-aggregator-routing` (there is no kube-proxy here, so no cluster IP): the
//! Service's port → the Endpoints object of the same name → the first ready address with the
//! matching port.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::{EndpointPort, Endpoints, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The port an APIService's `spec.service` defaults to.
pub const DEFAULT_PORT: u16 = 443;

/// An APIService's `spec.service`: the Service in front of its backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceReference {
    pub namespace: String,
    pub name: String,
    pub port: u16,
}

impl ServiceReference {
    /// The DNS name the backend's serving certificate is checked against.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

impl fmt::Display for ServiceReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why a backend has no address, each with kube-aggregator's condition reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("service \"{0}\" not found")]
    ServiceNotFound(ServiceReference),
    #[error("service \"{service}\" has no port {}", service.port)]
    PortNotFound { service: ServiceReference },
    #[error("endpoints for service \"{0}\" not found")]
    EndpointsNotFound(ServiceReference),
    #[error("service \"{0}\" has no ready endpoints")]
    NoReadyEndpoints(ServiceReference),
    #[error("endpoints for service \"{service}\" have an invalid address \"{ip}\"")]
    InvalidAddress {
        service: ServiceReference,
        ip: String,
    },
}

impl EndpointError {
    /// The reason of the APIService's Available=False condition.
    pub fn reason(&self) -> &'static str {
        match self {
            EndpointError::ServiceNotFound(_) => "ServiceNotFound",
            EndpointError::PortNotFound { .. } => "ServicePortError",
            EndpointError::EndpointsNotFound(_) => "EndpointsNotFound",
            EndpointError::NoReadyEndpoints(_) | EndpointError::InvalidAddress { .. } => {
                "MissingEndpoints"
            }
        }
    }
}

/// The address of `reference`'s backend, from its Service and Endpoints (`None` when the
/// object does not exist).
pub fn resolve(
    reference: &ServiceReference,
    service: Option<&Service>,
    endpoints: Option<&Endpoints>,
) -> Result<SocketAddr, EndpointError> {
    let service = service.ok_or_else(|| EndpointError::ServiceNotFound(reference.clone()))?;
    let service_port = service
        .spec
        .as_ref()
        .and_then(|spec| spec.ports.as_ref())
        .and_then(|ports| ports.iter().find(|p| p.port == i32::from(reference.port)))
        .ok_or_else(|| EndpointError::PortNotFound {
            service: reference.clone(),
        })?;
    let endpoints = endpoints.ok_or_else(|| EndpointError::EndpointsNotFound(reference.clone()))?;
    for subset in endpoints.subsets.iter().flatten() {
        let Some(address) = subset.addresses.iter().flatten().next() else {
            continue;
        };
        let Some(port) = subset
            .ports
            .iter()
            .flatten()
            .find(|p| port_matches(service_port, p))
        else {
            continue;
        };
        let ip: IpAddr = address
            .ip
            .parse()
            .map_err(|_| EndpointError::InvalidAddress {
                service: reference.clone(),
                ip: address.ip.clone(),
            })?;
        let port = u16::try_from(port.port)
            .map_err(|_| EndpointError::NoReadyEndpoints(reference.clone()))?;
        return Ok(SocketAddr::new(ip, port));
    }
    Err(EndpointError::NoReadyEndpoints(reference.clone()))
}

/// Whether an Endpoints port is the one a Service port targets: named alike (as the
/// endpoints controller names them, and kube-aggregator matches), or the `targetPort` by
/// number or name (a missing `targetPort` is the port itself).
fn port_matches(service_port: &ServicePort, endpoint_port: &EndpointPort) -> bool {
    if service_port.name.as_deref().unwrap_or_default()
        == endpoint_port.name.as_deref().unwrap_or_default()
    {
        return true;
    }
    match &service_port.target_port {
        Some(IntOrString::Int(number)) => endpoint_port.port == *number,
        Some(IntOrString::String(name)) => endpoint_port.name.as_deref() == Some(name.as_str()),
        None => endpoint_port.port == service_port.port,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reference() -> ServiceReference {
        ServiceReference {
            namespace: "kubevirt".into(),
            name: "virt-api".into(),
            port: 443,
        }
    }

    fn service(ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "virt-api"}, "spec": {"ports": ports}}))
            .unwrap()
    }

    fn endpoints(subsets: serde_json::Value) -> Endpoints {
        serde_json::from_value(json!({"metadata": {"name": "virt-api"}, "subsets": subsets}))
            .unwrap()
    }

    #[test]
    fn resolves_the_target_port_by_number_and_by_name() {
        let by_number = service(json!([{"port": 443, "targetPort": 8443}]));
        let eps = endpoints(
            json!([{"addresses": [{"ip": "10.0.0.7"}, {"ip": "10.0.0.8"}],
                                     "ports": [{"port": 8443}]}]),
        );
        assert_eq!(
            resolve(&reference(), Some(&by_number), Some(&eps)),
            Ok("10.0.0.7:8443".parse().unwrap())
        );

        let by_name = service(json!([
            {"name": "metrics", "port": 8080, "targetPort": 8080},
            {"name": "https", "port": 443, "targetPort": "api"},
        ]));
        let eps = endpoints(json!([
            {"notReadyAddresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "api", "port": 9000}]},
            {"addresses": [{"ip": "::1"}],
             "ports": [{"name": "metrics", "port": 8080}, {"name": "api", "port": 9443}]},
        ]));
        assert_eq!(
            resolve(&reference(), Some(&by_name), Some(&eps)),
            Ok("[::1]:9443".parse().unwrap())
        );
    }

    #[test]
    fn says_what_is_missing() {
        let svc = service(json!([{"port": 443}]));
        let reference = reference();
        let err = resolve(&reference, None, None).unwrap_err();
        assert_eq!(err.reason(), "ServiceNotFound");
        assert_eq!(err.to_string(), "service \"kubevirt/virt-api\" not found");

        let other_port = ServiceReference {
            port: 8443,
            ..reference.clone()
        };
        let err = resolve(&other_port, Some(&svc), None).unwrap_err();
        assert_eq!(err.reason(), "ServicePortError");

        let err = resolve(&reference, Some(&svc), None).unwrap_err();
        assert_eq!(err.reason(), "EndpointsNotFound");

        let not_ready = endpoints(json!([{"notReadyAddresses": [{"ip": "10.0.0.1"}],
                                           "ports": [{"port": 443}]}]));
        let err = resolve(&reference, Some(&svc), Some(&not_ready)).unwrap_err();
        assert_eq!(err.reason(), "MissingEndpoints");
        assert_eq!(
            err.to_string(),
            "service \"kubevirt/virt-api\" has no ready endpoints"
        );

        let wrong_port = endpoints(json!([{"addresses": [{"ip": "10.0.0.1"}],
                                            "ports": [{"name": "x", "port": 80}]}]));
        let err = resolve(&reference, Some(&svc), Some(&wrong_port)).unwrap_err();
        assert_eq!(err.reason(), "MissingEndpoints");
    }
}
