//! The Controller service: create, delete, list, get and expand volumes; snapshots; capacity.

use std::collections::HashMap;

use ferrovirt_hostpath::{
    CreateSnapshot, CreateVolume, SnapshotRecord, VolumeMode, VolumeRecord, VolumeSource,
};
use tonic::{Request, Response, Status};

use crate::capability::{unsupported_reason, volume_mode};
use crate::proto::controller_server::Controller;
use crate::proto::controller_service_capability::rpc::Type as Rpc;
use crate::proto::*;
use crate::status::{blocking, required};
use crate::{POOL_PARAMETER, Shared};

pub struct ControllerService {
    shared: Shared,
}

impl ControllerService {
    pub fn new(shared: Shared) -> Self {
        Self { shared }
    }

    fn csi_volume(&self, record: &VolumeRecord) -> Volume {
        let content_source = record.source.as_ref().map(|source| VolumeContentSource {
            r#type: Some(match source {
                VolumeSource::Snapshot(id) => {
                    volume_content_source::Type::Snapshot(volume_content_source::SnapshotSource {
                        snapshot_id: id.clone(),
                    })
                }
                VolumeSource::Volume(id) => {
                    volume_content_source::Type::Volume(volume_content_source::VolumeSource {
                        volume_id: id.clone(),
                    })
                }
            }),
        });
        Volume {
            capacity_bytes: i64::try_from(record.size).unwrap_or(i64::MAX),
            volume_id: record.id.clone(),
            volume_context: [(POOL_PARAMETER.to_string(), record.pool.clone())].into(),
            content_source,
            accessible_topology: vec![self.shared.topology()],
        }
    }

    fn condition(&self, record: &VolumeRecord) -> VolumeCondition {
        match self.shared.store.volume_condition(record) {
            Some(message) => VolumeCondition {
                abnormal: true,
                message,
            },
            None => VolumeCondition {
                abnormal: false,
                message: "volume is healthy".into(),
            },
        }
    }

    fn published_nodes(&self, record: &VolumeRecord) -> Vec<String> {
        if record.staged.is_some() || !record.published.is_empty() {
            vec![self.shared.config.node_id.clone()]
        } else {
            Vec::new()
        }
    }

    /// Whether `topology` names this node (a topology without our key does not restrict).
    fn is_this_node(&self, topology: &Topology) -> bool {
        topology
            .segments
            .get(crate::TOPOLOGY_KEY)
            .is_none_or(|node| *node == self.shared.config.node_id)
    }
}

fn csi_snapshot(record: &SnapshotRecord) -> Snapshot {
    Snapshot {
        size_bytes: i64::try_from(record.size).unwrap_or(i64::MAX),
        snapshot_id: record.id.clone(),
        source_volume_id: record.source_volume_id.clone(),
        creation_time: Some(prost_types::Timestamp {
            seconds: i64::try_from(record.created_unix_secs).unwrap_or(i64::MAX),
            nanos: i32::try_from(record.created_nanos).unwrap_or(0),
        }),
        ready_to_use: true,
        group_snapshot_id: String::new(),
    }
}

fn capacity_range(range: Option<&CapacityRange>) -> Result<(u64, u64), Status> {
    let Some(range) = range else {
        return Ok((0, 0));
    };
    let required = u64::try_from(range.required_bytes)
        .map_err(|_| Status::invalid_argument("required_bytes must not be negative"))?;
    let limit = u64::try_from(range.limit_bytes)
        .map_err(|_| Status::invalid_argument("limit_bytes must not be negative"))?;
    if limit != 0 && required > limit {
        return Err(Status::invalid_argument(format!(
            "required_bytes {required} exceed limit_bytes {limit}"
        )));
    }
    Ok((required, limit))
}

/// The prefix of pagination tokens: `after:<id>` resumes after that id, so a page boundary
/// stays valid when entries are added or deleted between calls.
const TOKEN_PREFIX: &str = "after:";

