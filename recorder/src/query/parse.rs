//! The parser: tokens to a syntax tree, by recursive descent over the grammar in the module
//! docs of [`crate::query`]. Paths are resolved against the schema as they are read and
//! literals checked against the field's type, so every error points at its token.

use afr_core::calendar;
use serde_json::Value as Json;

use super::{
    ParseError,
    lex::{self, Op, Tok, Token, describe},
    relations::Relation,
    schema::{self, Target, Ty},
};

/// A query's syntax tree. `!=` is parsed as `not (=)`.
#[derive(Debug, Clone)]
pub(super) enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    All,
    Cmp(Target, Op, Json),
    Range(Target, Json, Json, bool),
    Exists(Target),
    Rel(Relation, u64),
}

/// Parses `text`; the error points at the offending token.
pub(super) fn parse(text: &str) -> Result<Expr, ParseError> {
    let toks = lex::tokens(text)?;
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
    Ok(expr)
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

impl Parser<'_> {
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
        ParseError::at(self.query, at, width, message)
    }

    fn err(&self, t: &Token, message: impl Into<String>) -> ParseError {
        self.err_at(t.at, t.width, message)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(&self.peek().tok, Tok::Word(x) if x == w)
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        self.joined("or", Self::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        self.joined("and", Self::unary, Expr::And)
    }

    /// `item (sep item)*`: a lone item as itself, more than one as `join(items)`.
    fn joined(
        &mut self,
        sep: &str,
        item: fn(&mut Self) -> Result<Expr, ParseError>,
        join: fn(Vec<Expr>) -> Expr,
    ) -> Result<Expr, ParseError> {
        let mut v = vec![item(self)?];
        while self.is_word(sep) {
            self.bump();
            v.push(item(self)?);
        }
        Ok(if v.len() == 1 { v.remove(0) } else { join(v) })
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
        let (target, ty) =
            schema::resolve(word, t.at).map_err(|e| self.err_at(e.at, e.width, e.message))?;
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
}

#[cfg(test)]
mod tests {
    use crate::query::{ParseError, Query};

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
