//! The Identity service: who the plugin is, what it offers, whether it is ready.

use tonic::{Request, Response, Status};

use crate::Shared;
use crate::proto::identity_server::Identity;
use crate::proto::plugin_capability::{self, service, volume_expansion};
use crate::proto::*;

pub struct IdentityService {
    shared: Shared,
}

impl IdentityService {
    pub fn new(shared: Shared) -> Self {
        Self { shared }
    }
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: self.shared.config.name.clone(),
            vendor_version: self.shared.config.version.clone(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        let service = |t: service::Type| PluginCapability {
            r#type: Some(plugin_capability::Type::Service(
                plugin_capability::Service { r#type: t as i32 },
            )),
        };
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: vec![
                service(service::Type::ControllerService),
                service(service::Type::VolumeAccessibilityConstraints),
                PluginCapability {
                    r#type: Some(plugin_capability::Type::VolumeExpansion(
                        plugin_capability::VolumeExpansion {
                            r#type: volume_expansion::Type::Online as i32,
                        },
                    )),
                },
            ],
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}
