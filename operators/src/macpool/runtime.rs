//! The pool as the platform runs it, kubemacpool's pool manager: the [`MacPool`] behind a
//! mutex (admissions are synchronous and cheap), the namespaces' labels, and watches that
//! keep both current: namespaces, the range ConfigMap, and the stored VirtualMachines (a
//! first full listing rebuilds the pool; only then is the pool ready, and until then every
//! VirtualMachine admission is refused, as kubemacpool's webhook is unreachable until its
//! pool is loaded). Provisional MACs whose VM never appeared end after the wait time.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use api::FieldPath;

use super::metrics::MacPoolMetrics;
use super::plan::{AllocationError, VmKey, VmRequest, stored_interfaces};
use super::pool::{MacPool, Stamp, StoredVm};
use super::range::MacRange;
use super::{RANGE_CONFIG_MAP, TRANSACTION_TIMESTAMP_ANNOTATION, VM_WEBHOOK};

/// Whether namespaces take part unless labelled out, or only when labelled in (the
/// webhook's namespaceSelector; CNAO deploys the VM webhook opted out, the pod one opted in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OptMode {
    /// Every namespace but those labelled `mutatevirtualmachines.kubemacpool.io=ignore`.
    #[default]
    OptOut,
    /// Only namespaces labelled `mutatevirtualmachines.kubemacpool.io=allocate`.
    OptIn,
}

/// Whether a namespace with `labels` is managed: never at run level 0 or 1 (the cluster's
/// own), then as `mode` says.
pub fn namespace_is_managed<'a>(label: impl Fn(&str) -> Option<&'a str>, mode: OptMode) -> bool {
    for key in ["runlevel", "openshift.io/run-level"] {
        if matches!(label(key), Some("0" | "1")) {
            return false;
        }
    }
    match mode {
        OptMode::OptOut => label(VM_WEBHOOK) != Some("ignore"),
        OptMode::OptIn => label(VM_WEBHOOK) == Some("allocate"),
    }
}

/// How the pool runs.
#[derive(Clone, Debug)]
pub struct MacPoolConfig {
    /// Where the range ConfigMap lives (kubemacpool's namespace, CNAO's operand namespace).
    pub namespace: String,
    /// How long a MAC allocated for a VM that is never stored stays allocated
    /// (kubemacpool's `--wait-time`).
    pub wait_time: Duration,
    /// Which namespaces take part.
    pub opt_mode: OptMode,
}

/// What the admission was, where the caller knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A create.
    Create,
    /// An update.
    Update,
}

/// Why a VirtualMachine is refused, worded as kubemacpool's webhook words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// The pool has not been loaded from the stored VirtualMachines yet.
    #[error(
        "kubemacpool is not ready: the MAC pool is still being loaded from the stored VirtualMachines; try again"
    )]
    NotReady,
    /// A create the pool cannot serve.
    #[error(
        "Failed to create virtual machine allocation error: Failed to allocate mac to the vm object: {0}"
    )]
    Create(AllocationError),
    /// An update the pool cannot serve.
    #[error("Failed to update virtual machine allocation error: {0}")]
    Update(AllocationError),
}

impl AdmissionError {
    /// The field at fault, when there is one.
    pub fn field(&self) -> Option<&FieldPath> {
        match self {
            AdmissionError::NotReady => None,
            AdmissionError::Create(err) | AdmissionError::Update(err) => Some(err.field()),
        }
    }

    /// The message naming the field first (`spec…macAddress: Failed to create …`), as a
    /// webhook answers it.
    pub fn message(&self) -> String {
        match self.field() {
            Some(field) => format!("{field}: {self}"),
            None => self.to_string(),
        }
    }

    /// The reason counted in `kmp_mac_pool_refused_admissions`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            AdmissionError::NotReady => "NotReady",
            AdmissionError::Create(err) | AdmissionError::Update(err) => err.metric_label(),
        }
    }
}

/// Why the pool's watches stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A watch stream ended.
    #[error("the MAC pool's {0} watch ended")]
    WatchEnded(&'static str),
}

