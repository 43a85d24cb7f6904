//! Workspaces: the volumes a Task or Pipeline declares by name, and what a run binds to
//! each (`workspace_types.go`).

use k8s_openapi::api::core::v1::{
    CSIVolumeSource, ConfigMapVolumeSource, EmptyDirVolumeSource, PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource, ProjectedVolumeSource, SecretVolumeSource,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A workspace a Task declares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceDeclaration {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where the steps see it; `/workspace/<name>` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The Task runs without it when no binding is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

impl WorkspaceDeclaration {
    /// Where the steps see it.
    pub fn mount_path(&self) -> String {
        match self.mount_path.as_deref().filter(|p| !p.is_empty()) {
            Some(path) => path.to_owned(),
            None => format!("/workspace/{}", self.name),
        }
    }
}

/// A workspace a Pipeline declares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PipelineWorkspaceDeclaration {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// Which Pipeline workspace a pipeline task's workspace is.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspacePipelineTaskBinding {
    /// The Task's workspace.
    pub name: String,
    /// The Pipeline's workspace; the same name when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
}

/// The volume a TaskRun or PipelineRun gives a workspace: one of the sources.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceBinding {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
    /// A claim made for the run (and deleted with it); upstream keeps it unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::preserve_any")]
    pub volume_claim_template: Option<PersistentVolumeClaim>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<PersistentVolumeClaimVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projected: Option<ProjectedVolumeSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi: Option<CSIVolumeSource>,
}
