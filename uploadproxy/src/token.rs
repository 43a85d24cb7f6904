//! Upload tokens: the JWT that an `UploadTokenRequest` is answered with and that the upload
//! proxy checks before it lets bytes through. Same shape as CDI's (`pkg/token`): signed PS256
//! by issuer `cdi-apiserver`, valid for five minutes, with the private claims `operation`,
//! `name`, `namespace` and `resource` (a GroupVersionResource).
//!
//! CDI's API server signs clone tokens with the same key: its DataVolume webhook, having
//! checked that the creator may clone from the source namespace, puts one on the DataVolume
//! (operation `Clone`, the source PVC, and `params` naming the target), and the controller
//! clones only what such a token allows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrovirt_hostpath::persist::{Readers, write_file};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey, LineEnding};
use rsa::pkcs8::EncodePublicKey;
use serde::{Deserialize, Serialize};

/// The JWT issuer of upload tokens, as CDI's `UploadTokenIssuer`.
pub const ISSUER: &str = "cdi-apiserver";
/// How long an issued token is valid, as CDI's API server issues them.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// Clock skew tolerated when validating, as CDI's upload proxy.
pub const LEEWAY: Duration = Duration::from_secs(10);
/// The `operation` of an upload token.
pub const OPERATION_UPLOAD: &str = "Upload";
/// The `operation` of a clone token.
pub const OPERATION_CLONE: &str = "Clone";
/// The DataVolume annotation holding a clone token, as CDI's.
pub const CLONE_TOKEN_ANNOTATION: &str = "cdi.kubevirt.io/storage.clone.token";
/// The resource an upload token is for.
pub const RESOURCE_PVC: &str = "persistentvolumeclaims";
/// File name of the signing key in the key directory.
pub const KEY_FILE: &str = "upload-token-signing-key.pem";

const RSA_BITS: usize = 2048;

/// Kubernetes' GroupVersionResource, with its JSON field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub resource: String,
}

/// Every claim of an upload token: the registered ones and CDI's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadClaims {
    pub iss: String,
    /// Issued at, nbf and exp: seconds since the Unix epoch.
    pub iat: u64,
    pub nbf: u64,
    pub exp: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operation: String,
    /// The PVC's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default)]
    pub resource: GroupVersionResource,
    /// Further parameters: a clone token's `targetNamespace` and `targetName`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

/// Why a token was refused (or could not be issued).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("token has expired")]
    Expired,
    #[error("token is not valid yet")]
    NotYetValid,
    #[error("token signature does not verify")]
    BadSignature,
    #[error("token is malformed: {0}")]
    Malformed(String),
    #[error("token was not issued by {ISSUER:?}")]
    WrongIssuer,
    #[error("token is for operation {0:?} on {1:?}, not an upload to a PVC")]
    WrongOperation(String, String),
    #[error("token names no PVC (name and namespace are required)")]
    NoTarget,
    #[error("clone token is for {0}, not for this clone")]
    OtherClone(String),
    #[error("signing key {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("signing a token: {0}")]
    Sign(String),
}

impl TokenError {
    /// Whether the token is well-formed, signed and current but not for an upload: CDI's proxy
    /// answers these with 400 rather than 401.
    pub fn is_wrong_purpose(&self) -> bool {
        matches!(self, Self::WrongOperation(..) | Self::NoTarget)
    }
}

/// Issues upload tokens with a signing key that is generated once and then kept.
///
/// ```no_run
/// # fn main() -> Result<(), uploadproxy::token::TokenError> {
/// use uploadproxy::token::UploadTokenIssuer;
/// let issuer = UploadTokenIssuer::load_or_create("/var/lib/ferrovirt".as_ref())?;
/// let token = issuer.issue("default", "my-pvc")?; // the UploadTokenRequest's status.token
/// let validator = issuer.validator();              // or from issuer.public_key_pem()
/// assert_eq!(validator.validate(&token)?.name, "my-pvc");
/// # Ok(()) }
/// ```
pub struct UploadTokenIssuer {
    private_der: Vec<u8>,
    public_pem: String,
    key: EncodingKey,
}

