//! Guardrails: an ordered list of rules in a TOML file; the first rule that matches decides.
//!
//! ```toml
//! default = "allow"                 # when no rule matches (allow or deny)
//!
//! [[rule]]
//! id = "no-writes-outside-tmp"      # recorded as the guardrail
//! tool = "write_file"               # glob on the tool name (`*`, `?`); absent: any tool
//! server = "secure-filesystem-*"    # glob on serverInfo.name or the command line; absent: any
//! args = { path = "/etc/*" }        # argument path (dots for nesting) -> glob on its value
//! verdict = "deny"                  # allow, deny, or escalate (held for a human)
//! reason = "writes only under /tmp"
//!
//! [[approver]]                      # a person whose key may sign approvals
//! name = "j.doe@acme.example"
//! keys = ["ssh-ed25519 AAAA…", "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"]
//!
//! [[rule]]
//! id = "prod-sql-needs-a-signed-ok"
//! tool = "query"
//! verdict = "escalate"
//! signed_by = ["j.doe@acme.example"] # the call runs only with a valid signature of one of them
//! ```
//!
//! Every evaluation is recorded in the event's `policy_evaluation`: the rule id as
//! `guardrail` (`default` when no rule matched), `sha256:<hex>` of the policy file's bytes as
//! `version`, the verdict and the reason.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::json::glob;

/// Errors loading a policy file.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("policy {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid policy.
    #[error("policy {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What a rule decides: core's guardrail verdict. `allow` forwards the call; `warn` forwards it
/// too, recorded with the warning; `deny` answers a JSON-RPC error and the call never reaches
/// the server; `escalate` holds it until a human approves it (then it is forwarded) or rejects
/// it.
pub use afr_core::event::GuardrailVerdict;

/// One rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Recorded as the guardrail.
    pub id: String,
    /// Glob on the tool name.
    pub tool: Option<String>,
    /// Glob on the server's name (serverInfo.name) or its command line.
    pub server: Option<String>,
    /// Argument paths (dot-separated) and globs on their values (strings as they are, other
    /// values as JSON text); all must match, and a missing path does not match.
    #[serde(default)]
    pub args: std::collections::BTreeMap<String, String>,
    /// The verdict.
    pub verdict: GuardrailVerdict,
    /// Why, recorded and returned to the client on a deny.
    pub reason: Option<String>,
    /// For `escalate`: the approvers (by name) one of whom must sign the approval
    /// (`docs/spec/approvals.md`); empty when an unsigned decision is enough.
    #[serde(default)]
    pub signed_by: Vec<String>,
    /// For `escalate`: whether the client may be asked through MCP elicitation (default: the
    /// policy's `elicitation`). `false` waits for `afr approve` / `afr reject` only.
    #[serde(default)]
    pub elicit: Option<bool>,
}

/// A person whose keys may sign approvals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approver {
    /// The name recorded as `human_approval.approver` when one of the keys signs.
    pub name: String,
    /// The keys, canonical ([`afr_core::approval::canonical_signer`]).
    pub keys: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproverFile {
    name: String,
    keys: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default = "allow")]
    default: GuardrailVerdict,
    /// Whether escalated calls may ask the client's user through MCP elicitation. Headless
    /// hosts that declare the capability but answer every elicitation with `cancel`
    /// (fast-agent) turn every escalation into a rejection: set `false` for them.
    #[serde(default = "yes")]
    elicitation: bool,
    /// Whether `tools/list` answers leave out the tools this policy denies outright (a deny
    /// rule on the tool's name and server, with no argument condition, that no earlier rule
    /// could override), so an agent is not offered what it may never call.
    #[serde(default)]
    filter_tools: bool,
    #[serde(default)]
    approver: Vec<ApproverFile>,
    #[serde(default)]
    rule: Vec<Rule>,
}

fn yes() -> bool {
    true
}

fn allow() -> GuardrailVerdict {
    GuardrailVerdict::Allow
}

/// A loaded policy.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Vec<Rule>,
    default: GuardrailVerdict,
    version: String,
    approvers: Vec<Approver>,
    elicitation: bool,
    filter_tools: bool,
}

