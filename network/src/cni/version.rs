//! CNI spec versions: parsing, ordering, what each version's result shape has, and the
//! versions a configuration may ask for.

use std::fmt;

/// A CNI spec version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SpecVersion(u16, u16, u16);

impl SpecVersion {
    pub const V0_1: SpecVersion = SpecVersion(0, 1, 0);
    pub const V0_3: SpecVersion = SpecVersion(0, 3, 0);
    pub const V0_4: SpecVersion = SpecVersion(0, 4, 0);
    pub const V1_1: SpecVersion = SpecVersion(1, 1, 0);
    /// The version this plugin implements.
    pub const CURRENT: SpecVersion = SpecVersion::V1_1;

    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.split('.');
        let mut next = || parts.next().and_then(|p| p.parse::<u16>().ok());
        let version = SpecVersion(next()?, next()?, next()?);
        parts.next().is_none().then_some(version)
    }

    pub fn is_at_least(self, other: SpecVersion) -> bool {
        self >= other
    }

    /// 0.3.0 and later list addresses in `ips`; older versions have `ip4`/`ip6`.
    pub fn has_ip_list(self) -> bool {
        self >= SpecVersion::V0_3
    }

    pub fn is_1x(self) -> bool {
        self.0 >= 1
    }
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The versions a configuration may ask for: the reference plugins' list and 1.1.0, whose
/// STATUS and GC this plugin implements.
pub const SUPPORTED_VERSIONS: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];
