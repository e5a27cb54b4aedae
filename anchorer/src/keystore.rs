//! The anchoring key in an encrypted Ethereum V3 keystore (Web3 Secret Storage: scrypt, then
//! AES-128-CTR, with a Keccak-256 MAC), the format geth, Foundry's `cast wallet` and most
//! wallets read.
//!
//! New keystores use scrypt with N = 2^18, r = 8, p = 1 ([`KEYSTORE_SCRYPT_LOG_N`]: geth's
//! "standard" strength, 256 MiB and about a second per guess), not the 2^13 of the
//! `eth-keystore` crate's writer; reading accepts any N the file names (and PBKDF2).
//!
//! ```text
//! dk   = scrypt(passphrase, salt(32), N, r = 8, p = 1, dklen = 32)
//! ct   = AES-128-CTR(key = dk[0..16], iv(16), secret(32))
//! mac  = keccak256(dk[16..32] ‖ ct)
//! ```
//!
//! The file is created with mode 0600 and never overwritten; reading it refuses a file that
//! group or others may read or write, like the plain key files. Errors name the file and what
//! is wrong, never the passphrase or any key byte.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use zeroize::Zeroizing;

use crate::{AnchorError, PrivateKeySigner, signer_from_bytes};

fn err(path: &Path, message: impl Into<String>) -> AnchorError {
    AnchorError::Keystore {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// Name of the keystore inside the private staging directory before it is linked into place.
const STAGED_NAME: &str = "keystore.json";

/// log2 of scrypt's N for new keystores.
pub const KEYSTORE_SCRYPT_LOG_N: u8 = 18;

/// The V3 keystore JSON of `secret` under `passphrase`, scrypt N = 2^`log_n`.
fn encrypt(secret: &[u8; 32], passphrase: &[u8], log_n: u8) -> Result<String, String> {
    use aes::cipher::{KeyIvInit, StreamCipher};
    let mut salt = [0u8; 32];
    let mut iv = [0u8; 16];
    let mut id = [0u8; 16];
    rand08::RngCore::fill_bytes(&mut rand08::rngs::OsRng, &mut salt);
    rand08::RngCore::fill_bytes(&mut rand08::rngs::OsRng, &mut iv);
    rand08::RngCore::fill_bytes(&mut rand08::rngs::OsRng, &mut id);
    let params = scrypt::Params::new(log_n, 8, 1).map_err(|e| e.to_string())?;
    let mut dk = Zeroizing::new([0u8; 32]);
    scrypt::scrypt(passphrase, &salt, &params, &mut dk[..]).map_err(|e| e.to_string())?;
    let mut ct = Zeroizing::new(*secret);
    let mut cipher =
        ctr::Ctr128BE::<aes::Aes128>::new_from_slices(&dk[..16], &iv).map_err(|e| e.to_string())?;
    cipher.apply_keystream(&mut ct[..]);
    let mut mac_input = Zeroizing::new(Vec::with_capacity(64));
    mac_input.extend_from_slice(&dk[16..32]);
    mac_input.extend_from_slice(&ct[..]);
    let mac = alloy::primitives::keccak256(&mac_input[..]);
    // A random (version 4) UUID.
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    let h = hex::encode(id);
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    );
    let address = signer_from_bytes(secret)
        .map_err(|e| e.to_string())?
        .address();
    Ok(serde_json::json!({
        "address": hex::encode(address),
        "crypto": {
            "cipher": "aes-128-ctr",
            "cipherparams": {"iv": hex::encode(iv)},
            "ciphertext": hex::encode(&ct[..]),
            "kdf": "scrypt",
            "kdfparams": {
                "dklen": 32,
                "n": 1u64 << log_n,
                "p": 1,
                "r": 8,
                "salt": hex::encode(salt),
            },
            "mac": hex::encode(mac),
        },
        "id": uuid,
        "version": 3,
    })
    .to_string())
}

/// Encrypts `secret` under `passphrase` into a new V3 keystore at `path` (mode 0600; fails if
/// `path` exists). The file is written in a private (0700) directory next to `path`, synced,
/// and hard-linked into place, so `path` never exists half-written or with a wider mode.
pub fn write_keystore(
    path: &Path,
    secret: &[u8; 32],
    passphrase: &[u8],
) -> Result<(), AnchorError> {
    if passphrase.is_empty() {
        return Err(err(path, "the passphrase is empty"));
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new()
        .prefix(".keystore-")
        .tempdir_in(parent)
        .map_err(|e| err(path, format!("cannot create a staging directory: {e}")))?;
    let json = encrypt(secret, passphrase, KEYSTORE_SCRYPT_LOG_N)
        .map_err(|m| err(path, format!("cannot encrypt: {m}")))?;
    std::fs::write(staging.path().join(STAGED_NAME), json.as_bytes())
        .map_err(|e| err(path, format!("cannot write: {e}")))?;
    let staged: PathBuf = staging.path().join(STAGED_NAME);
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| err(path, format!("cannot set mode 0600: {e}")))?;
    std::fs::File::open(&staged)
        .and_then(|f| f.sync_all())
        .map_err(|e| err(path, format!("cannot sync: {e}")))?;
    std::fs::hard_link(&staged, path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => err(path, "already exists"),
        _ => err(path, format!("cannot create: {e}")),
    })?;
    Ok(())
}