impl std::fmt::Debug for UploadTokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadTokenIssuer").finish_non_exhaustive()
    }
}

impl UploadTokenIssuer {
    /// Loads the RSA key from `dir/upload-token-signing-key.pem` (PKCS#1 PEM), creating it
    /// (2048 bits, mode 0600, written atomically) when there is none.
    pub fn load_or_create(dir: &Path) -> Result<Self, TokenError> {
        let path = dir.join(KEY_FILE);
        let key_error = |reason: String| TokenError::Key {
            path: path.clone(),
            reason,
        };
        match std::fs::read_to_string(&path) {
            Ok(pem) => return Self::from_pem(&pem).map_err(|e| key_error(e.to_string())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(key_error(err.to_string())),
        }
        let issuer = Self::generate().map_err(|e| key_error(e.to_string()))?;
        write_file(&path, issuer.private_key_pem().as_bytes(), Readers::Owner)
            .map_err(|e| key_error(e.to_string()))?;
        tracing::info!(path = %path.display(), "created the upload token signing key");
        Ok(issuer)
    }

    /// A new 2048-bit key, kept nowhere (the webhook server keeps it in a Secret).
    pub fn generate() -> Result<Self, TokenError> {
        let key = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, RSA_BITS)
            .map_err(|e| TokenError::Sign(format!("generating a key: {e}")))?;
        let pem = key
            .to_pkcs1_pem(LineEnding::LF)
            .map_err(|e| TokenError::Sign(e.to_string()))?;
        Self::from_pem(&pem)
    }

    /// From a PKCS#1 (`RSA PRIVATE KEY`) PEM, as a Secret would hold it.
    pub fn from_pem(pem: &str) -> Result<Self, TokenError> {
        let key = rsa::RsaPrivateKey::from_pkcs1_pem(pem)
            .map_err(|e| TokenError::Malformed(format!("private key: {e}")))?;
        let private_der = key
            .to_pkcs1_der()
            .map_err(|e| TokenError::Malformed(e.to_string()))?
            .as_bytes()
            .to_vec();
        let public_pem = key
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| TokenError::Malformed(e.to_string()))?;
        Ok(Self {
            key: EncodingKey::from_rsa_der(&private_der),
            private_der,
            public_pem,
        })
    }

    /// The private key as PKCS#1 PEM (to store it in a Secret).
    pub fn private_key_pem(&self) -> String {
        rsa::RsaPrivateKey::from_pkcs1_der(&self.private_der)
            .and_then(|k| k.to_pkcs1_pem(LineEnding::LF).map(|p| p.to_string()))
            .expect("the key was parsed when the issuer was made")
    }

    /// The public key as SPKI PEM (`PUBLIC KEY`), what the upload proxy validates with.
    pub fn public_key_pem(&self) -> &str {
        &self.public_pem
    }

    /// A validator for the tokens this issuer signs.
    pub fn validator(&self) -> UploadTokenValidator {
        UploadTokenValidator::from_public_key_pem(&self.public_pem)
            .expect("the issuer's own public key parses")
    }

    /// A token allowing one upload to PVC `namespace/pvc_name`, valid for five minutes.
    pub fn issue(&self, namespace: &str, pvc_name: &str) -> Result<String, TokenError> {
        self.issue_at(namespace, pvc_name, SystemTime::now(), TOKEN_LIFETIME)
    }

    /// As [`Self::issue`], issued at `now` and valid for `lifetime` (for tests and tools).
    pub fn issue_at(
        &self,
        namespace: &str,
        pvc_name: &str,
        now: SystemTime,
        lifetime: Duration,
    ) -> Result<String, TokenError> {
        let now = unix_seconds(now);
        let claims = UploadClaims {
            iss: ISSUER.into(),
            iat: now,
            nbf: now,
            exp: now + lifetime.as_secs(),
            operation: OPERATION_UPLOAD.into(),
            name: pvc_name.into(),
            namespace: namespace.into(),
            resource: GroupVersionResource {
                group: String::new(),
                version: "v1".into(),
                resource: RESOURCE_PVC.into(),
            },
            params: BTreeMap::new(),
        };
        self.sign(&claims)
    }

    /// A token allowing a clone of PVC `source` (namespace, name) into `target`.
    pub fn issue_clone(
        &self,
        source: (&str, &str),
        target: (&str, &str),
    ) -> Result<String, TokenError> {
        let now = unix_seconds(SystemTime::now());
        let claims = UploadClaims {
            iss: ISSUER.into(),
            iat: now,
            nbf: now,
            exp: now + TOKEN_LIFETIME.as_secs(),
            operation: OPERATION_CLONE.into(),
            namespace: source.0.into(),
            name: source.1.into(),
            resource: GroupVersionResource {
                group: String::new(),
                version: "v1".into(),
                resource: RESOURCE_PVC.into(),
            },
            params: clone_params(target),
        };
        self.sign(&claims)
    }

    /// Signs arbitrary claims (tests use it to make wrong-purpose tokens, the fuzz target
    /// claims of any shape).
    pub fn sign(&self, claims: &impl Serialize) -> Result<String, TokenError> {
        jsonwebtoken::encode(&Header::new(Algorithm::PS256), claims, &self.key)
            .map_err(|e| TokenError::Sign(e.to_string()))
    }
}

