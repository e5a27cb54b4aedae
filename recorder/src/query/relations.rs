//! Relations: the delegation chain (`ancestors`, `descendants`) and the provenance graph
//! (`influences`, `influenced_by`) walked from one event.
//!
//! Delegation links a child to its parent through `delegation_provenance.parent_event`;
//! provenance links an event to the earlier one that introduced content its context cites
//! (same content hash, else same URI, or an `afr:event/<seq>` URI naming it directly):
//!
//! ```text
//!  ancestors(5):    5 ──parent──► 3 ──parent──► 0 (root request)
//!  descendants(0):  0 ◄──parent── 3 ◄──parent── 5, ...
//!  influences(7):   7 cites X ──► the first event citing X
//!  influenced_by(1): 1 introduced X ──► every later event citing X
//! ```
//!
//! Walks use the blind index for indexed events and read the payloads of events past its
//! watermark. An erased epoch hides its events' links: the walk notes it, and the plan treats
//! those events as unknown rather than as non-members.

use std::collections::{BTreeSet, HashSet};

use afr_core::event::ContextSource;

use super::{QueryError, exec::Exec};
use crate::{
    RecordError,
    index::{self, Field},
};

/// Delegation and provenance relations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// Parent events up to the root request.
    Ancestors,
    /// Every event delegated from the event, transitively.
    Descendants,
    /// The events that introduced content the event's context cites.
    Influences,
    /// The events whose context cites content the event introduced.
    InfluencedBy,
}

impl Relation {
    /// The relation called `s` in a query.
    pub(super) fn from_name(s: &str) -> Option<Relation> {
        Some(match s {
            "ancestors" => Relation::Ancestors,
            "descendants" => Relation::Descendants,
            "influences" => Relation::Influences,
            "influenced_by" => Relation::InfluencedBy,
            _ => return None,
        })
    }
    /// Its name in a query.
    pub(super) fn name(self) -> &'static str {
        match self {
            Relation::Ancestors => "ancestors",
            Relation::Descendants => "descendants",
            Relation::Influences => "influences",
            Relation::InfluencedBy => "influenced_by",
        }
    }
}

