//! Forensic queries: a small expression language over recorded events, answered from the
//! secondary index ([`crate::index`]) where it can and by decrypting payloads where it must.
//!
//! An event is seen as one object: the record's envelope (`seq`, `epoch`, `timestamp_us`
//! alias `time`, `category`, `lane`, `concurrent_with`) beside the eight semantic fields under
//! their schema names (`intent.tool`, `policy_evaluation[].verdict`,
//! `human_approval.approver`, `context_provenance.sources[].uri`, ...). `[]` matches any
//! element of a list. The syntax is in `docs/query.md`; in short:
//!
//! ```text
//!  query  := or
//!  or     := and ("or" and)*
//!  and    := unary ("and" unary)*
//!  unary  := "not" unary | "(" or ")" | "all" | REL "(" SEQ ")"
//!          | PATH ("=" | "!=" | "~" | "<" | "<=" | ">" | ">=") VALUE
//!          | PATH "in" VALUE (".." | "..=") VALUE | PATH "exists"
//!  REL    := ancestors | descendants | influences | influenced_by
//! ```
//!
//! ```
//! use afr_recorder::query::Query;
//! let q = Query::parse(r#"intent.tool = "psql" and policy_evaluation[].verdict = "escalate""#);
//! assert!(q.is_ok());
//! let e = Query::parse(r#"intent.tol = "psql""#).unwrap_err();
//! assert_eq!(e.column, 8);
//! ```
//!
//! # Evaluation
//!
//! Logic is three-valued: a predicate on the payload of an event whose epoch was erased is
//! *unknown*, `not unknown` is unknown, and such events are reported apart
//! ([`QueryResult::unknown`]), never silently dropped or matched. Planning turns equalities
//! on indexed fields into index lookups and relations into sets; the candidate events are the
//! intersection (for `and`) or union (for `or`) of those sets, or every event when the query
//! has nothing to narrow it (a full scan). Each candidate is then checked against the whole
//! query, decrypting its payload only when a non-indexed predicate needs it.
//!
//! # Layout
//!
//! ```text
//!  text ──lex──► tokens ──parse (paths checked against schema)──► Expr
//!       ──plan (index lookups, relations)──► Node + candidates ──exec──► QueryResult
//! ```
//!
//! `schema.rs` holds the fields and their types, `lex.rs` and `parse.rs` the language,
//! `plan.rs` the index planning, `relations.rs` the delegation and provenance walks, and
//! `exec.rs` the matching of events; times go through [`afr_core::calendar`].

mod exec;
mod lex;
mod parse;
mod plan;
mod relations;
mod schema;

use afr_core::{Record, RecorderId, crypto::MasterKey, event::Payload};
use serde_json::Value as Json;

use crate::{RecordError, Store, index::Opener};

pub(crate) use exec::run;
pub use parse::MAX_DEPTH;
pub use relations::Relation;

/// A query that does not parse. `column` (1-based, in characters) points at the bad token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What is wrong.
    pub message: String,
    /// Column of the bad token, from 1.
    pub column: usize,
    /// Width of the bad token, in characters (at least 1).
    pub width: usize,
    /// The query text.
    pub query: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} (column {})", self.message, self.column)?;
        writeln!(f, "  {}", self.query)?;
        write!(
            f,
            "  {}{}",
            " ".repeat(self.column.saturating_sub(1)),
            "^".repeat(self.width.max(1))
        )
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// An error in `query` at 0-based character `at`, `width` characters wide.
    fn at(query: &str, at: usize, width: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            message: message.into(),
            column: at + 1,
            width,
            query: query.to_owned(),
        }
    }
}

/// A parsed query.
#[derive(Debug, Clone)]
pub struct Query {
    expr: parse::Expr,
    text: String,
}

impl Query {
    /// Parses `text`; the error points at the offending token.
    pub fn parse(text: &str) -> Result<Query, ParseError> {
        Ok(Query {
            expr: parse::parse(text)?,
            text: text.to_owned(),
        })
    }

