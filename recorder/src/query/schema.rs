//! The query's schema: the fields a path may name, with their types, and the resolution of a
//! dotted path (`policy_evaluation[].verdict`) against them.
//!
//! Envelope fields come from the record and are never encrypted; the payload's eight semantic
//! fields mirror `afr_core::event::Payload`, and enumerated values take their names from the
//! core's enums ([`Category::NAMES`], [`GuardrailVerdict::NAMES`], [`Decision::NAMES`]), so a name the
//! core accepts is one the query accepts.

use afr_core::{
    Category,
    event::{CaptureStrength, Decision, GuardrailVerdict},
};

/// The type of a field: what a literal compared with it must be.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    /// Text.
    Str,
    /// A whole number ≥ 0.
    Uint,
    /// Microseconds since the Unix epoch; accepts RFC 3339 strings.
    Time,
    /// One of these names.
    Enum(&'static [&'static str]),
    /// Free-form JSON (tool arguments, return values): any sub-path.
    Json,
    /// An object with these fields.
    Obj(&'static [(&'static str, Ty)]),
    /// A list of this type.
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
            ("verdict", Ty::Enum(&GuardrailVerdict::NAMES)),
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
            (
                "capture",
                Ty::Obj(&[
                    ("strength", Ty::Enum(&CaptureStrength::NAMES)),
                    ("via", Ty::Str),
                ]),
            ),
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

/// Which log a path reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Root {
    /// The record: never encrypted.
    Envelope,
    /// The semantic fields: decrypted to be read.
    Payload,
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    /// A named field of an object.
    Key(String),
    /// Every element of a list (`[]`).
    Each,
}

/// A resolved path: which log it reads and the steps into the event.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) root: Root,
    pub(super) segs: Vec<Seg>,
    /// Canonical spelling, e.g. `policy_evaluation[].verdict`.
    pub(super) canon: String,
}

/// Resolves a dotted path against the schema; errors point at the bad segment.
pub(super) fn resolve(word: &str, at: usize) -> Result<(Target, Ty), PathError> {
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
            return Err(path_err(
                seg_at,
                width,
                format!("`{part}` is not a field name"),
            ));
        }
        let n_each = each.len() / 2;
        if each != "[]".repeat(n_each) {
            return Err(path_err(
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
                    return Err(path_err(
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
                    return Err(path_err(
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
                return Err(path_err(
                    at,
                    word.chars().count(),
                    format!("`{canon}` is a list: write `{canon}[].{name}`"),
                ));
            }
            Some(_) => {
                return Err(path_err(
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
                    return Err(path_err(
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
    let ty = ty.ok_or_else(|| path_err(at, 1, "expected a field"))?;
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
/// Why a path names no field, and where: `at` (0-based, in characters) and `width` of the bad
/// segment, as the parser reports them in a [`ParseError`](super::ParseError).
#[derive(Debug)]
pub(super) struct PathError {
    pub(super) at: usize,
    pub(super) width: usize,
    pub(super) message: String,
}

fn path_err(at: usize, width: usize, message: impl Into<String>) -> PathError {
    PathError {
        at,
        width,
        message: message.into(),
    }
}
