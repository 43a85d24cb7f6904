//! `create vm`: prints a VirtualMachine manifest built from flags, as `virtctl create vm`
//! does, to pipe into `kubectl apply -f -`. Volumes come in virtctl's order (containerDisks,
//! PVCs, DataSources, cloned PVCs, blank volumes, imports); a disk is listed only for a
//! volume given a `bootorder` (the others get one at admission); cloud-init user data comes
//! from `--cloud-init-user-data` or is written from `--user`, `--password-file` and
//! `--ssh-key`. An instancetype and a preference are named with `--instancetype` and
//! `--preference` (`[kind/]name`), or inferred from a volume's labels at admission: from the
//! boot volume (lowest `bootorder`, else the first) unless `--infer-*-from` names another.
//! Inference is on by default; left implicit, a volume that cannot be inferred from is
//! skipped silently and the VM keeps its memory, with `inferFromVolumeFailurePolicy: Ignore`.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use serde_json::{Value, json};

#[derive(Args, Debug, Default)]
pub struct CreateVmArgs {
    /// The VM's name [default: vm-XXXXX].
    #[arg(long)]
    name: Option<String>,
    /// The VM's runStrategy.
    #[arg(long, default_value = "Always")]
    run_strategy: String,
    /// terminationGracePeriodSeconds of the VM's instances.
    #[arg(long, default_value_t = 180)]
    termination_grace_period: i64,
    /// The guest's memory (a quantity) [default: 512Mi]. Mutually exclusive with the
    /// instancetype flags.
    #[arg(long)]
    memory: Option<String>,
    /// `[kind/]name` of the VM's instancetype (kind virtualmachineinstancetype or
    /// virtualmachineclusterinstancetype).
    #[arg(long)]
    instancetype: Option<String>,
    /// Whether the instancetype is inferred from the boot volume [default: true].
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    infer_instancetype: Option<bool>,
    /// The volume to infer the instancetype from.
    #[arg(long)]
    infer_instancetype_from: Option<String>,
    /// `[kind/]name` of the VM's preference (kind virtualmachinepreference or
    /// virtualmachineclusterpreference).
    #[arg(long)]
    preference: Option<String>,
    /// Whether the preference is inferred from the boot volume [default: true].
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    infer_preference: Option<bool>,
    /// The volume to infer the preference from.
    #[arg(long)]
    infer_preference_from: Option<String>,
    /// `src:IMAGE[,name:N][,bootorder:B]`, repeatable.
    #[arg(long = "volume-containerdisk")]
    containerdisks: Vec<String>,
    /// `src:CLAIM[,name:N][,bootorder:B]`: a PVC used as it is, repeatable.
    #[arg(long = "volume-pvc")]
    pvcs: Vec<String>,
    /// `type:T,...`: a DataVolume the VM owns, repeatable. Types: http, registry, s3 (url,
    /// secretref, certconfigmap; registry also pullmethod), blank, pvc, snapshot and ds
    /// (src: [NAMESPACE/]NAME); all take name, size and bootorder (size is needed but for
    /// pvc, snapshot and ds).
    #[arg(long = "volume-import")]
    imports: Vec<String>,
    /// Deprecated: `--volume-import type:ds,...`.
    #[arg(long = "volume-datasource")]
    datasources: Vec<String>,
    /// Deprecated: `--volume-import type:pvc,...`.
    #[arg(long = "volume-clone-pvc")]
    clone_pvcs: Vec<String>,
    /// Deprecated: `--volume-import type:blank,...`.
    #[arg(long = "volume-blank")]
    blanks: Vec<String>,
    /// The cloud-init data source: nocloud, configdrive or none [default: nocloud].
    #[arg(long)]
    cloud_init: Option<String>,
    /// Base64 cloud-init user data.
    #[arg(long)]
    cloud_init_user_data: Option<String>,
    /// Base64 cloud-init network data.
    #[arg(long)]
    cloud_init_network_data: Option<String>,
    /// The user the generated cloud-init user data creates.
    #[arg(long)]
    user: Option<String>,
    /// A file holding the user's password (stored in clear text in the VM).
    #[arg(long)]
    password_file: Option<PathBuf>,
    /// SSH authorized keys for the generated user data (comma-separated or repeated).
    #[arg(long = "ssh-key", value_delimiter = ',')]
    ssh_keys: Vec<String>,
}

pub fn create_vm(args: CreateVmArgs) -> Result<()> {
    let vm = manifest(&args, &mut api::common::random_name_suffix)?;
    print!(
        "{}",
        serde_saphyr::to_string(&vm).context("writing the manifest")?
    );
    Ok(())
}

