//! The VirtualMachineClusterInstancetypes of common-instancetypes: six series (u1, o1, cx1,
//! m1, n1, rt1), each a class of workload with its own vCPU:memory ratio, sizes and
//! settings, rendered one object per size (and per huge page size where a series has two).

use serde_json::{Map, Value, json};

use super::{LABEL_PREFIX, VENDOR, VERSION, quantity};

/// One size of a series: its name, vCPUs and memory in MiB.
#[derive(Clone, Copy, Debug)]
pub struct Size {
    pub name: &'static str,
    pub cpus: u32,
    pub memory_mib: u64,
}

/// A size whose memory follows the series' ratio of GiB per vCPU.
const fn by_ratio(name: &'static str, cpus: u32, gib_per_cpu: u64) -> Size {
    Size {
        name,
        cpus,
        memory_mib: cpus as u64 * gib_per_cpu * 1024,
    }
}

/// A size below the series' ratio (the small ones), its memory given.
const fn below_ratio(name: &'static str, cpus: u32, memory_mib: u64) -> Size {
    Size {
        name,
        cpus,
        memory_mib,
    }
}

/// A huge page size a series is offered with, and the suffix of its sizes' names.
#[derive(Clone, Copy, Debug)]
pub struct Hugepages {
    pub page_size: &'static str,
    pub size_suffix: &'static str,
}

const HUGEPAGES_2MI: Hugepages = Hugepages {
    page_size: "2Mi",
    size_suffix: "",
};
const HUGEPAGES_1GI_SUFFIXED: Hugepages = Hugepages {
    page_size: "1Gi",
    size_suffix: "1gi",
};
const HUGEPAGES_1GI: Hugepages = Hugepages {
    page_size: "1Gi",
    size_suffix: "",
};

/// One series: what it is for and how each of its instancetypes is set.
#[derive(Clone, Copy, Debug)]
pub struct Series {
    pub name: &'static str,
    pub class: &'static str,
    pub display_name: &'static str,
    pub description: &'static str,
    pub icon: &'static str,
    pub sizes: &'static [Size],
    /// Empty for a series without huge pages.
    pub hugepages: &'static [Hugepages],
    pub dedicated_cpu_placement: bool,
    pub isolate_emulator_thread: bool,
    /// NUMA topology passed through to the guest.
    pub numa: bool,
    pub realtime: bool,
    /// `maxSockets` pinned to the guest's vCPUs (no CPU hotplug headroom).
    pub max_sockets_of_guest: bool,
    /// `ioThreadsPolicy: auto`.
    pub io_threads_auto: bool,
    /// CRI-O's annotations turning off load balancing and CPU quota for the pod.
    pub crio_low_latency: bool,
    pub overcommit_percent: Option<u32>,
}

const PLAIN: Series = Series {
    name: "",
    class: "",
    display_name: "",
    description: "",
    icon: "",
    sizes: &[],
    hugepages: &[],
    dedicated_cpu_placement: false,
    isolate_emulator_thread: false,
    numa: false,
    realtime: false,
    max_sockets_of_guest: false,
    io_threads_auto: false,
    crio_low_latency: false,
    overcommit_percent: None,
};

/// The universal sizes, 4 GiB per vCPU from medium up.
const UNIVERSAL_SIZES: &[Size] = &[
    below_ratio("nano", 1, 512),
    below_ratio("micro", 1, 1024),
    below_ratio("small", 1, 2048),
    by_ratio("medium", 1, 4),
    below_ratio("2xmedium", 2, 4096),
    by_ratio("large", 2, 4),
    by_ratio("xlarge", 4, 4),
    by_ratio("2xlarge", 8, 4),
    by_ratio("4xlarge", 16, 4),
    by_ratio("8xlarge", 32, 4),
];

