//! The label and annotation keys Tekton puts on the objects of a run
//! (`pkg/apis/pipeline/register.go`), and the service account a run without one runs as.

pub const TASK: &str = "tekton.dev/task";
pub const TASK_RUN: &str = "tekton.dev/taskRun";
pub const TASK_RUN_UID: &str = "tekton.dev/taskRunUID";
pub const PIPELINE: &str = "tekton.dev/pipeline";
pub const PIPELINE_RUN: &str = "tekton.dev/pipelineRun";
pub const PIPELINE_RUN_UID: &str = "tekton.dev/pipelineRunUID";
pub const PIPELINE_TASK: &str = "tekton.dev/pipelineTask";
pub const MEMBER_OF: &str = "tekton.dev/memberOf";

/// The annotation of a TaskRun whose pipeline task has `onError: continue`.
pub const ON_ERROR_ANNOTATION: &str = "pipeline.tekton.dev/pipeline-task-on-error";
/// The service account a run without one gets (`default-service-account`).
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
