//! Ethereum evidence checked from its bytes, so that no RPC answer is believed as it is.
//!
//! An anchoring transaction counts only through what can be recomputed: the block header's
//! hash is `keccak256(rlp(header))`; the transaction and its receipt are leaves of the
//! header's `transactionsRoot` and `receiptsRoot` tries (Merkle-Patricia, key `rlp(index)`);
//! the transaction's sender is recovered from its signature, its chain id and target read from
//! its signed bytes; the contract's code hash is a leaf of the header's `stateRoot` trie (key
//! `keccak256(address)`). What is left to trust is the header hash itself: that the block
//! with this number and hash is the pinned chain's (`crate::providers` asks several
//! providers; the report lists every hash relied upon).
//!
//! ```text
//!  header rlp ──keccak256──► block hash (compared with the providers' answer)
//!      ├─ transactionsRoot ─MPT(rlp(i))─► raw tx ─ecrecover─► sender == recorder, chain id, to
//!      ├─ receiptsRoot ─────MPT(rlp(i))─► receipt ─► status 1, Anchored(recorder, epoch, root)
//!      └─ stateRoot ────────MPT(keccak(contract))─► account ─► codeHash == keccak(AfrAnchor)
//! ```
//!
//! The tries are rebuilt here from every transaction and receipt of the block
//! ([`ordered_trie`]); a proof kept for later ([`verify`]) holds the nodes on one leaf's path.

use std::collections::BTreeMap;

use alloy_consensus::transaction::SignerRecoverable as _;
use alloy_consensus::{Header, ReceiptEnvelope, Transaction as _, TxEnvelope};
use alloy_eips::eip2718::Decodable2718 as _;
use alloy_primitives::{B256, Bytes, U256, keccak256};
use alloy_rlp::{Decodable as _, Encodable as _};
use alloy_trie::{HashBuilder, Nibbles, proof::ProofRetainer};

/// The fields of a verified header that proofs and reports use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Block number.
    pub number: u64,
    /// `keccak256(rlp(header))`.
    pub hash: B256,
    /// Seconds since the Unix epoch.
    pub timestamp: u64,
    /// Root of the state trie.
    pub state_root: B256,
    /// Root of the transactions trie.
    pub transactions_root: B256,
    /// Root of the receipts trie.
    pub receipts_root: B256,
}

impl Block {
    fn of(h: &Header, hash: B256) -> Block {
        Block {
            number: h.number,
            hash,
            timestamp: h.timestamp,
            state_root: h.state_root,
            transactions_root: h.transactions_root,
            receipts_root: h.receipts_root,
        }
    }
}

/// `0x`-prefixed lower-case hex.
pub fn hex0(b: &[u8]) -> String {
    format!("0x{}", hex::encode(b))
}

/// Bytes of `0x`-prefixed hex (or an error naming `what`).
pub fn unhex(s: &str, what: &str) -> Result<Vec<u8>, String> {
    let digits = s
        .strip_prefix("0x")
        .ok_or_else(|| format!("{what} is not 0x-prefixed hex"))?;
    hex::decode(digits).map_err(|_| format!("{what} is not hex"))
}

/// The header of an `eth_getBlockByNumber` answer re-encoded: its RLP bytes and fields, once
/// `keccak256` of those bytes equals the `hash` the answer gives. A provider that changes a
/// field without changing the hash, or a header with fields this verifier does not know, is
/// refused here.
pub fn header_from_json(v: &serde_json::Value) -> Result<(Vec<u8>, Block), String> {
    let h: Header = serde_json::from_value(v.clone())
        .map_err(|e| format!("the block header does not parse: {e}"))?;
    let mut rlp = Vec::new();
    h.encode(&mut rlp);
    let hash = keccak256(&rlp);
    let claimed = v["hash"].as_str().unwrap_or_default();
    if !claimed.eq_ignore_ascii_case(&hex0(hash.as_slice())) {
        return Err(format!(
            "the header of block {} does not hash to the hash given with it ({} computed from its fields, {} given): the provider altered it, or it has fields this verifier does not know",
            h.number,
            hex0(hash.as_slice()),
            afr_core::text::escape(claimed)
        ));
    }
    Ok((rlp, Block::of(&h, hash)))
}

