//! Payload sealing: a two-level HKDF key hierarchy, ChaCha20-Poly1305, and a key-committing
//! payload commitment.
//!
//! ```text
//! epoch_key  = HKDF-SHA-256(salt = epoch_salt[32], ikm = master[32],
//!                           info = "afr/v1/epoch-key" ‖ recorder[20] ‖ u64be(epoch), L = 32)
//! event_key  = HKDF-Expand-SHA-256(prk = epoch_key,
//!                           info = "afr/v1/event-key" ‖ u64be(seq), L = 64)
//!            = enc_key[32] ‖ commit_key[32]
//! aad        = "afr/v1/payload-aad" ‖ recorder[20] ‖ u64be(epoch) ‖ u64be(seq)
//! ciphertext = ChaCha20-Poly1305(enc_key, nonce[12], aad, plaintext)   (tag appended)
//! key_commit = SHA-256("afr/v1/key-commit" ‖ commit_key ‖ plaintext)
//! commitment = SHA-256("afr/v1/payload-commit" ‖ key_commit ‖ nonce ‖ ciphertext)
//! index_key  = HKDF-SHA-256(salt = none, ikm = master[32],
//!                           info = "afr/v1/index-key" ‖ recorder[20], L = 32)
//! ```
//!
//! Why this shape:
//! - `epoch_salt` is random and stored apart from the master secret: destroying it (crypto-
//!   erasure) makes the epoch key, and so every event key of the epoch, underivable, while
//!   the master secret keeps serving other epochs.
//! - The record holds `commitment`, which a verifier without keys recomputes from the stored
//!   `key_commit`, `nonce` and `ciphertext`: any edit to the stored payload shows, and nothing
//!   about the plaintext leaks, because `key_commit` is keyed by a secret 256-bit value (no bare
//!   hash of a guessable payload).
//! - ChaCha20-Poly1305 is not key-committing: one ciphertext can open under two keys. The
//!   plaintext is bound instead by `key_commit`, a collision-resistant hash of the commit key
//!   and the plaintext itself, so a disclosed event key opens a record to exactly one plaintext.
//! - The AAD binds recorder, epoch and sequence number: a ciphertext moved to another slot
//!   fails to decrypt.
//! - `index_key` keys the recorder's blind query index (HMAC-SHA-256 of each term). It has no
//!   salt: it must outlive every epoch, so an erasure cannot destroy it; erasure deletes the
//!   erased epoch's postings instead. Its own label separates it from every epoch key.
//! - The nonce is random per event although the key already is: a sequence number whose first
//!   use never reached disk (buffered mode, then a crash) is used again, and a fresh nonce keeps
//!   that reuse harmless.

use chacha20poly1305::{AeadInOut, ChaCha20Poly1305, Key, KeyInit, Nonce};
use hkdf::Hkdf;
use sha2::Sha256;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::{
    RecorderId,
    cbor::{CborError, Reader, Writer},
    hash::{Hash32, sha256},
};

/// HKDF info label of the epoch key (level 1).
pub const EPOCH_KEY_LABEL: &[u8] = b"afr/v1/epoch-key";
/// HKDF info label of the event key (level 2).
pub const EVENT_KEY_LABEL: &[u8] = b"afr/v1/event-key";
/// HKDF info label of the query index key (see [`MasterKey::index_key`]).
pub const INDEX_KEY_LABEL: &[u8] = b"afr/v1/index-key";
/// Prefix of the AEAD associated data.
pub const AAD_LABEL: &[u8] = b"afr/v1/payload-aad";
/// Domain label of the key commitment.
pub const KEY_COMMIT_LABEL: &[u8] = b"afr/v1/key-commit";
/// Domain label of the payload commitment held by the record.
pub const PAYLOAD_COMMIT_LABEL: &[u8] = b"afr/v1/payload-commit";
/// Bytes of the AEAD nonce.
pub const NONCE_LEN: usize = 12;

/// Why a payload does not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// Authentication failed, or the plaintext does not match the commitment. Deliberately
    /// opaque: it never says which byte or which check.
    #[error("decryption failed")]
    DecryptionFailed,
}

/// The recorder's 32-byte master secret. Zeroized on drop; never printed.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct MasterKey([u8; 32]);

impl MasterKey {
    /// Wraps secret bytes.
    pub fn from_bytes(b: [u8; 32]) -> MasterKey {
        MasterKey(b)
    }

