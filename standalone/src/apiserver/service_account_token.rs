//! Service account tokens, as kube-apiserver's bound tokens: `TokenRequest` (the
//! `serviceaccounts/NAME/token` subresource, `kubectl create token`) issues them, and every
//! request may authenticate with one as `system:serviceaccount:NS:NAME`.
//!
//! A token is an ES256 JWT with Kubernetes' claims, signed with a key kept in the data dir. It
//! authenticates while it has not expired, names this server's audience, and its service
//! account still exists with the uid it was issued for (deleting the account revokes it).

use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::credentials::{CredentialsError, write_private};
use super::errors::ApiError;

/// The issuer and the one audience of this server's tokens: kube-apiserver's usual
/// `--service-account-issuer`, which is also its default API audience.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// The signing key (PKCS#8 PEM, P-256) under the data dir.
const KEY_FILE: &str = "service-account.key";

/// kube-apiserver's bounds on `spec.expirationSeconds`, and its default.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    aud: Vec<String>,
    exp: i64,
    iat: i64,
    nbf: i64,
    jti: String,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubernetesClaims,
}

#[derive(Debug, Serialize, Deserialize)]
struct KubernetesClaims {
    namespace: String,
    serviceaccount: ObjectClaim,
}

#[derive(Debug, Serialize, Deserialize)]
struct ObjectClaim {
    name: String,
    uid: String,
}

/// The service account a token was issued for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl ServiceAccountRef {
    /// Its user name, as RBAC subjects and `kubectl auth can-i --as` name it.
    pub fn user_name(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

/// What a TokenRequest asks for, validated as kube-apiserver validates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
}

impl TokenSpec {
    /// The spec of a TokenRequest body, with kube-apiserver's defaults; `name` is the
    /// service account's, for the error.
    pub fn from_request(body: &Value, name: &str) -> Result<TokenSpec, ApiError> {
        let spec = &body["spec"];
        let invalid = |message: String| ApiError::Invalid {
            kind: "TokenRequest.authentication.k8s.io".into(),
            name: name.into(),
            message,
        };
        let audiences = match &spec["audiences"] {
            Value::Null => vec![API_AUDIENCE.to_string()],
            Value::Array(items) if items.is_empty() => vec![API_AUDIENCE.to_string()],
            Value::Array(items) => items
                .iter()
                .map(|a| a.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid("spec.audiences: must be a list of strings".into()))?,
            _ => return Err(invalid("spec.audiences: must be a list of strings".into())),
        };
        let expiration_seconds = match &spec["expirationSeconds"] {
            Value::Null => DEFAULT_EXPIRATION_SECONDS,
            value => value.as_i64().ok_or_else(|| {
                invalid(format!(
                    "spec.expirationSeconds: Invalid value: {value}: must be an integer"
                ))
            })?,
        };
        if expiration_seconds < MIN_EXPIRATION_SECONDS {
            return Err(invalid(format!(
                "spec.expirationSeconds: Invalid value: {expiration_seconds}: may not specify a duration less than 10 minutes"
            )));
        }
        if expiration_seconds > MAX_EXPIRATION_SECONDS {
            return Err(invalid(format!(
                "spec.expirationSeconds: Invalid value: {expiration_seconds}: may not specify a duration larger than 2^32 seconds"
            )));
        }
        if !spec["boundObjectRef"].is_null() {
            return Err(invalid(
                "spec.boundObjectRef: Unsupported value: tokens bound to a Pod, Secret or Node are not issued by this server".into(),
            ));
        }
        Ok(TokenSpec {
            audiences,
            expiration_seconds,
        })
    }
}