/// The manifest `create vm FLAGS` prints, as create-vm-from-manifest's `virtctl` parameter
/// asks for it; the message says what is wrong with the flags.
pub fn manifest_from_flags(flags: &[String]) -> Result<Value, String> {
    #[derive(clap::Parser)]
    #[command(name = "create vm", no_binary_name = true)]
    struct Flags {
        #[command(flatten)]
        args: CreateVmArgs,
    }
    let flags: Vec<&String> = flags.iter().filter(|f| !f.is_empty()).collect();
    let parsed = <Flags as clap::Parser>::try_parse_from(flags)
        .map_err(|e| e.render().to_string().trim().to_owned())?;
    manifest(&parsed.args, &mut api::common::random_name_suffix).map_err(|e| format!("{e:#}"))
}

/// The manifest; `suffix` makes the generated names' random part.
fn manifest(args: &CreateVmArgs, suffix: &mut dyn FnMut() -> String) -> Result<Value> {
    if api::kubevirt::RunStrategy::parse(&args.run_strategy).is_none() {
        bail!(
            "--run-strategy: {:?} is not one of {}",
            args.run_strategy,
            api::kubevirt::RunStrategy::ALL.join(", ")
        );
    }
    check_exclusive_groups(args)?;
    let memory = args.memory.as_deref().unwrap_or(DEFAULT_MEMORY);
    if api::quantity::parse_quantity(memory).is_none() {
        bail!("--memory: {memory:?} is not a quantity");
    }
    let instancetype = args
        .instancetype
        .as_deref()
        .map(|value| matcher("instancetype", value, INSTANCETYPE_KINDS))
        .transpose()?;
    let preference = args
        .preference
        .as_deref()
        .map(|value| matcher("preference", value, PREFERENCE_KINDS))
        .transpose()?;
    let name = match &args.name {
        Some(name) => name.clone(),
        None => format!("vm-{}", suffix()),
    };
    check_dns_label("--name", &name)?;
    let mut vm = Builder::default();
    for (i, flag) in args.containerdisks.iter().enumerate() {
        let params = Params::parse(
            "--volume-containerdisk",
            flag,
            &["src", "name", "bootorder"],
        )?;
        let image = params.required("src")?;
        let volume = params
            .get("name")
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{name}-containerdisk-{i}"));
        vm.add_volume(&params, volume, json!({"containerDisk": {"image": image}}))?;
    }
    for flag in &args.pvcs {
        let params = Params::parse("--volume-pvc", flag, &["src", "name", "bootorder"])?;
        let claim = params.required("src")?;
        if claim.contains('/') {
            bail!("--volume-pvc: not allowed to specify namespace of pvc {claim:?}");
        }
        let volume = params.get("name").unwrap_or(claim).to_owned();
        vm.add_volume(
            &params,
            volume,
            json!({"persistentVolumeClaim": {"claimName": claim}}),
        )?;
    }
    let deprecated = [
        ("--volume-datasource", "ds", &args.datasources),
        ("--volume-clone-pvc", "pvc", &args.clone_pvcs),
        ("--volume-blank", "blank", &args.blanks),
    ];
    for (flag_name, kind, flags) in deprecated {
        for flag in flags {
            eprintln!("Flag {flag_name} has been deprecated, use flag --volume-import instead");
            vm.add_import(flag_name, &format!("type:{kind},{flag}"), suffix)?;
        }
    }
    for flag in &args.imports {
        vm.add_import("--volume-import", flag, suffix)?;
    }
    if let Some(cloud_init) = cloud_init_volume(args)? {
        vm.add_volume(&Params::default(), "cloudinitdisk".into(), cloud_init)?;
    }
    let mut spec = json!({
        "runStrategy": args.run_strategy,
        "template": {"spec": {
            "terminationGracePeriodSeconds": args.termination_grace_period,
            "domain": {"memory": {"guest": memory}, "devices": {}},
        }},
    });
    if let Some(instancetype) = instancetype {
        spec["instancetype"] = instancetype;
        remove_memory(&mut spec);
    }
    if let Some(preference) = preference {
        spec["preference"] = preference;
    }
    if !vm.templates.is_empty() {
        spec["dataVolumeTemplates"] = json!(vm.templates);
    }
    if !vm.volumes.is_empty() {
        spec["template"]["spec"]["volumes"] = json!(vm.volumes);
    }
    if !vm.disks.is_empty() {
        spec["template"]["spec"]["domain"]["devices"]["disks"] = json!(vm.disks);
    }
    infer(args, &vm, &mut spec)?;
    Ok(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": spec,
    }))
}