    /// The secret bytes, for writing the key file.
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }

    /// Level 1: the key of one epoch.
    pub fn epoch_key(&self, salt: &[u8; 32], recorder: &RecorderId, epoch: u64) -> EpochKey {
        let hk = Hkdf::<Sha256>::new(Some(salt), &self.0);
        let mut out = [0u8; 32];
        let info: [&[u8]; 3] = [EPOCH_KEY_LABEL, recorder, &epoch.to_be_bytes()];
        // 32 bytes is far below HKDF's 255 * 32 output limit.
        if hk.expand_multi_info(&info, &mut out).is_err() {
            unreachable!("hkdf output of 32 bytes is always valid");
        }
        EpochKey(out)
    }

    /// The key of the recorder's blind query index: index terms are stored as
    /// HMAC-SHA-256 under it, never in plaintext. One key per store (no salt), so that a
    /// lookup hashes its literal once and finds the term in every epoch.
    pub fn index_key(&self, recorder: &RecorderId) -> IndexKey {
        // No salt: RFC 5869 then extracts with a string of 32 zero bytes.
        let hk = Hkdf::<Sha256>::new(None, &self.0);
        let mut out = [0u8; 32];
        let info: [&[u8]; 2] = [INDEX_KEY_LABEL, recorder];
        // 32 bytes is far below HKDF's 255 * 32 output limit.
        if hk.expand_multi_info(&info, &mut out).is_err() {
            unreachable!("hkdf output of 32 bytes is always valid");
        }
        IndexKey(out)
    }
}

impl core::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

/// The key of the blind query index ([`MasterKey::index_key`]). Zeroized on drop; never
/// printed.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct IndexKey([u8; 32]);

impl IndexKey {
    /// The secret bytes, to key the HMAC.
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }
}

impl core::fmt::Debug for IndexKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("IndexKey(<redacted>)")
    }
}

/// The key of one epoch: every event key of the epoch derives from it. Zeroized on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct EpochKey([u8; 32]);

impl EpochKey {
    /// Wraps secret bytes (from a disclosure bundle).
    pub fn from_bytes(b: [u8; 32]) -> EpochKey {
        EpochKey(b)
    }

    /// The secret bytes.
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }

    /// Level 2: the key of event `seq`.
    pub fn event_key(&self, seq: u64) -> EventKey {
        let mut out = [0u8; 64];
        // A 32-byte PRK is valid and 64 bytes of output is within HKDF's limit.
        match Hkdf::<Sha256>::from_prk(&self.0) {
            Ok(hk) => {
                if hk
                    .expand_multi_info(&[EVENT_KEY_LABEL, &seq.to_be_bytes()], &mut out)
                    .is_err()
                {
                    unreachable!("hkdf output of 64 bytes is always valid");
                }
            }
            Err(_) => unreachable!("a 32-byte prk is always valid"),
        }
        EventKey(out)
    }
}

impl core::fmt::Debug for EpochKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("EpochKey(<redacted>)")
    }
}

/// The 64-byte key of one event: encryption key then commitment key. Zeroized on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct EventKey([u8; 64]);

impl EventKey {
    /// Wraps secret bytes (from a disclosure bundle).
    pub fn from_bytes(b: [u8; 64]) -> EventKey {
        EventKey(b)
    }

    /// The secret bytes, for writing a disclosure bundle.
    pub fn expose(&self) -> &[u8; 64] {
        &self.0
    }

    fn enc(&self) -> &[u8] {
        &self.0[..32]
    }

    fn commit(&self) -> &[u8] {
        &self.0[32..]
    }
}

impl core::fmt::Debug for EventKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("EventKey(<redacted>)")
    }
}

impl PartialEq for EventKey {
    /// Constant-time.
    fn eq(&self, other: &EventKey) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

/// Where a payload sits: the AEAD associated data binds it to this slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Recorder.
    pub recorder: RecorderId,
    /// Epoch.
    pub epoch: u64,
    /// Sequence number.
    pub seq: u64,
}

impl Slot {
    fn aad(&self) -> [u8; 18 + 20 + 16] {
        let mut a = [0u8; 54];
        a[..18].copy_from_slice(AAD_LABEL);
        a[18..38].copy_from_slice(&self.recorder);
        a[38..46].copy_from_slice(&self.epoch.to_be_bytes());
        a[46..54].copy_from_slice(&self.seq.to_be_bytes());
        a
    }
}

/// A sealed payload as stored and exported: enough to recompute the record's commitment
/// without any key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptedPayload {
    /// `SHA-256("afr/v1/key-commit" ‖ commit_key ‖ plaintext)`.
    pub key_commit: Hash32,
    /// The AEAD nonce.
    pub nonce: [u8; NONCE_LEN],
    /// Ciphertext with the 16-byte tag appended.
    pub ciphertext: Vec<u8>,
}

impl EncryptedPayload {
    /// The commitment the record holds.
    pub fn commitment(&self) -> Hash32 {
        sha256(&[
            PAYLOAD_COMMIT_LABEL,
            &self.key_commit.0,
            &self.nonce,
            &self.ciphertext,
        ])
    }

