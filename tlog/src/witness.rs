//! The `tlog-witness` protocol (`c2sp.org/tlog-witness`): the `add-checkpoint` request body
//! and the checks a witness makes before cosigning, without I/O.
//!
//! ```text
//! POST <prefix>/add-checkpoint
//! "old " decimal(old size) "\n"
//! base64(hash) "\n"                 × 0 ..= 63 (consistency proof from old size to size)
//! "\n"
//! <signed checkpoint>
//! ```
//!
//! Answers: 200 with cosignature lines; 400 malformed or old size above the size; 403 no
//! valid signature of a trusted log key; 404 unknown origin; 409 old size is not the size
//! last cosigned (body: that size, `text/x.tlog.size`); 422 a proof that does not verify, an
//! empty tree with another root, or the same size with another root.

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};

use afr_core::{Hash32, merkle};

use crate::{
    checkpoint::{Checkpoint, parse_decimal},
    note::{Note, NoteSignature, NoteSigner, VerifierKey},
};

/// Most consistency proof lines a request may hold.
pub const MAX_PROOF_LINES: usize = 63;
/// Largest request body a witness reads.
pub const MAX_REQUEST: usize = 70 * 1024;
/// The content type of a 409 body.
pub const SIZE_CONTENT_TYPE: &str = "text/x.tlog.size";

/// An `add-checkpoint` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddCheckpoint {
    /// The size the client believes the witness last cosigned.
    pub old: u64,
    /// Consistency proof from `old` to the checkpoint's size.
    pub proof: Vec<Hash32>,
    /// The signed checkpoint, as sent.
    pub checkpoint: String,
}

impl AddCheckpoint {
    /// The request body.
    pub fn body(&self) -> String {
        let mut s = format!("old {}\n", self.old);
        for h in &self.proof {
            s.push_str(&B64.encode(h.0));
            s.push('\n');
        }
        s.push('\n');
        s.push_str(&self.checkpoint);
        s
    }

    /// Parses a request body; `Err` is the reason for a 400.
    pub fn parse(body: &[u8]) -> Result<AddCheckpoint, String> {
        if body.len() > MAX_REQUEST {
            return Err(format!("the body is over {MAX_REQUEST} bytes"));
        }
        let s = std::str::from_utf8(body).map_err(|_| "the body is not UTF-8".to_owned())?;
        let (head, checkpoint) = s
            .split_once("\n\n")
            .ok_or_else(|| "no empty line before the checkpoint".to_owned())?;
        let mut lines = head.split('\n');
        let old = lines
            .next()
            .and_then(|l| l.strip_prefix("old "))
            .and_then(parse_decimal)
            .ok_or_else(|| "the first line is not \"old <size>\"".to_owned())?;
        let mut proof = Vec::new();
        for l in lines {
            if proof.len() == MAX_PROOF_LINES {
                return Err(format!(
                    "more than {MAX_PROOF_LINES} consistency proof lines"
                ));
            }
            let h = B64
                .decode(l)
                .ok()
                .and_then(|b| Hash32::from_slice(&b))
                .ok_or_else(|| "a proof line is not a base64 SHA-256 hash".to_owned())?;
            proof.push(h);
        }
        Ok(AddCheckpoint {
            old,
            proof,
            checkpoint: checkpoint.to_owned(),
        })
    }
}

/// What a witness holds per origin: the latest checkpoint it cosigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Its size.
    pub size: u64,
    /// Its root.
    pub root: Hash32,
    /// The checkpoint as submitted, with the witness's cosignature appended.
    pub note: String,
}

/// A refusal: the HTTP status, a content type and a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 400, 403, 404, 409 or 422.
    pub status: u16,
    /// `text/plain` or [`SIZE_CONTENT_TYPE`].
    pub content_type: &'static str,
    /// What is wrong (for 409: the size last cosigned and a newline).
    pub body: String,
}

fn refuse(status: u16, body: impl Into<String>) -> Refusal {
    Refusal {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.into() + "\n",
    }
}

/// The checkpoint's origin, if the request parses that far (for logging and state lookup).
pub fn origin_of(req: &AddCheckpoint) -> Option<String> {
    let note = Note::parse(req.checkpoint.as_bytes()).ok()?;
    Checkpoint::parse_text(&note.text).ok().map(|c| c.origin)
}

/// The witness's checks on `req` for a log whose trusted keys are `log_keys` (empty: unknown
/// origin) and whose latest cosigned head is `head`. On success: the new head (to persist
/// before answering) and the cosignature line.
pub fn add_checkpoint(
    req: &AddCheckpoint,
    log_keys: &[VerifierKey],
    head: Option<&Head>,
    signer: &NoteSigner,
    now: u64,
) -> Result<(Head, NoteSignature), Refusal> {
    let note = Note::parse(req.checkpoint.as_bytes()).map_err(|e| refuse(400, e.to_string()))?;
    let cp = Checkpoint::parse_text(&note.text).map_err(|e| refuse(400, e.to_string()))?;
    if log_keys.is_empty() {
        return Err(refuse(404, format!("unknown origin {:?}", cp.origin)));
    }
    note.verify(log_keys)
        .map_err(|e| refuse(403, e.to_string()))?;
    if req.old > cp.size {
        return Err(refuse(
            400,
            format!(
                "old size {} is above the checkpoint's size {}",
                req.old, cp.size
            ),
        ));
    }
    let last = head.map_or(0, |h| h.size);
    if req.old != last {
        return Err(Refusal {
            status: 409,
            content_type: SIZE_CONTENT_TYPE,
            body: format!("{last}\n"),
        });
    }
    if cp.size == 0 && cp.root != merkle::empty_root() {
        return Err(refuse(
            422,
            "a tree of size 0 must have the empty tree's root",
        ));
    }
    match head {
        None => {
            if !req.proof.is_empty() {
                return Err(refuse(422, "old size 0 takes an empty proof"));
            }
        }
        Some(h) => merkle::verify_consistency(h.size, cp.size, &h.root, &cp.root, &req.proof)
            .map_err(|e| {
                refuse(
                    422,
                    format!("not consistent with the cosigned size {}: {e}", h.size),
                )
            })?,
    }
    let sig = signer.cosign(&note.text, now);
    let mut cosigned = note.clone();
    cosigned
        .signatures
        .retain(|s| !(s.name == sig.name && s.id == sig.id));
    cosigned.signatures.push(sig.clone());
    Ok((
        Head {
            size: cp.size,
            root: cp.root,
            note: cosigned.to_text(),
        },
        sig,
    ))
}
