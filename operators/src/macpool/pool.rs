//! The pool itself, a plain in-memory structure with no I/O: which MACs are held and by whom,
//! the allocation cursor, and the two kinds of holding kubemacpool has. A MAC is held by a
//! stored VirtualMachine (as the pool last saw it stored), or provisionally by an admission
//! that allocated it for a VM not yet seen stored; a provisional holding ends when the VM is
//! seen stored with the admission's transaction stamp or a later one (the stored VM then
//! holds what it kept), when the VM is deleted, or when it expires after the wait time
//! (the VM never appeared).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use api::FieldPath;
use api::cnao::MacAddress;
use chrono::{DateTime, SecondsFormat, Utc};

use super::plan::{AllocationError, VmKey, VmRequest, interface_field};
use super::range::MacRange;

/// When an admission allocated: nanoseconds since the epoch, written on the VM as
/// kubemacpool's transaction timestamp annotation (RFC 3339 with nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp(i64);

impl Stamp {
    /// The stamp `nanos` nanoseconds after the epoch.
    pub fn from_nanos(nanos: i64) -> Stamp {
        Stamp(nanos)
    }

    /// The current time.
    pub fn now() -> Stamp {
        Stamp(Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX))
    }

    /// Nanoseconds since the epoch.
    pub fn nanos(self) -> i64 {
        self.0
    }

    /// The annotation's value, as Go's RFC3339Nano prints it (no trailing zeros).
    pub fn to_annotation(self) -> String {
        let text =
            DateTime::from_timestamp_nanos(self.0).to_rfc3339_opts(SecondsFormat::Nanos, true);
        match text.split_once('.') {
            Some((seconds, fraction)) => {
                let digits = fraction.trim_end_matches('Z').trim_end_matches('0');
                if digits.is_empty() {
                    format!("{seconds}Z")
                } else {
                    format!("{seconds}.{digits}Z")
                }
            }
            None => text,
        }
    }

    /// The stamp an annotation's value holds.
    pub fn from_annotation(text: &str) -> Option<Stamp> {
        let time = DateTime::parse_from_rfc3339(text).ok()?;
        time.timestamp_nanos_opt().map(Stamp)
    }

    fn older_than(self, now: Stamp, wait: Duration) -> bool {
        let wait = i64::try_from(wait.as_nanos()).unwrap_or(i64::MAX);
        self.0.saturating_add(wait) < now.0
    }
}

/// Who holds a MAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The VirtualMachine.
    pub vm: VmKey,
    /// Its interface.
    pub interface: String,
}

/// A VirtualMachine as the pool saw it stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredVm {
    /// Its uid.
    pub uid: Option<String>,
    /// Its transaction stamp, if an admission of the pool allocated for it.
    pub stamp: Option<Stamp>,
    /// Its managed interfaces and their MACs.
    pub interfaces: Vec<(String, MacAddress)>,
}

/// A MAC an admission allocated for a VM not yet seen stored.
#[derive(Clone, Debug)]
struct Provisional {
    uid: Option<String>,
    interface: String,
    mac: MacAddress,
    stamp: Stamp,
}

/// What an admission does to a VM and the pool, decided without changing either.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The MACs to write into interfaces that have none, by interface index.
    pub assign: Vec<(usize, MacAddress)>,
    /// The MACs the VM takes that it did not hold, by interface name.
    claims: Vec<(String, MacAddress)>,
    /// Where the next allocation starts looking.
    cursor: MacAddress,
}

impl Plan {
    /// Whether the admission takes new MACs (and so stamps the VM).
    pub fn claims_any(&self) -> bool {
        !self.claims.is_empty()
    }
}

/// Every MAC held, by whom, and where allocation goes on.
#[derive(Debug, Default)]
pub struct MacPool {
    range: Option<MacRange>,
    cursor: Option<MacAddress>,
    holders: HashMap<MacAddress, Vec<Holder>>,
    stored: HashMap<VmKey, StoredVm>,
    provisional: HashMap<VmKey, Vec<Provisional>>,
}

impl MacPool {
    /// An empty pool over `range` (none: the pool only records, it cannot allocate), its
    /// cursor at the member `random` picks.
    pub fn new(range: Option<MacRange>, random: u64) -> MacPool {
        let mut pool = MacPool::default();
        pool.set_range(range, random);
        pool
    }

