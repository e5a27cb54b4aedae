//! Witness quorums (`c2sp.org/tlog-policy`): witnesses, groups of `k` of `n` members, and the
//! one quorum a checkpoint's cosignatures must meet.
//!
//! The policy text is read as the spec writes it:
//!
//! ```text
//! log <vkey> [<url>]
//! witness <name> <vkey> [<url>]
//! group <name> all|any|<k> <name>...       (members defined on earlier lines, each once)
//! quorum <name>|none
//! ```
//!
//! The verifier's trust file carries the same statements as TOML tables and builds a
//! [`Policy`] through the same checks ([`Policy::add_witness`], [`Policy::add_group`],
//! [`Policy::set_quorum`]).

use std::collections::HashSet;

use crate::note::{TYPE_COSIGNATURE, TYPE_ED25519, VerifierKey};

/// Limits (the spec recommends supporting at least 32 of each).
pub const MAX_ENTRIES: usize = 256;

/// What is wrong with a policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A line, with its number (1-based; 0 for a trust-file table).
    #[error("policy line {line}: {why}")]
    Line {
        /// Line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// No quorum line.
    #[error("the policy has no quorum line (write \"quorum none\" to require no witness)")]
    NoQuorum,
}

/// How many members of a group must have witnessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    /// Every member.
    All,
    /// At least `k` (`any` is 1).
    AtLeast(usize),
}

/// A named witness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witness {
    /// Name in the policy.
    pub name: String,
    /// Its cosigning key (signature type `0x04`).
    pub key: VerifierKey,
    /// Submission prefix, if given.
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    name: String,
    k: usize,
    members: Vec<String>,
}

/// A trust policy for checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Accepted log keys (signature type `0x01`).
    pub logs: Vec<VerifierKey>,
    /// Known witnesses.
    pub witnesses: Vec<Witness>,
    groups: Vec<Group>,
    /// `None` until set; `Some(None)` is `quorum none`.
    quorum: Option<Option<String>>,
}

fn line_err(line: usize, why: impl Into<String>) -> PolicyError {
    PolicyError::Line {
        line,
        why: why.into(),
    }
}

impl Policy {
    fn defined(&self, name: &str) -> bool {
        self.witnesses.iter().any(|w| w.name == name) || self.groups.iter().any(|g| g.name == name)
    }

    fn check_new_name(&self, name: &str, line: usize) -> Result<(), PolicyError> {
        if name == "none" {
            return Err(line_err(line, "\"none\" is reserved"));
        }
        if self.defined(name) {
            return Err(line_err(line, format!("{name:?} is defined twice")));
        }
        if self.witnesses.len() + self.groups.len() >= MAX_ENTRIES {
            return Err(line_err(
                line,
                format!("more than {MAX_ENTRIES} witnesses and groups"),
            ));
        }
        Ok(())
    }

    /// Adds a log key (type `0x01`).
    pub fn add_log(&mut self, key: VerifierKey, line: usize) -> Result<(), PolicyError> {
        if key.kind != TYPE_ED25519 {
            return Err(line_err(
                line,
                "a log key must be an Ed25519 note key (type 0x01)",
            ));
        }
        if self.logs.iter().any(|k| k.public == key.public) {
            return Err(line_err(line, "the log key is listed twice"));
        }
        self.logs.push(key);
        Ok(())
    }

    /// Adds a witness (its key of type `0x04`).
    pub fn add_witness(&mut self, w: Witness, line: usize) -> Result<(), PolicyError> {
        self.check_new_name(&w.name, line)?;
        if w.key.kind != TYPE_COSIGNATURE {
            return Err(line_err(
                line,
                format!(
                    "witness {}: the key must be a cosignature/v1 key (type 0x04)",
                    w.name
                ),
            ));
        }
        if self.witnesses.iter().any(|o| o.key.public == w.key.public) {
            return Err(line_err(
                line,
                format!("witness {}: its key is another witness's", w.name),
            ));
        }
        self.witnesses.push(w);
        Ok(())
    }

