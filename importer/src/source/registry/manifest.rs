//! Image manifests and indexes (OCI and Docker schema 2), read just far enough to find the
//! layers, and the choice of one image from a multi-platform index.

use std::fmt;

use serde::Deserialize;

/// The manifest media types asked for, in order of preference.
pub(super) const MANIFEST_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

const INDEX_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// An index may point at another index; deeper than this is refused.
pub(super) const MAX_INDEX_DEPTH: usize = 4;

/// The annotation that names an image in an OCI layout's `index.json`.
pub(super) const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// A content descriptor: a layer, or an entry of an index.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default)]
    pub platform: Option<Platform>,
    #[serde(default)]
    pub annotations: Option<std::collections::HashMap<String, String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Platform {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub variant: Option<String>,
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        match &self.variant {
            Some(variant) => write!(f, "/{variant}"),
            None => Ok(()),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    #[serde(default)]
    schema_version: Option<u32>,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
}

/// What a manifest document turned out to be.
pub(super) enum Manifest {
    /// An image: its layers, bottom first.
    Image(Vec<Descriptor>),
    /// An index of images (one per platform, usually).
    Index(Vec<Descriptor>),
}

pub(super) fn parse(bytes: &[u8]) -> Result<Manifest, String> {
    let doc: Document =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid manifest: {e}"))?;
    if let Some(version) = doc.schema_version
        && version != 2
    {
        return Err(format!(
            "manifest schema version {version} is not supported (only 2)"
        ));
    }
    let is_index = match &doc.media_type {
        Some(media_type) => INDEX_MEDIA_TYPES.contains(&media_type.as_str()),
        None => doc.manifests.is_some() && doc.layers.is_none(),
    };
    if is_index {
        return Ok(Manifest::Index(doc.manifests.unwrap_or_default()));
    }
    match doc.layers {
        Some(layers) => Ok(Manifest::Image(layers)),
        None => Err(format!(
            "manifest of type {} has no layers",
            doc.media_type.as_deref().unwrap_or("(unset)")
        )),
    }
}

/// The platform wanted from a multi-platform index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlatformSpec {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl PlatformSpec {
    /// `os/arch[/variant]`, or a bare architecture (CDI's image architecture setting), which
    /// means Linux.
    pub fn parse(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.trim().split('/').collect();
        let bad = || format!("invalid platform {text:?}: expected os/arch[/variant] or arch");
        if parts.iter().any(|p| p.is_empty()) {
            return Err(bad());
        }
        let (os, architecture, variant) = match parts.as_slice() {
            [arch] => ("linux", *arch, None),
            [os, arch] => (*os, *arch, None),
            [os, arch, variant] => (*os, *arch, Some(variant.to_string())),
            _ => return Err(bad()),
        };
        Ok(Self {
            os: os.to_string(),
            architecture: normalize_arch(architecture).to_string(),
            variant,
        })
    }

    /// Linux on this machine's architecture, in OCI's names.
    pub fn host() -> Self {
        Self {
            os: "linux".into(),
            architecture: normalize_arch(std::env::consts::ARCH).to_string(),
            variant: None,
        }
    }

    fn matches(&self, platform: &Platform) -> bool {
        if platform.os != self.os || normalize_arch(&platform.architecture) != self.architecture {
            return false;
        }
        match &self.variant {
            None => true,
            Some(wanted) => {
                let variant = platform.variant.as_deref().or(
                    // arm64 images usually leave out the only variant there is.
                    (self.architecture == "arm64").then_some("v8"),
                );
                variant == Some(wanted.as_str())
            }
        }
    }
}

impl fmt::Display for PlatformSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        match &self.variant {
            Some(variant) => write!(f, "/{variant}"),
            None => Ok(()),
        }
    }
}

/// Go's architecture names (used by OCI) for the names Rust and uname use.
fn normalize_arch(arch: &str) -> &str {
    match arch {
        "x86_64" | "x86-64" => "amd64",
        "aarch64" => "arm64",
        "x86" | "i386" | "i686" => "386",
        "powerpc64" | "powerpc64le" => "ppc64le",
        other => other,
    }
}