/// Checks upload tokens against the issuer's public key.
#[derive(Clone)]
pub struct UploadTokenValidator {
    key: DecodingKey,
}

impl std::fmt::Debug for UploadTokenValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadTokenValidator")
            .finish_non_exhaustive()
    }
}

impl UploadTokenValidator {
    /// From the issuer's public key: SPKI (`PUBLIC KEY`) or PKCS#1 (`RSA PUBLIC KEY`) PEM.
    pub fn from_public_key_pem(pem: &str) -> Result<Self, TokenError> {
        let key = DecodingKey::from_rsa_pem(pem.as_bytes())
            .map_err(|e| TokenError::Malformed(format!("public key: {e}")))?;
        Ok(Self { key })
    }

    /// Checks the signature (PS256 only), issuer, validity window (with 10 s of leeway) and
    /// purpose; returns the claims of a token that allows an upload to the PVC they name.
    pub fn validate(&self, token: &str) -> Result<UploadClaims, TokenError> {
        let claims = self.decode(token, true)?;
        if claims.operation != OPERATION_UPLOAD || claims.resource.resource != RESOURCE_PVC {
            return Err(TokenError::WrongOperation(
                claims.operation,
                claims.resource.resource,
            ));
        }
        if claims.name.is_empty() || claims.namespace.is_empty() {
            return Err(TokenError::NoTarget);
        }
        Ok(claims)
    }

    /// Checks that `token` allows cloning PVC `source` into `target` (namespace, name each).
    ///
    /// Its expiry is not checked: the token is bound to one source and one target, both fixed
    /// in an immutable DataVolume spec, so it stays valid for as long as that DataVolume waits
    /// (CDI gets the same by replacing it with a long-lived one).
    pub fn validate_clone(
        &self,
        token: &str,
        source: (&str, &str),
        target: (&str, &str),
    ) -> Result<(), TokenError> {
        self.check_clone(token, source, target, false)
    }

    /// As [`Self::validate_clone`], and the token must not have expired: for a claim no
    /// DataVolume owns, whose clone request may be edited and whose name may be reused, a
    /// token is only good for its lifetime (as CDI's clone controller checks it).
    pub fn validate_unexpired_clone(
        &self,
        token: &str,
        source: (&str, &str),
        target: (&str, &str),
    ) -> Result<(), TokenError> {
        self.check_clone(token, source, target, true)
    }

