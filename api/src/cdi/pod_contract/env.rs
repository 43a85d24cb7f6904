//! The environment of the worker pods, by CDI's names, as one typed struct per pod: the
//! controller turns a struct into the pod's `env` ([`ImporterEnv::to_env`], ...), the pod
//! reads the same struct back from its process environment ([`ImporterEnv::from_env`]). A
//! variable is named in one place, here, and a round-trip test holds both sides together.

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};

/// What every worker reads.
pub const OWNER_UID: &str = "OWNER_UID";
pub const FILESYSTEM_OVERHEAD: &str = "FILESYSTEM_OVERHEAD";
pub const PREALLOCATION: &str = "PREALLOCATION";

/// The importer's (`ferrovirt importer`).
pub mod importer {
    pub const SOURCE: &str = "IMPORTER_SOURCE";
    pub const ENDPOINT: &str = "IMPORTER_ENDPOINT";
    pub const CONTENT_TYPE: &str = "IMPORTER_CONTENTTYPE";
    pub const IMAGE_SIZE: &str = "IMPORTER_IMAGE_SIZE";
    pub const INSECURE_TLS: &str = "INSECURE_TLS";
    pub const METRICS_ADDRESS: &str = "IMPORTER_METRICS_ADDR";
    pub const CHECKSUM: &str = "IMPORTER_CHECKSUM";
    pub const REGISTRY_ARCHITECTURE: &str = "IMPORTER_REGISTRY_IMAGE_ARCHITECTURE";
    pub const ACCESS_KEY_ID: &str = "IMPORTER_ACCESS_KEY_ID";
    pub const SECRET_KEY: &str = "IMPORTER_SECRET_KEY";
    pub const CERT_DIR: &str = "IMPORTER_CERT_DIR";
    /// Followed by 0, 1, ...: one `Name: value` header each.
    pub const EXTRA_HEADER_PREFIX: &str = "IMPORTER_EXTRA_HEADER_";
    /// The keys of the Secret a source's `secretRef` names.
    pub const ACCESS_KEY_ID_KEY: &str = "accessKeyId";
    pub const SECRET_KEY_KEY: &str = "secretKey";
}

/// The upload server's (`ferrovirt upload-server`).
pub mod upload_server {
    pub const TLS_KEY_FILE: &str = "TLS_KEY_FILE";
    pub const TLS_CERT_FILE: &str = "TLS_CERT_FILE";
    pub const CLIENT_CERT_FILE: &str = "CLIENT_CERT_FILE";
    pub const CLIENT_NAME: &str = "CLIENT_NAME";
    pub const IMAGE_SIZE: &str = "UPLOAD_IMAGE_SIZE";
    pub const LISTEN_PORT: &str = "LISTEN_PORT";
}

/// A host-assisted clone's source (`ferrovirt clone-source`).
pub mod clone_source {
    pub const CLIENT_KEY: &str = "CLIENT_KEY";
    pub const CLIENT_CERT: &str = "CLIENT_CERT";
    pub const SERVER_CA_CERT: &str = "SERVER_CA_CERT";
    pub const UPLOAD_URL: &str = "UPLOAD_URL";
    pub const METRICS_ADDRESS: &str = "CLONER_METRICS_ADDR";
    /// Beyond CDI: the address (`ip:port`) UPLOAD_URL's host is reached at, keeping the name
    /// for TLS; set where Services have no cluster DNS (one machine).
    pub const UPLOAD_SERVER_ADDRESS: &str = "FERROVIRT_UPLOAD_SERVER_ADDRESS";
}

/// A variable a pod cannot run without, or one whose value it cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("{name} has a wrong value {value:?}: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: &'static str,
    },
}

/// A pod's variables as the pod reads them: `None` for a variable that is unset or empty.
pub trait Lookup {
    fn var(&self, name: &str) -> Option<String>;

    /// The names of the set variables that start with `prefix`, sorted.
    fn names_with_prefix(&self, prefix: &str) -> Vec<String>;
}

/// The process environment: what a pod sees.
pub struct ProcessEnv;

impl Lookup for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    fn names_with_prefix(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = std::env::vars()
            .map(|(name, _)| name)
            .filter(|name| name.starts_with(prefix))
            .collect();
        names.sort();
        names
    }
}

/// The variables of a container spec, read as a pod would see them (values of Secret
/// references are not known and read as unset).
impl Lookup for [EnvVar] {
    fn var(&self, name: &str) -> Option<String> {
        self.iter()
            .find(|v| v.name == name)
            .and_then(|v| v.value.clone())
            .filter(|v| !v.is_empty())
    }

