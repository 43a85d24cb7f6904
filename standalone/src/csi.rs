//! The CSI calls the local provisioner and node agent make, as external-provisioner and
//! kubelet make them on a cluster: over gRPC to the driver's unix socket.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferrovirt_csi_driver::client::connect_unix;
use ferrovirt_csi_driver::proto::controller_client::ControllerClient;
use ferrovirt_csi_driver::proto::node_client::NodeClient;
use ferrovirt_csi_driver::proto::volume_capability::{
    AccessMode, AccessType, BlockVolume, MountVolume, access_mode,
};
use ferrovirt_csi_driver::proto::{
    CapacityRange, CreateSnapshotRequest, CreateVolumeRequest, DeleteSnapshotRequest,
    DeleteVolumeRequest, NodePublishVolumeRequest, NodeStageVolumeRequest,
    NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest, VolumeCapability, VolumeContentSource,
    volume_content_source,
};
use tonic::transport::Channel;

#[derive(Debug, thiserror::Error)]
pub enum CsiError {
    #[error("connecting to the CSI driver at {socket}: {source}")]
    Connect {
        socket: PathBuf,
        source: tonic::transport::Error,
    },
    #[error("CSI {call} of {volume}: {status}")]
    Call {
        call: &'static str,
        volume: String,
        status: String,
    },
}

/// Filesystem (ext4) or raw block, as a PV's volumeMode says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Filesystem,
    Block,
}

impl Mode {
    pub fn from_volume_mode(mode: Option<&str>) -> Mode {
        if mode == Some("Block") {
            Mode::Block
        } else {
            Mode::Filesystem
        }
    }

    fn capability(self) -> VolumeCapability {
        let access_type = match self {
            Mode::Filesystem => AccessType::Mount(MountVolume {
                fs_type: "ext4".into(),
                ..Default::default()
            }),
            Mode::Block => AccessType::Block(BlockVolume {}),
        };
        VolumeCapability {
            access_type: Some(access_type),
            access_mode: Some(AccessMode {
                mode: access_mode::Mode::SingleNodeWriter as i32,
            }),
        }
    }
}

/// What a new volume starts with: a copy of a volume or of a snapshot (by handle).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentSource {
    Volume(String),
    Snapshot(String),
}

/// A snapshot the driver took.
pub struct CreatedSnapshot {
    pub handle: String,
    pub size_bytes: u64,
    pub ready: bool,
}

/// A volume the driver created.
pub struct CreatedVolume {
    pub handle: String,
    pub capacity: u64,
    pub context: HashMap<String, String>,
}

#[derive(Clone)]
pub struct CsiClient {
    channel: Channel,
}

impl CsiClient {
    pub async fn connect(socket: &Path) -> Result<Self, CsiError> {
        let channel =
            connect_unix(socket.to_path_buf())
                .await
                .map_err(|source| CsiError::Connect {
                    socket: socket.to_path_buf(),
                    source,
                })?;
        Ok(CsiClient { channel })
    }