/// A header from its RLP bytes (as an archive keeps it); its hash is computed here.
pub fn decode_header(rlp: &[u8]) -> Result<Block, String> {
    let mut buf = rlp;
    let h = Header::decode(&mut buf).map_err(|e| format!("the header does not decode: {e}"))?;
    if !buf.is_empty() {
        return Err("the header has bytes after its RLP list".into());
    }
    Ok(Block::of(&h, keccak256(rlp)))
}

/// `rlp(i)`: the key of the `i`-th transaction or receipt in its trie.
pub fn index_key(i: u64) -> Vec<u8> {
    let mut k = Vec::new();
    i.encode(&mut k);
    k
}

/// The root of the ordered trie of `values` (value `i` under key `rlp(i)`) and, for each of
/// `targets`, the proof nodes on its path (root first).
pub fn ordered_trie(values: &[Vec<u8>], targets: &[u64]) -> (B256, BTreeMap<u64, Vec<Vec<u8>>>) {
    let mut leaves: Vec<(Nibbles, &Vec<u8>)> = (0u64..)
        .zip(values)
        .map(|(i, v)| (Nibbles::unpack(index_key(i)), v))
        .collect();
    leaves.sort_by_key(|l| l.0);
    let wanted: Vec<Nibbles> = targets
        .iter()
        .map(|i| Nibbles::unpack(index_key(*i)))
        .collect();
    let mut hb = HashBuilder::default().with_proof_retainer(ProofRetainer::new(wanted.clone()));
    for (k, v) in &leaves {
        hb.add_leaf(*k, v);
    }
    let root = hb.root();
    let nodes = hb.take_proof_nodes();
    let proofs = targets
        .iter()
        .zip(&wanted)
        .map(|(i, k)| {
            let path = nodes
                .matching_nodes_sorted(k)
                .into_iter()
                .map(|(_, n)| n.to_vec())
                .collect();
            (*i, path)
        })
        .collect();
    (root, proofs)
}

/// Whether `proof` proves `value` under `key` in the trie with root `root`.
pub fn verify(root: B256, key: &[u8], value: &[u8], proof: &[Vec<u8>]) -> Result<(), String> {
    let nodes: Vec<Bytes> = proof.iter().map(|n| Bytes::copy_from_slice(n)).collect();
    alloy_trie::proof::verify_proof(root, Nibbles::unpack(key), Some(value.to_vec()), &nodes)
        .map_err(|e| format!("the Merkle-Patricia proof does not hold ({e})"))
}

fn quantity_u64(v: &serde_json::Value, what: &str) -> Result<u64, String> {
    let s = v
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .ok_or_else(|| format!("{what} is not a hex quantity"))?;
    u64::from_str_radix(s, 16).map_err(|_| format!("{what} is not a hex quantity"))
}

fn bytes_n<const N: usize>(v: &serde_json::Value, what: &str) -> Result<[u8; N], String> {
    let b = unhex(v.as_str().unwrap_or_default(), what)?;
    b.try_into().map_err(|_| format!("{what} is not {N} bytes"))
}

/// The RLP list of already-encoded `items`.
fn list(items: &[Vec<u8>]) -> Vec<u8> {
    let payload_length = items.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(payload_length + 9);
    alloy_rlp::Header {
        list: true,
        payload_length,
    }
    .encode(&mut out);
    for i in items {
        out.extend_from_slice(i);
    }
    out
}

fn rlp_of<T: alloy_rlp::Encodable + ?Sized>(x: &T) -> Vec<u8> {
    let mut out = Vec::new();
    x.encode(&mut out);
    out
}

