//! C2SP transparency-log formats for the recorder's log of epochs, without I/O.
//!
//! Each sealed epoch extends a tree whose leaves are the epoch roots ([`tree`]); its head is
//! published as a `tlog-checkpoint` ([`checkpoint`]), a signed note ([`note`]) signed by the
//! recorder's Ed25519 log key, cosigned by witnesses (`cosignature/v1`, [`cosig`]) through the
//! `tlog-witness` protocol ([`witness`]), judged by a `tlog-policy` quorum ([`policy`]), and
//! handed to third parties as `tlog-proof`s ([`proof`]). Byte layouts: docs/spec/roots.md.

pub mod checkpoint;
pub mod cosig;
pub mod note;
pub mod policy;
pub mod proof;
pub mod tree;
pub mod witness;

use std::collections::HashSet;

pub use checkpoint::{Checkpoint, CheckpointError};
pub use note::{Note, NoteError, NoteSignature, NoteSigner, VerifierKey};
pub use policy::{Policy, PolicyError, Threshold};

/// Cosignature timestamps more than this many seconds ahead of the verifier's clock are not
/// counted.
pub const MAX_CLOCK_SKEW: u64 = 300;

/// The default origin (and log key name) of a recorder: `afr.recorder/0x<address>`.
pub fn origin(recorder_hex: &str) -> String {
    format!("afr.recorder/{recorder_hex}")
}

/// A checkpoint checked against a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCheckpoint {
    /// The tree head.
    pub checkpoint: Checkpoint,
    /// The note's text (what a TSA token must be over, hashed).
    pub text: String,
    /// Witnesses whose cosignature verified and counts, with its timestamp.
    pub cosigned: Vec<(String, u64)>,
    /// Witnesses whose cosignature verified but does not count, and why.
    pub not_counted: Vec<(String, String)>,
    /// Whether `cosigned` meets the policy's quorum.
    pub quorum_met: bool,
}

/// Why a checkpoint is rejected outright.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// Not a checkpoint note.
    #[error("malformed checkpoint: {0}")]
    Malformed(#[from] CheckpointError),
    /// Another origin than the one expected.
    #[error("the checkpoint's origin is {found:?}, not {expected:?}")]
    Origin {
        /// Expected.
        expected: String,
        /// Found (at most 200 characters).
        found: String,
    },
    /// No valid signature by a pinned log key, or an invalid one.
    #[error("log signature: {0}")]
    LogSignature(NoteError),
    /// A pinned witness's cosignature that does not verify (the note is rejected, as
    /// `signed-note` requires).
    #[error("the cosignature of witness {0} does not verify")]
    BadCosignature(String),
}

/// Checks a signed checkpoint: its origin, its signature by one of `policy.logs`, each pinned
/// witness's cosignature (a bad one rejects the note; one dated more than
/// [`MAX_CLOCK_SKEW`] after `now` verifies but is not counted), and the quorum.
pub fn check_checkpoint(
    bytes: &[u8],
    policy: &Policy,
    expected_origin: &str,
    now: u64,
) -> Result<CheckedCheckpoint, CheckError> {
    let (cp, note) = Checkpoint::parse_note(bytes)?;
    if cp.origin != expected_origin {
        return Err(CheckError::Origin {
            expected: expected_origin.to_owned(),
            found: cp.origin.chars().take(200).collect(),
        });
    }
    let logs: Vec<VerifierKey> = policy
        .logs
        .iter()
        .filter(|k| k.name == cp.origin)
        .cloned()
        .collect();
    note.verify(&logs).map_err(CheckError::LogSignature)?;
    let mut cosigned = Vec::new();
    let mut not_counted = Vec::new();
    for w in &policy.witnesses {
        let Some(sig) = note
            .signatures
            .iter()
            .find(|s| s.name == w.key.name && s.id == w.key.id)
        else {
            continue;
        };
        let one = Note {
            text: note.text.clone(),
            signatures: vec![sig.clone()],
        };
        match one.verify(std::slice::from_ref(&w.key)) {
            Ok(v) => {
                let ts = v.first().and_then(|(_, t)| *t).unwrap_or(0);
                if ts > now.saturating_add(MAX_CLOCK_SKEW) {
                    not_counted.push((
                        w.name.clone(),
                        format!("its timestamp {ts} is {} s in the future", ts - now),
                    ));
                } else {
                    cosigned.push((w.name.clone(), ts));
                }
            }
            Err(_) => return Err(CheckError::BadCosignature(w.name.clone())),
        }
    }
    let names: HashSet<&str> = cosigned.iter().map(|(n, _)| n.as_str()).collect();
    let quorum_met = policy.met(&names);
    Ok(CheckedCheckpoint {
        checkpoint: cp,
        text: note.text,
        cosigned,
        not_counted,
        quorum_met,
    })
}
