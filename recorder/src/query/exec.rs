//! The executor: checks candidate events against a plan, reading records and decrypting
//! payloads only as a predicate needs them, with three-valued logic for erased payloads.
//!
//! A predicate on the payload of an event whose epoch was erased is *unknown* ([`Tri::U`]);
//! `not` keeps it unknown, `and` is false if any part is false, `or` true if any part is true.
//! A plan with no candidate set is a full scan, split across threads.

use afr_core::{
    Record,
    crypto::{IndexKey, MasterKey},
    event::Payload,
};
use serde_json::Value as Json;

use super::{
    Query, QueryError, QueryResult,
    lex::Op,
    plan::{Node, Pred, payload_fields, reads_payload},
    schema::{Root, Seg},
};
use crate::{
    Entry, RecordError, Store,
    index::{self, Field, Opener},
};

/// Runs `query` over `store`, decrypting with `master` where needed.
pub(crate) fn run(
    store: &Store,
    master: &MasterKey,
    query: &Query,
) -> Result<QueryResult, QueryError> {
    let mut ex = Exec::new(store, master)?;
    let node = ex.plan(&query.expr)?;
    ex.fields = payload_fields(&node);
    let cand = ex.candidates(&node);
    let mut res = QueryResult {
        indexed: cand.is_some(),
        ..QueryResult::default()
    };
    let count = ex.count;
    match cand {
        Some(c) => {
            for seq in c.clip(count).into_list() {
                ex.check(&node, seq, None, None, &mut res)?;
            }
        }
        None => {
            // A full scan decrypts every payload: split the log across the cores.
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8)) as u64;
            let chunk = count.div_ceil(threads).max(1);
            let parts = std::thread::scope(|sc| {
                let handles: Vec<_> = (0..threads)
                    .map(|i| {
                        let (node, ex) = (&node, &ex);
                        sc.spawn(move || {
                            ex.fork()
                                .scan(node, i * chunk, ((i + 1) * chunk).min(count))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or(Err(RecordError::Internal("a query scan thread panicked")))
                    })
                    .collect::<Vec<_>>()
            });
            for part in parts {
                let part = part?;
                res.matches.extend(part.matches);
                res.unknown.extend(part.unknown);
                res.examined += part.examined;
                res.decrypted += part.decrypted;
            }
        }
    }
    if reads_payload(&node) {
        res.erased_epochs = ex.erased_epochs.clone();
    }
    res.notes = std::mem::take(&mut ex.notes);
    res.decrypted += ex.decrypted;
    Ok(res)
}

/// A truth value of three-valued logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tri {
    /// True.
    T,
    /// False.
    F,
    /// Unknown: the payload needed was erased.
    U,
}

impl Tri {
    fn from_bool(b: bool) -> Tri {
        if b { Tri::T } else { Tri::F }
    }
    fn not(self) -> Tri {
        match self {
            Tri::T => Tri::F,
            Tri::F => Tri::T,
            Tri::U => Tri::U,
        }
    }
}

/// What the executor has read of one event so far.
struct EventState {
    seq: u64,
    record: Option<Record>,
    /// The sealed payload's bytes, when a scan read them beside the record.
    sealed: Option<Vec<u8>>,
    /// `Some(None)`: erased.
    payload: Option<Option<Json>>,
}

/// One view of the log for planning, relation walks and checking: what is erased, how far
/// the index reaches, and a key cache for decryption.
pub(super) struct Exec<'a> {
    store: &'a Store,
    master: &'a MasterKey,
    pub(super) opener: Opener<'a>,
    /// Key of the blind index: literals are hashed under it to be looked up.
    index_key: IndexKey,
    /// Events in the log.
    pub(super) count: u64,
    /// Events below it are in the index.
    pub(super) watermark: u64,
    /// `[first_seq, end_seq)` of erased epochs.
    pub(super) erased: Vec<(u64, u64)>,
    pub(super) erased_epochs: Vec<u64>,
    /// What relation walks met, for [`QueryResult::notes`].
    pub(super) notes: Vec<String>,
    /// Set by the ancestor walk when an erased epoch cut it.
    pub(super) walk_cut: bool,
    /// Payloads decrypted.
    decrypted: u64,
    /// The top-level payload fields the plan reads (`None`: all of them): only these are
    /// decoded.
    fields: Option<Vec<String>>,
}