/// The outcome of evaluating a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// The rule id, or `default`.
    pub guardrail: String,
    /// `sha256:<hex>` of the policy file.
    pub version: String,
    /// The verdict.
    pub verdict: GuardrailVerdict,
    /// Why.
    pub reason: Option<String>,
    /// Whose signature an escalated call needs (one of them); empty: an unsigned decision.
    pub signed_by: Vec<Approver>,
    /// Whether an escalated call may be decided through MCP elicitation.
    pub elicit: bool,
}

/// What a call is evaluated on.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The tool name.
    pub tool: &'a str,
    /// The arguments (`Null` if absent).
    pub args: &'a Value,
    /// serverInfo.name, if the server sent one.
    pub server_name: Option<&'a str>,
    /// The server's command line.
    pub command_line: &'a str,
}

impl Policy {
    /// Reads and checks a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let bytes = std::fs::read(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Policy::parse(&bytes).map_err(|message| PolicyError::Invalid {
            path: path.to_owned(),
            message,
        })
    }

    /// Parses a policy from the bytes of its file.
    pub fn parse(bytes: &[u8]) -> Result<Policy, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
        let file: File = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let mut approvers: Vec<Approver> = Vec::new();
        for a in file.approver {
            if a.name.is_empty() || approvers.iter().any(|x| x.name == a.name) {
                return Err(format!("approver `{}` is empty or appears twice", a.name));
            }
            if a.keys.is_empty() {
                return Err(format!("approver `{}` has no keys", a.name));
            }
            let mut keys = Vec::new();
            for k in &a.keys {
                let c = afr_core::approval::canonical_signer(k).ok_or_else(|| {
                    format!(
                        "approver `{}`: key `{k}` is neither an Ethereum address (0x + 40 hex) nor an OpenSSH public key",
                        a.name
                    )
                })?;
                let kind = c.split_once(' ').map_or("", |(t, _)| t);
                if !c.starts_with("0x") && !afr_core::approval::SSH_KEY_TYPES.contains(&kind) {
                    return Err(format!(
                        "approver `{}`: keys of type `{kind}` cannot sign approvals (supported: {})",
                        a.name,
                        afr_core::approval::SSH_KEY_TYPES.join(", ")
                    ));
                }
                if let Some(o) = approvers.iter().find(|x| x.keys.contains(&c)) {
                    return Err(format!(
                        "approvers `{}` and `{}` share the key `{k}`",
                        o.name, a.name
                    ));
                }
                keys.push(c);
            }
            approvers.push(Approver { name: a.name, keys });
        }
        let mut seen = std::collections::BTreeSet::new();
        for r in &file.rule {
            if r.id.is_empty() || r.id == "default" {
                return Err(format!("rule id `{}` is reserved or empty", r.id));
            }
            if !seen.insert(r.id.as_str()) {
                return Err(format!("rule id `{}` appears twice", r.id));
            }
            if !r.signed_by.is_empty() && r.verdict != GuardrailVerdict::Escalate {
                return Err(format!(
                    "rule `{}`: signed_by needs verdict = \"escalate\"",
                    r.id
                ));
            }
            if let Some(n) = r
                .signed_by
                .iter()
                .find(|n| !approvers.iter().any(|a| &a.name == *n))
            {
                return Err(format!(
                    "rule `{}`: signed_by names `{n}`, who is no [[approver]]",
                    r.id
                ));
            }
        }
        Ok(Policy {
            rules: file.rule,
            default: file.default,
            version: format!("sha256:{}", hex::encode(Sha256::digest(bytes))),
            approvers,
            elicitation: file.elicitation,
            filter_tools: file.filter_tools,
        })
    }

    /// The policy with elicitation turned off for every rule (`--no-elicitation`).
    pub fn without_elicitation(mut self) -> Policy {
        self.elicitation = false;
        self
    }

    /// The policy with `tools/list` filtering turned on (`--filter-tools`).
    pub fn with_tool_filter(mut self) -> Policy {
        self.filter_tools = true;
        self
    }

    /// Whether `tools/list` answers are filtered ([`Policy::hides`]).
    pub fn filters_tools(&self) -> bool {
        self.filter_tools
    }

    /// The evaluation that denies every call of `tool` whatever its arguments, if there is
    /// one: the first rule whose tool and server match decides only when it has no argument
    /// condition (an earlier rule with one might allow some calls, so the tool stays offered);
    /// with no rule that could match, the default does.
    pub fn hides(
        &self,
        tool: &str,
        server_name: Option<&str>,
        command_line: &str,
    ) -> Option<Evaluation> {
        let probe = Call {
            tool,
            args: &serde_json::Value::Null,
            server_name,
            command_line,
        };
        let first = self.rules.iter().find(|r| {
            let mut r = (*r).clone();
            r.args.clear();
            matches(&r, &probe)
        });
        let e = match first {
            Some(r) if r.args.is_empty() => self.evaluate(&probe),
            Some(_) => return None,
            None => self.evaluate(&probe),
        };
        (e.verdict == GuardrailVerdict::Deny).then_some(e)
    }

    /// The first matching rule's verdict, else the default.
    pub fn evaluate(&self, call: &Call<'_>) -> Evaluation {
        match self.rules.iter().find(|r| matches(r, call)) {
            Some(r) => Evaluation {
                guardrail: r.id.clone(),
                version: self.version.clone(),
                verdict: r.verdict,
                reason: r.reason.clone(),
                signed_by: self
                    .approvers
                    .iter()
                    .filter(|a| r.signed_by.contains(&a.name))
                    .cloned()
                    .collect(),
                elicit: self.elicitation && r.elicit.unwrap_or(true),
            },
            None => Evaluation {
                guardrail: "default".into(),
                version: self.version.clone(),
                verdict: self.default,
                reason: Some("no rule matched".into()),
                signed_by: Vec::new(),
                elicit: self.elicitation,
            },
        }
    }
}