/// Every series of the bundle.
pub const SERIES: &[Series] = &[
    Series {
        name: "u1",
        class: "general.purpose",
        display_name: "General Purpose",
        description: "The U Series is quite neutral and provides resources for\n\
general purpose applications.\n\n\
*U* is the abbreviation for \"Universal\", hinting at the universal\n\
attitude towards workloads.\n\n\
VMs of instance types will share physical CPU cores on a\n\
time-slice basis with other VMs.",
        icon: "pficon-server-group",
        sizes: UNIVERSAL_SIZES,
        ..PLAIN
    },
    Series {
        name: "o1",
        class: "overcommitted",
        display_name: "Overcommitted",
        description: "The O Series is based on the U Series, with the only difference\n\
being that memory is overcommitted.\n\n\
*O* is the abbreviation for \"Overcommitted\".",
        icon: "pficon-virtual-machine",
        sizes: &[
            below_ratio("nano", 1, 512),
            below_ratio("micro", 1, 1024),
            below_ratio("small", 1, 2048),
            by_ratio("medium", 1, 4),
            by_ratio("large", 2, 4),
            by_ratio("xlarge", 4, 4),
            by_ratio("2xlarge", 8, 4),
            by_ratio("4xlarge", 16, 4),
            by_ratio("8xlarge", 32, 4),
        ],
        overcommit_percent: Some(50),
        ..PLAIN
    },
    Series {
        name: "cx1",
        class: "compute.exclusive",
        display_name: "Compute Exclusive",
        description: "The CX Series provides exclusive compute resources for compute\n\
intensive applications.\n\n\
*CX* is the abbreviation of \"Compute Exclusive\".\n\n\
The exclusive resources are given to the compute threads of the\n\
VM. In order to ensure this, some additional cores (depending\n\
on the number of disks and NICs) will be requested to offload\n\
the IO threading from cores dedicated to the workload.\n\
In addition, in this series, the NUMA topology of the used\n\
cores is provided to the VM.\n\n\
The amount of spec.cpu.maxSockets is set to the same as\n\
guest cpus. This avoids KubeVirt's default behavior of\n\
providing extra CPUs for hotplugging, which can exceed the\n\
amount of available CPUs on a node and cause the VM to fail.\n\n\
Requirements for CX series instance types:\n\
- CPU manager has to be enabled.\n\
- Huge pages have to be available on the nodes.",
        icon: "pficon-registry",
        sizes: &[
            by_ratio("medium", 1, 2),
            by_ratio("large", 2, 2),
            by_ratio("xlarge", 4, 2),
            by_ratio("2xlarge", 8, 2),
            by_ratio("4xlarge", 16, 2),
            by_ratio("8xlarge", 32, 2),
        ],
        hugepages: &[HUGEPAGES_2MI, HUGEPAGES_1GI_SUFFIXED],
        dedicated_cpu_placement: true,
        isolate_emulator_thread: true,
        numa: true,
        max_sockets_of_guest: true,
        io_threads_auto: true,
        ..PLAIN
    },
    Series {
        name: "m1",
        class: "memory.intensive",
        display_name: "Memory Intensive",
        description: "The M Series provides resources for memory intensive\n\
applications.\n\n\
*M* is the abbreviation of \"Memory\".",
        icon: "fa-memory",
        sizes: &[
            by_ratio("large", 2, 8),
            by_ratio("xlarge", 4, 8),
            by_ratio("2xlarge", 8, 8),
            by_ratio("4xlarge", 16, 8),
            by_ratio("8xlarge", 32, 8),
        ],
        hugepages: &[HUGEPAGES_2MI, HUGEPAGES_1GI_SUFFIXED],
        ..PLAIN
    },
    Series {
        name: "n1",
        class: "network",
        display_name: "Network",
        description: "The N Series provides resources for network intensive DPDK\n\
applications, like VNFs.\n\n\
*N* is the abbreviation for \"Network\".\n\n\
This series of instancetypes requires nodes capable\n\
of running DPDK workloads and being marked with the respective\n\
node-role.kubevirt.io/worker-dpdk label as such.",
        icon: "pficon-network",
        sizes: &[
            below_ratio("medium", 4, 4096),
            by_ratio("large", 4, 2),
            by_ratio("xlarge", 8, 2),
            by_ratio("2xlarge", 16, 2),
            by_ratio("4xlarge", 32, 2),
            by_ratio("8xlarge", 64, 2),
        ],
        hugepages: &[HUGEPAGES_1GI],
        dedicated_cpu_placement: true,
        isolate_emulator_thread: true,
        crio_low_latency: true,
        ..PLAIN
    },
    Series {
        name: "rt1",
        class: "realtime",
        display_name: "Realtime",
        description: "The RT Series provides resources for realtime applications, like Oslat.\n\n\
*RT* is the abbreviation for \"realtime\".\n\n\
This series of instance types requires nodes capable of running\n\
realtime applications.",
        icon: "pficon-server-group",
        sizes: &[
            below_ratio("micro", 1, 1024),
            below_ratio("small", 1, 2048),
            by_ratio("medium", 1, 4),
            by_ratio("large", 2, 4),
            by_ratio("xlarge", 4, 4),
            by_ratio("2xlarge", 8, 4),
            by_ratio("4xlarge", 16, 4),
            by_ratio("8xlarge", 32, 4),
        ],
        hugepages: &[HUGEPAGES_1GI],
        dedicated_cpu_placement: true,
        isolate_emulator_thread: true,
        numa: true,
        realtime: true,
        crio_low_latency: true,
        ..PLAIN
    },
];