    /// Allocates from `range` from now on, from the member `random` picks (as kubemacpool
    /// moves its cursor to a random place when the range changes); what is held stays held.
    pub fn set_range(&mut self, range: Option<MacRange>, random: u64) {
        self.range = range;
        self.cursor = range.map(|r| r.member(random));
    }

    /// The range allocated from.
    pub fn range(&self) -> Option<MacRange> {
        self.range
    }

    /// Who holds `mac`.
    pub fn holders(&self, mac: MacAddress) -> &[Holder] {
        self.holders.get(&mac).map_or(&[], Vec::as_slice)
    }

    /// How many distinct MACs are held.
    pub fn held(&self) -> usize {
        self.holders.len()
    }

    /// How many VirtualMachines the pool saw stored.
    pub fn stored_vms(&self) -> usize {
        self.stored.len()
    }

    /// How many provisional holdings wait for their VM.
    pub fn provisional(&self) -> usize {
        self.provisional.values().map(Vec::len).sum()
    }

    /// Whether the VM with `uid` is stored, or has MACs an admission allocated: what tells
    /// an update from a create where the operation is not known.
    pub fn knows(&self, key: &VmKey, uid: Option<&str>) -> bool {
        let Some(uid) = uid else {
            return false;
        };
        self.stored
            .get(key)
            .is_some_and(|vm| vm.uid.as_deref() == Some(uid))
            || self
                .provisional
                .get(key)
                .is_some_and(|list| list.iter().any(|p| p.uid.as_deref() == Some(uid)))
    }

    fn hold(&mut self, mac: MacAddress, vm: &VmKey, interface: &str) {
        self.holders.entry(mac).or_default().push(Holder {
            vm: vm.clone(),
            interface: interface.to_owned(),
        });
    }

    fn unhold(&mut self, mac: MacAddress, vm: &VmKey, interface: &str) {
        let Some(list) = self.holders.get_mut(&mac) else {
            return;
        };
        if let Some(at) = list
            .iter()
            .position(|h| &h.vm == vm && h.interface == interface)
        {
            list.swap_remove(at);
        }
        if list.is_empty() {
            self.holders.remove(&mac);
        }
    }

    /// The VM is stored as `vm` says: it holds its interfaces' MACs (and no longer what it
    /// held before), and the provisional holdings its stamp settles end.
    pub fn record_stored(&mut self, key: VmKey, vm: StoredVm) {
        if let Some(old) = self.stored.remove(&key) {
            for (interface, mac) in &old.interfaces {
                self.unhold(*mac, &key, interface);
            }
        }
        for (interface, mac) in &vm.interfaces {
            self.hold(*mac, &key, interface);
        }
        let settles = |p: &Provisional| {
            (p.uid.is_none() || p.uid == vm.uid) && vm.stamp.is_some_and(|s| p.stamp <= s)
        };
        self.end_provisional(&key, settles);
        self.stored.insert(key, vm);
    }

    /// The VM `key` with `uid` (and transaction stamp `stamp`) was deleted: what it held is
    /// free, and so is what admissions allocated for it (for a create that had no uid yet,
    /// what they allocated up to its stamp).
    pub fn forget_stored(&mut self, key: &VmKey, uid: Option<&str>, stamp: Option<Stamp>) {
        let matches = self
            .stored
            .get(key)
            .is_some_and(|vm| uid.is_none() || vm.uid.is_none() || vm.uid.as_deref() == uid);
        if matches && let Some(old) = self.stored.remove(key) {
            for (interface, mac) in &old.interfaces {
                self.unhold(*mac, key, interface);
            }
        }
        let ends = |p: &Provisional| match (&p.uid, uid) {
            (Some(held_for), Some(deleted)) => held_for == deleted,
            (None, _) => stamp.is_some_and(|s| p.stamp <= s),
            (Some(_), None) => false,
        };
        self.end_provisional(key, ends);
    }

    /// A full listing of the stored VMs (a start, or a watch that lost track): each holds its
    /// MACs, and VMs the pool knew but the listing lacks are forgotten.
    pub fn replace_stored(&mut self, vms: impl IntoIterator<Item = (VmKey, StoredVm)>) {
        let vms: Vec<(VmKey, StoredVm)> = vms.into_iter().collect();
        let listed: HashSet<&VmKey> = vms.iter().map(|(key, _)| key).collect();
        let gone: Vec<VmKey> = self
            .stored
            .keys()
            .filter(|key| !listed.contains(key))
            .cloned()
            .collect();
        for key in gone {
            if let Some(old) = self.stored.remove(&key) {
                for (interface, mac) in &old.interfaces {
                    self.unhold(*mac, &key, interface);
                }
            }
        }
        for (key, vm) in vms {
            self.record_stored(key, vm);
        }
    }