    fn names_with_prefix(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .iter()
            .filter(|v| v.name.starts_with(prefix))
            .map(|v| v.name.clone())
            .collect();
        names.sort();
        names
    }
}

fn required(env: &(impl Lookup + ?Sized), name: &'static str) -> Result<String, EnvError> {
    env.var(name).ok_or(EnvError::Missing(name))
}

/// A boolean as Go's `strconv.ParseBool` reads it (CDI's pods are Go).
fn boolean(env: &(impl Lookup + ?Sized), name: &'static str) -> Result<bool, EnvError> {
    match env.var(name) {
        None => Ok(false),
        Some(value) => match value.as_str() {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
            _ => Err(EnvError::Invalid {
                name,
                value,
                reason: "not a boolean",
            }),
        },
    }
}

fn text(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn optional(vars: &mut Vec<EnvVar>, name: &str, value: &Option<String>) {
    if let Some(value) = value {
        vars.push(text(name, value.clone()));
    }
}

fn secret_key(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: None,
            }),
            ..Default::default()
        }),
    }
}

/// What every worker pod is told about the volume it fills.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeEnv {
    /// The DataVolume's uid (the `ownerUID` label of the progress metric).
    pub owner_uid: String,
    /// The requested size (a quantity), read by importers and upload servers.
    pub image_size: Option<String>,
    /// The fraction of a filesystem volume kept for the filesystem (`"0"` on a block
    /// volume), as text.
    pub filesystem_overhead: Option<String>,
    pub preallocation: bool,
}

impl VolumeEnv {
    /// Its variables, the size under `image_size_name` (the pod's name for it, if it has one).
    fn push(&self, vars: &mut Vec<EnvVar>, image_size_name: Option<&str>) {
        vars.push(text(OWNER_UID, self.owner_uid.clone()));
        if let Some(name) = image_size_name {
            optional(vars, name, &self.image_size);
        }
        optional(vars, FILESYSTEM_OVERHEAD, &self.filesystem_overhead);
        vars.push(text(PREALLOCATION, self.preallocation.to_string()));
    }

    fn read(env: &(impl Lookup + ?Sized), image_size_name: Option<&str>) -> Result<Self, EnvError> {
        Ok(Self {
            owner_uid: env.var(OWNER_UID).unwrap_or_default(),
            image_size: image_size_name.and_then(|name| env.var(name)),
            filesystem_overhead: env.var(FILESYSTEM_OVERHEAD),
            preallocation: boolean(env, PREALLOCATION)?,
        })
    }
}

impl VolumeEnv {
    /// The size of the disk image on a filesystem volume, as CDI sizes it: the requested
    /// size less the filesystem overhead, aligned down to 1 MiB. `None` when no size was
    /// given, and on a block volume, which keeps its own size.
    pub fn filesystem_image_size(&self, block: bool) -> Result<Option<u64>, EnvError> {
        const ALIGN: u64 = 1 << 20;
        let Some(text) = &self.image_size else {
            return Ok(None);
        };
        let requested = crate::quantity::parse_bytes(text).map_err(|e| EnvError::Invalid {
            name: "the image size",
            value: text.clone(),
            reason: e.reason,
        })?;
        if block {
            return Ok(None);
        }
        let overhead = match &self.filesystem_overhead {
            None => 0.0,
            Some(text) => text
                .parse::<f64>()
                .ok()
                .filter(|o| (0.0..1.0).contains(o))
                .ok_or_else(|| EnvError::Invalid {
                    name: FILESYSTEM_OVERHEAD,
                    value: text.clone(),
                    reason: "not a fraction in [0, 1)",
                })?,
        };
        let usable = ((1.0 - overhead) * requested as f64).floor() as u64;
        Ok(Some(usable / ALIGN * ALIGN))
    }
}

/// The credentials of an import's source.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceCredentials {
    /// The keys `accessKeyId` and `secretKey` of a Secret: what the controller writes.
    Secret(String),
    /// Their values: what the pod reads.
    Values {
        access_key_id: String,
        secret_key: String,
    },
}

/// The importer pod's environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImporterEnv {
    pub volume: VolumeEnv,
    /// `http`, `registry`, `s3` or `none` (a blank image); `http` when unset.
    pub source: Option<String>,
    pub endpoint: Option<String>,
    /// `kubevirt` or `archive`.
    pub content_type: Option<String>,
    pub insecure_tls: bool,
    pub metrics_address: Option<String>,
    /// `algorithm:hex`.
    pub checksum: Option<String>,
    pub registry_architecture: Option<String>,
    pub credentials: Option<SourceCredentials>,
    /// Where the source's CA bundle (a ConfigMap) is mounted.
    pub cert_dir: Option<String>,
    /// `Name: value` headers sent to the source.
    pub extra_headers: Vec<String>,
}

