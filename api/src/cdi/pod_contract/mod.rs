//! The contract between the DataVolume controller and the worker pods it runs (the importer,
//! the upload server, the clone source): where they find the volume, and what they leave in
//! their termination message. The controller writes and reads it through these types; the
//! pods (`ferrovirt importer`, `upload-server`, `clone-source`) write it through them too.
//!
//! A termination message is CDI's: JSON with `message` (and `preallocationApplied`, ...) on
//! success, the error's text on failure. A failure also carries, on a last line of its own,
//! a typed [`FailureReason`] that says whether a retry can help: the controller never
//! decides that from the wording of the message.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a filesystem volume is mounted in a worker pod.
pub const DATA_MOUNT_PATH: &str = "/data";
/// The disk image on a filesystem volume.
pub const DISK_IMAGE_FILE: &str = "disk.img";
/// The disk image on a filesystem volume, as a worker pod sees it.
pub const DATA_IMAGE_PATH: &str = "/data/disk.img";
/// Where a block volume appears in a worker pod.
pub const BLOCK_DEVICE_PATH: &str = "/dev/cdi-block-volume";
/// Where a clone source pod mounts a filesystem source volume (CDI's `ClonerMountPath`).
pub const CLONE_SOURCE_MOUNT: &str = "/var/run/cdi/clone/source";
/// What a clone source says of a filesystem source volume that holds no disk image.
pub const NO_DISK_IMAGE: &str = "only disk images are cloned this way";
/// Where a worker leaves its termination message.
pub const TERMINATION_LOG_PATH: &str = "/dev/termination-log";

pub mod env;

/// The most of a termination message the kubelet keeps (it reads the first 4 KiB).
pub const TERMINATION_MESSAGE_LIMIT: usize = 4096;
/// The line that carries a failure's reason starts with this.
pub const FAILURE_REASON_PREFIX: &str = "ferrovirt.io/failure-reason: ";

/// Why a worker failed, as far as retrying goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailureReason {
    /// The source's bytes do not match the checksum the DataVolume names.
    ChecksumMismatch,
    /// The volume is too small for the image.
    TargetTooSmall,
    /// The DataVolume asks for what no worker can do (a blank archive, an unknown source).
    InvalidRequest,
    /// A clone source volume holds no disk image.
    NoDiskImage,
    /// A clone's source went away before the clone completed.
    SourceDeleted,
    /// Anything else: the pod is restarted and tries again.
    Other,
}

impl FailureReason {
    /// Every reason, for parsing.
    pub const ALL: [FailureReason; 6] = [
        FailureReason::ChecksumMismatch,
        FailureReason::TargetTooSmall,
        FailureReason::InvalidRequest,
        FailureReason::NoDiskImage,
        FailureReason::SourceDeleted,
        FailureReason::Other,
    ];

    /// Whether no retry can fix it: the transfer ends Failed instead of restarting the pod.
    pub fn is_final(self) -> bool {
        !matches!(self, FailureReason::Other)
    }

    /// The reason's name, as written in termination messages and annotations.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::ChecksumMismatch => "ChecksumMismatch",
            FailureReason::TargetTooSmall => "TargetTooSmall",
            FailureReason::InvalidRequest => "InvalidRequest",
            FailureReason::NoDiskImage => "NoDiskImage",
            FailureReason::SourceDeleted => "SourceDeleted",
            FailureReason::Other => "Other",
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no [`FailureReason`].
#[derive(Debug, thiserror::Error)]
#[error("unknown failure reason {0:?}")]
pub struct UnknownFailureReason(pub String);

impl FromStr for FailureReason {
    type Err = UnknownFailureReason;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FailureReason::ALL
            .into_iter()
            .find(|r| r.as_str() == text)
            .ok_or_else(|| UnknownFailureReason(text.to_string()))
    }
}

/// A worker's failure: what the DataVolume's conditions say, and whether a retry can help.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerFailure {
    /// Why, as far as retrying goes.
    pub reason: FailureReason,
    /// What the user reads (CDI's wording: `Unable to process data: ...`).
    pub message: String,
}

impl WorkerFailure {
    /// A failure for `reason` saying `message`.
    pub fn new(reason: FailureReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// Whether no retry can fix it.
    pub fn is_final(&self) -> bool {
        self.reason.is_final()
    }

    /// The termination message: the message on one line (cut short to fit the kubelet's
    /// limit), then the reason's line.
    pub fn termination_message(&self) -> String {
        let reason_line = format!("\n{FAILURE_REASON_PREFIX}{}", self.reason);
        let one_line = self.message.replace('\n', " ");
        let room = TERMINATION_MESSAGE_LIMIT - reason_line.len();
        let mut end = one_line.len().min(room);
        while !one_line.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}{reason_line}", &one_line[..end])
    }
}

