//! `create vm`: prints a VirtualMachine manifest built from flags, as `virtctl create vm`
//! does, to pipe into `kubectl apply -f -`. Volumes come in virtctl's order (containerDisks,
//! PVCs, DataSources, cloned PVCs, blank volumes, imports); a disk is listed only for a
//! volume given a `bootorder` (the others get one at admission); cloud-init user data comes
//! from `--cloud-init-user-data` or is written from `--user`, `--password-file` and
//! `--ssh-key`. Instancetypes and preferences are not supported here, so nothing is inferred.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
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
    /// The guest's memory (a quantity).
    #[arg(long, default_value = "512Mi")]
    memory: String,
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

/// The manifest; `suffix` makes the generated names' random part.
fn manifest(args: &CreateVmArgs, suffix: &mut dyn FnMut() -> String) -> Result<Value> {
    if api::kubevirt::RunStrategy::parse(&args.run_strategy).is_none() {
        bail!(
            "--run-strategy: {:?} is not one of {}",
            args.run_strategy,
            api::kubevirt::RunStrategy::ALL.join(", ")
        );
    }
    if api::quantity::parse_quantity(&args.memory).is_none() {
        bail!("--memory: {:?} is not a quantity", args.memory);
    }
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
            "domain": {"memory": {"guest": args.memory}, "devices": {}},
        }},
    });
    if !vm.templates.is_empty() {
        spec["dataVolumeTemplates"] = json!(vm.templates);
    }
    if !vm.volumes.is_empty() {
        spec["template"]["spec"]["volumes"] = json!(vm.volumes);
    }
    if !vm.disks.is_empty() {
        spec["template"]["spec"]["domain"]["devices"]["disks"] = json!(vm.disks);
    }
    Ok(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": spec,
    }))
}

/// The volumes, disks and DataVolume templates as they are added.
#[derive(Default)]
struct Builder {
    volumes: Vec<Value>,
    disks: Vec<Value>,
    templates: Vec<Value>,
}

impl Builder {
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
            memory: "512Mi".into(),
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
            memory: "1Gi".into(),
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
            memory: "512Mi".into(),
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
            memory: "512Mi".into(),
            ..Default::default()
        };
        let cases: Vec<(CreateVmArgs, &str)> = vec![
            (
                CreateVmArgs {
                    memory: "lots".into(),
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
}
