//! A case's answer as one JSON object (`--json`) and as text for a terminal.

use afr_core::{
    RecorderId,
    text::escape,
    verify::{Check, Failure, Outcome},
};

use super::{Blame, CaseReport, PartyVerdict, hex_id};

impl CaseReport {
    /// The parties in the case (see [`Case::listed`]).
    pub fn involved(&self) -> impl Iterator<Item = &PartyVerdict> {
        self.parties.iter().filter(|p| p.in_case)
    }

    fn party_name(&self, i: Option<usize>) -> Option<&str> {
        i.and_then(|i| self.parties.get(i))
            .and_then(|p| p.name.as_deref())
    }

    /// The report as one JSON object (`afr-verify case --json`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let fail = |f: &Option<(Failure, Option<String>)>| {
            f.as_ref().map(|(f, file)| {
                let mut v = f.to_json();
                if let Some(o) = v.as_object_mut() {
                    o.insert("bundle".into(), json!(file));
                }
                v
            })
        };
        json!({
            "outcome": self.outcome.name(),
            "trust": {
                "chain_id": self.trust.chain_id,
                "contract": self.trust.contract_hex(),
                "canonical_contract": self.trust.canonical(),
                "approvers_pinned": self.trust.approvers.len(),
                "require_signed_approvals": self.trust.require_signed_approvals,
            },
            "parties": self.involved().map(|p| json!({
                "name": p.name,
                "recorders": p.recorders.iter().map(hex_id).collect::<Vec<_>>(),
                "outcome": p.outcome.name(),
                "first_failure": fail(&p.first_failure),
                "missing": p.missing,
                "bundles": p.bundles.iter().map(|b| {
                    let mut v = b.verdict.to_json(Some(&b.trust));
                    if let Some(o) = v.as_object_mut() {
                        o.insert("file".into(), json!(b.file));
                    }
                    v
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "links": self.links.iter().map(|l| json!({
                "from": {"party": self.party_name(Some(l.from_party)), "recorder": hex_id(&l.from_recorder), "seq": l.from_seq},
                "to": {"party": self.party_name(l.to_party), "recorder": l.to_recorder.as_ref().map(hex_id), "seq": l.to_seq},
                "kind": l.kind.name(),
                "receipt": l.backing.name(),
                "role": l.role,
                "leaf_hash": l.leaf_hash.map(|h| h.to_hex()),
                "status": l.status.name(),
                "blames": l.blame.map(Blame::name),
                "blamed_party": match l.blame {
                    Some(Blame::Citing) => self.party_name(Some(l.from_party)),
                    Some(Blame::Linked) => self.party_name(l.to_party),
                    _ => None,
                },
                "check": l.check.map(Check::name),
                "why": l.why,
            })).collect::<Vec<_>>(),
            "chains": self.chains.iter().map(|c| c.iter().map(|s| json!({
                "party": s.party,
                "recorder": hex_id(&s.recorder),
                "seq": s.seq,
                "tool": s.tool,
                "via": s.via,
                "status": s.status.map(Outcome::name),
            })).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "missing": self.missing,
            "notes": self.notes,
        })
    }

    /// The report for a terminal; every string from a file or the case file is escaped
    /// ([`afr_core::text::escape`]).
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "CASE {}", self.outcome.name().to_uppercase());
        let _ = writeln!(
            out,
            "  trust: {}, contract {}{}, {} parties pinned",
            self.trust
                .chain_id
                .map_or_else(|| "no chain pinned".to_owned(), |c| format!("chain {c}")),
            self.trust.contract_hex(),
            if self.trust.canonical() {
                " (canonical)"
            } else {
                " (named explicitly, not canonical)"
            },
            self.trust.parties.len()
        );
        for n in &self.notes {
            let _ = writeln!(out, "  {}", escape(n));
        }
        for p in self.involved() {
            let who = match &p.name {
                Some(n) => format!("party \"{}\"", escape(n)),
                None => "bundles of no pinned party".into(),
            };
            let _ = writeln!(out, "  {who}: {}", p.outcome.name().to_uppercase());
            for b in &p.bundles {
                let v = &b.verdict;
                let _ = writeln!(
                    out,
                    "    bundle {}: {}{}, events {}",
                    escape(&b.file),
                    v.outcome.name(),
                    v.recorder
                        .map(|r| format!(" (recorder {})", hex_id(&r)))
                        .unwrap_or_default(),
                    v.events
                );
            }
            for m in &p.missing {
                let _ = writeln!(out, "    missing: {}", escape(m));
            }
            if let Some((f, file)) = &p.first_failure {
                let _ = writeln!(
                    out,
                    "    first failure {}at {}: {} ({})",
                    file.as_deref()
                        .map(|f| format!("in bundle {} ", escape(f)))
                        .unwrap_or_default(),
                    f.location,
                    f.check,
                    escape(&f.detail)
                );
                let _ = writeln!(out, "    consistent with: {}", f.consistent_with());
            }
        }
        for l in &self.links {
            let end = |party: Option<&str>, rec: Option<&RecorderId>, seq: u64| {
                let who = match (party, rec) {
                    (Some(p), _) => format!("\"{}\"", escape(p)),
                    (None, Some(r)) => hex_id(r),
                    (None, None) => "?".into(),
                };
                format!("{who} {seq}")
            };
            let blamed = match l.blame {
                Some(Blame::Citing) => self.party_name(Some(l.from_party)),
                Some(Blame::Linked) => self.party_name(l.to_party),
                _ => None,
            };
            let _ = writeln!(
                out,
                "  link {} -> {} ({}, {} receipt): {}{}: {}",
                end(
                    self.party_name(Some(l.from_party)),
                    Some(&l.from_recorder),
                    l.from_seq
                ),
                end(
                    self.party_name(l.to_party),
                    l.to_recorder.as_ref(),
                    l.to_seq
                ),
                l.kind.name(),
                match l.role {
                    Some(role) => format!("{} {role}", l.backing.name()),
                    None => l.backing.name().to_owned(),
                },
                l.status.name(),
                match (l.status, blamed) {
                    (Outcome::Verified, _) => String::new(),
                    (_, Some(p)) => format!(", about \"{}\"", escape(p)),
                    (_, None) => ", about the case".into(),
                },
                escape(&l.why)
            );
        }
        for c in &self.chains {
            let steps: Vec<String> = c
                .iter()
                .map(|s| {
                    let who = s
                        .party
                        .as_deref()
                        .map_or_else(|| hex_id(&s.recorder), |p| format!("\"{}\"", escape(p)));
                    let link = match (&s.via, s.status) {
                        (Some(v), Some(st)) if st != Outcome::Verified => {
                            format!(" -[{v}, {}]-> ", st.name())
                        }
                        (Some(v), _) => format!(" -[{v}]-> "),
                        (None, _) => String::new(),
                    };
                    format!(
                        "{link}{who} {}{}",
                        s.seq,
                        s.tool
                            .as_deref()
                            .map(|t| format!(" {}", escape(t)))
                            .unwrap_or_default()
                    )
                })
                .collect();
            let _ = writeln!(out, "  chain: {}", steps.concat());
        }
        for m in &self.missing {
            let _ = writeln!(out, "  missing: {}", escape(m));
        }
        out
    }
}
