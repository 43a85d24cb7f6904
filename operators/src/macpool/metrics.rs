//! The MAC pool's metrics, with kubemacpool's names: `kmp_mac_collisions{mac}`, how many
//! running objects share a MAC (only while more than one do), and counts of what the pool
//! holds and of the admissions it refused, by reason.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use api::cnao::MacAddress;

type Labels = Vec<(String, String)>;

/// The registry and the metrics in it.
pub struct MacPoolMetrics {
    registry: Registry,
    collisions: Family<Labels, Gauge>,
    allocated: Gauge,
    refused: Family<Labels, Counter>,
}

impl Default for MacPoolMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let collisions = Family::<Labels, Gauge>::default();
        registry.register(
            "kmp_mac_collisions",
            "Count of running objects sharing the same MAC address (collision when > 1)",
            collisions.clone(),
        );
        let allocated = Gauge::default();
        registry.register(
            "kmp_mac_pool_allocated_macs",
            "MAC addresses held by VirtualMachines, stored or being admitted",
            allocated.clone(),
        );
        let refused = Family::<Labels, Counter>::default();
        registry.register(
            "kmp_mac_pool_refused_admissions",
            "VirtualMachine admissions the MAC pool refused, by reason",
            refused.clone(),
        );
        MacPoolMetrics {
            registry,
            collisions,
            allocated,
            refused,
        }
    }
}

impl MacPoolMetrics {
    /// `count` running objects share `mac`.
    pub fn set_collision(&self, mac: MacAddress, count: usize) {
        self.collisions
            .get_or_create(&vec![("mac".to_owned(), mac.to_string())])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// No two running objects share `mac` any more.
    pub fn clear_collision(&self, mac: MacAddress) {
        self.collisions
            .remove(&vec![("mac".to_owned(), mac.to_string())]);
    }

    /// The pool holds `count` MACs.
    pub fn set_allocated(&self, count: usize) {
        self.allocated.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// An admission was refused for `reason`.
    pub fn count_refusal(&self, reason: &str) {
        self.refused
            .get_or_create(&vec![("reason".to_owned(), reason.to_owned())])
            .inc();
    }

    /// Every metric in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collisions_appear_and_go_by_mac() {
        let metrics = MacPoolMetrics::default();
        let mac: MacAddress = "02:00:00:00:00:01".parse().unwrap();
        metrics.set_collision(mac, 2);
        let text = metrics.encode();
        assert!(
            text.contains("kmp_mac_collisions{mac=\"02:00:00:00:00:01\"} 2"),
            "{text}"
        );
        metrics.clear_collision(mac);
        assert!(!metrics.encode().contains("02:00:00:00:00:01"));
    }
}