struct State {
    pool: MacPool,
    /// Whether each known namespace is managed.
    namespaces: HashMap<String, bool>,
    last_stamp: Stamp,
}

/// The running pool, shared by the admission and the watches.
pub struct KubeMacPool {
    config: MacPoolConfig,
    state: Mutex<State>,
    ready: tokio::sync::watch::Sender<bool>,
    metrics: Arc<MacPoolMetrics>,
}

/// A random number, for where allocation starts.
pub(crate) fn random() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// The VirtualMachine resource.
fn vm_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
        "virtualmachines",
    )
}

impl KubeMacPool {
    /// A pool with no range, not ready, knowing no VirtualMachine.
    pub fn new(config: MacPoolConfig) -> Arc<KubeMacPool> {
        let (ready, _) = tokio::sync::watch::channel(false);
        Arc::new(KubeMacPool {
            config,
            state: Mutex::new(State {
                pool: MacPool::new(None, 0),
                namespaces: HashMap::new(),
                last_stamp: Stamp::from_nanos(0),
            }),
            ready,
            metrics: Arc::new(MacPoolMetrics::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How it runs.
    pub fn config(&self) -> &MacPoolConfig {
        &self.config
    }

    /// Its metrics.
    pub fn metrics(&self) -> Arc<MacPoolMetrics> {
        self.metrics.clone()
    }

    /// Whether the pool has been loaded and admits VirtualMachines.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Admits VirtualMachines from now on (the watches call it once the pool is loaded).
    pub fn mark_ready(&self) {
        self.ready.send_replace(true);
    }

    /// Returns once the pool is ready.
    pub async fn wait_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Allocates from `range` from now on (none: kubemacpool is not deployed, and
    /// VirtualMachines pass unchanged). The same range again changes nothing.
    pub fn set_range(&self, range: Option<MacRange>) {
        let mut state = self.state();
        if state.pool.range() != range {
            tracing::info!(?range, "the MAC pool's range");
            state.pool.set_range(range, random());
        }
    }

    /// The range allocated from.
    pub fn range(&self) -> Option<MacRange> {
        self.state().pool.range()
    }

    /// How many MACs are held, how many VMs the pool saw stored, and how many provisional
    /// holdings wait for their VM.
    pub fn counts(&self) -> (usize, usize, usize) {
        let state = self.state();
        (
            state.pool.held(),
            state.pool.stored_vms(),
            state.pool.provisional(),
        )
    }

    /// Notes a namespace's labels (from its JSON).
    pub fn note_namespace(&self, namespace: &Value) {
        let name = namespace["metadata"]["name"].as_str().unwrap_or_default();
        let labels = &namespace["metadata"]["labels"];
        let managed = namespace_is_managed(|key| labels[key].as_str(), self.config.opt_mode);
        self.state().namespaces.insert(name.to_owned(), managed);
    }

    fn note_namespace_labels(&self, name: &str, labels: &BTreeMap<String, String>) {
        let managed = namespace_is_managed(
            |key| labels.get(key).map(String::as_str),
            self.config.opt_mode,
        );
        self.state().namespaces.insert(name.to_owned(), managed);
    }

    /// Whether VirtualMachines of `namespace` take part (one never seen: as the mode says
    /// of a namespace without labels).
    pub fn is_namespace_managed(&self, namespace: &str) -> bool {
        let known = self.state().namespaces.get(namespace).copied();
        known.unwrap_or(self.config.opt_mode == OptMode::OptOut)
    }

    fn stored_vm(vm: &Value) -> (VmKey, StoredVm) {
        let metadata = &vm["metadata"];
        let text = |key: &str| metadata[key].as_str().unwrap_or_default();
        let key = VmKey::new(text("namespace"), text("name"));
        let stamp = metadata["annotations"][TRANSACTION_TIMESTAMP_ANNOTATION]
            .as_str()
            .and_then(Stamp::from_annotation);
        let stored = StoredVm {
            uid: metadata["uid"].as_str().map(str::to_owned),
            stamp,
            interfaces: stored_interfaces(vm),
        };
        (key, stored)
    }

    /// A VirtualMachine as stored (a watch's add or change).
    pub fn record_stored_vm(&self, vm: &Value) {
        let (key, stored) = Self::stored_vm(vm);
        let mut state = self.state();
        let managed = state
            .namespaces
            .get(&key.namespace)
            .copied()
            .unwrap_or(self.config.opt_mode == OptMode::OptOut);
        if managed {
            state.pool.record_stored(key, stored);
        } else {
            state
                .pool
                .forget_stored(&key, stored.uid.as_deref(), stored.stamp);
        }
        self.metrics.set_allocated(state.pool.held());
    }

    /// A VirtualMachine deleted.
    pub fn forget_stored_vm(&self, vm: &Value) {
        let (key, stored) = Self::stored_vm(vm);
        let mut state = self.state();
        state
            .pool
            .forget_stored(&key, stored.uid.as_deref(), stored.stamp);
        self.metrics.set_allocated(state.pool.held());
    }

    /// Every stored VirtualMachine (a listing): the pool is rebuilt from them.
    pub fn replace_stored_vms(&self, vms: &[Value]) {
        let mut state = self.state();
        let default = self.config.opt_mode == OptMode::OptOut;
        let listed: Vec<(VmKey, StoredVm)> = vms
            .iter()
            .map(Self::stored_vm)
            .filter(|(key, _)| {
                state
                    .namespaces
                    .get(&key.namespace)
                    .copied()
                    .unwrap_or(default)
            })
            .collect();
        state.pool.replace_stored(listed);
        self.metrics.set_allocated(state.pool.held());
    }

    /// Ends the provisional MACs older than the wait time; how many ended.
    pub fn expire(&self) -> usize {
        let mut state = self.state();
        let ended = state.pool.expire(Stamp::now(), self.config.wait_time);
        self.metrics.set_allocated(state.pool.held());
        ended
    }

    /// The embedded API server's admission hook, run on every create and update: a
    /// Namespace's labels are noted (so a VM created right after its namespace is judged by
    /// them), a VirtualMachine gets its MACs; anything else passes.
    pub fn admit(&self, group: &str, plural: &str, object: &mut Value) -> Result<(), String> {
        match (group, plural) {
            ("", "namespaces") => {
                self.note_namespace(object);
                Ok(())
            }
            // The embedded API server reports this as the field's cause, which kubectl
            // prints: so the message starts with a field even when the pool names none.
            ("kubevirt.io", "virtualmachines") => {
                self.admit_virtual_machine(None, "", object).map_err(|err| {
                    let field = err.field().map_or_else(
                        || "spec.template.spec.domain.devices.interfaces".to_owned(),
                        ToString::to_string,
                    );
                    format!("{field}: admission webhook \"{VM_WEBHOOK}\" denied the request: {err}")
                })
            }
            _ => Ok(()),
        }
    }

    /// Gives the VirtualMachine `vm` (of `namespace` when its metadata names none) its MACs,
    /// as kubemacpool's mutating webhook does: each managed interface without one gets the
    /// next free MAC of the range (or the one it holds already), MACs set by hand are
    /// recorded, and new allocations are stamped with the transaction timestamp annotation.
    /// `operation` only words errors; unknown, it is told from what the pool knows.
    pub fn admit_virtual_machine(
        &self,
        operation: Option<Operation>,
        namespace: &str,
        vm: &mut Value,
    ) -> Result<(), AdmissionError> {
        let result = self.try_admit(operation, namespace, vm);
        if let Err(err) = &result {
            self.metrics.count_refusal(err.metric_label());
        }
        result
    }

    fn try_admit(
        &self,
        operation: Option<Operation>,
        namespace: &str,
        vm: &mut Value,
    ) -> Result<(), AdmissionError> {
        if !self.is_ready() {
            return Err(AdmissionError::NotReady);
        }
        let namespace = vm["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(namespace)
            .to_owned();
        let mut state = self.state();
        let default = self.config.opt_mode == OptMode::OptOut;
        if !state.namespaces.get(&namespace).copied().unwrap_or(default)
            || state.pool.range().is_none()
        {
            return Ok(());
        }
        let wrap = |operation: Operation| {
            move |err| match operation {
                Operation::Create => AdmissionError::Create(err),
                Operation::Update => AdmissionError::Update(err),
            }
        };
        let request = match VmRequest::from_vm(vm, &namespace) {
            Ok(Some(request)) => request,
            Ok(None) => return Ok(()),
            Err(err) => return Err(wrap(operation.unwrap_or(Operation::Create))(err)),
        };
        let operation = operation.unwrap_or_else(|| {
            if state.pool.knows(&request.key, request.uid.as_deref()) {
                Operation::Update
            } else {
                Operation::Create
            }
        });
        let plan = state.pool.plan(&request).map_err(wrap(operation))?;
        let interfaces = &mut vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"];
        for (index, mac) in &plan.assign {
            interfaces[*index]["macAddress"] = json!(mac.to_string());
        }
        if plan.claims_any() {
            let now = Stamp::now();
            let stamp = if now > state.last_stamp {
                now
            } else {
                Stamp::from_nanos(state.last_stamp.nanos() + 1)
            };
            state.last_stamp = stamp;
            let metadata = &mut vm["metadata"];
            if !metadata["annotations"].is_object() {
                metadata["annotations"] = json!({});
            }
            metadata["annotations"][TRANSACTION_TIMESTAMP_ANNOTATION] =
                json!(stamp.to_annotation());
            state.pool.apply(&request, plan, stamp);
            self.metrics.set_allocated(state.pool.held());
        }
        Ok(())
    }

    /// Keeps the pool current until a watch ends: namespaces and the range first, then the
    /// VirtualMachines, whose first full listing rebuilds the pool and makes it ready; and
    /// the expiry of provisional MACs.
    pub async fn run(self: Arc<Self>, client: Client) -> RunError {
        let (namespaces_listed, namespaces_done) = tokio::sync::oneshot::channel();
        let (range_listed, range_done) = tokio::sync::oneshot::channel();
        let namespaces = self
            .clone()
            .watch_namespaces(client.clone(), namespaces_listed);
        let range = self.clone().watch_range(client.clone(), range_listed);
        let vms = async {
            let _ = namespaces_done.await;
            let _ = range_done.await;
            self.clone().watch_vms(client.clone()).await
        };
        let expiry = self.clone().expire_periodically();
        tokio::select! {
            err = namespaces => err,
            err = range => err,
            err = vms => err,
            err = expiry => err,
        }
    }

    async fn watch_namespaces(
        self: Arc<Self>,
        client: Client,
        listed: tokio::sync::oneshot::Sender<()>,
    ) -> RunError {
        let mut listed = Some(listed);
        let api: Api<Namespace> = Api::all(client);
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns)) => {
                    self.note_namespace_labels(&ns.name_any(), ns.labels());
                }
                Ok(watcher::Event::Delete(ns)) => {
                    self.state().namespaces.remove(&ns.name_any());
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                }
                Ok(watcher::Event::Init) => {}
                Err(err) => tracing::debug!(%err, "Namespace watch"),
            }
        }
        RunError::WatchEnded("Namespace")
    }

    async fn watch_range(
        self: Arc<Self>,
        client: Client,
        listed: tokio::sync::oneshot::Sender<()>,
    ) -> RunError {
        let mut listed = Some(listed);
        let mut seen = false;
        let api: Api<ConfigMap> = Api::namespaced(client, &self.config.namespace);
        let config =
            watcher::Config::default().fields(&format!("metadata.name={RANGE_CONFIG_MAP}"));
        let mut events = watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => seen = false,
                Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => {
                    seen = true;
                    match MacRange::from_config_map_data(&cm.data.unwrap_or_default()) {
                        Ok(range) => self.set_range(Some(range)),
                        Err(err) => {
                            tracing::error!(%err, "the MAC range is not usable; the previous one stays")
                        }
                    }
                }
                Ok(watcher::Event::Delete(_)) => self.set_range(None),
                Ok(watcher::Event::InitDone) => {
                    if !seen {
                        self.set_range(None);
                    }
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                }
                Err(err) => tracing::debug!(%err, "range ConfigMap watch"),
            }
        }
        RunError::WatchEnded("ConfigMap")
    }