/// The guest memory when `--memory` is not given.
const DEFAULT_MEMORY: &str = "512Mi";
const INSTANCETYPE_KINDS: Kinds = Kinds {
    what: "instancetype",
    namespaced: "virtualmachineinstancetype",
    cluster: "virtualmachineclusterinstancetype",
};
const PREFERENCE_KINDS: Kinds = Kinds {
    what: "preference",
    namespaced: "virtualmachinepreference",
    cluster: "virtualmachineclusterpreference",
};

/// The two kinds a matcher may name, lowercased as virtctl takes them.
struct Kinds {
    what: &'static str,
    namespaced: &'static str,
    cluster: &'static str,
}

/// virtctl's (cobra's) mutually exclusive flag groups.
fn check_exclusive_groups(args: &CreateVmArgs) -> Result<()> {
    let groups = [
        vec![
            ("memory", args.memory.is_some()),
            ("instancetype", args.instancetype.is_some()),
            ("infer-instancetype", args.infer_instancetype.is_some()),
            (
                "infer-instancetype-from",
                args.infer_instancetype_from.is_some(),
            ),
        ],
        vec![
            ("preference", args.preference.is_some()),
            ("infer-preference", args.infer_preference.is_some()),
            (
                "infer-preference-from",
                args.infer_preference_from.is_some(),
            ),
        ],
    ];
    for group in groups {
        let mut set: Vec<&str> = group
            .iter()
            .filter(|(_, on)| *on)
            .map(|(n, _)| *n)
            .collect();
        if set.len() > 1 {
            set.sort_unstable();
            let names: Vec<&str> = group.iter().map(|(name, _)| *name).collect();
            bail!(
                "if any flags in the group [{}] are set none of the others can be; [{}] were all set",
                names.join(" "),
                set.join(" ")
            );
        }
    }
    Ok(())
}

/// `spec.instancetype` or `spec.preference` from `[kind/]name`.
fn matcher(flag: &str, value: &str, kinds: Kinds) -> Result<Value> {
    let flag_error = |message: String| anyhow!("failed to parse \"--{flag}\" flag: {message}");
    let (kind, name) = split_prefixed_name(value).map_err(flag_error)?;
    let kind = kind.to_lowercase();
    if !kind.is_empty() && kind != kinds.namespaced && kind != kinds.cluster {
        return Err(flag_error(format!(
            "invalid {} kind \"{kind}\", supported values are: {}, {}",
            kinds.what, kinds.namespaced, kinds.cluster
        )));
    }
    let mut matcher = json!({"name": name});
    if !kind.is_empty() {
        matcher["kind"] = json!(kind);
    }
    Ok(matcher)
}

/// `prefix/name` or `name`, as virtctl splits them.
fn split_prefixed_name(value: &str) -> std::result::Result<(&str, &str), String> {
    let parts: Vec<&str> = value.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => ("", *name),
        [prefix, name] => (*prefix, *name),
        _ => {
            return Err(format!(
                "invalid count {} of slashes in prefix/name",
                parts.len() - 1
            ));
        }
    };
    if name.is_empty() {
        return Err("name cannot be empty".to_owned());
    }
    Ok((prefix, name))
}

fn remove_memory(spec: &mut Value) {
    if let Some(domain) = spec["template"]["spec"]["domain"].as_object_mut() {
        domain.remove("memory");
    }
}

/// Inference of the instancetype and preference from a volume, as virtctl does after the
/// volumes are added: explicit (an `--infer-*` flag given) errors are returned, implicit
/// ones skip inference.
fn infer(args: &CreateVmArgs, vm: &Builder, spec: &mut Value) -> Result<()> {
    let explicit_instancetype =
        args.infer_instancetype.is_some() || args.infer_instancetype_from.is_some();
    if args.infer_instancetype.unwrap_or(true)
        && args.instancetype.is_none()
        && args.memory.is_none()
    {
        match vm.inference_volume(args.infer_instancetype_from.as_deref(), spec) {
            Ok(volume) => {
                spec["instancetype"] = json!({"inferFromVolume": volume});
                if explicit_instancetype {
                    remove_memory(spec);
                } else {
                    spec["instancetype"]["inferFromVolumeFailurePolicy"] = json!("Ignore");
                }
            }
            Err(err) if explicit_instancetype => return Err(err),
            Err(_) => {}
        }
    }
    let explicit_preference =
        args.infer_preference.is_some() || args.infer_preference_from.is_some();
    if args.infer_preference.unwrap_or(true) && args.preference.is_none() {
        match vm.inference_volume(args.infer_preference_from.as_deref(), spec) {
            Ok(volume) => {
                spec["preference"] = json!({"inferFromVolume": volume});
                if !explicit_preference {
                    spec["preference"]["inferFromVolumeFailurePolicy"] = json!("Ignore");
                }
            }
            Err(err) if explicit_preference => return Err(err),
            Err(_) => {}
        }
    }
    Ok(())
}