/// A page of `items` (sorted by `key`) after the token's id, at most `max` long (0: all).
fn paginate<T: Clone>(
    items: &[T],
    key: impl Fn(&T) -> &str,
    token: &str,
    max: i32,
) -> Result<(Vec<T>, String), Status> {
    if max < 0 {
        return Err(Status::invalid_argument("max_entries must not be negative"));
    }
    let start = if token.is_empty() {
        0
    } else {
        let after = token
            .strip_prefix(TOKEN_PREFIX)
            .ok_or_else(|| Status::aborted(format!("invalid starting_token {token:?}")))?;
        items.partition_point(|item| key(item) <= after)
    };
    let end = if max == 0 {
        items.len()
    } else {
        start.saturating_add(max as usize).min(items.len())
    };
    let next = if end < items.len() && end > start {
        format!("{TOKEN_PREFIX}{}", key(&items[end - 1]))
    } else {
        String::new()
    };
    Ok((items[start..end].to_vec(), next))
}

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.name, "name")?;
        let mode = volume_mode(&req.volume_capabilities)?;
        let (required_bytes, limit_bytes) = capacity_range(req.capacity_range.as_ref())?;
        if let Some(topology) = &req.accessibility_requirements
            && !topology.requisite.is_empty()
            && !topology.requisite.iter().any(|t| self.is_this_node(t))
        {
            return Err(Status::resource_exhausted(format!(
                "volumes of node {} cannot be made accessible from the requisite topologies",
                self.shared.config.node_id
            )));
        }
        let source = match req.volume_content_source.and_then(|s| s.r#type) {
            None => None,
            Some(volume_content_source::Type::Snapshot(s)) => {
                required(&s.snapshot_id, "source snapshot id")?;
                Some(VolumeSource::Snapshot(s.snapshot_id))
            }
            Some(volume_content_source::Type::Volume(v)) => {
                required(&v.volume_id, "source volume id")?;
                Some(VolumeSource::Volume(v.volume_id))
            }
        };
        let create = CreateVolume {
            name: req.name,
            required_bytes,
            limit_bytes,
            pool: req.parameters.get(POOL_PARAMETER).cloned(),
            mode,
            source,
            ephemeral: false,
        };
        let store = self.shared.store.clone();
        let record = blocking(move || store.create_volume(&create)).await?;
        Ok(Response::new(CreateVolumeResponse {
            volume: Some(self.csi_volume(&record)),
        }))
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        let store = self.shared.store.clone();
        blocking(move || store.delete_volume(&req.volume_id)).await?;
        Ok(Response::new(DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        _: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "volumes are local: there is nothing to attach",
        ))
    }

    async fn controller_unpublish_volume(
        &self,
        _: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "volumes are local: there is nothing to detach",
        ))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        if req.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument("volume capabilities are required"));
        }
        let store = self.shared.store.clone();
        let id = req.volume_id.clone();
        let record = blocking(move || store.volume(&id)).await?;
        for cap in &req.volume_capabilities {
            let mismatch = match (&cap.access_type, record.mode) {
                (Some(volume_capability::AccessType::Block(_)), VolumeMode::Filesystem) => {
                    Some("the volume is a filesystem volume, not a block volume".to_string())
                }
                (Some(volume_capability::AccessType::Mount(_)), VolumeMode::Block) => {
                    Some("the volume is a block volume and cannot be mounted".to_string())
                }
                _ => None,
            };
            if let Some(message) = unsupported_reason(cap)?.or(mismatch) {
                return Ok(Response::new(ValidateVolumeCapabilitiesResponse {
                    confirmed: None,
                    message,
                }));
            }
        }
        Ok(Response::new(ValidateVolumeCapabilitiesResponse {
            confirmed: Some(validate_volume_capabilities_response::Confirmed {
                volume_context: req.volume_context,
                volume_capabilities: req.volume_capabilities,
                parameters: req.parameters,
                mutable_parameters: HashMap::new(),
            }),
            message: String::new(),
        }))
    }

    async fn list_volumes(
        &self,
        request: Request<ListVolumesRequest>,
    ) -> Result<Response<ListVolumesResponse>, Status> {
        let req = request.into_inner();
        let volumes = self.shared.store.volumes();
        let (page, next_token) = paginate(
            &volumes,
            |v| v.id.as_str(),
            &req.starting_token,
            req.max_entries,
        )?;
        let entries = page
            .iter()
            .map(|record| list_volumes_response::Entry {
                volume: Some(self.csi_volume(record)),
                status: Some(list_volumes_response::VolumeStatus {
                    published_node_ids: self.published_nodes(record),
                    volume_condition: Some(self.condition(record)),
                }),
            })
            .collect();
        Ok(Response::new(ListVolumesResponse {
            entries,
            next_token,
        }))
    }

    async fn get_capacity(
        &self,
        request: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        let req = request.into_inner();
        for cap in &req.volume_capabilities {
            if unsupported_reason(cap)?.is_some() {
                return Ok(Response::new(GetCapacityResponse {
                    available_capacity: 0,
                    maximum_volume_size: Some(0),
                    minimum_volume_size: None,
                }));
            }
        }
        if let Some(topology) = &req.accessible_topology
            && !self.is_this_node(topology)
        {
            return Ok(Response::new(GetCapacityResponse {
                available_capacity: 0,
                maximum_volume_size: Some(0),
                minimum_volume_size: None,
            }));
        }
        // A filesystem volume's image is longer than its size: the largest volume that fits
        // is what the pool can give less that metadata (the smaller answer when unsaid).
        let mode = volume_mode(&req.volume_capabilities).unwrap_or(VolumeMode::Filesystem);
        let pool = req.parameters.get(POOL_PARAMETER).cloned();
        let store = self.shared.store.clone();
        let available = blocking(move || store.available_bytes(pool.as_deref())).await?;
        let largest = mode.largest_size_within(available);
        let to_i64 = |bytes: u64| i64::try_from(bytes).unwrap_or(i64::MAX);
        Ok(Response::new(GetCapacityResponse {
            available_capacity: to_i64(available),
            maximum_volume_size: Some(to_i64(largest)),
            minimum_volume_size: None,
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        let rpcs = [
            Rpc::CreateDeleteVolume,
            Rpc::GetCapacity,
            Rpc::ListVolumes,
            Rpc::GetVolume,
            Rpc::CreateDeleteSnapshot,
            Rpc::ListSnapshots,
            Rpc::GetSnapshot,
            Rpc::CloneVolume,
            Rpc::ExpandVolume,
            Rpc::VolumeCondition,
            Rpc::SingleNodeMultiWriter,
        ];
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: rpcs
                .into_iter()
                .map(|rpc| ControllerServiceCapability {
                    r#type: Some(controller_service_capability::Type::Rpc(
                        controller_service_capability::Rpc { r#type: rpc as i32 },
                    )),
                })
                .collect(),
        }))
    }

    async fn create_snapshot(
        &self,
        request: Request<CreateSnapshotRequest>,
    ) -> Result<Response<CreateSnapshotResponse>, Status> {
        let req = request.into_inner();
        required(&req.name, "name")?;
        required(&req.source_volume_id, "source volume id")?;
        let create = CreateSnapshot {
            name: req.name,
            source_volume_id: req.source_volume_id,
        };
        let store = self.shared.store.clone();
        let (record, method) = blocking(move || store.create_snapshot(&create)).await?;
        tracing::debug!(snapshot = %record.id, ?method, "snapshot created");
        Ok(Response::new(CreateSnapshotResponse {
            snapshot: Some(csi_snapshot(&record)),
        }))
    }

    async fn delete_snapshot(
        &self,
        request: Request<DeleteSnapshotRequest>,
    ) -> Result<Response<DeleteSnapshotResponse>, Status> {
        let req = request.into_inner();
        required(&req.snapshot_id, "snapshot id")?;
        let store = self.shared.store.clone();
        blocking(move || store.delete_snapshot(&req.snapshot_id)).await?;
        Ok(Response::new(DeleteSnapshotResponse {}))
    }

    async fn list_snapshots(
        &self,
        request: Request<ListSnapshotsRequest>,
    ) -> Result<Response<ListSnapshotsResponse>, Status> {
        let req = request.into_inner();
        let snapshots: Vec<SnapshotRecord> = self
            .shared
            .store
            .snapshots()
            .into_iter()
            .filter(|s| req.snapshot_id.is_empty() || s.id == req.snapshot_id)
            .filter(|s| {
                req.source_volume_id.is_empty() || s.source_volume_id == req.source_volume_id
            })
            .collect();
        let (page, next_token) = paginate(
            &snapshots,
            |s| s.id.as_str(),
            &req.starting_token,
            req.max_entries,
        )?;
        Ok(Response::new(ListSnapshotsResponse {
            entries: page
                .iter()
                .map(|s| list_snapshots_response::Entry {
                    snapshot: Some(csi_snapshot(s)),
                })
                .collect(),
            next_token,
        }))
    }

    async fn get_snapshot(
        &self,
        request: Request<GetSnapshotRequest>,
    ) -> Result<Response<GetSnapshotResponse>, Status> {
        let req = request.into_inner();
        required(&req.snapshot_id, "snapshot id")?;
        let record = self
            .shared
            .store
            .snapshot(&req.snapshot_id)
            .map_err(crate::status::to_status)?;
        Ok(Response::new(GetSnapshotResponse {
            snapshot: Some(csi_snapshot(&record)),
        }))
    }

    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        let Some(range) = req.capacity_range.as_ref() else {
            return Err(Status::invalid_argument("capacity range is required"));
        };
        let (required_bytes, limit_bytes) = capacity_range(Some(range))?;
        let store = self.shared.store.clone();
        let (size, node_expansion_required) =
            blocking(move || store.expand_volume(&req.volume_id, required_bytes, limit_bytes))
                .await?;
        Ok(Response::new(ControllerExpandVolumeResponse {
            capacity_bytes: i64::try_from(size).unwrap_or(i64::MAX),
            node_expansion_required,
        }))
    }

    async fn controller_get_volume(
        &self,
        request: Request<ControllerGetVolumeRequest>,
    ) -> Result<Response<ControllerGetVolumeResponse>, Status> {
        let req = request.into_inner();
        required(&req.volume_id, "volume id")?;
        let record = self
            .shared
            .store
            .volume(&req.volume_id)
            .map_err(crate::status::to_status)?;
        Ok(Response::new(ControllerGetVolumeResponse {
            volume: Some(self.csi_volume(&record)),
            status: Some(controller_get_volume_response::VolumeStatus {
                published_node_ids: self.published_nodes(&record),
                volume_condition: Some(self.condition(&record)),
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pagination() {
        let items: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        fn key(s: &String) -> &str {
            s
        }
        let page = |token: &str, max| paginate(&items, key, token, max);
        assert_eq!(page("", 0).unwrap(), (items.clone(), String::new()));
        let (first, token) = page("", 2).unwrap();
        assert_eq!(
            (first, token.as_str()),
            (vec!["a".into(), "b".into()], "after:b")
        );
        assert_eq!(
            page("after:d", 2).unwrap(),
            (vec!["e".into()], String::new())
        );
        // The entry the token names may be gone: the page still starts after it.
        assert_eq!(
            page("after:bb", 1).unwrap(),
            (vec!["c".into()], "after:c".into())
        );
        assert_eq!(page("x", 2).unwrap_err().code(), tonic::Code::Aborted);
        assert_eq!(
            page("", -1).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
}