pub struct ServiceAccountTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl ServiceAccountTokens {
    /// Loads the signing key from `dir`, creating it the first time.
    pub fn load_or_create(dir: &Path) -> Result<Self, CredentialsError> {
        let path = dir.join(KEY_FILE);
        let pem = match std::fs::read_to_string(&path) {
            Ok(pem) => pem,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let pem = rcgen::KeyPair::generate()?.serialize_pem();
                write_private(&path, &pem)?;
                pem
            }
            Err(source) => return Err(CredentialsError::Read { path, source }),
        };
        let load = |message: String| CredentialsError::Load {
            path: path.clone(),
            message,
        };
        let key = rcgen::KeyPair::from_pem(&pem).map_err(|e| load(e.to_string()))?;
        Ok(ServiceAccountTokens {
            encoding: EncodingKey::from_ec_pem(pem.as_bytes()).map_err(|e| load(e.to_string()))?,
            decoding: DecodingKey::from_ec_pem(key.public_key_pem().as_bytes())
                .map_err(|e| load(e.to_string()))?,
        })
    }

    /// Answers a TokenRequest for `account`: the request with its spec defaulted and its
    /// status holding the token.
    pub fn issue(&self, account: &ServiceAccountRef, spec: &TokenSpec) -> Result<Value, ApiError> {
        let now = jiff::Timestamp::now();
        let issued = now.as_second();
        let expires = issued + spec.expiration_seconds;
        let claims = Claims {
            iss: API_AUDIENCE.into(),
            sub: account.user_name(),
            aud: spec.audiences.clone(),
            exp: expires,
            iat: issued,
            nbf: issued,
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: KubernetesClaims {
                namespace: account.namespace.clone(),
                serviceaccount: ObjectClaim {
                    name: account.name.clone(),
                    uid: account.uid.clone(),
                },
            },
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, &self.encoding)
            .map_err(ApiError::internal)?;
        let expiration = api::meta_time::rfc3339(
            jiff::Timestamp::from_second(expires).map_err(ApiError::internal)?,
        );
        Ok(json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {
                "name": account.name,
                "namespace": account.namespace,
                "creationTimestamp": super::object::now(),
            },
            "spec": {
                "audiences": spec.audiences,
                "expirationSeconds": spec.expiration_seconds,
            },
            "status": {"token": token, "expirationTimestamp": expiration},
        }))
    }

    /// The service account of a token this server issued for its own audience, if it is
    /// one and has not expired; whether the account still exists is the caller's check.
    pub fn verify(&self, token: &str) -> Option<ServiceAccountRef> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_audience(&[API_AUDIENCE]);
        validation.set_issuer(&[API_AUDIENCE]);
        validation.leeway = 0;
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .ok()?
            .claims;
        let account = ServiceAccountRef {
            namespace: claims.kubernetes.namespace,
            name: claims.kubernetes.serviceaccount.name,
            uid: claims.kubernetes.serviceaccount.uid,
        };
        (claims.sub == account.user_name()).then_some(account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account() -> ServiceAccountRef {
        ServiceAccountRef {
            namespace: "ns".into(),
            name: "robot".into(),
            uid: "u-1".into(),
        }
    }

    fn tokens(dir: &Path) -> ServiceAccountTokens {
        ServiceAccountTokens::load_or_create(dir).unwrap()
    }

    #[test]
    fn an_issued_token_names_its_account_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let spec = TokenSpec::from_request(&json!({}), "robot").unwrap();
        assert_eq!(spec.audiences, [API_AUDIENCE]);
        assert_eq!(spec.expiration_seconds, 3600);
        let answer = tokens(dir.path()).issue(&account(), &spec).unwrap();
        let token = answer["status"]["token"].as_str().unwrap();
        assert!(answer["status"]["expirationTimestamp"].is_string());
        // The key is kept: a new server instance accepts the token.
        assert_eq!(tokens(dir.path()).verify(token), Some(account()));
        // Another server's key does not.
        let other = tempfile::tempdir().unwrap();
        assert_eq!(tokens(other.path()).verify(token), None);
        assert_eq!(tokens(dir.path()).verify("not-a-jwt"), None);
    }

    #[test]
    fn a_token_for_another_audience_does_not_authenticate_here() {
        let dir = tempfile::tempdir().unwrap();
        let spec =
            TokenSpec::from_request(&json!({"spec": {"audiences": ["vault"]}}), "r").unwrap();
        let answer = tokens(dir.path()).issue(&account(), &spec).unwrap();
        assert_eq!(answer["spec"]["audiences"], json!(["vault"]));
        assert_eq!(
            tokens(dir.path()).verify(answer["status"]["token"].as_str().unwrap()),
            None
        );
    }

    #[test]
    fn expirations_are_bounded_as_kube_apiservers() {
        let err = |body: Value| {
            TokenSpec::from_request(&body, "robot")
                .unwrap_err()
                .to_string()
        };
        let short = err(json!({"spec": {"expirationSeconds": 60}}));
        assert!(
            short.contains("less than 10 minutes") && short.contains("\"robot\" is invalid"),
            "{short}"
        );
        assert!(err(json!({"spec": {"expirationSeconds": 1_i64 << 33}})).contains("2^32"));
        assert!(err(json!({"spec": {"expirationSeconds": "soon"}})).contains("integer"));
        assert!(
            err(json!({"spec": {"boundObjectRef": {"kind": "Pod", "name": "p"}}}))
                .contains("boundObjectRef")
        );
        let spec =
            TokenSpec::from_request(&json!({"spec": {"expirationSeconds": 600}}), "r").unwrap();
        assert_eq!(spec.expiration_seconds, 600);
    }
}
