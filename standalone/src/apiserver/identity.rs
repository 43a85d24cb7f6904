//! Who is asking and what they ask to do: the identity of a request (a user and its groups,
//! as Kubernetes' `user.Info`) and the attributes an authorizer decides on. Apart from the
//! authorizer (`authz`), which reads RBAC objects, so that what only names a user (admission,
//! authentication) does not depend on the objects.

use serde_json::Value;

use super::errors::ApiError;

/// The group whose members may do anything, as in Kubernetes.
pub const MASTERS: &str = "system:masters";
/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The name the admin token authenticates as.
pub const ADMIN: &str = "ferrovirt-admin";
/// The user-name prefix of a service account, as Kubernetes names them.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// An authenticated user, as Kubernetes' `user.Info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The holder of the admin token.
    pub fn admin() -> Self {
        UserInfo {
            name: ADMIN.into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
        }
    }

    /// The user an impersonating request acts as (`Impersonate-User`, `Impersonate-Group`):
    /// its groups plus those Kubernetes adds (authenticated; a service account's own).
    pub fn impersonated(name: &str, groups: Vec<String>) -> Self {
        let mut all = groups;
        if let Some(namespace) = name
            .strip_prefix(SERVICE_ACCOUNT_PREFIX)
            .and_then(|rest| rest.split_once(':').map(|(ns, _)| ns))
        {
            all.push("system:serviceaccounts".into());
            all.push(format!("system:serviceaccounts:{namespace}"));
        }
        all.push(AUTHENTICATED.into());
        all.dedup();
        UserInfo {
            name: name.into(),
            groups: all,
        }
    }

    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }
}

/// What a request does, as Kubernetes' authorization attributes (and a SubjectAccessReview's
/// `resourceAttributes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl ResourceAttributes {
    /// From a SubjectAccessReview's `spec.resourceAttributes`.
    pub fn from_review(attributes: &Value) -> Self {
        let text = |key: &str| attributes[key].as_str().unwrap_or_default().to_string();
        ResourceAttributes {
            verb: text("verb"),
            group: text("group"),
            resource: text("resource"),
            subresource: text("subresource"),
            namespace: text("namespace"),
            name: text("name"),
        }
    }

    /// The 403 kube-apiserver answers with when these attributes are denied to `user`.
    pub fn forbidden(&self, user: &UserInfo) -> ApiError {
        let mut resource = self.resource.clone();
        if !self.group.is_empty() {
            resource = format!("{resource}.{}", self.group);
        }
        let object = if self.name.is_empty() {
            resource
        } else {
            format!("{resource} \"{}\"", self.name)
        };
        let mut what = self.resource.clone();
        if !self.subresource.is_empty() {
            what = format!("{what}/{}", self.subresource);
        }
        let scope = if self.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{}\"", self.namespace)
        };
        ApiError::Forbidden(format!(
            "{object} is forbidden: User \"{}\" cannot {} resource \"{what}\" in API group \"{}\" {scope}",
            user.name, self.verb, self.group
        ))
    }
}
