//! Signed notes (`c2sp.org/signed-note`): text, a blank line, then signature lines.
//!
//! ```text
//! <text: lines, each ending in "\n">
//! "\n"
//! "— " <key name> " " base64(u32be key ID ‖ signature) "\n"      × 1 or more
//! ```
//!
//! A signature is identified by its key name *and* key ID; one that matches no known key is
//! ignored (it may be a witness's cosignature the reader does not trust), one that matches a
//! known key must verify, or the whole note is rejected.

use base64::{Engine as _, engine::general_purpose::STANDARD as B64};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use zeroize::Zeroizing;

use afr_core::hash::sha256;

/// Largest note accepted, signatures included.
pub const MAX_NOTE: usize = 64 * 1024;
/// Most signature lines accepted (the spec requires at least 16).
pub const MAX_SIGNATURES: usize = 100;

/// Signature type bytes (`c2sp.org/signed-note`, "Signature types").
pub const TYPE_ED25519: u8 = 0x01;
/// Timestamped Ed25519 checkpoint cosignatures (`c2sp.org/tlog-cosignature`).
pub const TYPE_COSIGNATURE: u8 = 0x04;

/// What is wrong with a note, a key or a signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// Over [`MAX_NOTE`] bytes.
    #[error("the note is {0} bytes; at most {MAX_NOTE} are accepted")]
    TooLarge(usize),
    /// Not UTF-8, or a control character other than newline.
    #[error("the note is not UTF-8 text without control characters")]
    NotText,
    /// No blank line before the signatures, or no signature.
    #[error("the note has no signature block (a blank line, then \"— name signature\" lines)")]
    NoSignatures,
    /// More than [`MAX_SIGNATURES`] signature lines.
    #[error("the note has {0} signatures; at most {MAX_SIGNATURES} are accepted")]
    TooManySignatures(usize),
    /// A signature line that does not parse.
    #[error("signature line {line} is malformed: {why}")]
    BadSignatureLine {
        /// 1-based, among the signature lines.
        line: usize,
        /// What is wrong.
        why: &'static str,
    },
    /// The text does not end in a newline or is empty.
    #[error("the note text is empty or does not end in a newline")]
    BadText,
    /// A verifier key that does not parse.
    #[error("verifier key {key:?}: {why}")]
    BadKey {
        /// The key as given (public).
        key: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A key name that is empty or holds a space or `+`.
    #[error("key name {0:?} is empty or holds a space or '+'")]
    BadKeyName(String),
    /// A signature by a known key that does not verify: the note must be rejected.
    #[error("the signature of {name} (key ID {id:08x}) does not verify")]
    BadSignature {
        /// Key name.
        name: String,
        /// Key ID.
        id: u32,
    },
    /// No signature of any known key.
    #[error("no signature by a known key (known: {0})")]
    UnknownSigners(String),
}

/// One signature line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSignature {
    /// Key name.
    pub name: String,
    /// Key ID (the first four bytes of the decoded signature).
    pub id: u32,
    /// The signature after the key ID.
    pub sig: Vec<u8>,
}

impl NoteSignature {
    /// The line, `— name base64(id ‖ sig)\n`.
    pub fn line(&self) -> String {
        let mut raw = self.id.to_be_bytes().to_vec();
        raw.extend_from_slice(&self.sig);
        format!("\u{2014} {} {}\n", self.name, B64.encode(raw))
    }
}

/// A parsed note: its text (ending in a newline) and its signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The signed text, final newline included.
    pub text: String,
    /// Signature lines in order.
    pub signatures: Vec<NoteSignature>,
}

/// Checks a key name: non-empty, no Unicode space, no `+`.
pub fn check_name(name: &str) -> Result<(), NoteError> {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '+') {
        return Err(NoteError::BadKeyName(name.to_owned()));
    }
    Ok(())
}

/// `SHA-256(name ‖ 0x0A ‖ type ‖ public key)[:4]`, big-endian.
pub fn key_id(name: &str, kind: u8, public: &[u8]) -> u32 {
    let h = sha256(&[name.as_bytes(), b"\n", &[kind], public]);
    u32::from_be_bytes([h.0[0], h.0[1], h.0[2], h.0[3]])
}

fn is_text(s: &str) -> bool {
    !s.chars().any(|c| c.is_control() && c != '\n')
}

