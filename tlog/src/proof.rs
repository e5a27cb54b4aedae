//! `c2sp.org/tlog-proof@v1`: an offline proof that a leaf is in a cosigned checkpoint.
//!
//! ```text
//! "c2sp.org/tlog-proof@v1\n"
//! "extra " base64(extra) "\n"            optional, unauthenticated
//! "index " decimal(index) "\n"
//! base64(hash) "\n"                      × the audit path, leaf's sibling first
//! "\n"
//! <signed checkpoint, verbatim>
//! ```

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};

use afr_core::Hash32;

use crate::checkpoint::parse_decimal;

/// The first line.
pub const MAGIC: &str = "c2sp.org/tlog-proof@v1";
/// Largest proof file read.
pub const MAX_PROOF_FILE: usize = 256 * 1024;
/// Most audit path lines (trees of up to 2^64 leaves).
pub const MAX_PATH: usize = 64;

/// A parsed tlog proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlogProof {
    /// Opaque extra data (AFR: the event's own proof inside its epoch, see docs/spec/roots.md).
    pub extra: Option<Vec<u8>>,
    /// Index of the leaf.
    pub index: u64,
    /// Audit path.
    pub path: Vec<Hash32>,
    /// The signed checkpoint.
    pub checkpoint: String,
}

impl TlogProof {
    /// The proof as text.
    pub fn to_text(&self) -> String {
        let mut s = format!("{MAGIC}\n");
        if let Some(e) = &self.extra {
            s.push_str(&format!("extra {}\n", B64.encode(e)));
        }
        s.push_str(&format!("index {}\n", self.index));
        for h in &self.path {
            s.push_str(&B64.encode(h.0));
            s.push('\n');
        }
        s.push('\n');
        s.push_str(&self.checkpoint);
        s
    }

    /// Parses a proof; the checkpoint is kept as text (parse and verify it separately).
    pub fn parse(bytes: &[u8]) -> Result<TlogProof, String> {
        if bytes.len() > MAX_PROOF_FILE {
            return Err(format!(
                "the proof is {} bytes; at most {MAX_PROOF_FILE} are read",
                bytes.len()
            ));
        }
        let s = std::str::from_utf8(bytes).map_err(|_| "the proof is not UTF-8".to_owned())?;
        let (head, checkpoint) = s
            .split_once("\n\n")
            .ok_or_else(|| "no empty line before the checkpoint".to_owned())?;
        let mut lines = head.split('\n').peekable();
        if lines.next() != Some(MAGIC) {
            return Err(format!("the first line is not {MAGIC}"));
        }
        let extra = match lines.peek().and_then(|l| l.strip_prefix("extra ")) {
            Some(b) => {
                let e = B64
                    .decode(b)
                    .map_err(|_| "the extra line is not base64".to_owned())?;
                lines.next();
                Some(e)
            }
            None => None,
        };
        let index = lines
            .next()
            .and_then(|l| l.strip_prefix("index "))
            .and_then(parse_decimal)
            .ok_or_else(|| "no \"index N\" line".to_owned())?;
        let mut path = Vec::new();
        for l in lines {
            if path.len() == MAX_PATH {
                return Err(format!("more than {MAX_PATH} audit path lines"));
            }
            path.push(
                B64.decode(l)
                    .ok()
                    .and_then(|b| Hash32::from_slice(&b))
                    .ok_or_else(|| "an audit path line is not a base64 SHA-256 hash".to_owned())?,
            );
        }
        Ok(TlogProof {
            extra,
            index,
            path,
            checkpoint: checkpoint.to_owned(),
        })
    }
}