/// The volumes, disks and DataVolume templates as they are added.
#[derive(Default)]
struct Builder {
    volumes: Vec<Value>,
    disks: Vec<Value>,
    templates: Vec<Value>,
}

impl Builder {
    /// The volume to infer from: `named`, else the disk with the lowest boot order, else the
    /// first volume; it must be a claim or a DataVolume that can carry the labels.
    fn inference_volume(&self, named: Option<&str>, spec: &Value) -> Result<String> {
        let name = match named {
            Some(name) => name.to_owned(),
            None => self
                .boot_volume()
                .context("at least one volume is needed to infer an instance type or preference")?,
        };
        let volume = self
            .volumes
            .iter()
            .find(|v| v["name"] == name.as_str())
            .with_context(|| format!("there is no volume with name \"{name}\""))?;
        if let Some(data_volume) = volume["dataVolume"]["name"].as_str() {
            check_data_volume_inferable(spec, data_volume)?;
        } else if volume.get("persistentVolumeClaim").is_none() {
            bail!(
                "inference of instancetype or preference works only with datasources, datavolumes or pvcs"
            );
        }
        Ok(name)
    }

    /// The disk with the lowest boot order, else the first volume.
    fn boot_volume(&self) -> Option<String> {
        let first = self.volumes.first()?;
        let booted = self
            .disks
            .iter()
            .filter_map(|d| Some((d["bootOrder"].as_u64()?, d["name"].as_str()?)))
            .min();
        Some(match booted {
            Some((_, name)) => name.to_owned(),
            None => first["name"].as_str().unwrap_or_default().to_owned(),
        })
    }

    fn add_volume(&mut self, params: &Params, name: String, source: Value) -> Result<()> {
        check_dns_label(params.flag, &name)?;
        if self.volumes.iter().any(|v| v["name"] == name.as_str()) {
            bail!("there is already a volume with name {name:?}");
        }
        if let Some(order) = params.boot_order()? {
            if self.disks.iter().any(|d| d["bootOrder"] == order) {
                bail!(
                    "{}: bootorder {order} was specified multiple times",
                    params.flag
                );
            }
            self.disks.push(json!({"name": name, "bootOrder": order}));
        }
        let mut volume = source;
        volume["name"] = json!(name);
        self.volumes.push(volume);
        Ok(())
    }

    /// A `type:T,...` import: a DataVolume template and its volume.
    fn add_import(
        &mut self,
        flag: &'static str,
        text: &str,
        suffix: &mut dyn FnMut() -> String,
    ) -> Result<()> {
        let common = ["type", "name", "size", "bootorder"];
        let kind = Params::parse(flag, text, &[])
            .ok()
            .and_then(|p| p.get("type").map(str::to_owned))
            .with_context(|| format!("{flag}: {text:?} names no type"))?;
        let (extra, size_optional): (&[&str], bool) = match kind.as_str() {
            "http" | "s3" => (&["url", "secretref", "certconfigmap"], false),
            "registry" => (&["url", "secretref", "certconfigmap", "pullmethod"], false),
            "blank" => (&[], false),
            "pvc" | "snapshot" | "ds" => (&["src"], true),
            other => bail!(
                "{flag}: invalid volume import type {other:?}; supported here: http, registry, \
                 s3, blank, pvc, snapshot, ds"
            ),
        };
        let allowed: Vec<&str> = common.iter().chain(extra).copied().collect();
        let params = Params::parse(flag, text, &allowed)?;
        let source = import_source(&kind, &params)?;
        let size = params.get("size");
        if size.is_none() && !size_optional {
            bail!("{flag}: size must be specified for type {kind}");
        }
        if let Some(size) = size
            && api::quantity::parse_quantity(size).is_none()
        {
            bail!("{flag}: size {size:?} is not a quantity");
        }
        let name = params
            .get("name")
            .map(str::to_owned)
            .unwrap_or_else(|| format!("imported-volume-{}", suffix()));
        self.add_volume(&params, name.clone(), json!({"dataVolume": {"name": name}}))?;
        let mut spec = source;
        spec["storage"] = match size {
            Some(size) => json!({"resources": {"requests": {"storage": size}}}),
            None => json!({}),
        };
        self.templates
            .push(json!({"metadata": {"name": name}, "spec": spec}));
        Ok(())
    }
}