impl Exec<'_> {
    fn check_seq(&self, rel: Relation, seq: u64) -> Result<(), QueryError> {
        if seq >= self.count {
            return Err(QueryError::NoEvent {
                relation: rel.name(),
                seq,
                count: self.count,
            });
        }
        Ok(())
    }

    /// A relation's members, and whether events of erased epochs may be members too.
    pub(super) fn relation(
        &mut self,
        rel: Relation,
        seq: u64,
    ) -> Result<(Vec<u64>, bool), QueryError> {
        self.check_seq(rel, seq)?;
        self.walk_cut = false;
        let mut out = match rel {
            Relation::Ancestors => self.ancestors(seq)?,
            Relation::Descendants => self.descendants(seq)?,
            Relation::Influences => self.influences(seq)?,
            Relation::InfluencedBy => self.influenced_by(seq)?,
        };
        out.sort_unstable();
        out.dedup();
        // An ancestor walk that reached its root saw every event it depends on; the other
        // relations search the whole log, erased payloads included.
        let uncertain = match rel {
            Relation::Ancestors => self.walk_cut,
            _ => !self.erased.is_empty(),
        };
        Ok((out, uncertain))
    }

    fn ancestors(&mut self, seq: u64) -> Result<Vec<u64>, RecordError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = seq;
        loop {
            let Some(p) = self.payload(cur)? else {
                self.notes.push(format!(
                    "ancestors({seq}): the chain is cut at event {cur}, whose epoch was erased"
                ));
                self.walk_cut = true;
                break;
            };
            let Some(parent) = p.delegation_provenance.and_then(|d| d.parent_event) else {
                self.notes
                    .push(format!("ancestors({seq}): the root request is event {cur}"));
                break;
            };
            if !index::is_local(parent.recorder.as_deref(), self.opener.recorder()) {
                self.notes.push(format!(
                    "ancestors({seq}): event {cur} was delegated by event {} of recorder {}, whose log is not in this store",
                    parent.seq,
                    parent.recorder.as_deref().unwrap_or("?")
                ));
                break;
            }
            if parent.seq >= self.count {
                self.notes.push(format!(
                    "ancestors({seq}): event {cur} names parent {}, which is not in the log",
                    parent.seq
                ));
                break;
            }
            if parent.seq == seq || !seen.insert(parent.seq) {
                self.notes.push(format!(
                    "ancestors({seq}): event {cur} names parent {}, closing a cycle",
                    parent.seq
                ));
                break;
            }
            out.push(parent.seq);
            cur = parent.seq;
        }
        Ok(out)
    }

    /// Children of `parent` in this log: index hits, plus un-indexed events checked directly.
    fn children(&mut self, parent: u64) -> Result<Vec<u64>, RecordError> {
        let mut kids = self.lookup(Field::LocalParent, &parent.to_be_bytes())?;
        for s in self.watermark..self.count {
            if let Some(p) = self.payload(s)?
                && let Some(pe) = p.delegation_provenance.and_then(|d| d.parent_event)
                && pe.seq == parent
                && index::is_local(pe.recorder.as_deref(), self.opener.recorder())
            {
                kids.push(s);
            }
        }
        Ok(kids)
    }

    fn descendants(&mut self, seq: u64) -> Result<Vec<u64>, RecordError> {
        let mut seen = BTreeSet::new();
        let mut queue = vec![seq];
        while let Some(p) = queue.pop() {
            for c in self.children(p)? {
                if c != seq && seen.insert(c) {
                    queue.push(c);
                }
            }
        }
        if !self.erased.is_empty() {
            self.notes.push(format!(
                "descendants({seq}): events of erased epochs {:?} cannot be followed",
                self.erased_epochs
            ));
        }
        Ok(seen.into_iter().collect())
    }

    /// Events (ascending) citing the same content as source `s`: by content hash when `s`
    /// has one, else by URI.
    fn citing(&mut self, s: &ContextSource) -> Result<Vec<u64>, RecordError> {
        let mut hits = match &s.content_hash {
            Some(h) => self.lookup(Field::SourceHash, h.as_bytes())?,
            None => self.lookup(Field::SourceUri, s.uri.as_bytes())?,
        };
        for seq in self.watermark..self.count {
            if let Some(p) = self.payload(seq)?
                && p.context_provenance
                    .iter()
                    .flat_map(|c| &c.sources)
                    .any(|t| same_content(s, t))
            {
                hits.push(seq);
            }
        }
        Ok(hits)
    }

    fn sources_of(&mut self, rel: Relation, seq: u64) -> Result<Vec<ContextSource>, RecordError> {
        match self.payload(seq)? {
            Some(p) => Ok(p.context_provenance.map(|c| c.sources).unwrap_or_default()),
            None => {
                self.notes.push(format!(
                    "{}({seq}): event {seq} is in an erased epoch; its provenance is gone",
                    rel.name()
                ));
                Ok(Vec::new())
            }
        }
    }

    fn note_erased_before(&mut self, rel: Relation, seq: u64) {
        if self.erased.iter().any(|(a, _)| *a < seq) {
            self.notes.push(format!(
                "{}({seq}): erased epochs {:?} cannot be examined",
                rel.name(),
                self.erased_epochs
            ));
        }
    }

    fn influences(&mut self, seq: u64) -> Result<Vec<u64>, RecordError> {
        let mut out = Vec::new();
        for s in self.sources_of(Relation::Influences, seq)? {
            if let Some(n) = index::event_uri_seq(&s.uri) {
                if n < seq {
                    out.push(n);
                }
                continue;
            }
            // The content entered the log with the first event citing it.
            if let Some(first) = self.citing(&s)?.into_iter().filter(|x| *x < seq).min() {
                out.push(first);
            }
        }
        self.note_erased_before(Relation::Influences, seq);
        Ok(out)
    }

    fn influenced_by(&mut self, seq: u64) -> Result<Vec<u64>, RecordError> {
        let mut out = Vec::new();
        for s in self.sources_of(Relation::InfluencedBy, seq)? {
            let hits = self.citing(&s)?;
            // Only the event that introduced the content influenced its later citers.
            if hits.iter().min() == Some(&seq) {
                out.extend(hits.into_iter().filter(|x| *x > seq));
            }
        }
        let direct = format!("{}{seq}", index::EVENT_URI_PREFIX);
        let mut by_uri = self.lookup(Field::SourceUri, direct.as_bytes())?;
        for s in self.watermark..self.count {
            if let Some(p) = self.payload(s)?
                && p.context_provenance
                    .iter()
                    .flat_map(|c| &c.sources)
                    .any(|t| t.uri == direct)
            {
                by_uri.push(s);
            }
        }
        out.extend(by_uri.into_iter().filter(|x| *x > seq));
        if !self.erased.is_empty() {
            self.notes.push(format!(
                "influenced_by({seq}): erased epochs {:?} cannot be examined",
                self.erased_epochs
            ));
        }
        Ok(out)
    }
}

/// Whether two context sources cite the same content: equal content hashes when both carry
/// one, else equal URIs.
fn same_content(a: &ContextSource, b: &ContextSource) -> bool {
    match (&a.content_hash, &b.content_hash) {
        (Some(x), Some(y)) => x == y,
        (Some(_), None) => false,
        (None, _) => a.uri == b.uri,
    }
}
