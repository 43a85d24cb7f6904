//! `ferrovirt task NAME`: the KubeVirt tekton tasks (the `tekton` crate). A failure is the
//! task's [`tekton::TaskFailure`], whose upstream exit code the binary exits with;
//! create-vm-from-manifest's `virtctl` parameter is this binary's `create vm`.

/// Runs `command`.
pub async fn run(command: tekton::TaskCommand) -> anyhow::Result<()> {
    let virtctl = |flags: &[String]| crate::virtctl::manifest_from_flags(flags);
    tekton::run(command, &virtctl).await?;
    Ok(())
}