/// A DataVolume template inference can follow: a PVC, registry or snapshot source, or a
/// DataSource reference.
fn check_data_volume_inferable(spec: &Value, name: &str) -> Result<()> {
    let empty = Vec::new();
    let templates = spec["dataVolumeTemplates"].as_array().unwrap_or(&empty);
    let Some(template) = templates.iter().find(|t| t["metadata"]["name"] == name) else {
        return Ok(());
    };
    let source = &template["spec"]["source"];
    let from_source = ["pvc", "registry", "snapshot"]
        .iter()
        .any(|kind| source.get(*kind).is_some());
    let from_data_source = template["spec"]["sourceRef"]["kind"] == "DataSource";
    if from_source || from_data_source {
        return Ok(());
    }
    bail!(
        "this datavolume is not valid to infer an instancetype or preference from \
         (source needs to be PVC, Registry or Snapshot, sourceRef needs to be DataSource)"
    )
}

/// The DataVolume spec's source (`source` or `sourceRef`) of an import.
fn import_source(kind: &str, params: &Params) -> Result<Value> {
    let optional = |source: &mut Value, key: &str, field: &str| {
        if let Some(value) = params.get(key) {
            source[field] = json!(value);
        }
    };
    Ok(match kind {
        "http" | "s3" | "registry" => {
            let mut source = json!({"url": params.required("url")?});
            optional(&mut source, "secretref", "secretRef");
            optional(&mut source, "certconfigmap", "certConfigMap");
            if let Some(method) = params.get("pullmethod") {
                if method != "pod" && method != "node" {
                    bail!("{}: pullmethod must be set to pod or node", params.flag);
                }
                source["pullMethod"] = json!(method);
            }
            json!({"source": {kind: source}})
        }
        "blank" => json!({"source": {"blank": {}}}),
        _ => {
            let (namespace, name) = split_namespaced(params.flag, params.required("src")?)?;
            let mut reference = json!({"name": name});
            if let Some(namespace) = namespace {
                reference["namespace"] = json!(namespace);
            }
            match kind {
                "ds" => {
                    reference["kind"] = json!("DataSource");
                    json!({"sourceRef": reference})
                }
                "pvc" => json!({"source": {"pvc": reference}}),
                _ => json!({"source": {"snapshot": reference}}),
            }
        }
    })
}

/// `[NAMESPACE/]NAME`.
fn split_namespaced<'a>(flag: &str, src: &'a str) -> Result<(Option<&'a str>, &'a str)> {
    match src.split('/').collect::<Vec<_>>().as_slice() {
        [name] if !name.is_empty() => Ok((None, name)),
        [namespace, name] if !namespace.is_empty() && !name.is_empty() => {
            Ok((Some(namespace), name))
        }
        _ => bail!("{flag}: src {src:?} is not NAME or NAMESPACE/NAME"),
    }
}

/// The cloud-init volume's source, when any cloud-init flag was given.
fn cloud_init_volume(args: &CreateVmArgs) -> Result<Option<Value>> {
    let generated =
        args.user.is_some() || args.password_file.is_some() || !args.ssh_keys.is_empty();
    let given = args.cloud_init_user_data.is_some() || args.cloud_init_network_data.is_some();
    if !generated && !given && args.cloud_init.is_none() {
        return Ok(None);
    }
    let key = match args
        .cloud_init
        .as_deref()
        .unwrap_or("nocloud")
        .to_ascii_lowercase()
        .as_str()
    {
        "nocloud" => "cloudInitNoCloud",
        "configdrive" => "cloudInitConfigDrive",
        "none" if generated || given => {
            bail!(
                "--cloud-init none cannot be combined with cloud-init data or the flags that write it"
            )
        }
        "none" => return Ok(None),
        other => bail!("--cloud-init: {other:?} is not nocloud, configdrive or none"),
    };
    if generated && args.cloud_init_user_data.is_some() {
        bail!(
            "--cloud-init-user-data cannot be combined with --user, --password-file or --ssh-key"
        );
    }
    let mut source = json!({});
    if let Some(network) = &args.cloud_init_network_data {
        source["networkDataBase64"] = json!(network);
    }
    match &args.cloud_init_user_data {
        Some(user_data) => source["userDataBase64"] = json!(user_data),
        None => source["userData"] = json!(user_data(args)?),
    }
    Ok(Some(json!({key: source})))
}

/// `#cloud-config` with the user, password and keys.
fn user_data(args: &CreateVmArgs) -> Result<String> {
    let mut config = String::from("#cloud-config");
    if let Some(user) = &args.user {
        config.push_str(&format!("\nuser: {user}"));
    }
    if let Some(file) = &args.password_file {
        eprintln!(
            "WARNING: --password-file: The password is stored in cleartext in the VM definition!"
        );
        let password = std::fs::read_to_string(file)
            .with_context(|| format!("--password-file: reading {}", file.display()))?;
        let password = password.trim();
        if !password.is_empty() {
            config.push_str(&format!(
                "\npassword: {password}\nchpasswd: {{ expire: False }}"
            ));
        }
    }
    if !args.ssh_keys.is_empty() {
        config.push_str("\nssh_authorized_keys:");
        for key in &args.ssh_keys {
            config.push_str(&format!("\n  - {key}"));
        }
    }
    Ok(config)
}

