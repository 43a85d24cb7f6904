//! virt-api's checks of a VMI spec's `accessCredentials`: each credential is one SSH key or
//! one user password, from exactly one source, by exactly one propagation method, and the
//! cloud-init methods need the cloud-init volume they write into. The messages are
//! KubeVirt's (`validateAccessCredentials` in its VMI create admitter).

use api::kubevirt::vmi::{AccessCredential, VirtualMachineInstanceSpec};
use api::validation::{FieldPath, Problem, ValidationError, ValidationResult};

/// Checks every credential of `spec`, `path` being `spec.accessCredentials`.
pub fn validate_access_credentials(
    spec: &VirtualMachineInstanceSpec,
    path: &FieldPath,
) -> ValidationResult {
    let volumes = spec.volumes.iter().flatten();
    let has_no_cloud = volumes.clone().any(|v| v.cloud_init_no_cloud.is_some());
    let has_config_drive = volumes.clone().any(|v| v.cloud_init_config_drive.is_some());
    for (i, credential) in spec.access_credentials.iter().flatten().enumerate() {
        let at = path.index(i);
        check_credential(credential, &at, has_no_cloud, has_config_drive)?;
    }
    Ok(())
}

fn check_credential(
    credential: &AccessCredential,
    at: &FieldPath,
    has_no_cloud: bool,
    has_config_drive: bool,
) -> ValidationResult {
    let fail = |field: FieldPath, message: String| {
        Err(ValidationError::new(field, Problem::Invalid(message)))
    };
    let kinds = usize::from(credential.ssh_public_key.is_some())
        + usize::from(credential.user_password.is_some());
    if kinds != 1 {
        return fail(
            at.clone(),
            format!("{at} must have exactly one access credential type set"),
        );
    }
    if let Some(key) = &credential.ssh_public_key {
        let field = at.child("sshPublicKey");
        let methods = &key.propagation_method;
        let method_path = field.child("propagationMethod");
        if methods.no_cloud.is_some() && !has_no_cloud {
            return fail(
                method_path,
                format!(
                    "{at} requires a noCloud volume to exist when the noCloud propagationMethod is in use."
                ),
            );
        }
        if methods.config_drive.is_some() && !has_config_drive {
            return fail(
                method_path,
                format!(
                    "{at} requires a configDrive volume to exist when the configDrive propagationMethod is in use."
                ),
            );
        }
        if methods
            .qemu_guest_agent
            .as_ref()
            .is_some_and(|agent| agent.users.is_empty())
        {
            return fail(
                method_path.child("qemuGuestAgent").child("users"),
                format!("{at} requires at least one user to be present in the users list"),
            );
        }
        if key.source.secret.is_none() {
            return fail(
                field.child("source"),
                format!("{at} must have exactly one source set"),
            );
        }
        let count = usize::from(methods.no_cloud.is_some())
            + usize::from(methods.config_drive.is_some())
            + usize::from(methods.qemu_guest_agent.is_some());
        if count != 1 {
            return fail(
                method_path,
                format!("{at} must have exactly one propagationMethod set"),
            );
        }
    }
    if let Some(password) = &credential.user_password {
        let field = at.child("userPassword");
        if password.source.secret.is_none() {
            return fail(
                field.child("source"),
                format!("{at} must have exactly one source set"),
            );
        }
        if password.propagation_method.qemu_guest_agent.is_none() {
            return fail(
                field.child("propagationMethod"),
                format!("{at} must have exactly one propagationMethod set"),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> VirtualMachineInstanceSpec {
        serde_saphyr::from_str(yaml).expect("a VMI spec")
    }

    fn refusal(yaml: &str) -> String {
        let path = FieldPath::new("spec").child("accessCredentials");
        validate_access_credentials(&spec(yaml), &path)
            .expect_err("refused")
            .to_string()
    }

    const NO_CLOUD_KEY: &str = r#"
domain: {devices: {}}
accessCredentials:
- sshPublicKey:
    source: {secret: {secretName: keys}}
    propagationMethod: {noCloud: {}}
"#;

    #[test]
    fn a_no_cloud_key_needs_a_no_cloud_volume() {
        assert_eq!(
            refusal(NO_CLOUD_KEY),
            "spec.accessCredentials[0].sshPublicKey.propagationMethod: spec.accessCredentials[0] \
             requires a noCloud volume to exist when the noCloud propagationMethod is in use."
        );
        let with_volume = format!(
            "{NO_CLOUD_KEY}volumes:\n- name: ci\n  cloudInitNoCloud: {{userData: \"#cloud-config\"}}\n"
        );
        let path = FieldPath::new("spec").child("accessCredentials");
        assert_eq!(
            validate_access_credentials(&spec(&with_volume), &path),
            Ok(())
        );
    }

    #[test]
    fn a_config_drive_key_needs_a_config_drive_volume() {
        let yaml = NO_CLOUD_KEY.replace("noCloud: {}", "configDrive: {}");
        assert!(refusal(&yaml).contains("requires a configDrive volume to exist"));
    }

    #[test]
    fn a_guest_agent_key_names_its_users() {
        let yaml = NO_CLOUD_KEY.replace("noCloud: {}", "qemuGuestAgent: {users: []}");
        assert_eq!(
            refusal(&yaml),
            "spec.accessCredentials[0].sshPublicKey.propagationMethod.qemuGuestAgent.users: \
             spec.accessCredentials[0] requires at least one user to be present in the users list"
        );
    }

    #[test]
    fn one_source_and_one_method() {
        let no_method = NO_CLOUD_KEY.replace("noCloud: {}", "");
        assert!(refusal(&no_method).ends_with("must have exactly one propagationMethod set"));
        let no_source = NO_CLOUD_KEY.replace("{secret: {secretName: keys}}", "{}");
        let no_source =
            format!("{no_source}volumes:\n- name: ci\n  cloudInitNoCloud: {{userData: x}}\n");
        assert!(refusal(&no_source).ends_with("must have exactly one source set"));
        let password = r#"
domain: {devices: {}}
accessCredentials:
- userPassword:
    source: {secret: {secretName: pw}}
    propagationMethod: {}
"#;
        assert!(refusal(password).contains("userPassword.propagationMethod"));
    }
}