fn matches(r: &Rule, c: &Call<'_>) -> bool {
    if r.tool.as_deref().is_some_and(|p| !glob(p, c.tool)) {
        return false;
    }
    if let Some(p) = &r.server {
        let named = c.server_name.is_some_and(|n| glob(p, n));
        if !named && !glob(p, c.command_line) {
            return false;
        }
    }
    r.args.iter().all(|(path, pattern)| {
        let mut v = c.args;
        for part in path.split('.') {
            v = match v {
                Value::Object(m) => match m.get(part) {
                    Some(x) => x,
                    None => return false,
                },
                Value::Array(a) => match part.parse::<usize>().ok().and_then(|i| a.get(i)) {
                    Some(x) => x,
                    None => return false,
                },
                _ => return false,
            };
        }
        match v {
            Value::String(s) => glob(pattern, s),
            other => glob(pattern, &other.to_string()),
        }
    })
}

#[cfg(test)]
mod hides_tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn only_outright_denies_hide_a_tool() {
        let p = Policy::parse(
            br#"
[[rule]]
id = "tmp-writes"
tool = "write_file"
args = { path = "/tmp/*" }
verdict = "allow"

[[rule]]
id = "no-writes"
tool = "write_file"
verdict = "deny"

[[rule]]
id = "no-deletes"
tool = "delete_*"
server = "prod-*"
verdict = "deny"
"#,
        )
        .unwrap();
        // An earlier rule allows some writes: still offered.
        assert!(p.hides("write_file", None, "x").is_none());
        assert_eq!(
            p.hides("delete_db", Some("prod-db"), "x")
                .unwrap()
                .guardrail,
            "no-deletes"
        );
        assert!(p.hides("delete_db", Some("staging"), "x").is_none());
        assert!(p.hides("read_file", None, "x").is_none());
        let closed = Policy::parse(b"default = \"deny\"\n").unwrap();
        assert_eq!(
            closed.hides("anything", None, "x").unwrap().guardrail,
            "default"
        );
        assert!(!p.filters_tools() && p.with_tool_filter().filters_tools());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    const POLICY: &str = r#"
default = "allow"
[[rule]]
id = "tmp-ok"
tool = "write_file"
args = { path = "/tmp/*" }
verdict = "allow"
[[rule]]
id = "no-writes"
tool = "write_*"
verdict = "deny"
reason = "writes only under /tmp"
[[rule]]
id = "no-env"
tool = "get-env"
server = "mcp-servers/*"
verdict = "deny"
"#;