/// A DNS-1123 label, as volume and VM names must be.
fn check_dns_label(flag: &str, name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !valid {
        bail!(
            "{flag}: invalid name {name:?}: a lowercase RFC 1123 label must consist of lower case \
             alphanumeric characters or '-', and must start and end with an alphanumeric character"
        );
    }
    Ok(())
}

/// A flag's `key:value,key:value` parameters.
#[derive(Default)]
struct Params {
    flag: &'static str,
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Reads `text`; keys outside `allowed` are refused (none are when it is empty).
    fn parse(flag: &'static str, text: &str, allowed: &[&str]) -> Result<Self> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for item in text.split(',') {
            let Some((key, value)) = item.split_once(':') else {
                bail!("{flag}: {item:?} is not key:value");
            };
            let key = key.to_ascii_lowercase();
            if !allowed.is_empty() && !allowed.contains(&key.as_str()) {
                bail!(
                    "{flag}: unknown param {key:?}; supported: {}",
                    allowed.join(", ")
                );
            }
            if pairs.iter().any(|(k, _)| *k == key) {
                bail!("{flag}: param {key:?} given twice");
            }
            pairs.push((key, value.to_owned()));
        }
        Ok(Self { flag, pairs })
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn required(&self, key: &str) -> Result<&str> {
        self.get(key)
            .filter(|v| !v.is_empty())
            .with_context(|| format!("{}: {key} must be specified", self.flag))
    }

