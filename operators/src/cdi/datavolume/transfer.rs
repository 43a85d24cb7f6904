//! What fills a DataVolume's PVC, as decided from its source: an importer pod, an upload
//! server, a CSI clone or a host-assisted clone.

use api::cdi::datavolume::{DataVolumeSource, import_source};

/// What fills a DataVolume's PVC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// An importer pod: http, s3, registry, or a blank image.
    Import(ImportSource),
    /// An upload server pod and its service.
    Upload,
    /// A CSI clone of a PVC, or a restore of a VolumeSnapshot, of the same storage class.
    CsiClone {
        /// The source's namespace.
        namespace: String,
        /// The source PVC's (or VolumeSnapshot's) name.
        name: String,
        /// Whether the source is a VolumeSnapshot.
        snapshot: bool,
    },
    /// A host-assisted clone of a PVC that a CSI clone cannot copy (another storage class):
    /// an upload server on the target and a source pod streaming the source to it.
    HostClone {
        /// The source's namespace.
        namespace: String,
        /// The source PVC's (or VolumeSnapshot's) name.
        name: String,
        /// Whether the source is a VolumeSnapshot: it is restored into a temporary claim of
        /// its own class first, and that claim is copied.
        snapshot: bool,
    },
    /// A source this controller does not handle (yet); the message says which.
    Unsupported(String),
}

/// The importer pod's view of a source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSource {
    /// `http`, `s3`, `registry`, or `none` for a blank image.
    pub kind: &'static str,
    /// The URL, when there is one.
    pub endpoint: Option<String>,
    /// A Secret with `accessKeyId` and `secretKey`.
    pub secret_ref: Option<String>,
    /// A ConfigMap with CA certificates.
    pub cert_config_map: Option<String>,
    /// `algorithm:hex` of the source bytes.
    pub checksum: Option<String>,
    /// Extra `Name: value` headers.
    pub extra_headers: Vec<String>,
    /// Secrets holding one extra header each.
    pub secret_extra_headers: Vec<String>,
    /// The registry image's architecture.
    pub architecture: Option<String>,
    /// Whether the server's TLS certificate is not verified (an http source's
    /// `insecureSkipVerify`).
    pub insecure_skip_verify: bool,
}

impl Transfer {
    /// What fills a PVC from `source` (after a `sourceRef` was resolved).
    pub fn from_source(source: &DataVolumeSource) -> Transfer {
        let kinds = source.kinds();
        if kinds.len() != 1 {
            return Transfer::Unsupported(format!(
                "exactly one source is required, found {}",
                if kinds.is_empty() {
                    "none".to_string()
                } else {
                    kinds.join(", ")
                }
            ));
        }
        if let Some(http) = &source.http {
            return Transfer::Import(ImportSource {
                kind: import_source::HTTP,
                endpoint: Some(http.url.clone()),
                secret_ref: http.secret_ref.clone(),
                cert_config_map: http.cert_config_map.clone(),
                checksum: http.checksum.clone(),
                extra_headers: http.extra_headers.clone().unwrap_or_default(),
                secret_extra_headers: http.secret_extra_headers.clone().unwrap_or_default(),
                architecture: None,
                insecure_skip_verify: http.insecure_skip_verify == Some(true),
            });
        }
        if let Some(s3) = &source.s3 {
            return Transfer::Import(ImportSource {
                kind: import_source::S3,
                endpoint: Some(s3.url.clone()),
                secret_ref: s3.secret_ref.clone(),
                cert_config_map: s3.cert_config_map.clone(),
                ..Default::default()
            });
        }
        if let Some(registry) = &source.registry {
            let Some(url) = &registry.url else {
                return Transfer::Unsupported(
                    "registry imports from an ImageStream are not supported".to_string(),
                );
            };
            return Transfer::Import(ImportSource {
                kind: import_source::REGISTRY,
                endpoint: Some(url.clone()),
                secret_ref: registry.secret_ref.clone(),
                cert_config_map: registry.cert_config_map.clone(),
                architecture: registry
                    .platform
                    .as_ref()
                    .and_then(|p| p.architecture.clone()),
                ..Default::default()
            });
        }
        if source.blank.is_some() {
            return Transfer::Import(ImportSource {
                kind: import_source::NONE,
                ..Default::default()
            });
        }
        if source.upload.is_some() {
            return Transfer::Upload;
        }
        if let Some(pvc) = &source.pvc {
            return Transfer::CsiClone {
                namespace: pvc.namespace.clone(),
                name: pvc.name.clone(),
                snapshot: false,
            };
        }
        if let Some(snapshot) = &source.snapshot {
            return Transfer::CsiClone {
                namespace: snapshot.namespace.clone(),
                name: snapshot.name.clone(),
                snapshot: true,
            };
        }
        Transfer::Unsupported(format!("source {} is not supported yet", kinds.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::datavolume::{
        DataVolumeBlankImage, DataVolumeSourceHttp, DataVolumeSourcePvc, DataVolumeSourceUpload,
    };

    #[test]
    fn sources_map_to_transfers() {
        let http = DataVolumeSource {
            http: Some(DataVolumeSourceHttp {
                url: "http://x/disk.img".into(),
                checksum: Some("sha256:00".into()),
                insecure_skip_verify: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        let Transfer::Import(source) = Transfer::from_source(&http) else {
            panic!("http is an import");
        };
        assert_eq!(source.kind, "http");
        assert_eq!(source.endpoint.as_deref(), Some("http://x/disk.img"));
        assert_eq!(source.checksum.as_deref(), Some("sha256:00"));
        assert!(source.insecure_skip_verify);
        let s3 = DataVolumeSource {
            s3: Some(api::cdi::datavolume::DataVolumeSourceS3 {
                url: "http://s3.local/bucket/disk.qcow2".into(),
                secret_ref: Some("s3-creds".into()),
                cert_config_map: None,
            }),
            ..Default::default()
        };
        let Transfer::Import(source) = Transfer::from_source(&s3) else {
            panic!("s3 is an import");
        };
        assert_eq!(source.kind, "s3");
        assert_eq!(
            source.endpoint.as_deref(),
            Some("http://s3.local/bucket/disk.qcow2")
        );
        assert_eq!(source.secret_ref.as_deref(), Some("s3-creds"));
        let blank = DataVolumeSource {
            blank: Some(DataVolumeBlankImage {}),
            ..Default::default()
        };
        assert!(matches!(Transfer::from_source(&blank), Transfer::Import(s) if s.kind == "none"));
        let upload = DataVolumeSource {
            upload: Some(DataVolumeSourceUpload {}),
            ..Default::default()
        };
        assert_eq!(Transfer::from_source(&upload), Transfer::Upload);
        let clone = DataVolumeSource {
            pvc: Some(DataVolumeSourcePvc {
                namespace: "a".into(),
                name: "b".into(),
            }),
            ..Default::default()
        };
        assert!(matches!(
            Transfer::from_source(&clone),
            Transfer::CsiClone { .. }
        ));
        assert!(matches!(
            Transfer::from_source(&DataVolumeSource::default()),
            Transfer::Unsupported(_)
        ));
    }
}
