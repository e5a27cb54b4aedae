//! Independent roots kept beside the store: the recorder's checkpoint log key, its signed
//! checkpoints with the witnesses' cosignatures, and RFC 3161 timestamp tokens.
//!
//! ```text
//! <dir>/roots/log.key                     Ed25519 seed of the log key (0600, created once)
//! <dir>/roots/log.vkey                    its verifier key (public), one line
//! <dir>/roots/<size:020>.checkpoint       a signed checkpoint of the first <size> epochs,
//!                                         the log's signature and every cosignature kept
//! <dir>/roots/<size:020>.<tsa>.tsr        an RFC 3161 token over SHA-256(checkpoint text)
//! <dir>/roots/witnesses.json              per witness: the size it last cosigned
//! ```
//!
//! Every file is replaced atomically (a temporary file, synced, renamed, the directory
//! synced), so a crash leaves the old or the new version, never a torn one. Nothing here is
//! trusted by a verifier: checkpoints carry their own signatures and tokens their own.

use std::{
    collections::BTreeMap,
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use afr_core::{Hash32, RecorderId};
use afr_tlog::{
    Checkpoint, Note, NoteSignature, NoteSigner,
    note::{TYPE_ED25519, VerifierKey},
};
use zeroize::Zeroizing;

use crate::keyfile::{read_key_file, write_key_file};

/// Errors of the roots directory.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    /// A file could not be read or written.
    #[error("{path}: {why}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        why: String,
    },
    /// The log key file.
    #[error(transparent)]
    Key(#[from] crate::RecordError),
    /// A stored file that does not parse.
    #[error("{path}: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

fn io(path: &Path, e: impl std::fmt::Display) -> RootsError {
    RootsError::Io {
        path: path.to_owned(),
        why: e.to_string(),
    }
}

/// One stored checkpoint.
#[derive(Debug, Clone)]
pub struct StoredCheckpoint {
    /// Its tree head.
    pub checkpoint: Checkpoint,
    /// The note, with the log's signature and every cosignature collected.
    pub note: Note,
    /// Timestamp tokens by TSA name.
    pub tokens: BTreeMap<String, Vec<u8>>,
}

/// The roots directory of a store.
#[derive(Debug)]
pub struct Roots {
    dir: PathBuf,
}

/// The origin line (and log key name) of a recorder's checkpoints.
pub fn origin(recorder: &RecorderId) -> String {
    afr_tlog::origin(&format!("0x{}", hex::encode(recorder)))
}

impl Roots {
    /// The roots directory of the store at `store_dir` (created, mode 0700, when `create`).
    pub fn open(store_dir: &Path, create: bool) -> Result<Roots, RootsError> {
        let dir = store_dir.join("roots");
        if create && !dir.exists() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(|e| io(&dir, e))?;
        }
        Ok(Roots { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The log key, created on first use (its public half written to `log.vkey`).
    pub fn log_signer(&self, recorder: &RecorderId) -> Result<NoteSigner, RootsError> {
        let path = self.dir.join("log.key");
        if !path.exists() {
            let mut seed = Zeroizing::new([0u8; 32]);
            rand::fill(&mut seed[..]);
            write_key_file(&path, &seed[..])?;
        }
        let seed = read_key_file(&path)?;
        let signer =
            NoteSigner::new(&origin(recorder), TYPE_ED25519, &seed).map_err(|e| io(&path, e))?;
        let vkey = format!("{}\n", signer.verifier());
        let vpath = self.dir.join("log.vkey");
        if std::fs::read_to_string(&vpath).ok().as_deref() != Some(vkey.as_str()) {
            self.replace(&vpath, vkey.as_bytes())?;
        }
        Ok(signer)
    }

    /// The log's verifier key, if a checkpoint was ever signed.
    pub fn log_vkey(&self) -> Result<Option<VerifierKey>, RootsError> {
        let path = self.dir.join("log.vkey");
        match std::fs::read_to_string(&path) {
            Ok(s) => VerifierKey::parse(s.trim())
                .map(Some)
                .map_err(|e| RootsError::Corrupt {
                    path,
                    why: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&path, e)),
        }
    }

    fn checkpoint_path(&self, size: u64) -> PathBuf {
        self.dir.join(format!("{size:020}.checkpoint"))
    }

    /// Writes `data` to `path` atomically and durably.
    fn replace(&self, path: &Path, data: &[u8]) -> Result<(), RootsError> {
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)
            .map_err(|e| io(&tmp, e))?;
        f.write_all(data).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| io(path, e))?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(&self.dir, e))
    }

    /// Stores a signed checkpoint (replacing the one of its size).
    pub fn save(&self, note: &Note) -> Result<(), RootsError> {
        let cp = Checkpoint::parse_text(&note.text).map_err(|e| io(&self.dir, e))?;
        self.replace(&self.checkpoint_path(cp.size), note.to_text().as_bytes())
    }

    /// Adds cosignature lines to the stored checkpoint of `size` (one per key: a newer
    /// cosignature by the same key replaces the older).
    pub fn add_cosignatures(&self, size: u64, sigs: &[NoteSignature]) -> Result<(), RootsError> {
        let Some(mut s) = self.get(size)? else {
            return Err(io(&self.checkpoint_path(size), "no such checkpoint"));
        };
        for sig in sigs {
            s.note
                .signatures
                .retain(|o| !(o.name == sig.name && o.id == sig.id));
            s.note.signatures.push(sig.clone());
        }
        self.save(&s.note)
    }

    /// Stores an RFC 3161 token for the checkpoint of `size` from the TSA `name`.
    pub fn add_token(&self, size: u64, name: &str, der: &[u8]) -> Result<(), RootsError> {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.replace(&self.dir.join(format!("{size:020}.{safe}.tsr")), der)
    }

    /// The stored checkpoint of `size`.
    pub fn get(&self, size: u64) -> Result<Option<StoredCheckpoint>, RootsError> {
        let path = self.checkpoint_path(size);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, e)),
        };
        let corrupt = |why: String| RootsError::Corrupt {
            path: path.clone(),
            why,
        };
        let (checkpoint, note) =
            Checkpoint::parse_note(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if checkpoint.size != size {
            return Err(corrupt(format!(
                "holds a checkpoint of size {}",
                checkpoint.size
            )));
        }
        let mut tokens = BTreeMap::new();
        let prefix = format!("{size:020}.");
        for e in std::fs::read_dir(&self.dir).map_err(|e| io(&self.dir, e))? {
            let e = e.map_err(|e| io(&self.dir, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(tsa) = name
                .strip_prefix(&prefix)
                .and_then(|r| r.strip_suffix(".tsr"))
            {
                tokens.insert(
                    tsa.to_owned(),
                    std::fs::read(e.path()).map_err(|err| io(&e.path(), err))?,
                );
            }
        }
        Ok(Some(StoredCheckpoint {
            checkpoint,
            note,
            tokens,
        }))
    }

    /// Sizes of the stored checkpoints, ascending.
    pub fn sizes(&self) -> Result<Vec<u64>, RootsError> {
        let mut out = Vec::new();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io(&self.dir, e)),
        };
        for e in rd {
            let e = e.map_err(|e| io(&self.dir, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(n) = name
                .strip_suffix(".checkpoint")
                .and_then(|n| n.parse().ok())
            {
                out.push(n);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The largest stored checkpoint.
    pub fn latest(&self) -> Result<Option<StoredCheckpoint>, RootsError> {
        match self.sizes()?.last() {
            Some(&n) => self.get(n),
            None => Ok(None),
        }
    }

    /// The size each witness last cosigned.
    pub fn witness_sizes(&self) -> Result<BTreeMap<String, u64>, RootsError> {
        let path = self.dir.join("witnesses.json");
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| RootsError::Corrupt {
                path,
                why: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(io(&path, e)),
        }
    }

    /// Records that `witness` cosigned the checkpoint of `size`.
    pub fn set_witness_size(&self, witness: &str, size: u64) -> Result<(), RootsError> {
        let mut m = self.witness_sizes()?;
        m.insert(witness.to_owned(), size);
        let path = self.dir.join("witnesses.json");
        let body = serde_json::to_vec_pretty(&m).map_err(|e| io(&path, e))?;
        self.replace(&path, &body)
    }
}

/// The epoch roots of `headers` (epochs 0, 1, ... in order).
pub fn epoch_roots(headers: &[afr_core::EpochHeader]) -> Vec<Hash32> {
    headers.iter().map(afr_core::EpochHeader::root).collect()
}

impl Roots {
    /// The checkpoint frames for a bundle whose headers are epochs `0..h` of `epoch_roots`
    /// (every sealed epoch of the store): the smallest stored checkpoint covering all `h`, and
    /// the latest (it holds the most cosignatures), each with its consistency proof
    /// (`docs/spec/roots.md`, "In a bundle") and its timestamp tokens. None when nothing was
    /// ever witnessed.
    pub fn frames(
        &self,
        epoch_roots: &[Hash32],
        h: u64,
    ) -> Result<Vec<afr_core::bundle::CheckpointFrame>, RootsError> {
        let sizes = self.sizes()?;
        let mut pick: Vec<u64> = sizes.iter().copied().filter(|&s| s >= h).take(1).collect();
        if let Some(&last) = sizes.last()
            && !pick.contains(&last)
        {
            pick.push(last);
        }
        pick.sort_unstable();
        let leaves = afr_tlog::tree::leaves(epoch_roots);
        let mut out = Vec::new();
        let mut base = h;
        for size in pick {
            let Some(s) = self.get(size)? else { continue };
            // A checkpoint beyond the store's own epochs (a rolled-back store) is left out:
            // `afr witness` reports that case loudly.
            let Some(proof) = (if size <= h {
                Some(Vec::new())
            } else {
                afr_tlog::tree::consistency_proof(&leaves, base, size)
            }) else {
                continue;
            };
            if size > h {
                base = size;
            }
            out.push(afr_core::bundle::CheckpointFrame {
                note: s.note.to_text(),
                proof,
                tokens: s.tokens.into_iter().collect(),
            });
        }
        Ok(out)
    }
}

/// The `extra` data of an event's `c2sp.org/tlog-proof@v1` (`docs/spec/roots.md`): what
/// leads from the event's record to its epoch's leaf in the log of epochs,
/// `["afr-event-proof", header, [* bstr(32)] audit path of the record in its epoch]`.
pub const EVENT_PROOF_MAGIC: &str = "afr-event-proof";

/// One `tlog-proof` per event of `bundle` whose epoch a checkpoint of the bundle covers:
/// `(seq, proof text)`. `epoch_roots` are every sealed epoch's roots (a checkpoint may cover
/// more epochs than the bundle's headers).
pub fn tlog_proofs(
    bundle: &afr_core::bundle::Bundle,
    epoch_roots: &[Hash32],
) -> Vec<(u64, String)> {
    let leaves = afr_tlog::tree::leaves(epoch_roots);
    let parsed: Vec<(u64, String)> = bundle
        .checkpoints
        .iter()
        .filter_map(|f| {
            Checkpoint::parse_note(f.note.as_bytes())
                .ok()
                .map(|(c, _)| (c.size, f.note.clone()))
        })
        .collect();
    let mut out = Vec::new();
    for ev in &bundle.events {
        let Ok(record) = afr_core::Record::decode(&ev.record) else {
            continue;
        };
        let Some(header) = bundle.headers.get(record.epoch as usize) else {
            continue;
        };
        // The smallest checkpoint covering the epoch.
        let Some((size, note)) = parsed
            .iter()
            .filter(|(s, _)| *s > record.epoch)
            .min_by_key(|(s, _)| *s)
        else {
            continue;
        };
        let Some(path) = afr_tlog::tree::inclusion_proof(&leaves, record.epoch, *size) else {
            continue;
        };
        let mut w = afr_core::cbor::Writer::with_capacity(512);
        w.array(3);
        w.text(EVENT_PROOF_MAGIC);
        w.raw(&header.encode());
        w.array(ev.proof.len() as u64);
        for h in &ev.proof {
            w.bytes(&h.0);
        }
        let proof = afr_tlog::proof::TlogProof {
            extra: Some(w.buf),
            index: record.epoch,
            path,
            checkpoint: note.clone(),
        };
        out.push((record.seq, proof.to_text()));
    }
    out
}