    fn boot_order(&self) -> Result<Option<u32>> {
        let Some(text) = self.get("bootorder") else {
            return Ok(None);
        };
        match text.parse::<u32>() {
            Ok(0) => bail!("{}: bootorder must be greater than 0", self.flag),
            Ok(order) => Ok(Some(order)),
            Err(_) => bail!("{}: bootorder {text:?} is not a number", self.flag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(args: CreateVmArgs) -> Result<Value> {
        let mut n = 0;
        manifest(&args, &mut || {
            n += 1;
            format!("r{n}")
        })
    }

    #[test]
    fn with_no_flags_a_named_vm_with_memory_and_no_volumes() {
        let vm = build(CreateVmArgs {
            run_strategy: "Always".into(),
            termination_grace_period: 180,
            memory: None,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            vm,
            json!({
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                "metadata": {"name": "vm-r1"},
                "spec": {"runStrategy": "Always", "template": {"spec": {
                    "terminationGracePeriodSeconds": 180,
                    "domain": {"memory": {"guest": "512Mi"}, "devices": {}},
                }}},
            })
        );
    }

    #[test]
    fn volumes_come_in_virtctls_order_and_only_boot_orders_make_disks() {
        let vm = build(CreateVmArgs {
            name: Some("a".into()),
            run_strategy: "Halted".into(),
            memory: Some("1Gi".into()),
            imports: vec![
                "type:http,url:http://host/disk.qcow2,size:2Gi,bootorder:1".into(),
                "type:ds,src:images/fedora".into(),
            ],
            pvcs: vec!["src:data,bootorder:2".into()],
            containerdisks: vec!["src:quay.io/x/y:tag".into()],
            blanks: vec!["size:1Gi,name:scratch".into()],
            user: Some("fedora".into()),
            ssh_keys: vec!["ssh-ed25519 AAAA me".into()],
            ..Default::default()
        })
        .unwrap();
        let spec = &vm["spec"];
        let names: Vec<&str> = spec["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "a-containerdisk-0",
                "data",
                "scratch",
                "imported-volume-r1",
                "imported-volume-r2",
                "cloudinitdisk"
            ]
        );
        assert_eq!(
            spec["template"]["spec"]["domain"]["devices"]["disks"],
            json!([{"name": "data", "bootOrder": 2}, {"name": "imported-volume-r1", "bootOrder": 1}])
        );
        assert_eq!(
            spec["dataVolumeTemplates"][1],
            json!({"metadata": {"name": "imported-volume-r1"}, "spec": {
                "source": {"http": {"url": "http://host/disk.qcow2"}},
                "storage": {"resources": {"requests": {"storage": "2Gi"}}},
            }})
        );
        assert_eq!(
            spec["dataVolumeTemplates"][2]["spec"],
            json!({"sourceRef": {"kind": "DataSource", "name": "fedora", "namespace": "images"}, "storage": {}})
        );
        assert_eq!(
            spec["template"]["spec"]["volumes"][5]["cloudInitNoCloud"]["userData"],
            "#cloud-config\nuser: fedora\nssh_authorized_keys:\n  - ssh-ed25519 AAAA me"
        );
        assert_eq!(spec["runStrategy"], "Halted");
    }

    #[test]
    fn given_user_data_goes_base64_into_the_chosen_source() {
        let vm = build(CreateVmArgs {
            name: Some("b".into()),
            run_strategy: "Manual".into(),
            memory: None,
            cloud_init: Some("configdrive".into()),
            cloud_init_user_data: Some("I2Nsb3VkLWNvbmZpZwo=".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            vm["spec"]["template"]["spec"]["volumes"][0],
            json!({"name": "cloudinitdisk", "cloudInitConfigDrive": {"userDataBase64": "I2Nsb3VkLWNvbmZpZwo="}})
        );
    }

    #[test]
    fn bad_flags_are_refused_by_name() {
        let base = || CreateVmArgs {
            name: Some("c".into()),
            run_strategy: "Always".into(),
            memory: None,
            ..Default::default()
        };
        let cases: Vec<(CreateVmArgs, &str)> = vec![
            (
                CreateVmArgs {
                    memory: Some("lots".into()),
                    ..base()
                },
                "--memory",
            ),
            (
                CreateVmArgs {
                    name: Some("Bad_Name".into()),
                    ..base()
                },
                "invalid name",
            ),
            (
                CreateVmArgs {
                    imports: vec!["type:gcs,url:x,size:1Gi".into()],
                    ..base()
                },
                "invalid volume import type \"gcs\"",
            ),
            (
                CreateVmArgs {
                    imports: vec!["type:http,url:http://x".into()],
                    ..base()
                },
                "size must be specified",
            ),
            (
                CreateVmArgs {
                    imports: vec!["type:http,size:1Gi".into()],
                    ..base()
                },
                "url must be specified",
            ),
            (
                CreateVmArgs {
                    imports: vec!["type:blank,size:1Gi,colour:red".into()],
                    ..base()
                },
                "unknown param \"colour\"",
            ),
            (
                CreateVmArgs {
                    imports: vec!["type:blank,size:1Gi,bootorder:0".into()],
                    ..base()
                },
                "greater than 0",
            ),
            (
                CreateVmArgs {
                    pvcs: vec!["src:a,bootorder:1".into(), "src:b,bootorder:1".into()],
                    ..base()
                },
                "specified multiple times",
            ),
            (
                CreateVmArgs {
                    pvcs: vec!["src:a".into(), "src:a".into()],
                    ..base()
                },
                "already a volume with name \"a\"",
            ),
            (
                CreateVmArgs {
                    pvcs: vec!["src:ns/a".into()],
                    ..base()
                },
                "namespace",
            ),
            (
                CreateVmArgs {
                    imports: vec!["type:registry,url:docker://x,size:1Gi,pullmethod:push".into()],
                    ..base()
                },
                "pullmethod",
            ),
            (
                CreateVmArgs {
                    cloud_init: Some("none".into()),
                    user: Some("u".into()),
                    ..base()
                },
                "--cloud-init none",
            ),
        ];
        for (args, says) in cases {
            let err = build(args).unwrap_err().to_string();
            assert!(err.contains(says), "{says}: {err}");
        }
    }

    #[test]
    fn random_suffixes_are_names() {
        let suffix = api::common::random_name_suffix();
        assert_eq!(suffix.len(), 5);
        check_dns_label("test", &format!("vm-{suffix}")).unwrap();
    }

    fn named(args: CreateVmArgs) -> CreateVmArgs {
        CreateVmArgs {
            name: Some("vm".into()),
            run_strategy: "Always".into(),
            termination_grace_period: 180,
            ..args
        }
    }

    #[test]
    fn an_instancetype_and_preference_by_name_drop_the_memory() {
        let vm = build(named(CreateVmArgs {
            instancetype: Some("u1.medium".into()),
            preference: Some("VirtualMachinePreference/fedora".into()),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(vm["spec"]["instancetype"], json!({"name": "u1.medium"}));
        assert_eq!(
            vm["spec"]["preference"],
            json!({"name": "fedora", "kind": "virtualmachinepreference"})
        );
        assert_eq!(
            vm["spec"]["template"]["spec"]["domain"],
            json!({"devices": {}})
        );
    }

    #[test]
    fn implicit_inference_from_a_data_source_keeps_the_memory_and_ignores_failures() {
        let vm = build(named(CreateVmArgs {
            imports: vec!["type:ds,src:my-ds".into()],
            ..Default::default()
        }))
        .unwrap();
        let yaml = serde_saphyr::to_string(&vm).unwrap();
        assert!(
            yaml.contains(
                "  instancetype:\n    inferFromVolume: imported-volume-r1\n    inferFromVolumeFailurePolicy: Ignore\n"
            ),
            "{yaml}"
        );
        assert_eq!(
            vm["spec"]["preference"],
            json!({"inferFromVolume": "imported-volume-r1", "inferFromVolumeFailurePolicy": "Ignore"})
        );
        assert_eq!(
            vm["spec"]["template"]["spec"]["domain"]["memory"],
            json!({"guest": "512Mi"})
        );
    }

    #[test]
    fn explicit_inference_drops_the_memory_and_names_the_volume() {
        let vm = build(named(CreateVmArgs {
            pvcs: vec!["src:root".into(), "src:data,bootorder:1".into()],
            infer_instancetype: Some(true),
            infer_preference_from: Some("root".into()),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            vm["spec"]["instancetype"],
            json!({"inferFromVolume": "data"})
        );
        assert_eq!(vm["spec"]["preference"], json!({"inferFromVolume": "root"}));
        assert!(
            vm["spec"]["template"]["spec"]["domain"]
                .get("memory")
                .is_none()
        );
    }

    #[test]
    fn implicit_inference_is_skipped_where_it_cannot_work() {
        let none = build(named(CreateVmArgs::default())).unwrap();
        assert!(none["spec"].get("instancetype").is_none());
        let containerdisk = build(named(CreateVmArgs {
            containerdisks: vec!["src:quay.io/x/y".into()],
            ..Default::default()
        }))
        .unwrap();
        assert!(containerdisk["spec"].get("preference").is_none());
        let memory_given = build(named(CreateVmArgs {
            memory: Some("1Gi".into()),
            pvcs: vec!["src:root".into()],
            ..Default::default()
        }))
        .unwrap();
        assert!(memory_given["spec"].get("instancetype").is_none());
        assert_eq!(
            memory_given["spec"]["preference"]["inferFromVolume"],
            "root"
        );
        let turned_off = build(named(CreateVmArgs {
            pvcs: vec!["src:root".into()],
            infer_instancetype: Some(false),
            infer_preference: Some(false),
            ..Default::default()
        }))
        .unwrap();
        assert!(turned_off["spec"].get("instancetype").is_none());
        assert!(turned_off["spec"].get("preference").is_none());
    }

    #[test]
    fn instancetype_flags_are_refused_with_virtctls_messages() {
        let cases: Vec<(CreateVmArgs, &str)> = vec![
            (
                CreateVmArgs {
                    memory: Some("1Gi".into()),
                    instancetype: Some("u1.small".into()),
                    ..Default::default()
                },
                "if any flags in the group [memory instancetype infer-instancetype infer-instancetype-from] are set none of the others can be; [instancetype memory] were all set",
            ),
            (
                CreateVmArgs {
                    preference: Some("fedora".into()),
                    infer_preference_from: Some("root".into()),
                    ..Default::default()
                },
                "if any flags in the group [preference infer-preference infer-preference-from] are set none of the others can be; [infer-preference-from preference] were all set",
            ),
            (
                CreateVmArgs {
                    instancetype: Some("flavor/u1.small".into()),
                    ..Default::default()
                },
                "failed to parse \"--instancetype\" flag: invalid instancetype kind \"flavor\", supported values are: virtualmachineinstancetype, virtualmachineclusterinstancetype",
            ),
            (
                CreateVmArgs {
                    preference: Some("a/b/c".into()),
                    ..Default::default()
                },
                "failed to parse \"--preference\" flag: invalid count 2 of slashes in prefix/name",
            ),
            (
                CreateVmArgs {
                    preference: Some("virtualmachinepreference/".into()),
                    ..Default::default()
                },
                "failed to parse \"--preference\" flag: name cannot be empty",
            ),
            (
                CreateVmArgs {
                    infer_instancetype: Some(true),
                    ..Default::default()
                },
                "at least one volume is needed to infer an instance type or preference",
            ),
            (
                CreateVmArgs {
                    pvcs: vec!["src:root".into()],
                    infer_preference_from: Some("other".into()),
                    ..Default::default()
                },
                "there is no volume with name \"other\"",
            ),
            (
                CreateVmArgs {
                    containerdisks: vec!["src:quay.io/x/y".into()],
                    infer_instancetype: Some(true),
                    ..Default::default()
                },
                "inference of instancetype or preference works only with datasources, datavolumes or pvcs",
            ),
            (
                CreateVmArgs {
                    blanks: vec!["size:1Gi".into()],
                    infer_preference: Some(true),
                    ..Default::default()
                },
                "this datavolume is not valid to infer an instancetype or preference from (source needs to be PVC, Registry or Snapshot, sourceRef needs to be DataSource)",
            ),
        ];
        for (args, message) in cases {
            let err = build(named(args)).unwrap_err();
            assert_eq!(err.to_string(), message);
        }
    }
}