    fn call<'a>(tool: &'a str, args: &'a Value) -> Call<'a> {
        Call {
            tool,
            args,
            server_name: Some("mcp-servers/everything"),
            command_line: "node server",
        }
    }

    #[test]
    fn first_matching_rule_decides() {
        let p = Policy::parse(POLICY.as_bytes()).unwrap();
        let tmp = serde_json::json!({"path": "/tmp/a", "content": "x"});
        let etc = serde_json::json!({"path": "/etc/a", "content": "x"});
        assert_eq!(p.evaluate(&call("write_file", &tmp)).guardrail, "tmp-ok");
        let e = p.evaluate(&call("write_file", &etc));
        assert_eq!(
            (e.guardrail.as_str(), e.verdict),
            ("no-writes", GuardrailVerdict::Deny)
        );
        assert_eq!(e.reason.as_deref(), Some("writes only under /tmp"));
        assert!(e.version.starts_with("sha256:") && e.version.len() == 7 + 64);
        assert_eq!(
            p.evaluate(&call("get-env", &Value::Null)).verdict,
            GuardrailVerdict::Deny
        );
        let d = p.evaluate(&call("echo", &Value::Null));
        assert_eq!(
            (d.guardrail.as_str(), d.verdict),
            ("default", GuardrailVerdict::Allow)
        );
    }

    #[test]
    fn a_warn_rule_is_a_verdict_of_its_own() {
        let p = Policy::parse(
            br#"
[[rule]]
id = "shell-watch"
tool = "run_*"
verdict = "warn"
reason = "shell commands are reviewed later"
"#,
        )
        .unwrap();
        let e = p.evaluate(&call("run_shell", &Value::Null));
        assert_eq!(
            (e.guardrail.as_str(), e.verdict),
            ("shell-watch", GuardrailVerdict::Warn)
        );
        assert!(Policy::parse(b"[[rule]]\nid = \"x\"\nverdict = \"maybe\"\n").is_err());
    }

    #[test]
    fn a_missing_argument_path_does_not_match() {
        let p = Policy::parse(POLICY.as_bytes()).unwrap();
        let none = serde_json::json!({"content": "x"});
        assert_eq!(
            p.evaluate(&call("write_file", &none)).guardrail,
            "no-writes"
        );
    }

    const SIGNED: &str = r#"
[[approver]]
name = "alice"
keys = ["0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266"]
[[approver]]
name = "bob"
keys = ["0x70997970c51812dc3a010c7d01b50e0d17dc79c8"]
[[rule]]
id = "signed"
tool = "drop_*"
verdict = "escalate"
signed_by = ["bob"]
"#;

    #[test]
    fn escalations_name_their_signers_with_canonical_keys() {
        let p = Policy::parse(SIGNED.as_bytes()).unwrap();
        let e = p.evaluate(&call("drop_table", &Value::Null));
        assert_eq!(e.verdict, GuardrailVerdict::Escalate);
        assert_eq!(
            e.signed_by,
            vec![Approver {
                name: "bob".into(),
                keys: vec!["0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()],
            }]
        );
        assert!(p.evaluate(&call("echo", &Value::Null)).signed_by.is_empty());
        let bad = [
            // An unknown approver, signed_by on a deny, a key that is not a key, a shared key.
            SIGNED.replace("[\"bob\"]", "[\"carol\"]"),
            SIGNED.replace("\"escalate\"", "\"deny\""),
            SIGNED.replace(
                "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
                "ssh-ed25519 nope",
            ),
            SIGNED.replace(
                "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
                "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            ),
        ];
        for b in bad {
            assert!(Policy::parse(b.as_bytes()).is_err(), "{b}");
        }
    }

    #[test]
    fn bad_files_are_refused() {
        for bad in [
            "[[rule]]\nid = \"a\"\nverdict = \"maybe\"\n",
            "[[rule]]\nid = \"a\"\nverdict = \"deny\"\ntypo = 1\n",
            "[[rule]]\nid = \"a\"\nverdict = \"deny\"\n[[rule]]\nid = \"a\"\nverdict = \"allow\"\n",
            "[[rule]]\nid = \"default\"\nverdict = \"deny\"\n",
        ] {
            assert!(Policy::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
