//! `ipMasq`: source NAT for traffic from the container's addresses to anywhere outside its
//! network, with the reference plugin's iptables rules (so either plugin tears down what the
//! other set up): in table `nat`, a chain `CNI-` + 24 hex digits of SHA-512(network name +
//! container ID) that accepts the container's own network, masquerades everything but
//! multicast, and is jumped to from POSTROUTING for the container's address; every rule
//! commented `name: "NET" id: "ID"`. Applied with the `iptables`/`ip6tables` commands.

use std::process::Command;

use sha2::{Digest, Sha512};

use super::error::CniError;
use super::result::IpPrefix;

/// The NAT rules of one container on one network.
pub struct IpMasq {
    chain: String,
    comment: String,
}

impl IpMasq {
    pub fn new(network: &str, container_id: &str) -> Self {
        let digest = hex::encode(Sha512::digest(
            format!("{network}{container_id}").as_bytes(),
        ));
        IpMasq {
            chain: format!("CNI-{}", &digest[..24]),
            comment: format!("name: {network:?} id: {container_id:?}"),
        }
    }

    /// Masquerades traffic from `address` leaving its network.
    pub fn setup(&self, address: IpPrefix) -> Result<(), CniError> {
        let tool = Tool::for_address(address);
        let multicast = if address.is_ipv4() {
            "224.0.0.0/4"
        } else {
            "ff00::/8"
        };
        if !tool.succeeds(&["-t", "nat", "-S", &self.chain]) {
            tool.run(&["-t", "nat", "-N", &self.chain])?;
        }
        let network = address.to_string();
        let source = address.addr.to_string();
        let comment = ["-m", "comment", "--comment", &self.comment];
        tool.append_unique(
            &self.chain,
            &[&["-d", &network, "-j", "ACCEPT"][..], &comment].concat(),
        )?;
        tool.append_unique(
            &self.chain,
            &[&["!", "-d", multicast, "-j", "MASQUERADE"][..], &comment].concat(),
        )?;
        tool.append_unique(
            "POSTROUTING",
            &[&["-s", &source, "-j", &self.chain][..], &comment].concat(),
        )
    }

    /// Removes what `setup` added for `address`; what is already gone is no error.
    pub fn teardown(&self, address: IpPrefix) -> Result<(), CniError> {
        let tool = Tool::for_address(address);
        let comment = ["-m", "comment", "--comment", &self.comment];
        let source = address.addr.to_string();
        let network = address.to_string();
        for source in [source.as_str(), network.as_str()] {
            let rule = [
                &[
                    "-t",
                    "nat",
                    "-D",
                    "POSTROUTING",
                    "-s",
                    source,
                    "-j",
                    &self.chain,
                ][..],
                &comment,
            ]
            .concat();
            // Each -D removes one copy; a rule added twice by hand is removed twice.
            for _ in 0..16 {
                if !tool.succeeds(&rule) {
                    break;
                }
            }
        }
        if tool.succeeds(&["-t", "nat", "-S", &self.chain]) {
            tool.run(&["-t", "nat", "-F", &self.chain])?;
            tool.run(&["-t", "nat", "-X", &self.chain])?;
        }
        Ok(())
    }

    /// Whether the POSTROUTING jump for `address` is in place (for CHECK).
    pub fn is_set_up(&self, address: IpPrefix) -> bool {
        let tool = Tool::for_address(address);
        let source = address.addr.to_string();
        tool.succeeds(&[
            "-t",
            "nat",
            "-C",
            "POSTROUTING",
            "-s",
            &source,
            "-j",
            &self.chain,
            "-m",
            "comment",
            "--comment",
            &self.comment,
        ])
    }
}

struct Tool(&'static str);

impl Tool {
    fn for_address(address: IpPrefix) -> Self {
        Tool(if address.is_ipv4() {
            "iptables"
        } else {
            "ip6tables"
        })
    }

    fn output(&self, args: &[&str]) -> Result<std::process::Output, CniError> {
        Command::new(self.0)
            .arg("-w")
            .args(args)
            .output()
            .map_err(|e| {
                CniError::internal(format!(
                    "ipMasq needs the {} command, which cannot be run: {e}",
                    self.0
                ))
            })
    }

    fn succeeds(&self, args: &[&str]) -> bool {
        self.output(args).is_ok_and(|out| out.status.success())
    }

    fn run(&self, args: &[&str]) -> Result<(), CniError> {
        let out = self.output(args)?;
        if out.status.success() {
            return Ok(());
        }
        Err(CniError::internal(format!(
            "{} {} failed: {}",
            self.0,
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }

    fn append_unique(&self, chain: &str, rule: &[&str]) -> Result<(), CniError> {
        let check = [&["-t", "nat", "-C", chain][..], rule].concat();
        if self.succeeds(&check) {
            return Ok(());
        }
        self.run(&[&["-t", "nat", "-A", chain][..], rule].concat())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_and_comment_are_the_reference_ones() {
        let masq = IpMasq::new("mynet", "abc");
        assert!(masq.chain.starts_with("CNI-"));
        assert_eq!(masq.chain.len(), 28);
        assert_eq!(masq.comment, "name: \"mynet\" id: \"abc\"");
    }
}
