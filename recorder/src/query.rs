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

use std::collections::BTreeSet;

use afr_core::{
    Category, Record, calendar,
    crypto::{IndexKey, MasterKey},
    event::{ContextSource, Decision, Payload, Verdict},
};
use serde_json::Value as Json;

use crate::{
    RecordError, Store,
    index::{self, Field, Opener},
};

// ---------------------------------------------------------------------------------------------
// Schema

#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    Uint,
    /// Microseconds since the Unix epoch; accepts RFC 3339 strings.
    Time,
    Enum(&'static [&'static str]),
    /// Free-form JSON (tool arguments, return values): any sub-path.
    Json,
    Obj(&'static [(&'static str, Ty)]),
    List(&'static Ty),
}

/// Envelope fields (from the record, never encrypted).
const ENVELOPE: &[(&str, Ty)] = &[
    ("seq", Ty::Uint),
    ("epoch", Ty::Uint),
    ("timestamp_us", Ty::Time),
    ("category", Ty::Enum(&Category::NAMES)),
    ("lane", Ty::Str),
    ("concurrent_with", Ty::List(&Ty::Uint)),
];

/// The eight semantic fields, as in `afr_core::event::Payload`.
const PAYLOAD: &[(&str, Ty)] = &[
    ("intent", Ty::Obj(&[("tool", Ty::Str), ("args", Ty::Json)])),
    (
        "policy_evaluation",
        Ty::List(&Ty::Obj(&[
            ("guardrail", Ty::Str),
            ("version", Ty::Str),
            ("verdict", Ty::Enum(&Verdict::NAMES)),
            ("reason", Ty::Str),
        ])),
    ),
    (
        "human_approval",
        Ty::Obj(&[
            ("approver", Ty::Str),
            ("prompt", Ty::Str),
            ("decision", Ty::Enum(&Decision::NAMES)),
            ("decided_at_us", Ty::Time),
            (
                "signature",
                Ty::Obj(&[
                    ("scheme", Ty::Str),
                    ("public_key", Ty::Str),
                    ("signature", Ty::Str),
                    ("signed_digest", Ty::Str),
                ]),
            ),
        ]),
    ),
    (
        "execution",
        Ty::Obj(&[
            ("command", Ty::Str),
            ("target", Ty::Str),
            ("mutation", Ty::Json),
        ]),
    ),
    (
        "effects",
        Ty::Obj(&[
            ("return_value", Ty::Json),
            ("state_changes", Ty::List(&Ty::Str)),
            ("external_response", Ty::Json),
            ("error", Ty::Str),
        ]),
    ),
    (
        "context_provenance",
        Ty::Obj(&[
            (
                "sources",
                Ty::List(&Ty::Obj(&[
                    ("uri", Ty::Str),
                    ("content_hash", Ty::Str),
                    ("kind", Ty::Str),
                ])),
            ),
            ("environment", Ty::Str),
        ]),
    ),
    (
        "code_provenance",
        Ty::Obj(&[
            ("agent", Ty::Str),
            ("agent_version", Ty::Str),
            ("tool_version", Ty::Str),
            ("repository", Ty::Str),
            ("commit", Ty::Str),
            ("model", Ty::Str),
        ]),
    ),
    (
        "delegation_provenance",
        Ty::Obj(&[
            (
                "parent_event",
                Ty::Obj(&[("recorder", Ty::Str), ("seq", Ty::Uint)]),
            ),
            ("delegating_agent", Ty::Str),
            ("organisation", Ty::Str),
            ("on_behalf_of", Ty::Str),
        ]),
    ),
];

fn field_names(fields: &[(&str, Ty)]) -> String {
    fields
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// Errors

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

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Num(serde_json::Number),
    Op(Op),
    LParen,
    RParen,
    DotDot { inclusive: bool },
    Eof,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Contains,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    /// 0-based char index.
    at: usize,
    /// Width in chars.
    width: usize,
}

struct Lexer<'a> {
    chars: Vec<char>,
    pos: usize,
    query: &'a str,
}