/// The consensus (EIP-2718) encoding of a receipt as `eth_getBlockReceipts` answers it: a
/// type byte (none for legacy) and `rlp([status, cumulativeGasUsed, logsBloom, logs])`, plus
/// `depositNonce` and `depositReceiptVersion` for OP-stack deposit receipts (type `0x7e`).
/// Whether it is right is not decided here: the trie of all of them must give the header's
/// `receiptsRoot`.
pub fn receipt_bytes(r: &serde_json::Value) -> Result<Vec<u8>, String> {
    let ty = match r.get("type") {
        None | Some(serde_json::Value::Null) => 0,
        Some(t) => quantity_u64(t, "receipt type")?,
    };
    let ty = u8::try_from(ty).map_err(|_| "receipt type is over 255".to_owned())?;
    let status = match (r.get("status"), r.get("root")) {
        (Some(s), _) if !s.is_null() => rlp_of(&(quantity_u64(s, "receipt status")? == 1)),
        (_, Some(root)) if !root.is_null() => rlp_of(&bytes_n::<32>(root, "receipt root")?),
        _ => return Err("the receipt has neither status nor root".into()),
    };
    let mut logs = Vec::new();
    for l in r["logs"].as_array().ok_or("the receipt has no logs list")? {
        let topics: Vec<Vec<u8>> = l["topics"]
            .as_array()
            .ok_or("a log has no topics")?
            .iter()
            .map(|t| bytes_n::<32>(t, "log topic").map(|t| rlp_of(&t)))
            .collect::<Result<_, _>>()?;
        let data = unhex(l["data"].as_str().unwrap_or_default(), "log data")?;
        logs.push(list(&[
            rlp_of(&bytes_n::<20>(&l["address"], "log address")?),
            list(&topics),
            rlp_of(data.as_slice()),
        ]));
    }
    let mut items = vec![
        status,
        rlp_of(&quantity_u64(&r["cumulativeGasUsed"], "cumulativeGasUsed")?),
        rlp_of(&bytes_n::<256>(&r["logsBloom"], "logsBloom")?),
        list(&logs),
    ];
    if ty == 0x7e {
        for f in ["depositNonce", "depositReceiptVersion"] {
            match r.get(f) {
                Some(v) if !v.is_null() => items.push(rlp_of(&quantity_u64(v, f)?)),
                _ => break,
            }
        }
    }
    let body = list(&items);
    Ok(if ty == 0 {
        body
    } else {
        let mut out = vec![ty];
        out.extend_from_slice(&body);
        out
    })
}

/// The EIP-2718 bytes of a transaction as `eth_getBlockByNumber(_, true)` answers it (for a
/// provider that serves no raw transactions): the typed fields and signature re-encoded.
/// Types 0 to 4 only; a deposit or unknown type is an error.
pub fn raw_tx_from_json(v: &serde_json::Value) -> Result<Vec<u8>, String> {
    use alloy_eips::eip2718::Encodable2718 as _;
    let tx: TxEnvelope = serde_json::from_value(v.clone())
        .map_err(|e| format!("a transaction cannot be re-encoded from its fields: {e}"))?;
    Ok(tx.encoded_2718())
}

/// The anchoring transaction as its signed bytes say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    /// `keccak256` of its bytes.
    pub hash: B256,
    /// Recovered from its signature.
    pub sender: [u8; 20],
    /// The chain id it was signed for (`None`: a pre-EIP-155 legacy transaction, valid on
    /// every chain).
    pub chain_id: Option<u64>,
    /// Its target (`None`: a contract creation).
    pub to: Option<[u8; 20]>,
}

/// Decodes an EIP-2718 transaction and recovers its sender.
pub fn decode_tx(raw: &[u8]) -> Result<SignedTx, String> {
    let mut buf = raw;
    let tx = TxEnvelope::decode_2718(&mut buf)
        .map_err(|e| format!("the transaction does not decode: {e}"))?;
    if !buf.is_empty() {
        return Err("the transaction has bytes after its encoding".into());
    }
    let sender = tx
        .recover_signer()
        .map_err(|e| format!("the transaction's signature does not recover a sender: {e}"))?;
    Ok(SignedTx {
        hash: keccak256(raw),
        sender: sender.into_array(),
        chain_id: tx.chain_id(),
        to: tx.to().map(|a| a.into_array()),
    })
}

