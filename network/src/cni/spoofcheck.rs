//! `macspoofchk`: nftables rules that drop frames entering the bridge from a port with any
//! source MAC but the container's. The ruleset is the reference plugin's, so either plugin
//! can tear down what the other set up: table `bridge nat`, base chain `PREROUTING` (filter,
//! hook prerouting, priority -300), and per attachment the chains `cni-br-iface-ID` (jumped to
//! from PREROUTING for the host veth) and `cni-br-iface-ID-mac` (the MAC matches, else drop),
//! every rule commented `macspoofchk-ID`, ID being `CONTAINERID-IFNAME`. Applied with the
//! `nft` command's JSON input.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::error::CniError;

const TABLE: &str = "nat";
const BASE_CHAIN: &str = "PREROUTING";
const IFACE_CHAIN_PREFIX: &str = "cni-br-iface-";
const COMMENT_PREFIX: &str = "macspoofchk-";

/// The spoof check of one attachment.
pub struct SpoofCheck {
    id: String,
}

impl SpoofCheck {
    /// The check of the attachment `container_id`/`ifname`.
    pub fn new(container_id: &str, ifname: &str) -> Self {
        SpoofCheck {
            id: format!("{container_id}-{ifname}"),
        }
    }

    fn iface_chain(&self) -> String {
        format!("{IFACE_CHAIN_PREFIX}{}", self.id)
    }

    fn mac_chain(&self) -> String {
        format!("{}-mac", self.iface_chain())
    }

    fn comment(&self) -> String {
        format!("{COMMENT_PREFIX}{}", self.id)
    }

    fn rule(&self, chain: &str, expr: Value) -> Value {
        json!({"rule": {"family": "bridge", "table": TABLE, "chain": chain, "expr": expr, "comment": self.comment()}})
    }