impl Note {
    /// Parses a note: size, text, blank line, then signature lines.
    pub fn parse(bytes: &[u8]) -> Result<Note, NoteError> {
        if bytes.len() > MAX_NOTE {
            return Err(NoteError::TooLarge(bytes.len()));
        }
        let s = std::str::from_utf8(bytes).map_err(|_| NoteError::NotText)?;
        if !is_text(s) {
            return Err(NoteError::NotText);
        }
        // The text ends at the last blank line ("\n\n"); the signatures follow it.
        let cut = s.rfind("\n\n").ok_or(NoteError::NoSignatures)?;
        let (text, sigs) = (&s[..=cut], &s[cut + 2..]);
        if text.len() < 2 {
            return Err(NoteError::BadText);
        }
        if sigs.is_empty() || !sigs.ends_with('\n') {
            return Err(NoteError::NoSignatures);
        }
        let lines: Vec<&str> = sigs[..sigs.len() - 1].split('\n').collect();
        if lines.len() > MAX_SIGNATURES {
            return Err(NoteError::TooManySignatures(lines.len()));
        }
        let signatures = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                parse_signature_line(l)
                    .map_err(|why| NoteError::BadSignatureLine { line: i + 1, why })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Note {
            text: text.to_owned(),
            signatures,
        })
    }

    /// The note as text: the text, a blank line, the signature lines.
    pub fn to_text(&self) -> String {
        let mut s = self.text.clone();
        s.push('\n');
        for sig in &self.signatures {
            s.push_str(&sig.line());
        }
        s
    }

    /// Verifies the signatures of the known `keys`: every signature matching a known key
    /// (name and ID) must verify; at least one must. Returns, per verified signature, the
    /// index of its key in `keys` and, for a cosignature, its timestamp.
    pub fn verify(&self, keys: &[VerifierKey]) -> Result<Vec<(usize, Option<u64>)>, NoteError> {
        let mut out = Vec::new();
        for sig in &self.signatures {
            for (i, k) in keys.iter().enumerate() {
                if k.name != sig.name || k.id != sig.id {
                    continue;
                }
                let ts = k
                    .verify(&self.text, &sig.sig)
                    .ok_or_else(|| NoteError::BadSignature {
                        name: sig.name.clone(),
                        id: sig.id,
                    })?;
                if !out.iter().any(|(j, _)| *j == i) {
                    out.push((i, ts));
                }
            }
        }
        if out.is_empty() {
            let known: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
            return Err(NoteError::UnknownSigners(known.join(", ")));
        }
        Ok(out)
    }
}

fn parse_signature_line(l: &str) -> Result<NoteSignature, &'static str> {
    let rest = l
        .strip_prefix("\u{2014} ")
        .ok_or("does not start with \"— \"")?;
    let (name, b64) = rest
        .split_once(' ')
        .ok_or("no space between key name and signature")?;
    check_name(name).map_err(|_| "bad key name")?;
    let raw = B64.decode(b64).map_err(|_| "the signature is not base64")?;
    if raw.len() < 5 {
        return Err("the signature is shorter than a key ID");
    }
    Ok(NoteSignature {
        name: name.to_owned(),
        id: u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]),
        sig: raw[4..].to_vec(),
    })
}

/// A public key that verifies note signatures: Ed25519 (`0x01`) or an Ed25519 cosigner
/// (`0x04`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierKey {
    /// Key name.
    pub name: String,
    /// Key ID.
    pub id: u32,
    /// Signature type ([`TYPE_ED25519`] or [`TYPE_COSIGNATURE`]).
    pub kind: u8,
    /// Ed25519 public key.
    pub public: [u8; 32],
}

impl VerifierKey {
    /// A key with its recommended ID.
    pub fn new(name: &str, kind: u8, public: [u8; 32]) -> Result<VerifierKey, NoteError> {
        check_name(name)?;
        Ok(VerifierKey {
            name: name.to_owned(),
            id: key_id(name, kind, &public),
            kind,
            public,
        })
    }