impl<'a> Lexer<'a> {
    fn err(&self, at: usize, width: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            message: message.into(),
            column: at + 1,
            width,
            query: self.query.to_owned(),
        }
    }

    fn tokens(query: &'a str) -> Result<Vec<Token>, ParseError> {
        let mut lx = Lexer {
            chars: query.chars().collect(),
            pos: 0,
            query,
        };
        let mut out = Vec::new();
        loop {
            let t = lx.next()?;
            let eof = t.tok == Tok::Eof;
            out.push(t);
            if eof {
                return Ok(out);
            }
        }
    }

    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.pos + k).copied()
    }

    fn next(&mut self) -> Result<Token, ParseError> {
        while self.peek(0).is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
        let at = self.pos;
        let Some(c) = self.peek(0) else {
            return Ok(Token {
                tok: Tok::Eof,
                at,
                width: 1,
            });
        };
        let one = |lx: &mut Lexer<'_>, tok: Tok, n: usize| {
            lx.pos += n;
            Ok(Token { tok, at, width: n })
        };
        match c {
            '(' => one(self, Tok::LParen, 1),
            ')' => one(self, Tok::RParen, 1),
            '=' if self.peek(1) == Some('=') => one(self, Tok::Op(Op::Eq), 2),
            '=' => one(self, Tok::Op(Op::Eq), 1),
            '~' => one(self, Tok::Op(Op::Contains), 1),
            '!' if self.peek(1) == Some('=') => one(self, Tok::Op(Op::Ne), 2),
            '<' if self.peek(1) == Some('=') => one(self, Tok::Op(Op::Le), 2),
            '<' => one(self, Tok::Op(Op::Lt), 1),
            '>' if self.peek(1) == Some('=') => one(self, Tok::Op(Op::Ge), 2),
            '>' => one(self, Tok::Op(Op::Gt), 1),
            '.' if self.peek(1) == Some('.') && self.peek(2) == Some('=') => {
                one(self, Tok::DotDot { inclusive: true }, 3)
            }
            '.' if self.peek(1) == Some('.') => one(self, Tok::DotDot { inclusive: false }, 2),
            '"' | '\'' => self.string(c),
            '-' | '0'..='9' => self.number(),
            c if c.is_ascii_alphabetic() || c == '_' => {
                while self.peek(0).is_some_and(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']')
                }) {
                    // Stop before `..` so `a..b` never lexes as one word.
                    if self.peek(0) == Some('.') && self.peek(1) == Some('.') {
                        break;
                    }
                    self.pos += 1;
                }
                let word: String = self.chars[at..self.pos].iter().collect();
                Ok(Token {
                    tok: Tok::Word(word),
                    at,
                    width: self.pos - at,
                })
            }
            '&' | '|' => Err(self.err(at, 1, format!("unexpected `{c}`: write `and` / `or`"))),
            '!' => Err(self.err(at, 1, "unexpected `!`: write `not` or `!=`")),
            c => Err(self.err(at, 1, format!("unexpected character `{c}`"))),
        }
    }

    fn string(&mut self, quote: char) -> Result<Token, ParseError> {
        let at = self.pos;
        self.pos += 1;
        let mut s = String::new();
        loop {
            let Some(c) = self.peek(0) else {
                return Err(self.err(at, self.pos - at, "unterminated string"));
            };
            self.pos += 1;
            match c {
                c if c == quote => break,
                '\\' => {
                    let e = self.peek(0);
                    self.pos += 1;
                    match e {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some(c @ ('\\' | '"' | '\'')) => s.push(c),
                        _ => {
                            return Err(self.err(
                                self.pos - 2,
                                2,
                                "unknown escape (use \\\\, \\\", \\', \\n or \\t)",
                            ));
                        }
                    }
                }
                c => s.push(c),
            }
        }
        Ok(Token {
            tok: Tok::Str(s),
            at,
            width: self.pos - at,
        })
    }

    fn number(&mut self) -> Result<Token, ParseError> {
        let at = self.pos;
        if self.peek(0) == Some('-') {
            self.pos += 1;
        }
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        // A fraction, but not the start of a range (`1..5`).
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
            while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
        }
        let text: String = self.chars[at..self.pos].iter().collect();
        let width = self.pos - at;
        let num = if let Ok(u) = text.parse::<u64>() {
            serde_json::Number::from(u)
        } else if let Ok(i) = text.parse::<i64>() {
            serde_json::Number::from(i)
        } else {
            text.parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .ok_or_else(|| self.err(at, width.max(1), format!("`{text}` is not a number")))?
        };
        Ok(Token {
            tok: Tok::Num(num),
            at,
            width,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Syntax tree

/// Which log a path reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    Envelope,
    Payload,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Each,
}

#[derive(Debug, Clone)]
struct Target {
    root: Root,
    segs: Vec<Seg>,
    /// Canonical spelling, e.g. `policy_evaluation[].verdict`.
    canon: String,
}

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
    fn from_name(s: &str) -> Option<Relation> {
        Some(match s {
            "ancestors" => Relation::Ancestors,
            "descendants" => Relation::Descendants,
            "influences" => Relation::Influences,
            "influenced_by" => Relation::InfluencedBy,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Relation::Ancestors => "ancestors",
            Relation::Descendants => "descendants",
            Relation::Influences => "influences",
            Relation::InfluencedBy => "influenced_by",
        }
    }
}

#[derive(Debug, Clone)]
enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    All,
    Cmp(Target, Op, Json),
    Range(Target, Json, Json, bool),
    Exists(Target),
    Rel(Relation, u64),
}