    /// Canonical CBOR: `[key_commit, nonce, ciphertext]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.ciphertext.len() + 56);
        self.write(&mut w);
        w.buf
    }

    /// Appends the canonical CBOR form to a writer.
    pub fn write(&self, w: &mut Writer) {
        w.array(3);
        w.bytes(&self.key_commit.0);
        w.bytes(&self.nonce);
        w.bytes(&self.ciphertext);
    }

    /// Parses the canonical CBOR form.
    pub fn decode(bytes: &[u8]) -> Result<EncryptedPayload, CborError> {
        Reader::read_all(bytes, EncryptedPayload::read)
    }

    /// Reads one sealed payload from a reader positioned at it.
    pub fn read(r: &mut Reader<'_>) -> Result<EncryptedPayload, CborError> {
        r.array_of(3, "sealed payload")?;
        let key_commit = Hash32(r.fixed()?);
        let nonce = r.fixed()?;
        let ciphertext = r.bytes()?.to_vec();
        if ciphertext.len() < 16 {
            return Err(CborError::Malformed(
                "ciphertext shorter than its tag".into(),
            ));
        }
        Ok(EncryptedPayload {
            key_commit,
            nonce,
            ciphertext,
        })
    }
}

fn key_commit(key: &EventKey, plaintext: &[u8]) -> Hash32 {
    sha256(&[KEY_COMMIT_LABEL, key.commit(), plaintext])
}

fn cipher(key: &EventKey) -> ChaCha20Poly1305 {
    let mut k = Zeroizing::new([0u8; 32]);
    k.copy_from_slice(key.enc());
    ChaCha20Poly1305::new(&Key::from(*k))
}

/// Seals `plaintext` for `slot` under `key` with the given fresh nonce.
pub fn encrypt(
    key: &EventKey,
    slot: &Slot,
    nonce: [u8; NONCE_LEN],
    plaintext: &[u8],
) -> EncryptedPayload {
    let mut buf = Vec::with_capacity(plaintext.len() + 16);
    buf.extend_from_slice(plaintext);
    // ChaCha20-Poly1305 fails only for messages over 256 GiB; payloads are capped far below.
    if cipher(key)
        .encrypt_in_place(&Nonce::from(nonce), &slot.aad(), &mut buf)
        .is_err()
    {
        unreachable!("payload within the aead size limit");
    }
    EncryptedPayload {
        key_commit: key_commit(key, plaintext),
        nonce,
        ciphertext: buf,
    }
}