    fn check_clone(
        &self,
        token: &str,
        source: (&str, &str),
        target: (&str, &str),
        check_expiry: bool,
    ) -> Result<(), TokenError> {
        let claims = self.decode(token, check_expiry)?;
        if claims.operation != OPERATION_CLONE || claims.resource.resource != RESOURCE_PVC {
            return Err(TokenError::WrongOperation(
                claims.operation,
                claims.resource.resource,
            ));
        }
        let same = claims.namespace == source.0
            && claims.name == source.1
            && claims.params == clone_params(target);
        if !same {
            return Err(TokenError::OtherClone(format!(
                "{}/{} into {}/{}",
                claims.namespace,
                claims.name,
                claims
                    .params
                    .get("targetNamespace")
                    .map_or("", String::as_str),
                claims.params.get("targetName").map_or("", String::as_str),
            )));
        }
        Ok(())
    }

    fn decode(&self, token: &str, check_expiry: bool) -> Result<UploadClaims, TokenError> {
        let mut validation = Validation::new(Algorithm::PS256);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_exp = check_expiry;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "nbf", "iss"]);
        validation.set_issuer(&[ISSUER]);
        let data =
            jsonwebtoken::decode::<UploadClaims>(token, &self.key, &validation).map_err(|err| {
                match err.kind() {
                    ErrorKind::ExpiredSignature => TokenError::Expired,
                    ErrorKind::ImmatureSignature => TokenError::NotYetValid,
                    ErrorKind::InvalidSignature => TokenError::BadSignature,
                    ErrorKind::InvalidIssuer => TokenError::WrongIssuer,
                    _ => TokenError::Malformed(err.to_string()),
                }
            })?;
        Ok(data.claims)
    }
}