/// The entry of `entries` for `wanted`. An index with a single entry that names no
/// platform is taken as it is; otherwise the error lists the platforms on offer.
pub(super) fn select_platform<'a>(
    entries: &'a [Descriptor],
    wanted: &PlatformSpec,
) -> Result<&'a Descriptor, String> {
    if let [only] = entries
        && only.platform.is_none()
    {
        return Ok(only);
    }
    let runnable = |e: &&Descriptor| {
        e.platform
            .as_ref()
            .is_some_and(|p| p.os != "unknown" && p.architecture != "unknown")
    };
    // Exact variant first (an arm index may list v6, v7 and v8 images).
    let candidates: Vec<&Descriptor> = entries
        .iter()
        .filter(runnable)
        .filter(|e| wanted.matches(e.platform.as_ref().expect("filtered")))
        .collect();
    if let Some(first) = candidates.first() {
        return Ok(first);
    }
    let available: Vec<String> = entries
        .iter()
        .filter(runnable)
        .map(|e| e.platform.as_ref().expect("filtered").to_string())
        .collect();
    Err(format!(
        "image has no manifest for platform {wanted} (available: {})",
        if available.is_empty() {
            "none".to_string()
        } else {
            available.join(", ")
        }
    ))
}

/// The entry of an OCI layout's index named `tag` by its ref.name annotation.
pub(super) fn select_tag<'a>(entries: &'a [Descriptor], tag: &str) -> Option<&'a Descriptor> {
    entries.iter().find(|e| {
        e.annotations
            .as_ref()
            .and_then(|a| a.get(REF_NAME_ANNOTATION))
            .is_some_and(|name| name == tag)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(platform: Option<(&str, &str, Option<&str>)>) -> Descriptor {
        Descriptor {
            media_type: String::new(),
            digest: format!("sha256:{platform:?}"),
            size: 1,
            platform: platform.map(|(os, architecture, variant)| Platform {
                os: os.into(),
                architecture: architecture.into(),
                variant: variant.map(str::to_string),
            }),
            annotations: None,
        }
    }

    #[test]
    fn platform_spec_parses_and_normalizes() {
        let spec = PlatformSpec::parse("arm64").unwrap();
        assert_eq!(spec.to_string(), "linux/arm64");
        assert_eq!(
            PlatformSpec::parse("linux/x86_64").unwrap().architecture,
            "amd64"
        );
        assert_eq!(
            PlatformSpec::parse("linux/arm/v7").unwrap().to_string(),
            "linux/arm/v7"
        );
        assert!(PlatformSpec::parse("linux//v7").is_err());
        assert!(PlatformSpec::parse("a/b/c/d").is_err());
    }

    #[test]
    fn selects_by_platform_and_lists_the_others() {
        let entries = vec![
            entry(Some(("linux", "amd64", None))),
            entry(Some(("linux", "arm64", Some("v8")))),
            entry(Some(("linux", "arm", Some("v7")))),
            entry(Some(("unknown", "unknown", None))),
        ];
        let pick = |text: &str| {
            select_platform(&entries, &PlatformSpec::parse(text).unwrap()).map(|e| &e.digest)
        };
        assert_eq!(pick("amd64").unwrap(), &entries[0].digest);
        assert_eq!(pick("arm64").unwrap(), &entries[1].digest);
        assert_eq!(pick("linux/arm64/v8").unwrap(), &entries[1].digest);
        assert_eq!(pick("linux/arm/v7").unwrap(), &entries[2].digest);
        let err = pick("s390x").unwrap_err();
        assert_eq!(
            err,
            "image has no manifest for platform linux/s390x (available: linux/amd64, linux/arm64/v8, linux/arm/v7)"
        );
    }

    #[test]
    fn single_entry_without_platform_is_taken() {
        let entries = vec![entry(None)];
        assert!(select_platform(&entries, &PlatformSpec::parse("s390x").unwrap()).is_ok());
    }

    #[test]
    fn tells_images_from_indexes() {
        let image = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "config":{"mediaType":"x","digest":"sha256:00","size":2},
            "layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:11","size":3}]}"#;
        assert!(matches!(parse(image).unwrap(), Manifest::Image(l) if l.len() == 1));
        let index =
            br#"{"schemaVersion":2,"manifests":[{"mediaType":"m","digest":"sha256:22","size":4,
            "platform":{"os":"linux","architecture":"amd64"}}]}"#;
        assert!(matches!(parse(index).unwrap(), Manifest::Index(m) if m.len() == 1));
        assert!(parse(br#"{"schemaVersion":1}"#).is_err());
    }
}