/// A log of a receipt: emitter, topics, data.
pub type Log = ([u8; 20], Vec<[u8; 32]>, Vec<u8>);

/// Decodes a receipt's EIP-2718 bytes: whether it succeeded, and its logs.
pub fn decode_receipt(bytes: &[u8]) -> Result<(bool, Vec<Log>), String> {
    let mut buf = bytes;
    let r = ReceiptEnvelope::decode_2718(&mut buf)
        .map_err(|e| format!("the receipt does not decode: {e}"))?;
    if !buf.is_empty() {
        return Err("the receipt has bytes after its encoding".into());
    }
    let logs = r
        .logs()
        .iter()
        .map(|l| {
            (
                l.address.into_array(),
                l.data.topics().iter().map(|t| t.0).collect(),
                l.data.data.to_vec(),
            )
        })
        .collect();
    Ok((r.status(), logs))
}

/// An account of the state trie, as `eth_getProof` answers it, in its trie encoding
/// `rlp([nonce, balance, storageRoot, codeHash])`.
pub fn account_rlp(p: &serde_json::Value) -> Result<Vec<u8>, String> {
    let balance = p["balance"]
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|s| U256::from_str_radix(s, 16).ok())
        .ok_or("the account's balance is not a hex quantity")?;
    Ok(list(&[
        rlp_of(&quantity_u64(&p["nonce"], "the account's nonce")?),
        rlp_of(&balance),
        rlp_of(&bytes_n::<32>(
            &p["storageHash"],
            "the account's storageHash",
        )?),
        rlp_of(&bytes_n::<32>(&p["codeHash"], "the account's codeHash")?),
    ]))
}

/// The code hash of `address` proven against `state_root`: `account` (its trie encoding) is
/// the leaf under `keccak256(address)`.
pub fn proven_code_hash(
    state_root: B256,
    address: &[u8; 20],
    account: &[u8],
    proof: &[Vec<u8>],
) -> Result<B256, String> {
    verify(state_root, keccak256(address).as_slice(), account, proof)
        .map_err(|e| format!("the contract's account is not proven in the state: {e}"))?;
    let mut buf = account;
    let a = alloy_trie::TrieAccount::decode(&mut buf)
        .map_err(|e| format!("the contract's account does not decode: {e}"))?;
    Ok(a.code_hash)
}

/// `keccak256(bytes)`: a code hash, a transaction hash.
pub fn keccak(bytes: &[u8]) -> B256 {
    keccak256(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_trie_proofs_verify_and_fail_when_changed() {
        for n in [1usize, 2, 3, 17, 130, 300] {
            let values: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 40 + i % 7]).collect();
            let targets: Vec<u64> = [0, 1, 127, 128, 129, n as u64 - 1]
                .into_iter()
                .filter(|t| *t < n as u64)
                .collect();
            let (root, proofs) = ordered_trie(&values, &targets);
            // The same root as alloy's own ordered trie of these values.
            let expected = alloy_trie::root::ordered_trie_root_with_encoder(&values, |v, out| {
                out.extend_from_slice(v)
            });
            assert_eq!(root, expected, "n = {n}");
            for t in &targets {
                let p = &proofs[t];
                let v = &values[*t as usize];
                verify(root, &index_key(*t), v, p).unwrap();
                let mut other = v.clone();
                other[0] ^= 1;
                assert!(verify(root, &index_key(*t), &other, p).is_err());
                assert!(verify(root, &index_key(*t + 1), v, p).is_err());
            }
        }
    }

    #[test]
    fn hostile_bytes_are_errors() {
        for junk in [&b""[..], b"\x02", b"\xf8\xff", b"\x7e\xc0", &[0xc0; 3]] {
            assert!(decode_tx(junk).is_err());
            assert!(decode_receipt(junk).is_err());
            assert!(decode_header(junk).is_err());
        }
        assert!(verify(B256::ZERO, &index_key(0), b"x", &[vec![0xc0]]).is_err());
        assert!(verify(B256::ZERO, &index_key(0), b"x", &[]).is_err());
    }
}