/// Every instancetype of every series, unordered.
pub fn all() -> Vec<Value> {
    SERIES
        .iter()
        .flat_map(|series| {
            let pages: Vec<Option<&Hugepages>> = if series.hugepages.is_empty() {
                vec![None]
            } else {
                series.hugepages.iter().map(Some).collect()
            };
            series.sizes.iter().flat_map(move |size| {
                pages
                    .clone()
                    .into_iter()
                    .map(move |page| instancetype(series, size, page))
            })
        })
        .collect()
}

/// The instancetype of `size` in `series`, with huge pages of `hugepages`' size if any.
fn instancetype(series: &Series, size: &Size, hugepages: Option<&Hugepages>) -> Value {
    let size_name = format!(
        "{}{}",
        size.name,
        hugepages.map_or("", |pages| pages.size_suffix)
    );
    json!({
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": "VirtualMachineClusterInstancetype",
        "metadata": {
            "name": format!("{}.{size_name}", series.name),
            "labels": labels(series, size, &size_name, hugepages),
            "annotations": {
                "instancetype.kubevirt.io/description": series.description,
                "instancetype.kubevirt.io/displayName": series.display_name,
            },
        },
        "spec": spec(series, size, hugepages),
    })
}

fn labels(series: &Series, size: &Size, size_name: &str, hugepages: Option<&Hugepages>) -> Value {
    let mut labels = Map::new();
    let mut label = |key: &str, value: String| {
        labels.insert(format!("{LABEL_PREFIX}{key}"), Value::String(value));
    };
    label("class", series.class.to_owned());
    label("cpu", size.cpus.to_string());
    label("memory", quantity(size.memory_mib));
    label("size", size_name.to_owned());
    label("icon-pf", series.icon.to_owned());
    label("vendor", VENDOR.to_owned());
    label("version", "1".to_owned());
    label("common-instancetypes-version", VERSION.to_owned());
    if let Some(pages) = hugepages {
        label("hugepages", pages.page_size.to_owned());
    }
    for (key, set) in [
        ("dedicatedCPUPlacement", series.dedicated_cpu_placement),
        ("isolateEmulatorThread", series.isolate_emulator_thread),
        ("numa", series.numa),
        ("realtime", series.realtime),
    ] {
        if set {
            label(key, "true".to_owned());
        }
    }
    Value::Object(labels)
}

fn spec(series: &Series, size: &Size, hugepages: Option<&Hugepages>) -> Value {
    let mut cpu = Map::new();
    cpu.insert("guest".into(), json!(size.cpus));
    for (key, set) in [
        ("dedicatedCPUPlacement", series.dedicated_cpu_placement),
        ("isolateEmulatorThread", series.isolate_emulator_thread),
    ] {
        if set {
            cpu.insert(key.into(), json!(true));
        }
    }
    if series.max_sockets_of_guest {
        cpu.insert("maxSockets".into(), json!(size.cpus));
    }
    if series.numa {
        cpu.insert("numa".into(), json!({"guestMappingPassthrough": {}}));
    }
    if series.realtime {
        cpu.insert("realtime".into(), json!({}));
    }
    let mut memory = Map::new();
    memory.insert("guest".into(), json!(quantity(size.memory_mib)));
    if let Some(pages) = hugepages {
        memory.insert("hugepages".into(), json!({"pageSize": pages.page_size}));
    }
    if let Some(percent) = series.overcommit_percent {
        memory.insert("overcommitPercent".into(), json!(percent));
    }
    let mut spec = Map::new();
    spec.insert("cpu".into(), Value::Object(cpu));
    spec.insert("memory".into(), Value::Object(memory));
    if series.io_threads_auto {
        spec.insert("ioThreadsPolicy".into(), json!("auto"));
    }
    if series.crio_low_latency {
        spec.insert(
            "annotations".into(),
            json!({
                "cpu-load-balancing.crio.io": "disable",
                "cpu-quota.crio.io": "disable",
                "irq-load-balancing.crio.io": "disable",
            }),
        );
    }
    Value::Object(spec)
}
