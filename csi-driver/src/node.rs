//! The Node service: stage (loop device, ext4 mount), publish (bind mount, read-only honoured;
//! block volumes as the loop device), inline ephemeral volumes, volume stats and expansion.

use std::path::PathBuf;

use api::quantity::parse_bytes;
use ferrovirt_hostpath::{AccessType, CreateVolume, VolumeMode};
use tonic::{Request, Response, Status};

use crate::capability::{access_type, is_read_only, is_single_writer};
use crate::proto::node_server::Node;
use crate::proto::node_service_capability::rpc::Type as Rpc;
use crate::proto::*;
use crate::status::{blocking, required};
use crate::{POOL_PARAMETER, Shared};

/// The volume context key kubelet sets on inline ephemeral volumes.
const EPHEMERAL_KEY: &str = "csi.storage.k8s.io/ephemeral";
/// The volume attribute that sizes an inline ephemeral volume (a Kubernetes quantity).
const EPHEMERAL_SIZE_KEY: &str = "size";
const DEFAULT_EPHEMERAL_SIZE: u64 = 1 << 30;

pub struct NodeService {
    shared: Shared,
}

impl NodeService {
    pub fn new(shared: Shared) -> Self {
        Self { shared }
    }
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        required(&req.staging_target_path, "staging target path")?;
        let Some(cap) = req.volume_capability.as_ref() else {
            return Err(Status::invalid_argument("volume capability is required"));
        };
        let access = access_type(cap)?;
        let store = self.shared.store.clone();
        blocking(move || {
            store.stage(
                &req.volume_id,
                &PathBuf::from(&req.staging_target_path),
                &access,
            )
        })
        .await?;
        Ok(Response::new(NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        required(&req.staging_target_path, "staging target path")?;
        let store = self.shared.store.clone();
        blocking(move || store.unstage(&req.volume_id, &PathBuf::from(&req.staging_target_path)))
            .await?;
        Ok(Response::new(NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        required(&req.target_path, "target path")?;
        let Some(cap) = req.volume_capability.as_ref() else {
            return Err(Status::invalid_argument("volume capability is required"));
        };
        let access = access_type(cap)?;
        let read_only = req.readonly || is_read_only(cap);
        let exclusive = is_single_writer(cap);
        let ephemeral = req
            .volume_context
            .get(EPHEMERAL_KEY)
            .is_some_and(|v| v == "true");
        let store = self.shared.store.clone();
        let target = PathBuf::from(&req.target_path);
        if ephemeral {
            if matches!(access, AccessType::Block) {
                return Err(Status::invalid_argument(
                    "inline ephemeral volumes are filesystem volumes",
                ));
            }
            let size = match req.volume_context.get(EPHEMERAL_SIZE_KEY) {
                None => DEFAULT_EPHEMERAL_SIZE,
                Some(text) => parse_bytes(text).map_err(|err| {
                    Status::invalid_argument(format!("ephemeral volume size: {err}"))
                })?,
            };
            let create = CreateVolume {
                name: req.volume_id.clone(),
                required_bytes: size,
                limit_bytes: 0,
                pool: req.volume_context.get(POOL_PARAMETER).cloned(),
                mode: VolumeMode::Filesystem,
                source: None,
                ephemeral: true,
            };
            let volume_id = req.volume_id.clone();
            blocking(move || {
                let record = store.create_volume(&create)?;
                if record.id != volume_id {
                    return Err(ferrovirt_hostpath::Error::InvalidArgument(format!(
                        "ephemeral volume id {volume_id:?} is not path-safe"
                    )));
                }
                let staging = store.state_dir().join("ephemeral").join(&record.id);
                store.stage(&record.id, &staging, &access)?;
                store.publish(&record.id, &staging, &target, &access, read_only, exclusive)
            })
            .await?;
            return Ok(Response::new(NodePublishVolumeResponse {}));
        }
        required(&req.staging_target_path, "staging target path")?;
        let staging = PathBuf::from(&req.staging_target_path);
        blocking(move || {
            store.publish(
                &req.volume_id,
                &staging,
                &target,
                &access,
                read_only,
                exclusive,
            )
        })
        .await?;
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        required(&req.target_path, "target path")?;
        let store = self.shared.store.clone();
        blocking(move || {
            let target = PathBuf::from(&req.target_path);
            store.unpublish(&req.volume_id, &target)?;
            let record = store.volume(&req.volume_id)?;
            if record.ephemeral && record.published.is_empty() {
                if let Some(staging) = &record.staged {
                    store.unstage(&record.id, staging)?;
                    let _ = std::fs::remove_dir(staging);
                }
                store.delete_volume(&record.id)?;
            }
            Ok(())
        })
        .await?;
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        required(&req.volume_path, "volume path")?;
        let store = self.shared.store.clone();
        let stats =
            blocking(move || store.volume_stats(&req.volume_id, &PathBuf::from(&req.volume_path)))
                .await?;
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut usage = vec![VolumeUsage {
            available: int(stats.available_bytes.unwrap_or(0)),
            total: int(stats.total_bytes),
            used: int(stats.used_bytes.unwrap_or(0)),
            unit: volume_usage::Unit::Bytes as i32,
        }];
        if let (Some(total), Some(used), Some(free)) =
            (stats.total_inodes, stats.used_inodes, stats.free_inodes)
        {
            usage.push(VolumeUsage {
                available: int(free),
                total: int(total),
                used: int(used),
                unit: volume_usage::Unit::Inodes as i32,
            });
        }
        Ok(Response::new(NodeGetVolumeStatsResponse {
            usage,
            volume_condition: Some(match stats.abnormal {
                Some(message) => VolumeCondition {
                    abnormal: true,
                    message,
                },
                None => VolumeCondition {
                    abnormal: false,
                    message: "volume is healthy".into(),
                },
            }),
        }))
    }

    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        required(&req.volume_path, "volume path")?;
        let path = PathBuf::from(&req.volume_path);
        let store = self.shared.store.clone();
        let size = blocking(move || {
            if !path.exists() {
                return Err(ferrovirt_hostpath::Error::NotFound(format!(
                    "volume path {} does not exist",
                    path.display()
                )));
            }
            store.node_expand(&req.volume_id)
        })
        .await?;
        Ok(Response::new(NodeExpandVolumeResponse {
            capacity_bytes: i64::try_from(size).unwrap_or(i64::MAX),
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        let rpcs = [
            Rpc::StageUnstageVolume,
            Rpc::GetVolumeStats,
            Rpc::ExpandVolume,
            Rpc::VolumeCondition,
            Rpc::SingleNodeMultiWriter,
        ];
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: rpcs
                .into_iter()
                .map(|rpc| NodeServiceCapability {
                    r#type: Some(node_service_capability::Type::Rpc(
                        node_service_capability::Rpc { r#type: rpc as i32 },
                    )),
                })
                .collect(),
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.shared.config.node_id.clone(),
            max_volumes_per_node: 0,
            accessible_topology: Some(self.shared.topology()),
        }))
    }
}