    /// The query as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Every relation call in the query (`ancestors(5)` gives `(Ancestors, 5)`), in order:
    /// what `afr query --case` follows into other recorders' bundles.
    pub fn relations(&self) -> Vec<(Relation, u64)> {
        fn walk(e: &parse::Expr, out: &mut Vec<(Relation, u64)>) {
            match e {
                parse::Expr::And(v) | parse::Expr::Or(v) => v.iter().for_each(|x| walk(x, out)),
                parse::Expr::Not(x) => walk(x, out),
                parse::Expr::Rel(r, s) => out.push((*r, *s)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.expr, &mut out);
        out
    }
}

/// Why a parsed query could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A relation names an event the log does not hold.
    #[error("{relation}({seq}): no event {seq} in the log (it holds {count} events)")]
    NoEvent {
        /// The relation, e.g. `ancestors`.
        relation: &'static str,
        /// The event it named.
        seq: u64,
        /// Events in the log.
        count: u64,
    },
    /// The store failed or holds something it should not.
    #[error(transparent)]
    Store(#[from] RecordError),
}

/// The answer to a query.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueryResult {
    /// Matching events, ascending.
    pub matches: Vec<u64>,
    /// Events of erased epochs the query could not decide (a predicate needed their
    /// destroyed payload). They may or may not have matched.
    pub unknown: Vec<u64>,
    /// Erased epochs of the store, when the query reads payload fields: their events can
    /// only be matched by envelope fields (seq, time, category, lane).
    pub erased_epochs: Vec<u64>,
    /// What the relations met on the way: chains that continue in another recorder's log,
    /// links into erased epochs, missing or cyclic parents.
    pub notes: Vec<String>,
    /// Whether the index narrowed the candidates (false: every event was examined).
    pub indexed: bool,
    /// Events examined.
    pub examined: u64,
    /// Payloads decrypted to answer (index hits need none).
    pub decrypted: u64,
}

/// One event as stored: its record and, unless its epoch was erased, its payload.
#[derive(Debug, Clone)]
pub struct LoadedEvent {
    /// The record.
    pub record: Record,
    /// The decrypted payload; `None` if the epoch's key material was destroyed.
    pub payload: Option<Payload>,
}

impl LoadedEvent {
    /// The event as it was submitted (`docs/event.schema.json`), or `None` if erased.
    pub fn event_json(&self) -> Option<Json> {
        let p = self.payload.clone()?;
        let env = afr_core::event::Envelope {
            category: self.record.category,
            timestamp_us: Some(self.record.timestamp_us),
            lane: self.record.lane.clone(),
            concurrent_with: self.record.concurrent_with.clone(),
        };
        let ev = afr_core::EventInput::from_parts(env, p);
        serde_json::to_value(ev).ok()
    }
}

/// Reads and decrypts the events `seqs` of `recorder`'s store, in their order (one opener, so
/// each epoch key is derived once): what `Recorder::load_events` and `LogReader::load_events`
/// answer.
pub(crate) fn load_all<'s, 'q>(
    store: &'s Store,
    master: &'s MasterKey,
    recorder: RecorderId,
    seqs: &'q [u64],
) -> impl Iterator<Item = Result<LoadedEvent, RecordError>> + use<'s, 'q> {
    let mut opener = Opener::with_recorder(store, master, recorder);
    seqs.iter().map(move |&seq| load(&mut opener, store, seq))
}

/// Reads and decrypts event `seq`.
pub(crate) fn load(
    opener: &mut Opener<'_>,
    store: &Store,
    seq: u64,
) -> Result<LoadedEvent, RecordError> {
    let record = store.record(seq)?.ok_or(RecordError::UnknownEvent(seq))?;
    let payload = opener.payload(&record)?;
    Ok(LoadedEvent { record, payload })
}