impl ImporterEnv {
    pub fn to_env(&self) -> Vec<EnvVar> {
        use importer::*;
        let mut vars = Vec::new();
        optional(&mut vars, SOURCE, &self.source);
        optional(&mut vars, ENDPOINT, &self.endpoint);
        optional(&mut vars, CONTENT_TYPE, &self.content_type);
        self.volume.push(&mut vars, Some(IMAGE_SIZE));
        vars.push(text(INSECURE_TLS, self.insecure_tls.to_string()));
        optional(&mut vars, METRICS_ADDRESS, &self.metrics_address);
        optional(&mut vars, CHECKSUM, &self.checksum);
        optional(
            &mut vars,
            REGISTRY_ARCHITECTURE,
            &self.registry_architecture,
        );
        match &self.credentials {
            Some(SourceCredentials::Secret(secret)) => {
                vars.push(secret_key(ACCESS_KEY_ID, secret, ACCESS_KEY_ID_KEY));
                vars.push(secret_key(SECRET_KEY, secret, SECRET_KEY_KEY));
            }
            Some(SourceCredentials::Values {
                access_key_id,
                secret_key,
            }) => {
                vars.push(text(ACCESS_KEY_ID, access_key_id.clone()));
                vars.push(text(SECRET_KEY, secret_key.clone()));
            }
            None => {}
        }
        optional(&mut vars, CERT_DIR, &self.cert_dir);
        for (i, header) in self.extra_headers.iter().enumerate() {
            vars.push(text(&format!("{EXTRA_HEADER_PREFIX}{i}"), header.clone()));
        }
        vars
    }

    pub fn from_env(env: &(impl Lookup + ?Sized)) -> Result<Self, EnvError> {
        use importer::*;
        let credentials = match (env.var(ACCESS_KEY_ID), env.var(SECRET_KEY)) {
            (Some(access_key_id), Some(secret_key)) => Some(SourceCredentials::Values {
                access_key_id,
                secret_key,
            }),
            _ => None,
        };
        // Every variable of the prefix, as CDI's importer reads them: the numbered ones in
        // the order they were given (_0, _1, ... _10), then any others by name.
        let mut headers: Vec<(String, String)> = env
            .names_with_prefix(EXTRA_HEADER_PREFIX)
            .into_iter()
            .filter_map(|name| {
                let value = env.var(&name)?;
                Some((name[EXTRA_HEADER_PREFIX.len()..].to_string(), value))
            })
            .collect();
        headers.sort_by_key(|(suffix, _)| {
            let index: Option<u64> = suffix.parse().ok();
            (index.is_none(), index, suffix.clone())
        });
        Ok(Self {
            volume: VolumeEnv::read(env, Some(IMAGE_SIZE))?,
            source: env.var(SOURCE),
            endpoint: env.var(ENDPOINT),
            content_type: env.var(CONTENT_TYPE),
            // CDI ignores a value it cannot parse here.
            insecure_tls: boolean(env, INSECURE_TLS).unwrap_or(false),
            metrics_address: env.var(METRICS_ADDRESS),
            checksum: env.var(CHECKSUM),
            registry_architecture: env.var(REGISTRY_ARCHITECTURE),
            credentials,
            cert_dir: env.var(CERT_DIR),
            extra_headers: headers.into_iter().map(|(_, header)| header).collect(),
        })
    }
}

/// The upload server pod's environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UploadServerEnv {
    pub volume: VolumeEnv,
    pub tls_key_file: String,
    pub tls_cert_file: String,
    /// The CA bundle the clients' certificates chain to.
    pub client_cert_file: String,
    /// The common name a client certificate must carry.
    pub client_name: Option<String>,
    pub listen_port: Option<String>,
}

impl UploadServerEnv {
    pub fn to_env(&self) -> Vec<EnvVar> {
        use upload_server::*;
        let mut vars = vec![
            text(TLS_KEY_FILE, self.tls_key_file.clone()),
            text(TLS_CERT_FILE, self.tls_cert_file.clone()),
            text(CLIENT_CERT_FILE, self.client_cert_file.clone()),
        ];
        optional(&mut vars, CLIENT_NAME, &self.client_name);
        self.volume.push(&mut vars, Some(IMAGE_SIZE));
        optional(&mut vars, LISTEN_PORT, &self.listen_port);
        vars
    }

