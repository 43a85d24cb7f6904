//! Firmware: SeaBIOS (optionally mirrored to the serial port) or OVMF with its EFI
//! variable store, with or without secure boot.

use std::path::{Path, PathBuf};

use api::kubevirt::VirtualMachineInstanceSpec;
use api::validation::FieldPath;

use super::facts::NodeFacts;
use super::machine::{Identity, MachinePlan};
use super::{DomainError, PrepareStep};

/// KubeVirt's refusal of secure boot on a machine without SMM.
pub const SECURE_BOOT_NEEDS_SMM: &str =
    "spec.domain has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled.";

/// The legacy serial port SeaBIOS mirrors its screen to with `bios.useSerial`.
const COM1: u16 = 0x3f8;

/// The firmware part of the invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct FirmwarePlan {
    pub kind: FirmwareKind,
    pub prepare: Vec<PrepareStep>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FirmwareKind {
    Bios {
        image: PathBuf,
        /// A fw_cfg file telling SeaBIOS to use the serial console.
        sercon_port: Option<PathBuf>,
    },
    Efi {
        code: PathBuf,
        vars: PathBuf,
        secure_boot: bool,
    },
}

pub fn plan(
    spec: &VirtualMachineInstanceSpec,
    facts: &NodeFacts,
    identity: &Identity,
    machine: &MachinePlan,
) -> Result<FirmwarePlan, DomainError> {
    let path = FieldPath::new("spec")
        .child("domain")
        .child("firmware")
        .child("bootloader");
    let bootloader = spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.clone())
        .unwrap_or_default();
    if bootloader.bios.is_some() && bootloader.efi.is_some() {
        return Err(DomainError::unsupported(
            &path,
            "set one of bios and efi, not both",
        ));
    }
    let Some(efi) = bootloader.efi else {
        return bios(
            facts,
            bootloader.bios.and_then(|b| b.use_serial).unwrap_or(false),
            &path,
        );
    };
    let secure_boot = efi.secure_boot.unwrap_or(true);
    if secure_boot && !machine.smm {
        return Err(DomainError::Refused(SECURE_BOOT_NEEDS_SMM.to_owned()));
    }
    if !machine.is_q35() {
        return Err(DomainError::unsupported(
            &path.child("efi"),
            "EFI needs a q35 machine type",
        ));
    }
    let fw = &facts.firmware;
    let (code, template, what) = if secure_boot {
        (
            &fw.ovmf_code_secure_boot,
            &fw.ovmf_vars_secure_boot,
            "OVMF secure boot",
        )
    } else {
        (&fw.ovmf_code, &fw.ovmf_vars, "OVMF")
    };
    let field = path.child("efi").to_string();
    let missing = |file: &str| DomainError::FirmwareMissing {
        field: field.clone(),
        what: what.to_owned(),
        looked_for: file.to_owned(),
    };
    let code = code.clone().ok_or_else(|| missing("its code image"))?;
    let template = template
        .clone()
        .ok_or_else(|| missing("its variable store template"))?;
    let vars_dir: &Path = if efi.persistent.unwrap_or(false) {
        &facts.nvram_dir
    } else {
        &facts.run_dir
    };
    let vars = vars_dir.join(format!("{}_VARS.fd", identity.qemu_name));
    Ok(FirmwarePlan {
        kind: FirmwareKind::Efi {
            code,
            vars: vars.clone(),
            secure_boot,
        },
        prepare: vec![PrepareStep::CopyIfMissing {
            from: template,
            to: vars,
        }],
    })
}

fn bios(
    facts: &NodeFacts,
    use_serial: bool,
    path: &FieldPath,
) -> Result<FirmwarePlan, DomainError> {
    let image = facts
        .firmware
        .seabios
        .clone()
        .ok_or_else(|| DomainError::FirmwareMissing {
            field: path.child("bios").to_string(),
            what: "SeaBIOS".to_owned(),
            looked_for: "bios-256k.bin".to_owned(),
        })?;
    let mut prepare = Vec::new();
    let sercon_port = use_serial.then(|| {
        let file = facts.run_dir.join("sercon-port");
        // SeaBIOS reads the fw_cfg file as a little-endian integer: the port to use.
        prepare.push(PrepareStep::WriteFile {
            path: file.clone(),
            contents: COM1.to_le_bytes().to_vec(),
        });
        file
    });
    Ok(FirmwarePlan {
        kind: FirmwareKind::Bios { image, sercon_port },
        prepare,
    })
}
