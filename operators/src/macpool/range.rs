//! The range MAC addresses are allocated from: read from kubemacpool's ConfigMap
//! (`RANGE_START`, `RANGE_END`), checked as CNAO checks the NetworkAddonsConfig it came from,
//! and walked with wrap-around.

use std::collections::BTreeMap;

use api::cnao::{MacAddress, MacRangeProblem, parse_mac_range};

use super::{RANGE_CONFIG_MAP, RANGE_END_KEY, RANGE_START_KEY};

/// Why a range cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The ConfigMap lacks one of its keys.
    #[error("ConfigMap {RANGE_CONFIG_MAP} has no {0}")]
    Missing(&'static str),
    /// An end is not a unicast MAC address, or the range is empty.
    #[error(transparent)]
    Invalid(#[from] MacRangeProblem),
}

/// The first and last address of the pool, both included, the last after the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacRange {
    start: MacAddress,
    end: MacAddress,
}

impl MacRange {
    /// The range from `start` to `end` (text), refused as CNAO refuses it.
    pub fn parse(start: &str, end: &str) -> Result<MacRange, RangeError> {
        if start.is_empty() {
            return Err(RangeError::Missing(RANGE_START_KEY));
        }
        if end.is_empty() {
            return Err(RangeError::Missing(RANGE_END_KEY));
        }
        let (start, end) = parse_mac_range(Some(start), Some(end))?
            .expect("both ends are set, so a range or an error");
        Ok(MacRange { start, end })
    }

    /// The range a `kubemacpool-mac-range-config` ConfigMap's data names.
    pub fn from_config_map_data(data: &BTreeMap<String, String>) -> Result<MacRange, RangeError> {
        let get = |key: &'static str| {
            data.get(key)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .ok_or(RangeError::Missing(key))
        };
        Self::parse(get(RANGE_START_KEY)?, get(RANGE_END_KEY)?)
    }

    /// The first address.
    pub fn start(&self) -> MacAddress {
        self.start
    }

    /// The last address.
    pub fn end(&self) -> MacAddress {
        self.end
    }

    /// How many addresses the range holds.
    pub fn len(&self) -> u64 {
        self.end.as_u64() - self.start.as_u64() + 1
    }

    /// Never: a range holds at least two addresses.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `mac` lies in the range.
    pub fn contains(&self, mac: MacAddress) -> bool {
        (self.start..=self.end).contains(&mac)
    }

    /// The address after `mac`, the first one after the last.
    pub fn after(&self, mac: MacAddress) -> MacAddress {
        if mac >= self.end || mac < self.start {
            self.start
        } else {
            MacAddress::from_u64(mac.as_u64() + 1).expect("below the range's end")
        }
    }

    /// The member `random` picks (modulo the range's size): where allocation starts, so
    /// that a restarted pool does not hand out first what was just released.
    pub fn member(&self, random: u64) -> MacAddress {
        MacAddress::from_u64(self.start.as_u64() + random % self.len()).expect("within the range")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(text: &str) -> MacAddress {
        text.parse().expect("a MAC address")
    }

    #[test]
    fn a_config_map_names_both_ends() {
        let data = BTreeMap::from([
            (RANGE_START_KEY.to_owned(), "02:00:00:00:00:00".to_owned()),
            (RANGE_END_KEY.to_owned(), " 02:00:00:00:00:0F\n".to_owned()),
        ]);
        let range = MacRange::from_config_map_data(&data).expect("a range");
        assert_eq!(range.start(), mac("02:00:00:00:00:00"));
        assert_eq!(range.end(), mac("02:00:00:00:00:0f"));
        assert_eq!(range.len(), 16);
        let mut partial = data.clone();
        partial.remove(RANGE_END_KEY);
        assert_eq!(
            MacRange::from_config_map_data(&partial),
            Err(RangeError::Missing(RANGE_END_KEY))
        );
        assert_eq!(
            MacRange::parse("02:00:00:00:00:10", "02:00:00:00:00:01")
                .unwrap_err()
                .to_string(),
            "failed to set mac address range: invalid range. Range end is lesser than or equal to its start. start: 02:00:00:00:00:10 end: 02:00:00:00:00:01"
        );
        assert!(matches!(
            MacRange::parse("01:00:00:00:00:00", "02:00:00:00:00:01"),
            Err(RangeError::Invalid(MacRangeProblem::Multicast { .. }))
        ));
    }

    #[test]
    fn walking_wraps_from_the_end_to_the_start() {
        let range = MacRange::parse("02:00:00:00:00:fe", "02:00:00:00:01:01").expect("a range");
        assert_eq!(
            range.after(mac("02:00:00:00:00:fe")),
            mac("02:00:00:00:00:ff")
        );
        assert_eq!(
            range.after(mac("02:00:00:00:00:ff")),
            mac("02:00:00:00:01:00")
        );
        assert_eq!(
            range.after(mac("02:00:00:00:01:01")),
            mac("02:00:00:00:00:fe")
        );
        assert_eq!(
            range.after(mac("02:00:00:00:00:00")),
            mac("02:00:00:00:00:fe")
        );
        assert!(range.contains(mac("02:00:00:00:01:00")));
        assert!(!range.contains(mac("02:00:00:00:01:02")));
        assert_eq!(range.member(5), mac("02:00:00:00:00:ff"));
        assert!((0..50).all(|r| range.contains(range.member(r * 7919))));
    }
}