/// A parsed query.
#[derive(Debug, Clone)]
pub struct Query {
    expr: Expr,
    text: String,
}

impl Query {
    /// Parses `text`; the error points at the offending token.
    pub fn parse(text: &str) -> Result<Query, ParseError> {
        let toks = Lexer::tokens(text)?;
        let mut p = Parser {
            toks,
            pos: 0,
            query: text,
            depth: 0,
        };
        if p.peek().tok == Tok::Eof {
            return Err(p.err_at(0, 1, "empty query (try `all`, or see docs/query.md)"));
        }
        let expr = p.or()?;
        let t = p.peek().clone();
        if t.tok != Tok::Eof {
            return Err(p.err(&t, "expected `and`, `or`, `)` or the end of the query"));
        }
        Ok(Query {
            expr,
            text: text.to_owned(),
        })
    }

    /// The query as written.
    pub fn text(&self) -> &str {
        &self.text
    }
}

struct Parser<'a> {
    toks: Vec<Token>,
    pos: usize,
    query: &'a str,
    /// Open `not`s and parentheses: parsing, planning and evaluation recurse this deep.
    depth: usize,
}

/// Deepest nesting of `not` and parentheses a query may have. Parsing, planning and the
/// scan all recurse once per level, and the scan runs on threads with small stacks.
pub const MAX_DEPTH: usize = 64;

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("`{w}`"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Num(n) => format!("number {n}"),
        Tok::Op(_) => "an operator".into(),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::DotDot { .. } => "`..`".into(),
        Tok::Eof => "the end of the query".into(),
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> &Token {
        // The token list always ends with Eof, and `bump` never moves past it.
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn err_at(&self, at: usize, width: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            message: message.into(),
            column: at + 1,
            width,
            query: self.query.to_owned(),
        }
    }

    fn err(&self, t: &Token, message: impl Into<String>) -> ParseError {
        self.err_at(t.at, t.width, message)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(&self.peek().tok, Tok::Word(x) if x == w)
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut v = vec![self.and()?];
        while self.is_word("or") {
            self.bump();
            v.push(self.and()?);
        }
        Ok(if v.len() == 1 {
            v.remove(0)
        } else {
            Expr::Or(v)
        })
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut v = vec![self.unary()?];
        while self.is_word("and") {
            self.bump();
            v.push(self.unary()?);
        }
        Ok(if v.len() == 1 {
            v.remove(0)
        } else {
            Expr::And(v)
        })
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let t = self.bump();
        let nests = matches!(&t.tok, Tok::LParen) || matches!(&t.tok, Tok::Word(w) if w == "not");
        if nests {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(self.err(
                    &t,
                    format!("nested more than {MAX_DEPTH} deep (`not` and parentheses)"),
                ));
            }
        }
        let e = self.unary_inner(&t);
        if nests {
            self.depth -= 1;
        }
        e
    }

    fn unary_inner(&mut self, t: &Token) -> Result<Expr, ParseError> {
        let t = t.clone();
        match &t.tok {
            Tok::Word(w) if w == "not" => Ok(Expr::Not(Box::new(self.unary()?))),
            Tok::Word(w) if w == "all" => Ok(Expr::All),
            Tok::LParen => {
                let e = self.or()?;
                let c = self.bump();
                if c.tok != Tok::RParen {
                    return Err(self.err(
                        &c,
                        format!("expected `)` to close the `(` at column {}", t.at + 1),
                    ));
                }
                Ok(e)
            }
            Tok::Word(w) if self.peek().tok == Tok::LParen => {
                let Some(rel) = Relation::from_name(w) else {
                    return Err(self.err(
                        &t,
                        format!(
                            "unknown function `{w}` (ancestors, descendants, influences, influenced_by)"
                        ),
                    ));
                };
                self.bump();
                let n = self.bump();
                let seq = match &n.tok {
                    Tok::Num(x) => x.as_u64(),
                    _ => None,
                }
                .ok_or_else(|| {
                    self.err(
                        &n,
                        format!("{}() takes an event's sequence number", rel.name()),
                    )
                })?;
                let c = self.bump();
                if c.tok != Tok::RParen {
                    return Err(self.err(&c, "expected `)`"));
                }
                Ok(Expr::Rel(rel, seq))
            }
            Tok::Word(w) if matches!(w.as_str(), "and" | "or" | "in" | "exists") => Err(self.err(
                &t,
                format!("expected a field, `not`, `(` or a function before `{w}`"),
            )),
            Tok::Word(_) => self.predicate(&t),
            _ => Err(self.err(
                &t,
                format!(
                    "expected a field (e.g. intent.tool), `not`, `(` or a function, found {}",
                    describe(&t.tok)
                ),
            )),
        }
    }

    fn predicate(&mut self, t: &Token) -> Result<Expr, ParseError> {
        let Tok::Word(word) = &t.tok else {
            return Err(self.err(t, "expected a field"));
        };
        let (target, ty) = self.resolve(word, t.at)?;
        let op_tok = self.bump();
        match &op_tok.tok {
            Tok::Word(w) if w == "exists" => Ok(Expr::Exists(target)),
            Tok::Word(w) if w == "in" => {
                if !matches!(ty, Ty::Uint | Ty::Time | Ty::Json) {
                    return Err(self.err(
                        &op_tok,
                        format!("`in` takes a range of numbers or times; `{word}` is not one"),
                    ));
                }
                let lo = self.value(&ty, word)?;
                let dd = self.bump();
                let Tok::DotDot { inclusive } = dd.tok else {
                    return Err(self.err(&dd, "expected `..` (end excluded) or `..=` (end included)"));
                };
                let hi = self.value(&ty, word)?;
                Ok(Expr::Range(target, lo, hi, inclusive))
            }
            Tok::Op(op) => {
                let op = *op;
                let (ok, what) = match ty {
                    Ty::Obj(_) | Ty::List(_) => (false, "is a group of fields: name one inside it, or write `exists`"),
                    Ty::Enum(_) => (matches!(op, Op::Eq | Op::Ne), "takes only `=` and `!=`"),
                    Ty::Uint | Ty::Time => (op != Op::Contains, "is a number: `~` needs text"),
                    Ty::Str | Ty::Json => (true, ""),
                };
                if !ok {
                    return Err(self.err(&op_tok, format!("`{word}` {what}")));
                }
                let lit = self.value(&ty, word)?;
                if op == Op::Contains && !lit.is_string() {
                    return Err(self.err(
                        &self.toks[self.pos - 1].clone(),
                        "`~` (contains) needs a string",
                    ));
                }
                let cmp = Expr::Cmp(target, if op == Op::Ne { Op::Eq } else { op }, lit);
                Ok(if op == Op::Ne {
                    Expr::Not(Box::new(cmp))
                } else {
                    cmp
                })
            }
            _ => Err(self.err(
                &op_tok,
                format!(
                    "expected an operator after `{word}` (=, !=, ~, <, <=, >, >=, in, exists), found {}",
                    describe(&op_tok.tok)
                ),
            )),
        }
    }

    /// Reads a literal and checks it against the field's type.
    fn value(&mut self, ty: &Ty, field: &str) -> Result<Json, ParseError> {
        let t = self.bump();
        let lit = match &t.tok {
            Tok::Str(s) => Json::String(s.clone()),
            Tok::Num(n) => Json::Number(n.clone()),
            Tok::Word(w) if w == "true" => Json::Bool(true),
            Tok::Word(w) if w == "false" => Json::Bool(false),
            Tok::Word(w) if w == "null" => Json::Null,
            Tok::Word(w) => {
                return Err(self.err(&t, format!("expected a value; quote text: \"{w}\"")));
            }
            other => {
                return Err(self.err(&t, format!("expected a value, found {}", describe(other))));
            }
        };
        match ty {
            Ty::Str if !lit.is_string() => {
                Err(self.err(&t, format!("`{field}` is text: quote the value")))
            }
            Ty::Uint if lit.as_u64().is_none() => Err(self.err(
                &t,
                format!("`{field}` is a whole number ≥ 0"),
            )),
            Ty::Time => match &lit {
                Json::Number(n) if n.as_u64().is_some() => Ok(lit),
                Json::String(s) => calendar::parse_time_us(s).map(Json::from).ok_or_else(|| {
                    self.err(
                        &t,
                        format!(
                            "`{field}` is a time: microseconds since 1970 or RFC 3339 like \"2026-11-30T12:00:00Z\""
                        ),
                    )
                }),
                _ => Err(self.err(&t, format!("`{field}` is a time"))),
            },
            Ty::Enum(names) => match lit.as_str() {
                Some(s) if names.contains(&s) => Ok(lit),
                _ => Err(self.err(
                    &t,
                    format!("`{field}` is one of {}", names.join(", ")),
                )),
            },
            _ => Ok(lit),
        }
    }

    /// Resolves a dotted path against the schema; errors point at the bad segment.
    fn resolve(&self, word: &str, at: usize) -> Result<(Target, Ty), ParseError> {
        let mut segs = Vec::new();
        let mut canon = String::new();
        let mut ty: Option<Ty> = None;
        let mut root = Root::Payload;
        let mut offset = 0usize;
        for (i, part) in word.split('.').enumerate() {
            let seg_at = at + offset;
            let width = part.chars().count().max(1);
            offset += part.chars().count() + 1;
            let (name, each) = match part.find('[') {
                Some(k) => (&part[..k], &part[k..]),
                None => (part, ""),
            };
            if name.is_empty() || !each.chars().all(|c| c == '[' || c == ']') {
                return Err(self.err_at(seg_at, width, format!("`{part}` is not a field name")));
            }
            let n_each = each.len() / 2;
            if each != "[]".repeat(n_each) {
                return Err(self.err_at(
                    seg_at,
                    width,
                    "write `[]` to match any element of a list",
                ));
            }
            let name = if i == 0 && name == "time" {
                "timestamp_us"
            } else {
                name
            };
            let mut next = match ty {
                None => {
                    if let Some((_, t)) = ENVELOPE.iter().find(|(n, _)| *n == name) {
                        root = Root::Envelope;
                        *t
                    } else if let Some((_, t)) = PAYLOAD.iter().find(|(n, _)| *n == name) {
                        *t
                    } else {
                        return Err(self.err_at(
                            seg_at,
                            width,
                            format!(
                                "unknown field `{name}` (fields: time, {}, {})",
                                field_names(ENVELOPE),
                                field_names(PAYLOAD)
                            ),
                        ));
                    }
                }
                Some(Ty::Json) => Ty::Json,
                Some(Ty::Obj(fields)) => match fields.iter().find(|(n, _)| *n == name) {
                    Some((_, t)) => *t,
                    None => {
                        return Err(self.err_at(
                            seg_at,
                            width,
                            format!(
                                "unknown field `{name}` in `{canon}` (fields: {})",
                                field_names(fields)
                            ),
                        ));
                    }
                },
                Some(Ty::List(_)) => {
                    return Err(self.err_at(
                        at,
                        word.chars().count(),
                        format!("`{canon}` is a list: write `{canon}[].{name}`"),
                    ));
                }
                Some(_) => {
                    return Err(self.err_at(
                        seg_at,
                        width,
                        format!("`{canon}` is a single value; it has no field `{name}`"),
                    ));
                }
            };
            if !canon.is_empty() {
                canon.push('.');
            }
            canon.push_str(name);
            segs.push(Seg::Key(name.to_owned()));
            for _ in 0..n_each {
                next = match next {
                    Ty::List(t) => *t,
                    Ty::Json => Ty::Json,
                    _ => {
                        return Err(self.err_at(
                            seg_at,
                            width,
                            format!("`{canon}` is not a list; drop the `[]`"),
                        ));
                    }
                };
                canon.push_str("[]");
                segs.push(Seg::Each);
            }
            ty = Some(next);
        }
        let ty = ty.ok_or_else(|| self.err_at(at, 1, "expected a field"))?;
        if let Ty::List(inner) = ty
            && !matches!(inner, Ty::Obj(_))
        {
            // `effects.state_changes ~ "x"` is clear enough: compare each element.
            segs.push(Seg::Each);
            canon.push_str("[]");
            return Ok((Target { root, segs, canon }, *inner));
        }
        Ok((Target { root, segs, canon }, ty))
    }
}