    pub fn from_env(env: &(impl Lookup + ?Sized)) -> Result<Self, EnvError> {
        use upload_server::*;
        Ok(Self {
            volume: VolumeEnv::read(env, Some(IMAGE_SIZE))?,
            tls_key_file: required(env, TLS_KEY_FILE)?,
            tls_cert_file: required(env, TLS_CERT_FILE)?,
            client_cert_file: required(env, CLIENT_CERT_FILE)?,
            client_name: env.var(CLIENT_NAME),
            listen_port: env.var(LISTEN_PORT),
        })
    }
}

/// A host-assisted clone's source pod's environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CloneSourceEnv {
    /// The owner and preallocation (a clone source has no image size of its own).
    pub volume: VolumeEnv,
    /// PEM; issued when the pod is created.
    pub client_key: String,
    pub client_cert: String,
    pub server_ca_cert: String,
    pub upload_url: String,
    pub metrics_address: Option<String>,
    /// See [`clone_source::UPLOAD_SERVER_ADDRESS`].
    pub upload_server_address: Option<String>,
}

impl CloneSourceEnv {
    pub fn to_env(&self) -> Vec<EnvVar> {
        use clone_source::*;
        let mut vars = vec![
            text(CLIENT_KEY, self.client_key.clone()),
            text(CLIENT_CERT, self.client_cert.clone()),
            text(SERVER_CA_CERT, self.server_ca_cert.clone()),
            text(UPLOAD_URL, self.upload_url.clone()),
        ];
        self.volume.push(&mut vars, None);
        optional(&mut vars, METRICS_ADDRESS, &self.metrics_address);
        optional(
            &mut vars,
            UPLOAD_SERVER_ADDRESS,
            &self.upload_server_address,
        );
        vars
    }

    pub fn from_env(env: &(impl Lookup + ?Sized)) -> Result<Self, EnvError> {
        use clone_source::*;
        Ok(Self {
            volume: VolumeEnv::read(env, None)?,
            client_key: required(env, CLIENT_KEY)?,
            client_cert: required(env, CLIENT_CERT)?,
            server_ca_cert: required(env, SERVER_CA_CERT)?,
            upload_url: required(env, UPLOAD_URL)?,
            metrics_address: env.var(METRICS_ADDRESS),
            upload_server_address: env.var(UPLOAD_SERVER_ADDRESS),
        })
    }