    /// Ends the provisional holdings older than `wait` at `now`: their VM never appeared
    /// stored with them. Returns how many ended.
    pub fn expire(&mut self, now: Stamp, wait: Duration) -> usize {
        let keys: Vec<VmKey> = self.provisional.keys().cloned().collect();
        let mut ended = 0;
        for key in keys {
            ended += self.end_provisional(&key, |p| p.stamp.older_than(now, wait));
        }
        ended
    }

    fn end_provisional(&mut self, key: &VmKey, ends: impl Fn(&Provisional) -> bool) -> usize {
        let Some(list) = self.provisional.get_mut(key) else {
            return 0;
        };
        let (ended, kept): (Vec<Provisional>, Vec<Provisional>) =
            std::mem::take(list).into_iter().partition(|p| ends(p));
        if kept.is_empty() {
            self.provisional.remove(key);
        } else {
            *self.provisional.get_mut(key).expect("present") = kept;
        }
        for p in &ended {
            self.unhold(p.mac, key, &p.interface);
        }
        ended.len()
    }

    /// The MACs the VM of `request` holds now, by interface: as stored (the same uid), then
    /// as admissions since allocated.
    fn current(&self, request: &VmRequest) -> HashMap<&str, MacAddress> {
        let mut current = HashMap::new();
        if let Some(vm) = self.stored.get(&request.key)
            && request.uid.is_some()
            && vm.uid == request.uid
        {
            for (interface, mac) in &vm.interfaces {
                current.insert(interface.as_str(), *mac);
            }
        }
        for p in self.provisional.get(&request.key).into_iter().flatten() {
            if p.uid.is_none() || p.uid == request.uid {
                current.insert(p.interface.as_str(), p.mac);
            }
        }
        current
    }

    /// What admitting `request` does, as kubemacpool decides it: an interface keeps the MAC
    /// it holds; a MAC set by hand is taken unless another VM holds it; an interface without
    /// one gets the next free MAC from the cursor on (wrapping around once).
    pub fn plan(&self, request: &VmRequest) -> Result<Plan, AllocationError> {
        let current = self.current(request);
        let managed = || request.interfaces.iter().filter(|i| i.managed);
        let mut claims = Vec::new();
        let mut taken: HashSet<MacAddress> = HashSet::new();
        for iface in managed() {
            let Some(mac) = iface.mac else { continue };
            taken.insert(mac);
            if current.get(iface.name.as_str()) == Some(&mac) {
                continue;
            }
            if let Some(other) = self.holders(mac).iter().find(|h| h.vm != request.key) {
                return Err(AllocationError::AlreadyAllocated {
                    field: interface_field(iface.index).child("macAddress"),
                    mac,
                    holder: other.vm.clone(),
                });
            }
            claims.push((iface.name.clone(), mac));
        }
        let mut assign = Vec::new();
        let mut cursor = self.cursor;
        for iface in managed().filter(|i| i.mac.is_none()) {
            if let Some(mac) = current
                .get(iface.name.as_str())
                .filter(|m| !taken.contains(m))
            {
                assign.push((iface.index, *mac));
                taken.insert(*mac);
                continue;
            }
            let field = || interface_field(iface.index).child("macAddress");
            let mac = self.next_free(&mut cursor, &taken, field)?;
            assign.push((iface.index, mac));
            claims.push((iface.name.clone(), mac));
            taken.insert(mac);
        }
        Ok(Plan {
            assign,
            claims,
            cursor: cursor.unwrap_or(MacAddress::from_octets([0; 6])),
        })
    }

    /// The first MAC from `cursor` on that nobody holds and `taken` lacks; the cursor moves
    /// past it (so a MAC just released is not handed out again at once).
    fn next_free(
        &self,
        cursor: &mut Option<MacAddress>,
        taken: &HashSet<MacAddress>,
        field: impl Fn() -> FieldPath,
    ) -> Result<MacAddress, AllocationError> {
        let (Some(range), Some(from)) = (self.range, *cursor) else {
            return Err(AllocationError::RangeFull { field: field() });
        };
        let mut mac = if range.contains(from) {
            from
        } else {
            range.start()
        };
        for _ in 0..range.len() {
            if !self.holders.contains_key(&mac) && !taken.contains(&mac) {
                *cursor = Some(range.after(mac));
                return Ok(mac);
            }
            mac = range.after(mac);
        }
        Err(AllocationError::RangeFull { field: field() })
    }

