//! Planning: a syntax tree becomes a plan whose leaves are index hits, relation members or
//! predicates, and the plan yields the candidate events worth checking.
//!
//! Equalities on indexed fields become lookups in the blind index ([`crate::index`]), and
//! relations become the sets their walks find. Candidates are the intersection (`and`) or
//! union (`or`) of the leaves' sets, kept as ranges while they can be:
//!
//! ```text
//!  seq >= 10 and intent.tool = "psql"    Range(10, count) ∩ List(index hits)
//!  not ...  /  a non-indexed predicate   None: every event is a candidate (full scan)
//! ```
//!
//! Index hits speak only for indexed, unerased events: events past the index watermark and
//! events of erased epochs are always candidates too, and are decided by the executor.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use super::{
    QueryError,
    exec::Exec,
    lex::Op,
    parse::Expr,
    schema::{Root, Seg, Target},
};
use crate::index::Field;

/// The candidate events of a plan node.
#[derive(Debug, Clone)]
pub(super) enum Cand {
    /// `[from, to)`.
    Range(u64, u64),
    List(Vec<u64>),
}

impl Cand {
    /// Keeps only sequence numbers below `count`.
    pub(super) fn clip(self, count: u64) -> Cand {
        match self {
            Cand::Range(a, b) => Cand::Range(a.min(count), b.min(count)),
            Cand::List(v) => Cand::List(v.into_iter().filter(|s| *s < count).collect()),
        }
    }

    pub(super) fn into_list(self) -> Vec<u64> {
        match self {
            Cand::Range(a, b) => (a..b).collect(),
            Cand::List(v) => v,
        }
    }
    fn and(self, o: Cand) -> Cand {
        match (self, o) {
            (Cand::Range(a, b), Cand::Range(c, d)) => Cand::Range(a.max(c), b.min(d).max(a.max(c))),
            (Cand::Range(a, b), Cand::List(v)) | (Cand::List(v), Cand::Range(a, b)) => {
                Cand::List(v.into_iter().filter(|s| (a..b).contains(s)).collect())
            }
            (Cand::List(x), Cand::List(y)) => {
                let ys: BTreeSet<u64> = y.into_iter().collect();
                Cand::List(x.into_iter().filter(|s| ys.contains(s)).collect())
            }
        }
    }
    fn or(self, o: Cand) -> Cand {
        if let (Cand::Range(a, b), Cand::Range(c, d)) = (&self, &o)
            && *a <= *d
            && *c <= *b
        {
            return Cand::Range(*a.min(c), *b.max(d));
        }
        let mut s: BTreeSet<u64> = self.into_list().into_iter().collect();
        s.extend(o.into_list());
        Cand::List(s.into_iter().collect())
    }
}

/// A planned query: [`Expr`] with relations and indexed equalities resolved to sets.
#[derive(Debug)]
pub(super) enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    All,
    /// A relation's members; with `true`, events of erased epochs may belong too (the walk
    /// could not look inside them), so for them non-membership is unknown, not false.
    Set(Vec<u64>, bool),
    /// Index hits for `pred`; events past the watermark are checked by `pred` itself, and
    /// non-hits in erased epochs are unknown.
    Indexed(Vec<u64>, Pred),
    Pred(Pred),
}

/// A predicate the executor checks on an event.
#[derive(Debug, Clone)]
pub(super) enum Pred {
    Cmp(Target, Op, Json),
    Range(Target, Json, Json, bool),
    Exists(Target),
}

impl Pred {
    pub(super) fn target(&self) -> &Target {
        match self {
            Pred::Cmp(t, ..) | Pred::Range(t, ..) | Pred::Exists(t) => t,
        }
    }
}

/// How dear a node is to check: sets first, then envelope fields, then payload fields.
fn cost(n: &Node) -> u8 {
    match n {
        Node::All | Node::Set(..) | Node::Indexed(..) => 0,
        Node::Pred(p) if p.target().root == Root::Envelope => 1,
        Node::Pred(_) => 2,
        Node::Not(x) => cost(x),
        Node::And(v) | Node::Or(v) => v.iter().map(cost).max().unwrap_or(0),
    }
}

/// The top-level payload fields the plan's predicates read, or `None` if one reads the
/// payload whole (a full scan then decodes only these; see `cbor::to_json_fields`).
pub(super) fn payload_fields(n: &Node) -> Option<Vec<String>> {
    fn walk(n: &Node, out: &mut Vec<String>) -> bool {
        let pred = |p: &Pred, out: &mut Vec<String>| {
            let t = p.target();
            match (t.root, t.segs.first()) {
                (Root::Envelope, _) => true,
                (Root::Payload, Some(Seg::Key(k))) => {
                    if !out.contains(k) {
                        out.push(k.clone());
                    }
                    true
                }
                (Root::Payload, _) => false,
            }
        };
        match n {
            Node::Indexed(_, p) | Node::Pred(p) => pred(p, out),
            Node::Not(x) => walk(x, out),
            Node::And(v) | Node::Or(v) => v.iter().all(|x| walk(x, out)),
            Node::All | Node::Set(..) => true,
        }
    }
    let mut out = Vec::new();
    walk(n, &mut out).then_some(out)
}