/// Decrypts the V3 keystore at `path` with `passphrase` into a signer.
pub fn signer_from_keystore(
    path: &Path,
    passphrase: &[u8],
) -> Result<PrivateKeySigner, AnchorError> {
    afr_recorder::check_private(path).map_err(|m| err(path, m))?;
    let secret = Zeroizing::new(eth_keystore::decrypt_key(path, passphrase).map_err(|e| {
        err(
            path,
            match e {
                eth_keystore::KeystoreError::MacMismatch => {
                    "wrong passphrase (or a damaged keystore): the MAC does not match".to_owned()
                }
                eth_keystore::KeystoreError::StdIo(m) => format!("cannot read: {m}"),
                eth_keystore::KeystoreError::SerdeJson(_) => {
                    "not a V3 keystore (JSON with crypto.kdf scrypt or pbkdf2)".to_owned()
                }
                _ => "unsupported keystore parameters".to_owned(),
            },
        )
    })?);
    let k: &[u8; 32] = secret
        .as_slice()
        .try_into()
        .map_err(|_| err(path, format!("holds {} key bytes, not 32", secret.len())))?;
    signer_from_bytes(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 32] = [7; 32];

    #[test]
    fn round_trips_with_mode_0600_and_rejects_a_wrong_passphrase() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("anchor.keystore.json");
        write_keystore(&path, &SECRET, b"correct horse").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], 3);
        assert_eq!(v["crypto"]["kdf"], "scrypt");
        assert_eq!(v["crypto"]["kdfparams"]["n"], 1u64 << 18, "scrypt N = 2^18");
        assert!(!text.contains(&hex::encode(SECRET)), "secret in clear");
        // Only the keystore is left beside it: the staging directory is gone.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);

        let s = signer_from_keystore(&path, b"correct horse").unwrap();
        assert_eq!(s.address(), signer_from_bytes(&SECRET).unwrap().address());

        let e = signer_from_keystore(&path, b"wrong horse")
            .unwrap_err()
            .to_string();
        assert!(e.contains("wrong passphrase"), "{e}");
        assert!(
            !e.contains("horse") && !e.contains(&hex::encode(SECRET)),
            "{e}"
        );

        // Never overwritten.
        let e = write_keystore(&path, &SECRET, b"x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("already exists"), "{e}");
        // Refused when others may read it.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = signer_from_keystore(&path, b"correct horse")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mode is 644"), "{e}");
    }

    /// Keystores written by other tools at other strengths still open: the 2^13 of
    /// `eth-keystore` (and of AFR before N was raised).
    #[test]
    fn keystores_of_any_scrypt_n_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        eth_keystore::encrypt_key(
            tmp.path(),
            &mut rand08::rngs::OsRng,
            SECRET,
            b"pw",
            Some("old.json"),
        )
        .unwrap();
        let old = tmp.path().join("old.json");
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o600)).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&old).unwrap()).unwrap();
        assert_eq!(v["crypto"]["kdfparams"]["n"], 1u64 << 13);
        let s = signer_from_keystore(&old, b"pw").unwrap();
        assert_eq!(s.address(), signer_from_bytes(&SECRET).unwrap().address());
        // And ours at a small N decrypts with the reference reader.
        let ours = tmp.path().join("ours.json");
        std::fs::write(&ours, encrypt(&SECRET, b"pw", 10).unwrap()).unwrap();
        assert_eq!(
            eth_keystore::decrypt_key(&ours, b"pw").unwrap(),
            SECRET.to_vec()
        );
    }

    #[test]
    fn an_empty_passphrase_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let e = write_keystore(&tmp.path().join("k.json"), &SECRET, b"").unwrap_err();
        assert!(e.to_string().contains("passphrase is empty"), "{e}");
    }
}