impl<'a> Exec<'a> {
    fn new(store: &'a Store, master: &'a MasterKey) -> Result<Exec<'a>, RecordError> {
        let mut erased = Vec::new();
        let mut erased_epochs = Vec::new();
        // Erased epochs are read from their own metadata entries, not by visiting every
        // epoch: planning a query costs the same on a log of a thousand epochs or a million.
        for e in store.erased_epochs()? {
            let h = store.epoch(e)?.ok_or_else(|| Entry::Header(e).missing())?;
            erased.push((h.first_seq, h.end_seq()));
            erased_epochs.push(e);
        }
        let opener = Opener::new(store, master)?;
        Ok(Exec {
            store,
            master,
            index_key: master.index_key(opener.recorder()),
            opener,
            count: store.record_count()?,
            watermark: index::watermark(store)?,
            erased,
            erased_epochs,
            notes: Vec::new(),
            walk_cut: false,
            decrypted: 0,
            fields: None,
        })
    }

    /// An executor for another thread: same view of the log, its own key cache.
    fn fork(&self) -> Exec<'a> {
        Exec {
            store: self.store,
            master: self.master,
            opener: Opener::with_recorder(self.store, self.master, *self.opener.recorder()),
            index_key: self.index_key.clone(),
            count: self.count,
            watermark: self.watermark,
            erased: self.erased.clone(),
            erased_epochs: self.erased_epochs.clone(),
            notes: Vec::new(),
            walk_cut: false,
            decrypted: 0,
            fields: self.fields.clone(),
        }
    }

    /// Checks one event against the plan, adding it to `res` if it matches or is unknown.
    fn check(
        &mut self,
        node: &Node,
        seq: u64,
        record: Option<Record>,
        sealed: Option<Vec<u8>>,
        res: &mut QueryResult,
    ) -> Result<(), RecordError> {
        let mut ev = EventState {
            seq,
            record,
            sealed,
            payload: None,
        };
        res.examined += 1;
        match self.eval(node, &mut ev)? {
            Tri::T => res.matches.push(seq),
            Tri::U => res.unknown.push(seq),
            Tri::F => {}
        }
        Ok(())
    }

    /// Checks every event in `[from, to)`, reading records in order, and the payloads beside
    /// them (one sequential read of each column) when the plan reads payloads.
    fn scan(mut self, node: &Node, from: u64, to: u64) -> Result<QueryResult, RecordError> {
        let mut res = QueryResult::default();
        if from >= to {
            return Ok(res);
        }
        let mut payloads = if reads_payload(node) {
            Some(self.store.payloads_from(from)?)
        } else {
            None
        };
        for kv in self.store.records_from(from)? {
            let (seq, bytes) = kv?;
            if seq >= to {
                break;
            }
            let r = Record::decode(&bytes).map_err(|e| Entry::Record(seq).malformed(e))?;
            let sealed = match payloads.as_mut().and_then(Iterator::next).transpose()? {
                Some((ps, p)) if ps == seq => Some(p),
                Some((ps, _)) => {
                    return Err(Entry::Payload(ps).instead_of(Entry::Payload(seq)));
                }
                None => None,
            };
            self.check(node, seq, Some(r), sealed, &mut res)?;
        }
        res.decrypted = self.decrypted;
        Ok(res)
    }

    fn is_erased(&self, seq: u64) -> bool {
        self.erased.iter().any(|(a, b)| (*a..*b).contains(&seq))
    }

    fn record(&self, seq: u64) -> Result<Record, RecordError> {
        self.store
            .record(seq)?
            .ok_or_else(|| Entry::Record(seq).missing())
    }

    /// Events holding the term `(field, value)`, from the blind index.
    pub(super) fn lookup(&self, field: Field, value: &[u8]) -> Result<Vec<u64>, RecordError> {
        index::lookup(self.store, &self.index_key, field, value)
    }

    pub(super) fn payload(&mut self, seq: u64) -> Result<Option<Payload>, RecordError> {
        let r = self.record(seq)?;
        self.decrypted += 1;
        self.opener.payload(&r)
    }

    fn eval(&mut self, n: &Node, ev: &mut EventState) -> Result<Tri, RecordError> {
        Ok(match n {
            Node::All => Tri::T,
            Node::Set(v, uncertain) => {
                if v.binary_search(&ev.seq).is_ok() {
                    Tri::T
                } else if *uncertain && self.is_erased(ev.seq) {
                    Tri::U
                } else {
                    Tri::F
                }
            }
            Node::Indexed(hits, pred) => {
                if ev.seq >= self.watermark {
                    self.pred(pred, ev)?
                } else if hits.binary_search(&ev.seq).is_ok() {
                    Tri::T
                } else if self.is_erased(ev.seq) {
                    // Erasure removed the event's terms; envelope fields are still readable.
                    match pred.target().root {
                        Root::Envelope => self.pred(pred, ev)?,
                        Root::Payload => Tri::U,
                    }
                } else {
                    Tri::F
                }
            }
            Node::Pred(p) => self.pred(p, ev)?,
            Node::Not(x) => self.eval(x, ev)?.not(),
            Node::And(v) => self.junction(v, ev, Tri::F)?,
            Node::Or(v) => self.junction(v, ev, Tri::T)?,
        })
    }

    /// `and` (`decisive` false) or `or` (`decisive` true) of `v`: the first part that is
    /// `decisive` decides, and the rest are not evaluated; otherwise an unknown part makes
    /// the whole unknown.
    fn junction(
        &mut self,
        v: &[Node],
        ev: &mut EventState,
        decisive: Tri,
    ) -> Result<Tri, RecordError> {
        let mut out = decisive.not();
        for x in v {
            match self.eval(x, ev)? {
                t if t == decisive => return Ok(t),
                Tri::U => out = Tri::U,
                _ => {}
            }
        }
        Ok(out)
    }

    fn pred(&mut self, p: &Pred, ev: &mut EventState) -> Result<Tri, RecordError> {
        let t = p.target();
        let envelope;
        let root: &Json = match t.root {
            Root::Envelope => {
                if ev.record.is_none() {
                    ev.record = Some(self.record(ev.seq)?);
                }
                let Some(r) = &ev.record else {
                    return Ok(Tri::F);
                };
                envelope = serde_json::json!({
                    "seq": r.seq,
                    "epoch": r.epoch,
                    "timestamp_us": r.timestamp_us,
                    "category": r.category.name(),
                    "lane": r.lane,
                    "concurrent_with": r.concurrent_with,
                });
                &envelope
            }
            Root::Payload => {
                if ev.payload.is_none() {
                    if ev.record.is_none() {
                        ev.record = Some(self.record(ev.seq)?);
                    }
                    let p = match &ev.record {
                        Some(r) => {
                            self.decrypted += 1;
                            self.opener.payload_json(
                                r,
                                ev.sealed.as_deref(),
                                self.fields.as_deref(),
                            )?
                        }
                        None => None,
                    };
                    ev.payload = Some(p);
                }
                match &ev.payload {
                    Some(Some(j)) => j,
                    _ => return Ok(Tri::U),
                }
            }
        };
        let vals = resolve(root, &t.segs);
        Ok(Tri::from_bool(match p {
            Pred::Exists(_) => vals.iter().any(|v| !v.is_null()),
            Pred::Cmp(_, op, lit) => vals.iter().any(|v| compare(v, *op, lit)),
            Pred::Range(_, lo, hi, inc) => vals.iter().any(|v| {
                compare(v, Op::Ge, lo) && compare(v, if *inc { Op::Le } else { Op::Lt }, hi)
            }),
        }))
    }
}

