//! Why a PipelineRun cannot run at all: each failure is one value with Tekton's condition
//! reason and, as its `Display`, the condition message Tekton writes, `[User error] ` and all.

/// The prefix Tekton puts on a message caused by the user (`errors.UserErrorLabel`).
pub const USER_ERROR: &str = "[User error] ";

/// A failure that ends the run before (or instead of) running its tasks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunFailure {
    /// `spec.pipelineRef` names a Pipeline that does not exist (or the run names none).
    #[error("Error retrieving pipeline for pipelinerun {namespace}/{run}: {detail}")]
    CouldntGetPipeline {
        namespace: String,
        run: String,
        detail: String,
    },
    /// A pipeline task's `taskRef` names a Task that does not exist.
    #[error(
        "Pipeline {namespace}/{pipeline} can't be Run; it contains Tasks that don't exist: Couldn't retrieve Task {task:?}: tasks.tekton.dev {task:?} not found"
    )]
    CouldntGetTask {
        namespace: String,
        pipeline: String,
        task: String,
    },
    /// The tasks do not form a DAG (cycle, unknown or duplicate task).
    #[error("{USER_ERROR}PipelineRun {namespace}/{run}'s Pipeline DAG is invalid: {detail}")]
    InvalidGraph {
        namespace: String,
        run: String,
        detail: String,
    },
    /// The run passes no value for parameters without a default.
    #[error(
        "{USER_ERROR}PipelineRun {namespace}/{run} is missing some parameters required by Pipeline {namespace}/{pipeline}: pipelineRun missing parameters: [{}]",
        missing.join(" ")
    )]
    ParameterMissing {
        namespace: String,
        run: String,
        pipeline: String,
        missing: Vec<String>,
    },
    /// The run passes values of another type than the Pipeline declares.
    #[error(
        "{USER_ERROR}PipelineRun {namespace}/{run} parameters have mismatching types with Pipeline {namespace}/{pipeline}'s parameters: parameters have inconsistent types : [{}]",
        names.join(" ")
    )]
    ParameterTypeMismatch {
        namespace: String,
        run: String,
        pipeline: String,
        names: Vec<String>,
    },
    /// A workspace the Pipeline needs is not bound by the run.
    #[error(
        "{USER_ERROR}PipelineRun {namespace}/{run} doesn't bind Pipeline {namespace}/{pipeline}'s Workspaces correctly: pipeline requires workspace with name {workspace:?} be provided by pipelinerun"
    )]
    InvalidWorkspaceBindings {
        namespace: String,
        run: String,
        pipeline: String,
        workspace: String,
    },
    /// A `taskRunSpecs` entry names no pipeline task.
    #[error(
        "{USER_ERROR}PipelineRun {namespace}/{run} doesn't define taskRunSpecs correctly: pipelineRun's taskrunSpecs defined wrong taskName: {task:?}, does not exist in Pipeline"
    )]
    InvalidTaskRunSpecs {
        namespace: String,
        run: String,
        task: String,
    },
    /// A pipeline task passes no value for a parameter its Task requires. `task` is the
    /// referenced Task's name, empty for an embedded spec (as upstream prints it).
    #[error(
        "{USER_ERROR}Validation failed for pipelinerun {run} with error invalid input params for task {task}: missing values for these params which have no default values: [{}]",
        missing.join(" ")
    )]
    TaskParameterMissing {
        run: String,
        task: String,
        missing: Vec<String>,
    },
    /// A result reference names a result the referenced Task does not declare.
    #[error(
        "{USER_ERROR}invalid result reference in pipeline task {task:?}: {result:?} is not a named result returned by pipeline task {referenced:?}"
    )]
    InvalidTaskResultReference {
        task: String,
        result: String,
        referenced: String,
    },
    /// A workspace binding of a pipeline task names no workspace the run binds, and the
    /// Pipeline does not mark it optional.
    #[error(
        "expected workspace {workspace:?} to be provided by pipelinerun for pipeline task {task:?}"
    )]
    UnboundTaskWorkspace { workspace: String, task: String },
    /// The Pipeline uses a feature Ferrovirt's runner does not implement; `field` is its path.
    #[error(
        "Pipeline {namespace}/{pipeline} can't be Run; {field} is not supported by Ferrovirt's PipelineRun runner"
    )]
    Unsupported {
        namespace: String,
        pipeline: String,
        field: String,
    },
    /// Pipeline results refer to results the (succeeded) tasks did not produce.
    #[error(
        "Failed to get PipelineResult from TaskRun Results for PipelineRun {run}: invalid pipelineresults [{}], the referenced results don't exist",
        names.join(" ")
    )]
    CouldntGetPipelineResult { run: String, names: Vec<String> },
}

impl RunFailure {
    /// The condition reason Tekton gives this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            RunFailure::CouldntGetPipeline { .. } => "CouldntGetPipeline",
            RunFailure::CouldntGetTask { .. } => "CouldntGetTask",
            RunFailure::InvalidGraph { .. } => "PipelineInvalidGraph",
            RunFailure::ParameterMissing { .. } => "ParameterMissing",
            RunFailure::ParameterTypeMismatch { .. } => "ParameterTypeMismatch",
            RunFailure::InvalidWorkspaceBindings { .. } => "InvalidWorkspaceBindings",
            RunFailure::InvalidTaskRunSpecs { .. } => "InvalidTaskRunSpecs",
            RunFailure::TaskParameterMissing { .. } | RunFailure::Unsupported { .. } => {
                "PipelineValidationFailed"
            }
            RunFailure::InvalidTaskResultReference { .. } => "InvalidTaskResultReference",
            RunFailure::UnboundTaskWorkspace { .. } => "CreateRunFailed",
            RunFailure::CouldntGetPipelineResult { .. } => "CouldntGetPipelineResult",
        }
    }
}