    /// Where the clone's certificates go once issued (they are not known when the pod is
    /// planned).
    pub fn set_credentials(vars: &mut [EnvVar], cert_pem: &str, key_pem: &str, ca_pem: &str) {
        use clone_source::*;
        for var in vars {
            let value = match var.name.as_str() {
                CLIENT_CERT => cert_pem,
                CLIENT_KEY => key_pem,
                SERVER_CA_CERT => ca_pem,
                _ => continue,
            };
            var.value = Some(value.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume() -> VolumeEnv {
        VolumeEnv {
            owner_uid: "uid-dv".into(),
            image_size: Some("1Gi".into()),
            filesystem_overhead: Some("0.055".into()),
            preallocation: true,
        }
    }

    #[test]
    fn what_the_controller_writes_the_importer_reads_back() {
        let written = ImporterEnv {
            volume: volume(),
            source: Some("s3".into()),
            endpoint: Some("s3://bucket/disk.qcow2".into()),
            content_type: Some("kubevirt".into()),
            insecure_tls: true,
            metrics_address: Some("0.0.0.0:8443".into()),
            checksum: Some("sha256:00ff".into()),
            registry_architecture: Some("arm64".into()),
            credentials: Some(SourceCredentials::Values {
                access_key_id: "id".into(),
                secret_key: "key".into(),
            }),
            cert_dir: Some("/certs".into()),
            extra_headers: (0..12).map(|i| format!("X-Header-{i}: {i}")).collect(),
        };
        let vars = written.to_env();
        assert_eq!(ImporterEnv::from_env(vars.as_slice()), Ok(written));
        assert!(
            vars.iter()
                .all(|v| v.name != "IMPORTER_IMAGE_SIZE" || v.value.as_deref() == Some("1Gi")),
            "CDI's names: {vars:?}"
        );
    }

    #[test]
    fn every_extra_header_variable_is_read_numbered_first() {
        let var = |name: &str, value: &str| EnvVar {
            name: name.into(),
            value: Some(value.into()),
            ..Default::default()
        };
        let vars = [
            var("IMPORTER_EXTRA_HEADER_b", "B: 1"),
            var("IMPORTER_EXTRA_HEADER_10", "Ten: 1"),
            var("IMPORTER_EXTRA_HEADER_a", "A: 1"),
            var("IMPORTER_EXTRA_HEADER_2", "Two: 1"),
        ];
        let read = ImporterEnv::from_env(vars.as_slice()).unwrap();
        assert_eq!(read.extra_headers, ["Two: 1", "Ten: 1", "A: 1", "B: 1"]);
    }

    #[test]
    fn source_credentials_come_from_the_secret_by_cdis_keys() {
        let env = ImporterEnv {
            credentials: Some(SourceCredentials::Secret("s3-creds".into())),
            ..Default::default()
        };
        let vars = env.to_env();
        let from = |name: &str| {
            let var = vars.iter().find(|v| v.name == name).expect(name);
            let selector = var
                .value_from
                .as_ref()
                .and_then(|s| s.secret_key_ref.as_ref());
            selector.map(|s| (s.name.clone(), s.key.clone()))
        };
        assert_eq!(
            from(importer::ACCESS_KEY_ID),
            Some(("s3-creds".into(), "accessKeyId".into()))
        );
        assert_eq!(
            from(importer::SECRET_KEY),
            Some(("s3-creds".into(), "secretKey".into()))
        );
        // The pod sees no values in the spec: no credentials.
        assert_eq!(
            ImporterEnv::from_env(vars.as_slice()).unwrap().credentials,
            None
        );
    }

    #[test]
    fn the_upload_server_and_clone_source_read_back_what_was_written() {
        let server = UploadServerEnv {
            volume: volume(),
            tls_key_file: "/etc/tls/tls.key".into(),
            tls_cert_file: "/etc/tls/tls.crt".into(),
            client_cert_file: "/etc/client/ca-bundle.crt".into(),
            client_name: Some("ns/golden-ns/disk".into()),
            listen_port: Some("8443".into()),
        };
        assert_eq!(
            UploadServerEnv::from_env(server.to_env().as_slice()),
            Ok(server)
        );
        let source = CloneSourceEnv {
            volume: VolumeEnv {
                image_size: None,
                filesystem_overhead: None,
                ..volume()
            },
            client_key: "key".into(),
            client_cert: "cert".into(),
            server_ca_cert: "ca".into(),
            upload_url: "https://cdi-upload-disk.ns.svc/v1beta1/upload".into(),
            metrics_address: Some("0.0.0.0:8443".into()),
            upload_server_address: Some("127.1.0.3:8443".into()),
        };
        assert_eq!(
            CloneSourceEnv::from_env(source.to_env().as_slice()),
            Ok(source)
        );
    }

    #[test]
    fn the_image_is_the_request_less_the_overhead_in_whole_mebibytes() {
        let volume = volume();
        // 1 GiB less 5.5 %: 1014686023.68 bytes, 967 MiB of it whole.
        assert_eq!(volume.filesystem_image_size(false), Ok(Some(967 << 20)));
        assert_eq!(
            volume.filesystem_image_size(true),
            Ok(None),
            "a device keeps its size"
        );
        let no_size = VolumeEnv::default();
        assert_eq!(no_size.filesystem_image_size(false), Ok(None));
        let wrong = VolumeEnv {
            filesystem_overhead: Some("1.5".into()),
            ..volume.clone()
        };
        assert_eq!(
            wrong.filesystem_image_size(false).unwrap_err().to_string(),
            "FILESYSTEM_OVERHEAD has a wrong value \"1.5\": not a fraction in [0, 1)"
        );
        let wrong = VolumeEnv {
            image_size: Some("lots".into()),
            ..volume
        };
        assert_eq!(
            wrong.filesystem_image_size(false).unwrap_err().to_string(),
            "the image size has a wrong value \"lots\": no number"
        );
    }

    #[test]
    fn a_missing_or_wrong_variable_is_named() {
        let vars = [text(upload_server::TLS_CERT_FILE, "/tls.crt")];
        assert_eq!(
            UploadServerEnv::from_env(vars.as_slice())
                .unwrap_err()
                .to_string(),
            "TLS_KEY_FILE is required"
        );
        let vars = [text(PREALLOCATION, "yes")];
        assert_eq!(
            ImporterEnv::from_env(vars.as_slice())
                .unwrap_err()
                .to_string(),
            "PREALLOCATION has a wrong value \"yes\": not a boolean"
        );
        // CDI reads a wrong INSECURE_TLS as false.
        let vars = [text(importer::INSECURE_TLS, "maybe")];
        assert!(!ImporterEnv::from_env(vars.as_slice()).unwrap().insecure_tls);
    }
}