    /// Adds a group of earlier-defined members.
    pub fn add_group(
        &mut self,
        name: &str,
        threshold: Threshold,
        members: &[String],
        line: usize,
    ) -> Result<(), PolicyError> {
        self.check_new_name(name, line)?;
        if members.is_empty() {
            return Err(line_err(line, format!("group {name} has no member")));
        }
        let mut seen = HashSet::new();
        for m in members {
            if !self.defined(m) {
                return Err(line_err(
                    line,
                    format!("group {name}: {m:?} is not defined on an earlier line"),
                ));
            }
            if !seen.insert(m.as_str()) {
                return Err(line_err(
                    line,
                    format!("group {name}: {m:?} is listed twice"),
                ));
            }
        }
        let k = match threshold {
            Threshold::All => members.len(),
            Threshold::AtLeast(k) if (1..=members.len()).contains(&k) => k,
            Threshold::AtLeast(k) => {
                return Err(line_err(
                    line,
                    format!(
                        "group {name}: threshold {k} is not between 1 and {}",
                        members.len()
                    ),
                ));
            }
        };
        self.groups.push(Group {
            name: name.to_owned(),
            k,
            members: members.to_vec(),
        });
        Ok(())
    }

    /// Sets the quorum (`None`: no cosignature required).
    pub fn set_quorum(&mut self, name: Option<&str>, line: usize) -> Result<(), PolicyError> {
        if self.quorum.is_some() {
            return Err(line_err(line, "a second quorum line"));
        }
        if let Some(n) = name.filter(|n| !self.defined(n)) {
            return Err(line_err(
                line,
                format!("quorum {n:?} is not defined on an earlier line"),
            ));
        }
        self.quorum = Some(name.map(str::to_owned));
        Ok(())
    }

    /// Whether a quorum was set.
    pub fn has_quorum(&self) -> bool {
        self.quorum.is_some()
    }

    /// The quorum's name (`none` when no cosignature is required).
    pub fn quorum_name(&self) -> &str {
        match &self.quorum {
            Some(Some(n)) => n,
            _ => "none",
        }
    }

    /// Whether the witnesses named in `cosigned` meet the quorum. Without a quorum line,
    /// nothing does.
    pub fn met(&self, cosigned: &HashSet<&str>) -> bool {
        match &self.quorum {
            None => false,
            Some(None) => true,
            Some(Some(q)) => self.witnessed(q, cosigned, 0),
        }
    }

    fn witnessed(&self, name: &str, cosigned: &HashSet<&str>, depth: usize) -> bool {
        if depth > MAX_ENTRIES {
            return false;
        }
        if self.witnesses.iter().any(|w| w.name == name) {
            return cosigned.contains(name);
        }
        self.groups
            .iter()
            .find(|g| g.name == name)
            .is_some_and(|g| {
                g.members
                    .iter()
                    .filter(|m| self.witnessed(m, cosigned, depth + 1))
                    .count()
                    >= g.k
            })
    }

    /// Parses a `tlog-policy` text.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let mut p = Policy::default();
        for (i, raw) in text.split('\n').enumerate() {
            let line = i + 1;
            if raw.bytes().any(|b| b < 0x20 && b != b'\t') || raw.bytes().any(|b| b == 0x7f) {
                return Err(line_err(line, "a control character other than tab"));
            }
            let words: Vec<&str> = raw.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
            let Some((&kw, args)) = words.split_first() else {
                continue;
            };
            if kw.starts_with('#') {
                continue;
            }
            let key = |s: &str| VerifierKey::parse(s).map_err(|e| line_err(line, e.to_string()));
            match (kw, args) {
                ("log", [vkey] | [vkey, _]) => p.add_log(key(vkey)?, line)?,
                ("witness", [name, vkey, rest @ ..]) if rest.len() <= 1 => p.add_witness(
                    Witness {
                        name: (*name).to_owned(),
                        key: key(vkey)?,
                        url: rest.first().map(|u| (*u).to_owned()),
                    },
                    line,
                )?,
                ("group", [name, t, members @ ..]) => {
                    let threshold = match *t {
                        "all" => Threshold::All,
                        "any" => Threshold::AtLeast(1),
                        k => Threshold::AtLeast(
                            crate::checkpoint::parse_decimal(k)
                                .and_then(|k| usize::try_from(k).ok())
                                .ok_or_else(|| {
                                    line_err(
                                        line,
                                        format!("threshold {k:?} is not all, any or a number"),
                                    )
                                })?,
                        ),
                    };
                    let members: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
                    p.add_group(name, threshold, &members, line)?;
                }
                ("quorum", [name]) => p.set_quorum((*name != "none").then_some(*name), line)?,
                _ => {
                    return Err(line_err(
                        line,
                        format!("cannot read {kw:?} with {} argument(s)", args.len()),
                    ));
                }
            }
        }
        if p.quorum.is_none() {
            return Err(PolicyError::NoQuorum);
        }
        Ok(p)
    }
}