/// CDI's termination message of a worker that completed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompletionMessage {
    /// Whether a scratch volume was needed (never: conversion streams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_space_required: Option<bool>,
    /// Whether the image was preallocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocation_applied: Option<bool>,
    /// Whether an upload server's deadline passed before an upload completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_passed: Option<bool>,
    /// `Import Complete`, `Upload Complete`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a worker's termination message says, as the controller reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TerminationMessage {
    /// The message for the DataVolume's conditions.
    pub message: String,
    /// A failure's reason, when the worker gave one.
    pub failure_reason: Option<FailureReason>,
    /// Whether the image was preallocated (a completion's).
    pub preallocation_applied: Option<bool>,
}

impl TerminationMessage {
    /// Reads a termination message: a completion's JSON, or a failure's text with its
    /// reason's line; any other text (a log tail, an older worker's) is a message with no
    /// reason.
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if let Ok(completion) = serde_json::from_str::<CompletionMessage>(text) {
            return Self {
                message: completion.message.unwrap_or_else(|| text.to_string()),
                failure_reason: None,
                preallocation_applied: completion.preallocation_applied,
            };
        }
        let reason = text
            .rsplit_once('\n')
            .and_then(|(message, last)| Some((message, last.strip_prefix(FAILURE_REASON_PREFIX)?)))
            .and_then(|(message, reason)| Some((message, reason.trim().parse().ok()?)));
        match reason {
            Some((message, reason)) => Self {
                message: message.trim().to_string(),
                failure_reason: Some(reason),
                preallocation_applied: None,
            },
            None => Self {
                message: text.to_string(),
                ..Default::default()
            },
        }
    }

    /// The failure it reports, when it gave a reason.
    pub fn failure(&self) -> Option<WorkerFailure> {
        Some(WorkerFailure::new(
            self.failure_reason?,
            self.message.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_its_message_first_and_its_reason_last() {
        let failure = WorkerFailure::new(
            FailureReason::ChecksumMismatch,
            "Unable to process data: checksum mismatch:\nexpected sha256:00",
        );
        let text = failure.termination_message();
        assert!(text.starts_with("Unable to process data: checksum mismatch: expected"));
        assert!(text.ends_with("\nferrovirt.io/failure-reason: ChecksumMismatch"));
        let read = TerminationMessage::parse(&text);
        assert_eq!(
            read.message,
            "Unable to process data: checksum mismatch: expected sha256:00"
        );
        assert_eq!(
            read.failure(),
            Some(WorkerFailure {
                reason: FailureReason::ChecksumMismatch,
                message: read.message.clone(),
            })
        );
        assert!(read.failure().unwrap().is_final());
    }

    #[test]
    fn the_reason_survives_a_message_longer_than_the_kubelet_keeps() {
        let long = "é".repeat(TERMINATION_MESSAGE_LIMIT);
        let text = WorkerFailure::new(FailureReason::TargetTooSmall, long).termination_message();
        assert!(text.len() <= TERMINATION_MESSAGE_LIMIT);
        let read = TerminationMessage::parse(&text);
        assert_eq!(read.failure_reason, Some(FailureReason::TargetTooSmall));
    }

    #[test]
    fn the_wording_never_decides_a_retry() {
        // A message that reads like a final failure, without a reason, is retried.
        let read = TerminationMessage::parse("Unable to process data: checksum mismatch");
        assert_eq!(read.failure_reason, None);
        let other = WorkerFailure::new(FailureReason::Other, "checksum mismatch, too small");
        assert!(
            !TerminationMessage::parse(&other.termination_message())
                .failure()
                .unwrap()
                .is_final()
        );
        // An unknown reason (a newer worker's) is no reason.
        let read = TerminationMessage::parse("boom\nferrovirt.io/failure-reason: Gremlins");
        assert_eq!(read.failure_reason, None);
    }

    #[test]
    fn a_completion_is_cdis_json() {
        let done = CompletionMessage {
            scratch_space_required: Some(false),
            preallocation_applied: Some(false),
            message: Some("Import Complete".into()),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&done).unwrap(),
            r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#
        );
        let read = TerminationMessage::parse(&serde_json::to_string(&done).unwrap());
        assert_eq!(read.message, "Import Complete");
        assert_eq!(read.preallocation_applied, Some(false));
        assert_eq!(read.failure_reason, None);
    }

    #[test]
    fn the_image_path_is_the_image_on_the_mount() {
        assert_eq!(
            DATA_IMAGE_PATH,
            format!("{DATA_MOUNT_PATH}/{DISK_IMAGE_FILE}")
        );
    }

    #[test]
    fn reasons_read_back_by_name() {
        for reason in FailureReason::ALL {
            assert_eq!(reason.as_str().parse::<FailureReason>().unwrap(), reason);
        }
    }
}