/// The values at path `segs` in `root`: one per list element a `[]` step passes.
fn resolve<'j>(root: &'j Json, segs: &[Seg]) -> Vec<&'j Json> {
    let mut cur = vec![root];
    for s in segs {
        let mut next = Vec::new();
        for v in cur {
            match (s, v) {
                (Seg::Key(k), Json::Object(m)) => next.extend(m.get(k)),
                (Seg::Each, Json::Array(a)) => next.extend(a.iter()),
                _ => {}
            }
        }
        cur = next;
    }
    cur
}

/// Whether `v op lit` holds; values of different JSON types are never related.
fn compare(v: &Json, op: Op, lit: &Json) -> bool {
    use std::cmp::Ordering;
    let ord = match (v, lit) {
        (Json::String(a), Json::String(b)) => {
            if op == Op::Contains {
                return a.contains(b.as_str());
            }
            Some(a.as_str().cmp(b.as_str()))
        }
        (Json::Number(a), Json::Number(b)) => match (a.as_u64(), b.as_u64()) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            _ => a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(x, y)| x.partial_cmp(&y)),
        },
        (Json::Bool(a), Json::Bool(b)) => Some(a.cmp(b)),
        (Json::Null, Json::Null) => Some(Ordering::Equal),
        _ => None,
    };
    let Some(o) = ord else {
        return false;
    };
    match op {
        Op::Eq => o == Ordering::Equal,
        Op::Ne => o != Ordering::Equal,
        Op::Lt => o == Ordering::Less,
        Op::Le => o != Ordering::Greater,
        Op::Gt => o == Ordering::Greater,
        Op::Ge => o != Ordering::Less,
        Op::Contains => false,
    }
}