    /// Parses `name+hex(id)+base64(type ‖ key)`. The ID must be the recommended one.
    pub fn parse(vkey: &str) -> Result<VerifierKey, NoteError> {
        let bad = |why| NoteError::BadKey {
            key: vkey.chars().take(200).collect(),
            why,
        };
        // The key is base64 and may itself hold '+': split at the first two only.
        let mut parts = vkey.trim().splitn(3, '+');
        let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("expected name+keyid+key"));
        };
        check_name(name).map_err(|_| bad("bad key name"))?;
        if id.len() != 8 {
            return Err(bad("the key ID is not 8 hex digits"));
        }
        let id = u32::from_str_radix(id, 16).map_err(|_| bad("the key ID is not hex"))?;
        let raw = B64.decode(key).map_err(|_| bad("the key is not base64"))?;
        let (kind, public) = match raw.split_first() {
            Some((&k, rest)) if k == TYPE_ED25519 || k == TYPE_COSIGNATURE => (k, rest),
            Some(_) => {
                return Err(bad(
                    "unsupported signature type (0x01 Ed25519 and 0x04 cosignature/v1 are)",
                ));
            }
            None => return Err(bad("empty key")),
        };
        let public: [u8; 32] = public
            .try_into()
            .map_err(|_| bad("an Ed25519 key is 32 bytes"))?;
        VerifyingKey::from_bytes(&public).map_err(|_| bad("not an Ed25519 public key"))?;
        if key_id(name, kind, &public) != id {
            return Err(bad("the key ID does not match the name and key"));
        }
        Ok(VerifierKey {
            name: name.to_owned(),
            id,
            kind,
            public,
        })
    }

    /// Verifies `sig` over `text`; `Some(timestamp)` for a cosignature, `Some(None)` for a
    /// plain signature, `None` when it fails.
    fn verify(&self, text: &str, sig: &[u8]) -> Option<Option<u64>> {
        let vk = VerifyingKey::from_bytes(&self.public).ok()?;
        match self.kind {
            TYPE_ED25519 => {
                let s = ed25519_dalek::Signature::from_slice(sig).ok()?;
                vk.verify_strict(text.as_bytes(), &s).ok().map(|()| None)
            }
            TYPE_COSIGNATURE => {
                let (ts, s) = sig.split_at_checked(8)?;
                let ts = u64::from_be_bytes(ts.try_into().ok()?);
                if ts > i64::MAX as u64 {
                    return None;
                }
                let s = ed25519_dalek::Signature::from_slice(s).ok()?;
                let msg = crate::cosig::message(text, ts);
                vk.verify_strict(msg.as_bytes(), &s).ok().map(|()| Some(ts))
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for VerifierKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut raw = vec![self.kind];
        raw.extend_from_slice(&self.public);
        write!(f, "{}+{:08x}+{}", self.name, self.id, B64.encode(raw))
    }
}

/// An Ed25519 signing key with its name, for notes (`0x01`) or cosignatures (`0x04`).
pub struct NoteSigner {
    key: SigningKey,
    vkey: VerifierKey,
}

impl std::fmt::Debug for NoteSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NoteSigner({})", self.vkey)
    }
}

impl NoteSigner {
    /// From a 32-byte Ed25519 seed.
    pub fn new(name: &str, kind: u8, seed: &Zeroizing<[u8; 32]>) -> Result<NoteSigner, NoteError> {
        let key = SigningKey::from_bytes(seed);
        let vkey = VerifierKey::new(name, kind, key.verifying_key().to_bytes())?;
        Ok(NoteSigner { key, vkey })
    }

    /// The public side.
    pub fn verifier(&self) -> &VerifierKey {
        &self.vkey
    }

    /// Signs a note text (type `0x01`).
    pub fn sign(&self, text: &str) -> NoteSignature {
        NoteSignature {
            name: self.vkey.name.clone(),
            id: self.vkey.id,
            sig: self.key.sign(text.as_bytes()).to_bytes().to_vec(),
        }
    }

    /// Cosigns a checkpoint text at `timestamp` (type `0x04`, `cosignature/v1`).
    pub fn cosign(&self, text: &str, timestamp: u64) -> NoteSignature {
        let msg = crate::cosig::message(text, timestamp);
        let mut sig = timestamp.to_be_bytes().to_vec();
        sig.extend_from_slice(&self.key.sign(msg.as_bytes()).to_bytes());
        NoteSignature {
            name: self.vkey.name.clone(),
            id: self.vkey.id,
            sig,
        }
    }
}
