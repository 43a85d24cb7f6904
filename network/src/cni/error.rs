//! The CNI error object: the spec's well-known codes and the error every command returns,
//! printed on stdout as the spec's error JSON.

use std::fmt;

use serde::Serialize;

/// The spec's well-known error codes (and the 999 libcni uses for everything else).
pub mod code {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const UNSUPPORTED_FIELD: u32 = 2;
    pub const UNKNOWN_CONTAINER: u32 = 3;
    pub const INVALID_ENVIRONMENT: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODING_FAILURE: u32 = 6;
    pub const INVALID_CONFIG: u32 = 7;
    pub const INVALID_NETNS: u32 = 8;
    pub const TRY_AGAIN_LATER: u32 = 11;
    pub const PLUGIN_NOT_AVAILABLE: u32 = 50;
    pub const LIMITED_CONNECTIVITY: u32 = 51;
    pub const INTERNAL: u32 = 999;
}

/// A failed command, as the spec's error object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        CniError {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// A failure that is none of the well-known ones (netlink, nftables, sysctls).
    pub fn internal(msg: impl Into<String>) -> Self {
        CniError::new(code::INTERNAL, msg)
    }

    /// An invalid network configuration; `msg` names the field.
    pub fn config(msg: impl Into<String>) -> Self {
        CniError::new(code::INVALID_CONFIG, msg)
    }

    /// The same error with `context: ` before its message.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.msg = format!("{context}: {}", self.msg);
        self
    }

    /// The error object, labelled with `cni_version`.
    pub fn printable<'a>(&'a self, cni_version: &'a str) -> impl Serialize + 'a {
        #[derive(Serialize)]
        struct Out<'a> {
            #[serde(rename = "cniVersion")]
            cni_version: &'a str,
            code: u32,
            msg: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            details: &'a str,
        }
        Out {
            cni_version,
            code: self.code,
            msg: &self.msg,
            details: &self.details,
        }
    }
}

impl fmt::Display for CniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.msg)?;
        if !self.details.is_empty() {
            write!(f, " ({})", self.details)?;
        }
        Ok(())
    }
}

impl std::error::Error for CniError {}