    /// Carries out `plan` for `request`: its claims are held provisionally under `stamp`.
    pub fn apply(&mut self, request: &VmRequest, plan: Plan, stamp: Stamp) {
        for (interface, mac) in plan.claims {
            self.hold(mac, &request.key, &interface);
            self.provisional
                .entry(request.key.clone())
                .or_default()
                .push(Provisional {
                    uid: request.uid.clone(),
                    interface,
                    mac,
                    stamp,
                });
        }
        if self.range.is_some() {
            self.cursor = Some(plan.cursor);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::RequestedInterface;
    use super::*;

    fn mac(text: &str) -> MacAddress {
        text.parse().expect("a MAC address")
    }

    fn range(start: &str, end: &str) -> MacRange {
        MacRange::parse(start, end).expect("a range")
    }

    /// A pool over 02:00:00:00:00:00 – 02:00:00:00:00:03, its cursor at the start.
    fn tiny() -> MacPool {
        MacPool::new(Some(range("02:00:00:00:00:00", "02:00:00:00:00:03")), 0)
    }

    fn request(name: &str, uid: &str, interfaces: &[(&str, Option<&str>)]) -> VmRequest {
        VmRequest {
            key: VmKey::new("ns", name),
            uid: Some(uid.to_owned()),
            interfaces: interfaces
                .iter()
                .enumerate()
                .map(|(index, (iface, mac))| RequestedInterface {
                    index,
                    name: (*iface).to_owned(),
                    mac: mac.map(|m| m.parse().unwrap()),
                    managed: true,
                })
                .collect(),
        }
    }

    /// Plans and applies `request` at `stamp`; the MACs assigned.
    fn admit(
        pool: &mut MacPool,
        request: &VmRequest,
        stamp: i64,
    ) -> Result<Vec<MacAddress>, AllocationError> {
        let plan = pool.plan(request)?;
        let assigned = plan.assign.iter().map(|(_, m)| *m).collect();
        pool.apply(request, plan, Stamp(stamp));
        Ok(assigned)
    }

    fn stored(uid: &str, stamp: Option<i64>, interfaces: &[(&str, &str)]) -> StoredVm {
        StoredVm {
            uid: Some(uid.to_owned()),
            stamp: stamp.map(Stamp),
            interfaces: interfaces
                .iter()
                .map(|(i, m)| ((*i).to_owned(), mac(m)))
                .collect(),
        }
    }

    #[test]
    fn the_cursor_walks_on_and_wraps_around_skipping_held_macs() {
        let mut pool = MacPool::new(Some(range("02:00:00:00:00:00", "02:00:00:00:00:03")), 2);
        pool.record_stored(
            VmKey::new("ns", "old"),
            stored("u0", None, &[("eth0", "02:00:00:00:00:03")]),
        );
        let a = admit(&mut pool, &request("a", "ua", &[("eth0", None)]), 1).unwrap();
        let b = admit(
            &mut pool,
            &request("b", "ub", &[("eth0", None), ("eth1", None)]),
            2,
        )
        .unwrap();
        assert_eq!(a, [mac("02:00:00:00:00:02")]);
        assert_eq!(b, [mac("02:00:00:00:00:00"), mac("02:00:00:00:00:01")]);
        assert_eq!(
            admit(&mut pool, &request("c", "uc", &[("eth0", None)]), 3),
            Err(AllocationError::RangeFull {
                field: interface_field(0).child("macAddress")
            })
        );
        assert_eq!(
            AllocationError::RangeFull {
                field: interface_field(0)
            }
            .to_string(),
            "the range is full"
        );
    }

    #[test]
    fn a_released_mac_is_reused_only_after_the_others() {
        let mut pool = tiny();
        let a = admit(&mut pool, &request("a", "ua", &[("eth0", None)]), 1).unwrap()[0];
        pool.record_stored(
            VmKey::new("ns", "a"),
            stored("ua", Some(1), &[("eth0", &a.to_string())]),
        );
        pool.forget_stored(&VmKey::new("ns", "a"), Some("ua"), Some(Stamp(1)));
        assert_eq!(pool.held(), 0);
        let next: Vec<MacAddress> = (0..4)
            .map(|i| {
                admit(
                    &mut pool,
                    &request(&format!("v{i}"), &format!("u{i}"), &[("eth0", None)]),
                    2 + i,
                )
                .unwrap()[0]
            })
            .collect();
        assert_eq!(next[3], a, "the released MAC comes last: {next:?}");
    }

    #[test]
    fn macs_set_by_hand_are_taken_unless_another_vm_holds_them() {
        let mut pool = tiny();
        let held = mac("02:00:00:00:00:01");
        admit(
            &mut pool,
            &request("a", "ua", &[("eth0", Some("02:00:00:00:00:01"))]),
            1,
        )
        .unwrap();
        let err = admit(
            &mut pool,
            &request(
                "b",
                "ub",
                &[("x", None), ("eth0", Some("02:00:00:00:00:01"))],
            ),
            2,
        )
        .unwrap_err();
        assert_eq!(
            err,
            AllocationError::AlreadyAllocated {
                field: interface_field(1).child("macAddress"),
                mac: held,
                holder: VmKey::new("ns", "a"),
            }
        );
        assert_eq!(
            err.to_string(),
            "failed to allocate requested mac address: 02:00:00:00:00:01 is already allocated to VirtualMachine ns/a"
        );
        // Nothing of the refused admission is held.
        assert_eq!(pool.held(), 1);
        // The same VM may state it again (an update), and a MAC outside the range is fine.
        admit(
            &mut pool,
            &request(
                "a",
                "ua",
                &[
                    ("eth0", Some("02:00:00:00:00:01")),
                    ("eth1", Some("0a:00:00:00:00:01")),
                ],
            ),
            3,
        )
        .unwrap();
        assert_eq!(pool.held(), 2);
        // Automatic allocation steps over MACs set by hand in the same VM.
        let mut fresh = tiny();
        let got = admit(
            &mut fresh,
            &request(
                "c",
                "uc",
                &[("eth0", None), ("eth1", Some("02:00:00:00:00:00"))],
            ),
            1,
        )
        .unwrap();
        assert_eq!(got, [mac("02:00:00:00:00:01")]);
    }

    #[test]
    fn an_update_keeps_the_macs_of_kept_interfaces_and_releases_removed_ones_once_stored() {
        let mut pool = tiny();
        let key = VmKey::new("ns", "a");
        let first = admit(
            &mut pool,
            &request("a", "ua", &[("eth0", None), ("eth1", None)]),
            1,
        )
        .unwrap();
        pool.record_stored(
            key.clone(),
            stored(
                "ua",
                Some(1),
                &[
                    ("eth0", &first[0].to_string()),
                    ("eth1", &first[1].to_string()),
                ],
            ),
        );
        assert_eq!(pool.provisional(), 0);
        // Re-applied without MACs: the same ones come back, nothing new is claimed.
        let plan = pool
            .plan(&request("a", "ua", &[("eth0", None), ("eth1", None)]))
            .unwrap();
        assert_eq!(
            plan.assign.iter().map(|(_, m)| *m).collect::<Vec<_>>(),
            first
        );
        assert!(!plan.claims_any());
        // eth1 removed: held until the update is seen stored, then free.
        let plan = pool
            .plan(&request(
                "a",
                "ua",
                &[("eth0", Some(&first[0].to_string()))],
            ))
            .unwrap();
        assert!(!plan.claims_any());
        assert_eq!(pool.holders(first[1]).len(), 1);
        pool.record_stored(
            key.clone(),
            stored("ua", Some(1), &[("eth0", &first[0].to_string())]),
        );
        assert!(pool.holders(first[1]).is_empty());
        assert_eq!(pool.held(), 1);
    }

    #[test]
    fn provisional_macs_end_when_settled_deleted_or_expired() {
        let mut pool = tiny();
        let key = VmKey::new("ns", "a");
        // Settled by the stored VM with a later stamp: only what it kept stays held.
        admit(
            &mut pool,
            &request("a", "ua", &[("eth0", None), ("eth1", None)]),
            10,
        )
        .unwrap();
        pool.record_stored(key.clone(), stored("ua", Some(5), &[]));
        assert_eq!(pool.provisional(), 2, "an older version settles nothing");
        pool.record_stored(
            key.clone(),
            stored("ua", Some(10), &[("eth0", "02:00:00:00:00:00")]),
        );
        assert_eq!(pool.provisional(), 0);
        assert_eq!(pool.held(), 1);
        // A create that never got stored expires after the wait time.
        admit(
            &mut pool,
            &request("b", "ub", &[("eth0", None)]),
            1_000_000_000,
        )
        .unwrap();
        assert_eq!(pool.expire(Stamp(1_500_000_000), Duration::from_secs(1)), 0);
        assert_eq!(pool.expire(Stamp(2_000_000_001), Duration::from_secs(1)), 1);
        assert_eq!(pool.held(), 1);
        // A VM deleted and created again under the same name: the delete of the old one
        // leaves the new one's MACs alone.
        let new = admit(&mut pool, &request("a", "ua2", &[("eth0", None)]), 20).unwrap()[0];
        pool.forget_stored(&key, Some("ua"), Some(Stamp(10)));
        assert_eq!(pool.holders(new).len(), 1);
        assert!(pool.holders(mac("02:00:00:00:00:00")).is_empty());
        assert!(pool.knows(&key, Some("ua2")));
        assert!(!pool.knows(&key, Some("ua")));
    }

    #[test]
    fn a_create_without_uid_is_settled_by_its_stamp() {
        let mut pool = tiny();
        let key = VmKey::new("ns", "a");
        let mut create = request("a", "", &[("eth0", None)]);
        create.uid = None;
        let got = admit(&mut pool, &create, 7).unwrap()[0];
        // Deleting an older VM of that name (stamp 3) leaves the new create's MAC held.
        pool.forget_stored(&key, Some("old"), Some(Stamp(3)));
        assert_eq!(pool.holders(got).len(), 1);
        pool.record_stored(
            key.clone(),
            stored("ua", Some(7), &[("eth0", &got.to_string())]),
        );
        assert_eq!(pool.provisional(), 0);
        assert_eq!(pool.holders(got).len(), 1);
    }

    #[test]
    fn a_listing_rebuilds_the_pool_and_forgets_what_it_lacks() {
        let mut pool = tiny();
        pool.record_stored(
            VmKey::new("ns", "gone"),
            stored("g", None, &[("eth0", "02:00:00:00:00:02")]),
        );
        pool.replace_stored([
            (
                VmKey::new("ns", "a"),
                stored("ua", None, &[("eth0", "02:00:00:00:00:00")]),
            ),
            (
                VmKey::new("other", "b"),
                stored(
                    "ub",
                    None,
                    &[("eth0", "02:00:00:00:00:01"), ("eth1", "0a:00:00:00:00:00")],
                ),
            ),
        ]);
        assert_eq!(pool.stored_vms(), 2);
        assert_eq!(pool.held(), 3);
        assert!(pool.holders(mac("02:00:00:00:00:02")).is_empty());
        let got = admit(
            &mut pool,
            &request("c", "uc", &[("eth0", None), ("eth1", None)]),
            1,
        )
        .unwrap();
        assert_eq!(got, [mac("02:00:00:00:00:02"), mac("02:00:00:00:00:03")]);
        assert_eq!(
            pool.holders(mac("02:00:00:00:00:01")),
            [Holder {
                vm: VmKey::new("other", "b"),
                interface: "eth0".into()
            }]
        );
    }

    #[test]
    fn a_new_range_moves_the_cursor_and_keeps_what_is_held() {
        let mut pool = tiny();
        admit(&mut pool, &request("a", "ua", &[("eth0", None)]), 1).unwrap();
        pool.set_range(Some(range("02:00:00:00:01:00", "02:00:00:00:01:ff")), 7);
        assert_eq!(pool.held(), 1);
        let got = admit(&mut pool, &request("b", "ub", &[("eth0", None)]), 2).unwrap()[0];
        assert_eq!(got, mac("02:00:00:00:01:07"));
        pool.set_range(None, 0);
        assert_eq!(
            admit(&mut pool, &request("c", "uc", &[("eth0", None)]), 3),
            Err(AllocationError::RangeFull {
                field: interface_field(0).child("macAddress")
            })
        );
    }

    #[test]
    fn stamps_read_back_what_they_write() {
        let stamp = Stamp(1_700_000_000_123_450_000);
        assert_eq!(stamp.to_annotation(), "2023-11-14T22:13:20.12345Z");
        assert_eq!(Stamp::from_annotation(&stamp.to_annotation()), Some(stamp));
        assert_eq!(
            Stamp(1_700_000_000_000_000_000).to_annotation(),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            Stamp::from_annotation("2023-11-14T22:13:20.000000001+00:00"),
            Some(Stamp(1_700_000_000_000_000_001))
        );
        assert_eq!(Stamp::from_annotation("yesterday"), None);
    }
}
