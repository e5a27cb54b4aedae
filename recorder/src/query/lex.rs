//! The lexer: query text to tokens, each with its column and width for error carets.
//!
//! Words take dots and brackets (`policy_evaluation[].verdict` is one token) but stop before
//! `..`, so `seq in 1..5` lexes as a word, a number, `..` and a number.

use super::ParseError;

/// A token.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// A keyword, function name or field path.
    Word(String),
    /// A quoted string, unescaped.
    Str(String),
    Num(serde_json::Number),
    Op(Op),
    LParen,
    RParen,
    /// `..` (end excluded) or `..=` (end included).
    DotDot {
        inclusive: bool,
    },
    /// The end of the query: the last token of every list.
    Eof,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Eq,
    Ne,
    Contains,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A token and where it stands in the query.
#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    /// 0-based char index.
    pub(super) at: usize,
    /// Width in chars.
    pub(super) width: usize,
}

/// The tokens of `query`, ending with [`Tok::Eof`].
pub(super) fn tokens(query: &str) -> Result<Vec<Token>, ParseError> {
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

struct Lexer<'a> {
    chars: Vec<char>,
    pos: usize,
    query: &'a str,
}

impl Lexer<'_> {
    fn err(&self, at: usize, width: usize, message: impl Into<String>) -> ParseError {
        ParseError::at(self.query, at, width, message)
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

/// A token as an error message names it.
pub(super) fn describe(t: &Tok) -> String {
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