// ---------------------------------------------------------------------------------------------
// Results

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
        let ev = afr_core::EventInput {
            category: self.record.category,
            timestamp_us: Some(self.record.timestamp_us),
            lane: self.record.lane.clone(),
            concurrent_with: self.record.concurrent_with.clone(),
            intent: p.intent,
            policy_evaluation: p.policy_evaluation,
            human_approval: p.human_approval,
            execution: p.execution,
            effects: p.effects,
            context_provenance: p.context_provenance,
            code_provenance: p.code_provenance,
            delegation_provenance: p.delegation_provenance,
        };
        serde_json::to_value(ev).ok()
    }
}

/// Reads and decrypts event `seq`.
pub fn load(opener: &mut Opener<'_>, store: &Store, seq: u64) -> Result<LoadedEvent, RecordError> {
    let record = store
        .record(seq)?
        .ok_or_else(|| RecordError::Invalid(format!("no event {seq} in the log")))?;
    let payload = opener.payload(&record)?;
    Ok(LoadedEvent { record, payload })
}

// ---------------------------------------------------------------------------------------------
// Planning

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tri {
    T,
    F,
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

/// The candidate events of a plan node.
#[derive(Debug, Clone)]
enum Cand {
    Range(u64, u64),
    List(Vec<u64>),
}

impl Cand {
    /// Keeps only sequence numbers below `count`.
    fn clip(self, count: u64) -> Cand {
        match self {
            Cand::Range(a, b) => Cand::Range(a.min(count), b.min(count)),
            Cand::List(v) => Cand::List(v.into_iter().filter(|s| *s < count).collect()),
        }
    }

    fn into_list(self) -> Vec<u64> {
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

#[derive(Debug)]
enum Node {
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

#[derive(Debug, Clone)]
enum Pred {
    Cmp(Target, Op, Json),
    Range(Target, Json, Json, bool),
    Exists(Target),
}

impl Pred {
    fn target(&self) -> &Target {
        match self {
            Pred::Cmp(t, ..) | Pred::Range(t, ..) | Pred::Exists(t) => t,
        }
    }
}

fn cost(n: &Node) -> u8 {
    match n {
        Node::All | Node::Set(..) | Node::Indexed(..) => 0,
        Node::Pred(p) if p.target().root == Root::Envelope => 1,
        Node::Pred(_) => 2,
        Node::Not(x) => cost(x),
        Node::And(v) | Node::Or(v) => v.iter().map(cost).max().unwrap_or(0),
    }
}

fn reads_payload(n: &Node) -> bool {
    match n {
        Node::Indexed(..) => true,
        Node::Pred(p) => p.target().root == Root::Payload,
        Node::Not(x) => reads_payload(x),
        Node::And(v) | Node::Or(v) => v.iter().any(reads_payload),
        Node::All | Node::Set(..) => false,
    }
}

/// Runs `query` over `store`, decrypting with `master` where needed.
pub fn run(store: &Store, master: &MasterKey, query: &Query) -> Result<QueryResult, QueryError> {
    let mut ex = Exec::new(store, master)?;
    let node = ex.plan(&query.expr)?;
    let cand = ex.candidates(&node);
    let mut res = QueryResult {
        indexed: cand.is_some(),
        ..QueryResult::default()
    };
    let count = ex.count;
    match cand {
        Some(c) => {
            let c = match c {
                Cand::Range(a, b) => Cand::Range(a, b.min(count)),
                Cand::List(v) => Cand::List(v.into_iter().filter(|s| *s < count).collect()),
            };
            for seq in c.into_list() {
                ex.check(&node, seq, None, &mut res)?;
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
                        h.join().unwrap_or_else(|_| {
                            Err(RecordError::Corrupt("scan thread panicked".into()))
                        })
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

struct EventState {
    seq: u64,
    record: Option<Record>,
    /// `Some(None)`: erased.
    payload: Option<Option<Json>>,
}

struct Exec<'a> {
    store: &'a Store,
    master: &'a MasterKey,
    opener: Opener<'a>,
    /// Key of the blind index: literals are hashed under it to be looked up.
    index_key: IndexKey,
    count: u64,
    watermark: u64,
    /// `[first_seq, end_seq)` of erased epochs.
    erased: Vec<(u64, u64)>,
    erased_epochs: Vec<u64>,
    notes: Vec<String>,
    /// Set by the ancestor walk when an erased epoch cut it.
    walk_cut: bool,
    decrypted: u64,
}

impl<'a> Exec<'a> {
    fn new(store: &'a Store, master: &'a MasterKey) -> Result<Exec<'a>, RecordError> {
        let mut erased = Vec::new();
        let mut erased_epochs = Vec::new();
        for kv in store.epochs_from(0)? {
            let (e, b) = kv?;
            if store.is_erased(e)? {
                let h = afr_core::EpochHeader::decode(&b)
                    .map_err(|err| RecordError::Corrupt(format!("epoch {e}: {err}")))?;
                erased.push((h.first_seq, h.end_seq()));
                erased_epochs.push(e);
            }
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
        }
    }

    /// Checks one event against the plan, adding it to `res` if it matches or is unknown.
    fn check(
        &mut self,
        node: &Node,
        seq: u64,
        record: Option<Record>,
        res: &mut QueryResult,
    ) -> Result<(), RecordError> {
        let mut ev = EventState {
            seq,
            record,
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

    /// Checks every event in `[from, to)`, reading records in order.
    fn scan(mut self, node: &Node, from: u64, to: u64) -> Result<QueryResult, RecordError> {
        let mut res = QueryResult::default();
        if from >= to {
            return Ok(res);
        }
        for kv in self.store.records_from(from)? {
            let (seq, bytes) = kv?;
            if seq >= to {
                break;
            }
            let r = Record::decode(&bytes)
                .map_err(|e| RecordError::Corrupt(format!("record {seq}: {e}")))?;
            self.check(node, seq, Some(r), &mut res)?;
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
            .ok_or_else(|| RecordError::Corrupt(format!("record {seq} missing")))
    }

    /// Events holding the term `(field, value)`, from the blind index.
    fn lookup(&self, field: Field, value: &[u8]) -> Result<Vec<u64>, RecordError> {
        index::lookup(self.store, &self.index_key, field, value)
    }

    fn payload(&mut self, seq: u64) -> Result<Option<Payload>, RecordError> {
        let r = self.record(seq)?;
        self.decrypted += 1;
        self.opener.payload(&r)
    }

    fn plan(&mut self, e: &Expr) -> Result<Node, QueryError> {
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
    fn candidates(&self, n: &Node) -> Option<Cand> {
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
            Node::And(v) => {
                let mut out = Tri::T;
                for x in v {
                    match self.eval(x, ev)? {
                        Tri::F => return Ok(Tri::F),
                        Tri::U => out = Tri::U,
                        Tri::T => {}
                    }
                }
                out
            }
            Node::Or(v) => {
                let mut out = Tri::F;
                for x in v {
                    match self.eval(x, ev)? {
                        Tri::T => return Ok(Tri::T),
                        Tri::U => out = Tri::U,
                        Tri::F => {}
                    }
                }
                out
            }
        })
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
                            self.opener.payload_json(r)?
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

    // -- relations ------------------------------------------------------------------------

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
    fn relation(&mut self, rel: Relation, seq: u64) -> Result<(Vec<u64>, bool), QueryError> {
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
        let mut seen = std::collections::HashSet::new();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(q: &str) -> ParseError {
        Query::parse(q).unwrap_err()
    }

    #[test]
    fn parses_the_documented_forms() {
        for q in [
            r#"intent.tool = "bash""#,
            r#"policy_evaluation[].verdict = "deny""#,
            r#"human_approval.approver = "alice@acme""#,
            r#"context_provenance.environment = "production""#,
            r#"context_provenance.sources[].uri ~ "wiki""#,
            r#"category = "database" and not (seq in 10..20 or seq in 30..=40)"#,
            r#"time >= "2026-11-30T12:00:00Z" and time < "2026-12-01""#,
            r#"time in "2026-11-30".."2026-12-01""#,
            "ancestors(5) or descendants(3) or influences(7) or influenced_by(1)",
            r#"intent.args.sql ~ "DROP" and effects.state_changes ~ "dropped""#,
            "delegation_provenance.parent_event.seq = 4",
            "human_approval exists and effects.error exists",
            r#"intent.args.items[].id = 3 and intent.args.flag = true"#,
            "all",
        ] {
            Query::parse(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        }
    }

    #[test]
    fn errors_point_at_the_bad_token() {
        let e = err(r#"intent.tool = "bash" and policy_evaluation.verdict = "deny""#);
        assert_eq!(e.column, 26, "{e}");
        assert!(e.message.contains("policy_evaluation[].verdict"), "{e}");
        let e = err(r#"intent.tool == "bash" or"#);
        assert_eq!(e.column, 25, "{e}");
        assert!(e.message.contains("end of the query"), "{e}");
        let e = err(r#"policy_evaluation[].verdict = "denied""#);
        assert_eq!((e.column, e.width), (31, 8), "{e}");
        assert!(e.message.contains("allow, deny, warn, escalate"), "{e}");
        let e = err(r#"(intent.tool = "a""#);
        assert!(e.message.contains("close the `(` at column 1"), "{e}");
        let e = err(r#"intent.tool = bash"#);
        assert!(e.message.contains("quote"), "{e}");
        assert_eq!(e.column, 15);
        let e = err("seq in 10-20");
        assert_eq!(e.column, 10, "{e}");
        let e = err("ancestorz(3)");
        assert_eq!((e.column, e.width), (1, 9));
        let e = err(r#"time > "yesterday""#);
        assert_eq!(e.column, 8);
        let e = err("human_approval = 3");
        assert!(e.message.contains("group of fields"), "{e}");
        let shown = err(r#"intent.tol = "x""#).to_string();
        assert!(
            shown.ends_with("\n  intent.tol = \"x\"\n         ^^^"),
            "{shown}"
        );
    }
}