/// Opens a sealed payload and checks the plaintext against its key commitment.
pub fn decrypt(
    key: &EventKey,
    slot: &Slot,
    sealed: &EncryptedPayload,
) -> Result<Vec<u8>, CryptoError> {
    let mut buf = sealed.ciphertext.clone();
    cipher(key)
        .decrypt_in_place(&Nonce::from(sealed.nonce), &slot.aad(), &mut buf)
        .map_err(|_| CryptoError::DecryptionFailed)?;
    let want = key_commit(key, &buf);
    if !bool::from(want.0.ct_eq(&sealed.key_commit.0)) {
        buf.zeroize();
        return Err(CryptoError::DecryptionFailed);
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s.split_whitespace().collect::<String>()).unwrap()
    }

    #[test]
    fn rfc5869_case1_hkdf_sha256_and_tamper() {
        let ikm = unhex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b");
        let salt = unhex("000102030405060708090a0b0c");
        let info = unhex("f0f1f2f3f4f5f6f7f8f9");
        let okm =
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865";
        let mut out = [0u8; 42];
        Hkdf::<Sha256>::new(Some(&salt), &ikm)
            .expand(&info, &mut out)
            .unwrap();
        assert_eq!(hex::encode(out), okm);
        let mut bad = ikm.clone();
        bad[0] ^= 1;
        Hkdf::<Sha256>::new(Some(&salt), &bad)
            .expand(&info, &mut out)
            .unwrap();
        assert_ne!(hex::encode(out), okm);
    }

    #[test]
    fn rfc8439_2_8_2_chacha20_poly1305_and_tamper() {
        let key = unhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
        let nonce = unhex("070000004041424344454647");
        let aad = unhex("50515253c0c1c2c3c4c5c6c7");
        let pt = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
        let want = unhex(
            "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6
             3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36
             92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc
             3ff4def08e4b7a9de576d26586cec64b6116 1ae10b594f09e26a7e902ecbd060
             0691",
        );
        let c = ChaCha20Poly1305::new_from_slice(&key).unwrap();
        let n = Nonce::try_from(nonce.as_slice()).unwrap();
        let mut buf = pt.to_vec();
        c.encrypt_in_place(&n, &aad, &mut buf).unwrap();
        assert_eq!(buf, want);
        let mut ok = buf.clone();
        c.decrypt_in_place(&n, &aad, &mut ok).unwrap();
        assert_eq!(ok, pt);
        let mut bad = buf.clone();
        bad[7] ^= 0x10;
        assert!(c.decrypt_in_place(&n, &aad, &mut bad).is_err());
    }

    fn setup() -> (EventKey, Slot) {
        let m = MasterKey::from_bytes([5; 32]);
        let ek = m.epoch_key(&[6; 32], &[7; 20], 3);
        (
            ek.event_key(301),
            Slot {
                recorder: [7; 20],
                epoch: 3,
                seq: 301,
            },
        )
    }

    #[test]
    fn seal_open_round_trip_and_slot_binding() {
        let (k, slot) = setup();
        let s = encrypt(&k, &slot, [9; 12], b"{\"approved\":true}");
        assert_eq!(decrypt(&k, &slot, &s).unwrap(), b"{\"approved\":true}");
        assert_eq!(EncryptedPayload::decode(&s.encode()).unwrap(), s);
        // Moved to another slot, another epoch, another recorder: fails.
        for other in [
            Slot { seq: 302, ..slot },
            Slot { epoch: 4, ..slot },
            Slot {
                recorder: [8; 20],
                ..slot
            },
        ] {
            assert_eq!(decrypt(&k, &other, &s), Err(CryptoError::DecryptionFailed));
        }
        // A flipped ciphertext bit or a wrong key commitment fails too.
        let mut t = s.clone();
        t.ciphertext[0] ^= 1;
        assert!(decrypt(&k, &slot, &t).is_err());
        let mut t = s.clone();
        t.key_commit.0[0] ^= 1;
        assert!(decrypt(&k, &slot, &t).is_err());
    }

    #[test]
    fn keys_depend_on_every_input() {
        let m = MasterKey::from_bytes([5; 32]);
        let base = m.epoch_key(&[6; 32], &[7; 20], 3).event_key(1);
        assert!(base != m.epoch_key(&[6; 32], &[7; 20], 3).event_key(2));
        assert!(base != m.epoch_key(&[6; 32], &[7; 20], 4).event_key(1));
        assert!(base != m.epoch_key(&[0; 32], &[7; 20], 3).event_key(1));
        assert!(base != m.epoch_key(&[6; 32], &[8; 20], 3).event_key(1));
        assert!(
            base != MasterKey::from_bytes([4; 32])
                .epoch_key(&[6; 32], &[7; 20], 3)
                .event_key(1)
        );
        assert!(!format!("{base:?}").contains('5'));
    }

    #[test]
    fn index_key_matches_the_spec_vector_and_depends_on_every_input() {
        // docs/spec/format.md, "Keys": the example's master and recorder.
        let master = MasterKey::from_bytes([0x4d; 32]);
        let mut recorder = [0u8; 20];
        recorder[15..].copy_from_slice(&[0x0a, 0xf2, 0xaf, 0x00, 0x01]);
        let k = master.index_key(&recorder);
        let want = "ac0002a74ef5c1fc1e1408096d3c17df95e6b11fa06d86514e1b0c64c9233970";
        assert_eq!(hex::encode(k.expose()), want);
        // The formula, with the primitive directly.
        let mut out = [0u8; 32];
        Hkdf::<Sha256>::new(Some(&[0u8; 32]), &[0x4d; 32])
            .expand(&[INDEX_KEY_LABEL, &recorder[..]].concat(), &mut out)
            .unwrap();
        assert_eq!(hex::encode(out), want);
        // Tamper: another recorder or master gives another key, and no epoch key equals it.
        let mut other = recorder;
        other[19] ^= 1;
        assert_ne!(master.index_key(&other).expose(), k.expose());
        assert_ne!(
            MasterKey::from_bytes([0x4c; 32])
                .index_key(&recorder)
                .expose(),
            k.expose()
        );
        assert_ne!(
            master.epoch_key(&[0; 32], &recorder, 0).expose(),
            k.expose()
        );
        assert_eq!(format!("{k:?}"), "IndexKey(<redacted>)");
    }

    #[test]
    fn commitment_hides_guessable_payloads() {
        // Two events with the same plaintext get unrelated commitments.
        let m = MasterKey::from_bytes([5; 32]);
        let e = m.epoch_key(&[6; 32], &[7; 20], 0);
        let a = encrypt(
            &e.event_key(0),
            &Slot {
                recorder: [7; 20],
                epoch: 0,
                seq: 0,
            },
            [0; 12],
            b"yes",
        );
        let b = encrypt(
            &e.event_key(1),
            &Slot {
                recorder: [7; 20],
                epoch: 0,
                seq: 1,
            },
            [0; 12],
            b"yes",
        );
        assert_ne!(a.key_commit, b.key_commit);
        assert_ne!(a.key_commit, sha256(&[b"yes"]));
    }
}