    async fn watch_vms(self: Arc<Self>, client: Client) -> RunError {
        let api: Api<DynamicObject> = Api::all_with(client, &vm_resource());
        let mut listing: Vec<Value> = Vec::new();
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            let as_json = |vm: &DynamicObject| serde_json::to_value(vm).unwrap_or_default();
            match event {
                Ok(watcher::Event::Init) => listing.clear(),
                Ok(watcher::Event::InitApply(vm)) => listing.push(as_json(&vm)),
                Ok(watcher::Event::InitDone) => {
                    self.replace_stored_vms(&std::mem::take(&mut listing));
                    if !self.is_ready() {
                        let (held, vms, _) = self.counts();
                        tracing::info!(held, vms, "the MAC pool is loaded");
                        self.mark_ready();
                    }
                }
                Ok(watcher::Event::Apply(vm)) => self.record_stored_vm(&as_json(&vm)),
                Ok(watcher::Event::Delete(vm)) => self.forget_stored_vm(&as_json(&vm)),
                Err(err) => tracing::debug!(%err, "VirtualMachine watch"),
            }
        }
        RunError::WatchEnded("VirtualMachine")
    }

    async fn expire_periodically(self: Arc<Self>) -> RunError {
        // kubemacpool looks every 3 s; a short wait time (tests) is looked at more often.
        let period =
            (self.config.wait_time / 2).clamp(Duration::from_millis(100), Duration::from_secs(3));
        let mut ticks = tokio::time::interval(period);
        loop {
            ticks.tick().await;
            let ended = self.expire();
            if ended > 0 {
                tracing::info!(
                    ended,
                    "released MACs of VirtualMachines that were never stored"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(range: Option<(&str, &str)>) -> Arc<KubeMacPool> {
        let pool = KubeMacPool::new(MacPoolConfig {
            namespace: "cluster-network-addons".into(),
            wait_time: Duration::from_secs(1),
            opt_mode: OptMode::OptOut,
        });
        pool.set_range(range.map(|(s, e)| MacRange::parse(s, e).unwrap()));
        pool
    }

    fn vm(namespace: &str, name: &str, uid: &str, mac: Option<&str>) -> Value {
        let mut iface = json!({"name": "default", "masquerade": {}});
        if let Some(mac) = mac {
            iface["macAddress"] = json!(mac);
        }
        json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"template": {"spec": {
                "domain": {"devices": {"interfaces": [iface]}},
                "networks": [{"name": "default", "pod": {}}],
            }}},
        })
    }

    fn mac_of(vm: &Value) -> Option<&str> {
        vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["macAddress"].as_str()
    }

    #[test]
    fn admissions_wait_for_the_pool_and_skip_opted_out_namespaces() {
        let pool = pool(Some(("02:00:00:00:00:00", "02:00:00:00:00:ff")));
        let mut first = vm("a", "x", "u1", None);
        assert_eq!(
            pool.admit("kubevirt.io", "virtualmachines", &mut first)
                .unwrap_err(),
            format!(
                "spec.template.spec.domain.devices.interfaces: admission webhook \"{VM_WEBHOOK}\" denied the request: {}",
                AdmissionError::NotReady
            )
        );
        pool.mark_ready();
        pool.admit("kubevirt.io", "virtualmachines", &mut first)
            .unwrap();
        assert!(mac_of(&first).is_some());
        assert!(first["metadata"]["annotations"][TRANSACTION_TIMESTAMP_ANNOTATION].is_string());
        let mut ns = json!({"metadata": {"name": "quiet", "labels": {VM_WEBHOOK: "ignore"}}});
        pool.admit("", "namespaces", &mut ns).unwrap();
        let mut quiet = vm("quiet", "y", "u2", None);
        let before = quiet.clone();
        pool.admit("kubevirt.io", "virtualmachines", &mut quiet)
            .unwrap();
        assert_eq!(quiet, before);
        // Anything else passes untouched.
        let mut pod = json!({"metadata": {"name": "p"}});
        pool.admit("", "pods", &mut pod).unwrap();
    }

    #[test]
    fn errors_are_worded_as_kubemacpool_for_creates_and_updates() {
        let pool = pool(Some(("02:00:00:00:00:00", "02:00:00:00:00:01")));
        pool.mark_ready();
        let mut a = vm("ns", "a", "ua", Some("02:00:00:00:00:00"));
        pool.admit_virtual_machine(None, "", &mut a).unwrap();
        let mut b = vm("ns", "b", "ub", Some("02:00:00:00:00:00"));
        let err = pool.admit_virtual_machine(None, "", &mut b).unwrap_err();
        assert!(
            err.to_string().starts_with("Failed to create virtual machine allocation error: Failed to allocate mac to the vm object: failed to allocate requested mac address: "),
            "{err}"
        );
        // a stated again without a MAC keeps the one it holds.
        let mut again = vm("ns", "a", "ua", None);
        pool.admit_virtual_machine(None, "", &mut again).unwrap();
        assert_eq!(mac_of(&again), Some("02:00:00:00:00:00"));
        let mut c = vm("ns", "c", "uc", None);
        pool.admit_virtual_machine(Some(Operation::Update), "", &mut c)
            .unwrap();
        let mut d = vm("ns", "d", "ud", None);
        assert_eq!(
            pool.admit_virtual_machine(Some(Operation::Update), "", &mut d)
                .unwrap_err()
                .to_string(),
            "Failed to update virtual machine allocation error: the range is full"
        );
        assert!(pool.metrics().encode().contains("reason=\"RangeFull\""));
    }

    #[test]
    fn a_stored_listing_rebuilds_and_deletes_release() {
        let pool = pool(Some(("02:00:00:00:00:00", "02:00:00:00:00:01")));
        pool.replace_stored_vms(&[
            vm("ns", "a", "ua", Some("02:00:00:00:00:00")),
            vm("ns", "b", "ub", Some("02:00:00:00:00:01")),
        ]);
        pool.mark_ready();
        let mut c = vm("ns", "c", "uc", None);
        assert!(matches!(
            pool.admit_virtual_machine(None, "", &mut c),
            Err(AdmissionError::Create(AllocationError::RangeFull { .. }))
        ));
        pool.forget_stored_vm(&vm("ns", "b", "ub", Some("02:00:00:00:00:01")));
        pool.admit_virtual_machine(None, "", &mut c).unwrap();
        assert_eq!(mac_of(&c), Some("02:00:00:00:00:01"));
        assert_eq!(pool.counts(), (2, 1, 1));
    }

    #[test]
    fn namespaces_are_managed_by_their_labels() {
        let labels = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
        };
        assert!(namespace_is_managed(labels(&[]), OptMode::OptOut));
        assert!(!namespace_is_managed(
            labels(&[(VM_WEBHOOK, "ignore")]),
            OptMode::OptOut
        ));
        assert!(!namespace_is_managed(
            labels(&[("runlevel", "0")]),
            OptMode::OptOut
        ));
        assert!(!namespace_is_managed(labels(&[]), OptMode::OptIn));
        assert!(namespace_is_managed(
            labels(&[(VM_WEBHOOK, "allocate")]),
            OptMode::OptIn
        ));
        assert!(!namespace_is_managed(
            labels(&[(VM_WEBHOOK, "allocate"), ("openshift.io/run-level", "1")]),
            OptMode::OptIn
        ));
    }
}