    /// Lets only `mac` in from the bridge port `host_veth`. Two transactions, as the
    /// reference: first declare the table and chains (a no-op for those that exist), then
    /// flush this attachment's chains and fill them, atomically.
    pub fn setup(&self, host_veth: &str, mac: &str) -> Result<(), CniError> {
        let chain =
            |name: &str| json!({"chain": {"family": "bridge", "table": TABLE, "name": name}});
        let declare = vec![
            json!({"add": {"table": {"family": "bridge", "name": TABLE}}}),
            json!({"add": {"chain": {
                "family": "bridge", "table": TABLE, "name": BASE_CHAIN,
                "type": "filter", "hook": "prerouting", "prio": -300, "policy": "accept"
            }}}),
            json!({"add": chain(&self.iface_chain())}),
            json!({"add": chain(&self.mac_chain())}),
        ];
        apply(declare).map_err(|e| e.context("failed to set up macspoofchk"))?;
        let rules = vec![
            json!({"flush": chain(&self.iface_chain())}),
            json!({"flush": chain(&self.mac_chain())}),
            json!({"add": self.rule(BASE_CHAIN, json!([
                {"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": host_veth}},
                {"jump": {"target": self.iface_chain()}}
            ]))}),
            json!({"add": self.rule(&self.iface_chain(), json!([{"jump": {"target": self.mac_chain()}}]))}),
            json!({"add": self.rule(&self.mac_chain(), json!([
                {"match": {"op": "==", "left": {"payload": {"protocol": "ether", "field": "saddr"}}, "right": mac}},
                {"return": null}
            ]))}),
            json!({"add": self.rule(&self.mac_chain(), json!([{"drop": null}]))}),
        ];
        apply(rules).map_err(|e| e.context("failed to set up macspoofchk"))
    }

    /// Removes the attachment's jump rule and chains; the table and base chain stay.
    pub fn teardown(&self) -> Result<(), CniError> {
        let mut problems = Vec::new();
        match list(&["chain", "bridge", TABLE, BASE_CHAIN]) {
            Ok(ruleset) => {
                let deletes: Vec<Value> = rules_of(&ruleset)
                    .filter(|rule| {
                        rule.get("chain").and_then(Value::as_str) == Some(BASE_CHAIN)
                            && rule.get("comment").and_then(Value::as_str) == Some(self.comment().as_str())
                    })
                    .filter_map(|rule| rule.get("handle").cloned())
                    .map(|handle| {
                        json!({"delete": {"rule": {"family": "bridge", "table": TABLE, "chain": BASE_CHAIN, "handle": handle}}})
                    })
                    .collect();
                if !deletes.is_empty() {
                    if let Err(e) = apply(deletes) {
                        problems.push(format!("cannot delete the jump rule: {e}"));
                    }
                }
            }
            // Without the base chain there is no jump rule to remove.
            Err(e) => tracing::debug!("macspoofchk teardown: {e}"),
        }
        let delete_chain = |name: String| json!({"delete": {"chain": {"family": "bridge", "table": TABLE, "name": name}}});
        if let Err(e) = apply(vec![
            delete_chain(self.iface_chain()),
            delete_chain(self.mac_chain()),
        ]) {
            problems.push(format!("cannot delete the chains: {e}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CniError::internal(format!(
                "failed to tear down macspoofchk {}: {}",
                self.id,
                problems.join("; ")
            )))
        }
    }

    /// Whether the attachment's rules are in place (for CHECK).
    pub fn is_set_up(&self, host_veth: &str) -> Result<bool, CniError> {
        let ruleset = list(&["chain", "bridge", TABLE, BASE_CHAIN])?;
        let comment = self.comment();
        Ok(rules_of(&ruleset).any(|rule| {
            rule.get("comment").and_then(Value::as_str) == Some(comment.as_str())
                && rule.to_string().contains(&format!("\"{host_veth}\""))
        }))
    }

    /// GC: tears down the checks of every attachment not in `valid` (IDs `CONTAINERID-IFNAME`).
    pub fn collect_garbage(valid: &BTreeSet<String>) -> Result<(), CniError> {
        let ruleset = match list(&["table", "bridge", TABLE]) {
            Ok(ruleset) => ruleset,
            // No table, nothing to collect.
            Err(_) => return Ok(()),
        };
        let stale: BTreeSet<String> = items(&ruleset)
            .filter_map(|item| item.get("chain"))
            .filter_map(|chain| chain.get("name").and_then(Value::as_str))
            .filter_map(|name| name.strip_prefix(IFACE_CHAIN_PREFIX))
            .filter(|id| !id.ends_with("-mac"))
            .filter(|id| !valid.contains(*id))
            .map(str::to_owned)
            .collect();
        let mut problems = Vec::new();
        for id in stale {
            if let Err(e) = (SpoofCheck { id }).teardown() {
                problems.push(e.msg);
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CniError::internal(problems.join("; ")))
        }
    }
}

fn items(ruleset: &Value) -> impl Iterator<Item = &Value> {
    ruleset
        .get("nftables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn rules_of(ruleset: &Value) -> impl Iterator<Item = &Value> {
    items(ruleset).filter_map(|item| item.get("rule"))
}

fn nft(args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, CniError> {
    let mut child = Command::new("nft")
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            CniError::internal(format!(
                "macspoofchk needs the nft command (package nftables), which cannot be run: {e}"
            ))
        })?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        let _ = stdin.write_all(input);
    }
    let output = child
        .wait_with_output()
        .map_err(|e| CniError::internal(format!("cannot wait for nft: {e}")))?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(CniError::internal(format!(
            "nft {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

fn apply(commands: Vec<Value>) -> Result<(), CniError> {
    let input = json!({"nftables": commands}).to_string();
    nft(&["-j", "-f", "-"], Some(input.as_bytes())).map(drop)
}

fn list(what: &[&str]) -> Result<Value, CniError> {
    let mut args = vec!["-j", "-a", "list"];
    args.extend_from_slice(what);
    let out = nft(&args, None)?;
    serde_json::from_slice(&out)
        .map_err(|e| CniError::internal(format!("nft printed something that is not JSON: {e}")))
}