    fn failed<'a>(
        call: &'static str,
        volume: &'a str,
    ) -> impl FnOnce(tonic::Status) -> CsiError + 'a {
        move |status| CsiError::Call {
            call,
            volume: volume.to_string(),
            status: status.message().to_string(),
        }
    }

    /// CreateVolume: `name` is the idempotency key; `source` what it starts as.
    pub async fn create_volume(
        &self,
        name: &str,
        bytes: u64,
        mode: Mode,
        parameters: HashMap<String, String>,
        source: Option<ContentSource>,
    ) -> Result<CreatedVolume, CsiError> {
        let request = CreateVolumeRequest {
            name: name.to_string(),
            capacity_range: Some(CapacityRange {
                required_bytes: bytes as i64,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![mode.capability()],
            parameters,
            volume_content_source: source.map(|source| VolumeContentSource {
                r#type: Some(match source {
                    ContentSource::Volume(volume_id) => {
                        volume_content_source::Type::Volume(volume_content_source::VolumeSource {
                            volume_id,
                        })
                    }
                    ContentSource::Snapshot(snapshot_id) => volume_content_source::Type::Snapshot(
                        volume_content_source::SnapshotSource { snapshot_id },
                    ),
                }),
            }),
            ..Default::default()
        };
        let response = ControllerClient::new(self.channel.clone())
            .create_volume(request)
            .await
            .map_err(Self::failed("CreateVolume", name))?
            .into_inner();
        let volume = response.volume.unwrap_or_default();
        Ok(CreatedVolume {
            handle: volume.volume_id,
            capacity: volume.capacity_bytes.max(0) as u64,
            context: volume.volume_context,
        })
    }

    /// CreateSnapshot of volume `source`: `name` is the idempotency key.
    pub async fn create_snapshot(
        &self,
        name: &str,
        source: &str,
    ) -> Result<CreatedSnapshot, CsiError> {
        let request = CreateSnapshotRequest {
            name: name.to_string(),
            source_volume_id: source.to_string(),
            ..Default::default()
        };
        let snapshot = ControllerClient::new(self.channel.clone())
            .create_snapshot(request)
            .await
            .map_err(Self::failed("CreateSnapshot", source))?
            .into_inner()
            .snapshot
            .unwrap_or_default();
        Ok(CreatedSnapshot {
            handle: snapshot.snapshot_id,
            size_bytes: snapshot.size_bytes.max(0) as u64,
            ready: snapshot.ready_to_use,
        })
    }

    pub async fn delete_snapshot(&self, handle: &str) -> Result<(), CsiError> {
        let request = DeleteSnapshotRequest {
            snapshot_id: handle.to_string(),
            ..Default::default()
        };
        ControllerClient::new(self.channel.clone())
            .delete_snapshot(request)
            .await
            .map_err(Self::failed("DeleteSnapshot", handle))?;
        Ok(())
    }

    pub async fn delete_volume(&self, handle: &str) -> Result<(), CsiError> {
        let request = DeleteVolumeRequest {
            volume_id: handle.to_string(),
            ..Default::default()
        };
        ControllerClient::new(self.channel.clone())
            .delete_volume(request)
            .await
            .map_err(Self::failed("DeleteVolume", handle))?;
        Ok(())
    }

    /// NodeStageVolume then NodePublishVolume: the volume appears at `target` (a directory
    /// for a filesystem volume, a device file for a block volume).
    pub async fn publish(
        &self,
        handle: &str,
        mode: Mode,
        staging: &Path,
        target: &Path,
    ) -> Result<(), CsiError> {
        let mut node = NodeClient::new(self.channel.clone());
        let stage = NodeStageVolumeRequest {
            volume_id: handle.to_string(),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(mode.capability()),
            ..Default::default()
        };
        node.node_stage_volume(stage)
            .await
            .map_err(Self::failed("NodeStageVolume", handle))?;
        let publish = NodePublishVolumeRequest {
            volume_id: handle.to_string(),
            staging_target_path: staging.display().to_string(),
            target_path: target.display().to_string(),
            volume_capability: Some(mode.capability()),
            ..Default::default()
        };
        node.node_publish_volume(publish)
            .await
            .map_err(Self::failed("NodePublishVolume", handle))?;
        Ok(())
    }

    /// NodeUnpublishVolume of one target; the volume stays staged for the node's other users.
    pub async fn unpublish(&self, handle: &str, target: &Path) -> Result<(), CsiError> {
        let mut node = NodeClient::new(self.channel.clone());
        let unpublish = NodeUnpublishVolumeRequest {
            volume_id: handle.to_string(),
            target_path: target.display().to_string(),
        };
        node.node_unpublish_volume(unpublish)
            .await
            .map_err(Self::failed("NodeUnpublishVolume", handle))?;
        Ok(())
    }

    /// NodeUnstageVolume: for when no pod on the node publishes the volume any more.
    pub async fn unstage(&self, handle: &str, staging: &Path) -> Result<(), CsiError> {
        let mut node = NodeClient::new(self.channel.clone());
        let unstage = NodeUnstageVolumeRequest {
            volume_id: handle.to_string(),
            staging_target_path: staging.display().to_string(),
        };
        node.node_unstage_volume(unstage)
            .await
            .map_err(Self::failed("NodeUnstageVolume", handle))?;
        Ok(())
    }
}
