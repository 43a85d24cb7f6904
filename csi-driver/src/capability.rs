//! Volume capabilities: which access types and modes this driver serves, and what they mean
//! for the store.

use ferrovirt_hostpath::{AccessType, VolumeMode};
use tonic::Status;

use crate::proto::VolumeCapability;
use crate::proto::volume_capability::access_mode::Mode;
use crate::proto::volume_capability::{AccessType as CsiAccessType, MountVolume};

/// Whether the access mode can be served: volumes live on one node, so only single-node modes.
fn mode_supported(mode: i32) -> Result<bool, Status> {
    match Mode::try_from(mode) {
        Ok(
            Mode::SingleNodeWriter
            | Mode::SingleNodeReaderOnly
            | Mode::SingleNodeSingleWriter
            | Mode::SingleNodeMultiWriter,
        ) => Ok(true),
        Ok(
            Mode::MultiNodeReaderOnly | Mode::MultiNodeSingleWriter | Mode::MultiNodeMultiWriter,
        ) => Ok(false),
        Ok(Mode::Unknown) | Err(_) => Err(Status::invalid_argument(format!(
            "volume capability has no valid access mode ({mode})"
        ))),
    }
}

/// Whether the capability's access mode is read-only.
pub fn is_read_only(cap: &VolumeCapability) -> bool {
    cap.access_mode.as_ref().is_some_and(|m| {
        matches!(
            Mode::try_from(m.mode),
            Ok(Mode::SingleNodeReaderOnly | Mode::MultiNodeReaderOnly)
        )
    })
}

/// Whether the capability allows one publication on the node at a time
/// (SINGLE_NODE_SINGLE_WRITER).
pub fn is_single_writer(cap: &VolumeCapability) -> bool {
    cap.access_mode
        .as_ref()
        .is_some_and(|m| Mode::try_from(m.mode) == Ok(Mode::SingleNodeSingleWriter))
}

/// The store's view of one capability; `InvalidArgument` when it is malformed.
pub fn access_type(cap: &VolumeCapability) -> Result<AccessType, Status> {
    let Some(mode) = &cap.access_mode else {
        return Err(Status::invalid_argument(
            "volume capability has no access mode",
        ));
    };
    mode_supported(mode.mode)?;
    match &cap.access_type {
        Some(CsiAccessType::Block(_)) => Ok(AccessType::Block),
        Some(CsiAccessType::Mount(MountVolume {
            fs_type,
            mount_flags,
            ..
        })) => Ok(AccessType::Mount {
            fs_type: fs_type.clone(),
            flags: mount_flags.clone(),
        }),
        None => Err(Status::invalid_argument(
            "volume capability has no access type (block or mount)",
        )),
    }
}

/// Why a well-formed capability cannot be served, if it cannot.
pub fn unsupported_reason(cap: &VolumeCapability) -> Result<Option<String>, Status> {
    let access = access_type(cap)?;
    if let Some(mode) = &cap.access_mode
        && !mode_supported(mode.mode)?
    {
        return Ok(Some(format!(
            "access mode {:?} is not supported: volumes are local to one node",
            Mode::try_from(mode.mode).unwrap_or(Mode::Unknown)
        )));
    }
    if let AccessType::Mount { fs_type, .. } = &access
        && !fs_type.is_empty()
        && fs_type != "ext4"
    {
        return Ok(Some(format!(
            "filesystem type {fs_type:?} is not supported (only ext4)"
        )));
    }
    Ok(None)
}

/// The volume mode a set of capabilities asks for; `InvalidArgument` if they are malformed,
/// mix block and mount, or ask for something this driver cannot serve.
pub fn volume_mode(caps: &[VolumeCapability]) -> Result<VolumeMode, Status> {
    if caps.is_empty() {
        return Err(Status::invalid_argument("volume capabilities are required"));
    }
    let mut mode = None;
    for cap in caps {
        if let Some(reason) = unsupported_reason(cap)? {
            return Err(Status::invalid_argument(reason));
        }
        let this = match access_type(cap)? {
            AccessType::Block => VolumeMode::Block,
            AccessType::Mount { .. } => VolumeMode::Filesystem,
        };
        if mode.is_some_and(|m| m != this) {
            return Err(Status::invalid_argument(
                "a volume cannot be both a block and a mounted volume",
            ));
        }
        mode = Some(this);
    }
    Ok(mode.unwrap_or(VolumeMode::Filesystem))
}
