//! Checkpoints (`c2sp.org/tlog-checkpoint`): the note text `origin\nsize\nbase64(root)\n`.

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};

use afr_core::Hash32;

use crate::note::{Note, NoteError};

/// What is wrong with a checkpoint's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The note around it.
    #[error(transparent)]
    Note(#[from] NoteError),
    /// Fewer than three lines, or an empty one.
    #[error("a checkpoint is origin, size and root hash, each on its own non-empty line")]
    Lines,
    /// The size line.
    #[error("the tree size {0:?} is not a decimal without leading zeroes")]
    Size(String),
    /// The root line.
    #[error("the root hash is not 32 bytes of base64")]
    Root,
}

/// A tree head: origin, size and root (and opaque extension lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's identity.
    pub origin: String,
    /// Number of leaves.
    pub size: u64,
    /// RFC 6962 root of the first `size` leaves.
    pub root: Hash32,
    /// Extension lines (AFR writes none).
    pub extensions: Vec<String>,
}

impl Checkpoint {
    /// The note text: `origin\nsize\nbase64(root)\n` then the extension lines.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            B64.encode(self.root.0)
        );
        for e in &self.extensions {
            s.push_str(e);
            s.push('\n');
        }
        s
    }

    /// Parses a note text (not the signatures).
    pub fn parse_text(text: &str) -> Result<Checkpoint, CheckpointError> {
        let body = text.strip_suffix('\n').ok_or(CheckpointError::Lines)?;
        let lines: Vec<&str> = body.split('\n').collect();
        if lines.len() < 3 || lines.iter().any(|l| l.is_empty()) {
            return Err(CheckpointError::Lines);
        }
        let size = parse_decimal(lines[1])
            .ok_or_else(|| CheckpointError::Size(lines[1].chars().take(40).collect()))?;
        let root = B64
            .decode(lines[2])
            .ok()
            .and_then(|b| Hash32::from_slice(&b))
            .ok_or(CheckpointError::Root)?;
        Ok(Checkpoint {
            origin: lines[0].to_owned(),
            size,
            root,
            extensions: lines[3..].iter().map(|l| (*l).to_owned()).collect(),
        })
    }

    /// Parses a signed checkpoint (the note and its text), without verifying signatures.
    pub fn parse_note(bytes: &[u8]) -> Result<(Checkpoint, Note), CheckpointError> {
        let note = Note::parse(bytes)?;
        Ok((Checkpoint::parse_text(&note.text)?, note))
    }
}

/// An ASCII decimal with no leading zeroes (`0` alone allowed), as C2SP formats write sizes.
pub fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}