fn clone_params(target: (&str, &str)) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("targetNamespace".to_string(), target.0.to_string()),
        ("targetName".to_string(), target.1.to_string()),
    ])
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer() -> (tempfile::TempDir, UploadTokenIssuer) {
        let dir = tempfile::tempdir().unwrap();
        let issuer = UploadTokenIssuer::load_or_create(dir.path()).unwrap();
        (dir, issuer)
    }

    #[test]
    fn key_is_created_private_and_reloaded() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, issuer) = issuer();
        let path = dir.path().join(KEY_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = UploadTokenIssuer::load_or_create(dir.path()).unwrap();
        assert_eq!(again.public_key_pem(), issuer.public_key_pem());
        let token = issuer.issue("ns", "pvc").unwrap();
        assert!(again.validator().validate(&token).is_ok());
    }

    #[test]
    fn claims_match_cdi() {
        let (_dir, issuer) = issuer();
        let token = issuer.issue("default", "disk").unwrap();
        let claims = issuer.validator().validate(&token).unwrap();
        assert_eq!(claims.iss, "cdi-apiserver");
        assert_eq!(claims.operation, "Upload");
        assert_eq!(
            (claims.namespace.as_str(), claims.name.as_str()),
            ("default", "disk")
        );
        assert_eq!(claims.exp - claims.iat, 300);
        assert_eq!(claims.nbf, claims.iat);
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.alg, Algorithm::PS256);
        // The payload's JSON field names, as CDI's Go structs serialise them.
        let payload: serde_json::Value =
            serde_json::from_slice(&base64_url_decode(token.split('.').nth(1).unwrap())).unwrap();
        assert_eq!(
            payload["resource"],
            serde_json::json!({"group": "", "version": "v1", "resource": "persistentvolumeclaims"})
        );
    }

    #[test]
    fn refusals_are_typed() {
        let (_dir, issuer) = issuer();
        let validator = issuer.validator();
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        let expired = issuer
            .issue_at("ns", "pvc", long_ago, TOKEN_LIFETIME)
            .unwrap();
        assert!(matches!(
            validator.validate(&expired),
            Err(TokenError::Expired)
        ));
        let later = SystemTime::now() + Duration::from_secs(3600);
        let early = issuer.issue_at("ns", "pvc", later, TOKEN_LIFETIME).unwrap();
        assert!(matches!(
            validator.validate(&early),
            Err(TokenError::NotYetValid)
        ));
        let (_other_dir, other) = issuer_pair();
        let forged = other.issue("ns", "pvc").unwrap();
        assert!(matches!(
            validator.validate(&forged),
            Err(TokenError::BadSignature)
        ));
        let now = unix_seconds(SystemTime::now());
        let mut claims = UploadClaims {
            iss: ISSUER.into(),
            iat: now,
            nbf: now,
            exp: now + 60,
            operation: "Clone".into(),
            name: "pvc".into(),
            namespace: "ns".into(),
            resource: GroupVersionResource {
                resource: RESOURCE_PVC.into(),
                ..Default::default()
            },
            params: BTreeMap::new(),
        };
        let clone = issuer.sign(&claims).unwrap();
        let err = validator.validate(&clone).unwrap_err();
        assert!(err.is_wrong_purpose(), "{err}");
        claims.operation = OPERATION_UPLOAD.into();
        claims.iss = "someone-else".into();
        let foreign = issuer.sign(&claims).unwrap();
        assert!(matches!(
            validator.validate(&foreign),
            Err(TokenError::WrongIssuer)
        ));
        assert!(matches!(
            validator.validate("not.a.token"),
            Err(TokenError::Malformed(_))
        ));
    }

    #[test]
    fn clone_tokens_bind_one_source_to_one_target() {
        let (_dir, issuer) = issuer();
        let validator = issuer.validator();
        let token = issuer
            .issue_clone(("src", "golden"), ("dst", "copy"))
            .unwrap();
        validator
            .validate_clone(&token, ("src", "golden"), ("dst", "copy"))
            .unwrap();
        let err = validator
            .validate_clone(&token, ("src", "golden"), ("dst", "other"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "clone token is for src/golden into dst/copy, not for this clone"
        );
        assert!(matches!(
            validator.validate_clone(&token, ("src", "secret"), ("dst", "copy")),
            Err(TokenError::OtherClone(_))
        ));
        // Neither kind of token passes for the other.
        assert!(validator.validate(&token).unwrap_err().is_wrong_purpose());
        let upload = issuer.issue("dst", "copy").unwrap();
        assert!(matches!(
            validator.validate_clone(&upload, ("src", "golden"), ("dst", "copy")),
            Err(TokenError::WrongOperation(..))
        ));
        let (_other_dir, other) = issuer_pair();
        let forged = other
            .issue_clone(("src", "golden"), ("dst", "copy"))
            .unwrap();
        assert!(matches!(
            validator.validate_clone(&forged, ("src", "golden"), ("dst", "copy")),
            Err(TokenError::BadSignature)
        ));
    }

    #[test]
    fn an_expired_clone_token_passes_only_where_expiry_is_not_checked() {
        let (_dir, issuer) = issuer();
        let validator = issuer.validator();
        let now = unix_seconds(SystemTime::now());
        let expired = issuer
            .sign(&UploadClaims {
                iss: ISSUER.into(),
                iat: now - 3600,
                nbf: now - 3600,
                exp: now - 3000,
                operation: OPERATION_CLONE.into(),
                namespace: "src".into(),
                name: "golden".into(),
                resource: GroupVersionResource {
                    group: String::new(),
                    version: "v1".into(),
                    resource: RESOURCE_PVC.into(),
                },
                params: clone_params(("dst", "copy")),
            })
            .unwrap();
        let (source, target) = (("src", "golden"), ("dst", "copy"));
        validator.validate_clone(&expired, source, target).unwrap();
        assert!(matches!(
            validator.validate_unexpired_clone(&expired, source, target),
            Err(TokenError::Expired)
        ));
        let fresh = issuer.issue_clone(source, target).unwrap();
        validator
            .validate_unexpired_clone(&fresh, source, target)
            .unwrap();
    }

    fn issuer_pair() -> (tempfile::TempDir, UploadTokenIssuer) {
        issuer()
    }

    fn base64_url_decode(text: &str) -> Vec<u8> {
        // A test-only decoder for the unpadded URL-safe alphabet.
        let value = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            _ => 63,
        };
        let mut out = Vec::new();
        let mut acc = 0u32;
        let mut bits = 0;
        for &c in text.as_bytes() {
            acc = (acc << 6) | value(c) as u32;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        out
    }
}