/// Whether the plan reads payload fields (and so cannot see into erased epochs).
pub(super) fn reads_payload(n: &Node) -> bool {
    match n {
        Node::Indexed(..) => true,
        Node::Pred(p) => p.target().root == Root::Payload,
        Node::Not(x) => reads_payload(x),
        Node::And(v) | Node::Or(v) => v.iter().any(reads_payload),
        Node::All | Node::Set(..) => false,
    }
}

impl Exec<'_> {
    /// Plans `e`: looks up its indexed equalities and walks its relations.
    pub(super) fn plan(&mut self, e: &Expr) -> Result<Node, QueryError> {
        Ok(match e {
            Expr::And(v) => {
                let mut n = v
                    .iter()
                    .map(|x| self.plan(x))
                    .collect::<Result<Vec<_>, _>>()?;
                n.sort_by_key(cost);
                Node::And(n)
            }
            Expr::Or(v) => Node::Or(v.iter().map(|x| self.plan(x)).collect::<Result<_, _>>()?),
            Expr::Not(x) => Node::Not(Box::new(self.plan(x)?)),
            Expr::All => Node::All,
            Expr::Rel(r, seq) => {
                let (members, uncertain) = self.relation(*r, *seq)?;
                Node::Set(members, uncertain)
            }
            Expr::Cmp(t, op, lit) => {
                let pred = Pred::Cmp(t.clone(), *op, lit.clone());
                match (op, Field::for_path(&t.canon)) {
                    (Op::Eq, Some(f)) => {
                        let value = match (f, lit) {
                            (Field::ParentSeq, Json::Number(n)) => {
                                n.as_u64().map(|s| s.to_be_bytes().to_vec())
                            }
                            (_, Json::String(s)) => Some(s.as_bytes().to_vec()),
                            _ => None,
                        };
                        match value {
                            Some(v) => Node::Indexed(self.lookup(f, &v)?, pred),
                            None => Node::Pred(pred),
                        }
                    }
                    _ => Node::Pred(pred),
                }
            }
            Expr::Range(t, lo, hi, inc) => {
                Node::Pred(Pred::Range(t.clone(), lo.clone(), hi.clone(), *inc))
            }
            Expr::Exists(t) => Node::Pred(Pred::Exists(t.clone())),
        })
    }

    /// Candidate events of a node, or `None` for "every event". Ranges are clipped to the log
    /// (`0..count`) before they are combined, so `seq > 10 or ...` never expands a range
    /// reaching `u64::MAX` into a list.
    pub(super) fn candidates(&self, n: &Node) -> Option<Cand> {
        self.candidates_unclipped(n).map(|c| c.clip(self.count))
    }

    fn candidates_unclipped(&self, n: &Node) -> Option<Cand> {
        match n {
            Node::Set(v, uncertain) => {
                let mut c = Cand::List(v.clone());
                if *uncertain {
                    for (a, b) in &self.erased {
                        c = c.or(Cand::Range(*a, *b).clip(self.count));
                    }
                }
                Some(c)
            }
            Node::Indexed(hits, _) => {
                // Erased and un-indexed events are candidates too: the index cannot speak for them.
                let mut c = Cand::List(hits.clone());
                for (a, b) in &self.erased {
                    c = c.or(Cand::Range(*a, *b).clip(self.count));
                }
                if self.watermark < self.count {
                    c = c.or(Cand::Range(self.watermark, self.count));
                }
                Some(c)
            }
            Node::Pred(Pred::Cmp(t, op, lit)) if t.canon == "seq" => {
                let v = lit.as_u64()?;
                Some(match op {
                    Op::Eq => Cand::Range(v, v.saturating_add(1)),
                    Op::Lt => Cand::Range(0, v),
                    Op::Le => Cand::Range(0, v.saturating_add(1)),
                    Op::Gt => Cand::Range(v.saturating_add(1), self.count),
                    Op::Ge => Cand::Range(v, self.count),
                    Op::Ne | Op::Contains => return None,
                })
            }
            Node::Pred(Pred::Range(t, lo, hi, inc)) if t.canon == "seq" => {
                let (a, b) = (lo.as_u64()?, hi.as_u64()?);
                Some(Cand::Range(a, if *inc { b.saturating_add(1) } else { b }).clip(self.count))
            }
            Node::And(v) => v
                .iter()
                .filter_map(|x| self.candidates(x))
                .reduce(Cand::and),
            Node::Or(v) => {
                let mut acc: Option<Cand> = None;
                for x in v {
                    let c = self.candidates(x)?;
                    acc = Some(match acc {
                        None => c,
                        Some(a) => a.or(c),
                    });
                }
                acc
            }
            Node::Not(_) | Node::All | Node::Pred(_) => None,
        }
    }
}
