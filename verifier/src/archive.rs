//! The proof archive (`afr-verify anchors --out`, version 3): headers and proofs, not answers.
//!
//! Every root an archive holds is re-derived here from its evidence alone ([`Archive::check`]):
//! the header bytes give the block hash; the transaction and receipt are proven against the
//! header's tries; the sender is recovered from the signature; the contract's code is proven
//! against the state root. The archive's own `roots` map is only a summary: a root it claims
//! that no proof holds is reported and not counted, so a forged archive fails unless it forges
//! headers too, and the header hashes relied upon are listed ([`Proven::headers`]) for anyone
//! to compare with any explorer or node. The byte layout is in `docs/spec/anchor-proofs.md`.

use std::collections::BTreeMap;

use afr_core::{Hash32, RecorderId};
use serde::{Deserialize, Serialize};

use crate::{
    anchors::{ANCHORED_TOPIC, AnchorProof, Anchors},
    eth::{self, hex0, unhex},
};

/// Version of the proof archive.
pub const ARCHIVE_VERSION: u64 = 3;

/// One provider's part in the answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProviderReport {
    /// The endpoint, redacted (no credentials, path or query).
    pub endpoint: String,
    /// Whether it agreed with the answer taken.
    pub agreed: bool,
    /// Why not, or what it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The evidence of one block: its header and the anchor contract's account in its state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BlockEvidence {
    /// `rlp(header)`, hex.
    pub header: String,
    /// The contract's account, `rlp([nonce, balance, storageRoot, codeHash])`, hex.
    pub account: String,
    /// The state-trie nodes from the root to that account, hex.
    pub account_proof: Vec<String>,
}

/// The evidence of one anchoring transaction.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TxEvidence {
    /// Its block.
    pub block: u64,
    /// Its index in the block.
    pub index: u64,
    /// Its EIP-2718 bytes, hex.
    pub raw: String,
    /// The transactions-trie nodes from the root to it, hex.
    pub tx_proof: Vec<String>,
    /// Its receipt's EIP-2718 bytes, hex.
    pub receipt: String,
    /// The receipts-trie nodes from the root to it, hex.
    pub receipt_proof: Vec<String>,
    /// Index in the block of the receipt's first log (as the provider numbered the logs; not
    /// proven, kept to name each log as explorers do).
    pub first_log_index: u64,
}

/// The confirmations of one anchoring block.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Depth {
    /// The anchoring block.
    pub block: u64,
    /// `verification block - block + 1`, as the agreeing providers saw it.
    pub confirmations: u64,
    /// Whether the block is at or below the providers' `finalized` block (`None`: a provider
    /// did not say).
    pub finalized: Option<bool>,
}

/// A proof archive, as written to a file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Archive {
    /// [`ARCHIVE_VERSION`].
    pub version: u64,
    /// EVM chain id.
    pub chain_id: u64,
    /// Anchor contract, lower-case `0x` hex.
    pub contract: String,
    /// Recorder address, lower-case `0x` hex.
    pub recorder: String,
    /// The verification block (what the providers agreed on).
    pub block: u64,
    /// Its hash, as the agreeing providers gave it.
    pub block_hash: String,
    /// The lowest `finalized` block of the agreeing providers, when all said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalized: Option<u64>,
    /// The agreement rule (`all`, `2 of 3`).
    pub rule: String,
    /// Each provider asked.
    pub providers: Vec<ProviderReport>,
    /// Summary of the proven roots by epoch (re-derived on load; a mismatch is reported).
    pub roots: BTreeMap<u64, AnchorProof>,
    /// Evidence per block number.
    pub blocks: BTreeMap<u64, BlockEvidence>,
    /// Evidence per anchoring transaction.
    pub txs: Vec<TxEvidence>,
}

/// What an archive proves.
#[derive(Debug, Clone)]
pub struct Proven {
    /// The roots proven (each by its transaction, receipt, header and the contract's code).
    pub anchors: Anchors,
    /// Why evidence was not counted (a failed proof, a claimed root no proof holds).
    pub problems: Vec<String>,
    /// The header hash of every block relied upon, by number.
    pub headers: BTreeMap<u64, String>,
    /// Confirmations of each anchoring block relied upon.
    pub depth: Vec<Depth>,
}

fn nodes(list: &[String], what: &str) -> Result<Vec<Vec<u8>>, String> {
    list.iter().map(|n| unhex(n, what)).collect()
}

fn addr20(s: &str, what: &str) -> Result<[u8; 20], String> {
    unhex(s, what)?
        .try_into()
        .map_err(|_| format!("{what} is not 20 bytes"))
}

impl Archive {
    /// Reads an archive from JSON text (a version-3 file).
    pub fn parse(text: &str) -> Result<Archive, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Every root this archive proves for `recorder` on `contract`, for pinned `chain_id`,
    /// derived from the evidence alone. `min_confirmations`: anchoring blocks with fewer do
    /// not count.
    pub fn check(
        &self,
        chain_id: u64,
        contract: &str,
        recorder: &RecorderId,
        min_confirmations: u64,
    ) -> Result<Proven, String> {
        let contract_b = addr20(contract, "the pinned contract")?;
        let genuine = afr_core::deployment::runtime_code()
            .ok()
            .and_then(|c| hex::decode(c).ok())
            .map(|c| eth::keccak(&c))
            .ok_or("the AfrAnchor artifact this verifier was built with is unreadable")?;
        let mut problems = Vec::new();
        // Each block's header, and whether the contract's code in it is proven AfrAnchor's.
        let mut blocks: BTreeMap<u64, (eth::Block, Result<(), String>)> = BTreeMap::new();
        for (n, b) in &self.blocks {
            let header = unhex(&b.header, "header").and_then(|rlp| eth::decode_header(&rlp));
            let h = match header {
                Ok(h) if h.number == *n => h,
                Ok(h) => {
                    problems.push(format!(
                        "block {n} of the archive not used: its header is block {}",
                        h.number
                    ));
                    continue;
                }
                Err(why) => {
                    problems.push(format!("block {n} of the archive not used: {why}"));
                    continue;
                }
            };
            let code = (|| {
                let account = unhex(&b.account, "account")?;
                let proof = nodes(&b.account_proof, "account proof node")?;
                let code = eth::proven_code_hash(h.state_root, &contract_b, &account, &proof)?;
                if code != genuine {
                    return Err(format!(
                        "the code at {contract} in block {n} is not AfrAnchor's, so its logs prove nothing"
                    ));
                }
                Ok(())
            })();
            blocks.insert(*n, (h, code));
        }
        let mut roots: BTreeMap<u64, AnchorProof> = BTreeMap::new();
        let mut used = std::collections::BTreeSet::new();
        for t in &self.txs {
            let Some((h, code)) = blocks.get(&t.block) else {
                problems.push(format!(
                    "transaction {} of block {} not used: the archive proves no header for that block",
                    t.index, t.block
                ));
                continue;
            };
            // The transaction's own failure first (the most specific reason), then the code's.
            match prove_tx(t, h, chain_id, &contract_b, recorder).and_then(|ok| {
                code.clone()
                    .map(|()| ok)
                    .map_err(|why| format!("the block's state does not prove the contract: {why}"))
            }) {
                Ok((tx_hash, logs)) => {
                    used.insert(t.block);
                    for (pos, epoch, root) in logs {
                        let proof = AnchorProof {
                            root: format!("0x{root}"),
                            tx: tx_hash.clone(),
                            block: t.block,
                            log_index: t.first_log_index.saturating_add(pos),
                            block_time: Some(h.timestamp),
                        };
                        if let Some(prev) = roots.get(&epoch)
                            && prev.root != proof.root
                        {
                            return Err(format!(
                                "two roots proven for epoch {epoch} (transactions {} and {}): the genuine contract never accepts a second one",
                                prev.tx, proof.tx
                            ));
                        }
                        roots.entry(epoch).or_insert(proof);
                    }
                }
                Err(why) => problems.push(format!(
                    "transaction {} of block {} not used: {why}",
                    t.index, t.block
                )),
            }
        }
        let headers: BTreeMap<u64, String> = used
            .iter()
            .filter_map(|n| Some((*n, hex0(blocks.get(n)?.0.hash.as_slice()))))
            .collect();
        // The anchoring blocks deep enough to count.
        let mut counted = std::collections::BTreeSet::new();
        let mut depth = Vec::new();
        for b in &used {
            let confirmations = self.block.saturating_sub(*b).saturating_add(1);
            let finalized = self.finalized.map(|f| *b <= f);
            if *b > self.block {
                problems.push(format!(
                    "block {b} is after the verification block {}: its anchors not counted",
                    self.block
                ));
            } else if confirmations < min_confirmations {
                problems.push(format!(
                    "block {b} has {confirmations} confirmations, fewer than the {min_confirmations} required: its anchors not counted"
                ));
            } else {
                counted.insert(*b);
            }
            depth.push(Depth {
                block: *b,
                confirmations,
                finalized,
            });
        }
        roots.retain(|_, p| counted.contains(&p.block));
        // The summary must be what the proofs hold: an archive that says otherwise was edited,
        // and none of its roots count.
        let mut contradicts = false;
        for (e, claimed) in &self.roots {
            match roots.get(e) {
                None => problems.push(format!(
                    "the archive claims a root for epoch {e} that no proof in it holds: not counted"
                )),
                Some(p) if p.root != claimed.root.to_ascii_lowercase() => {
                    contradicts = true;
                    problems.push(format!(
                        "the archive claims root {} for epoch {e}, but its proofs hold {}: the archive contradicts itself, none of its roots count",
                        afr_core::text::escape(&claimed.root),
                        p.root
                    ));
                }
                Some(_) => {}
            }
        }
        if contradicts {
            roots.clear();
        }
        let anchors = Anchors {
            version: crate::anchors::ANCHORS_FILE_VERSION,
            chain_id,
            contract: contract.to_ascii_lowercase(),
            recorder: hex0(recorder),
            block: self.block,
            head: roots.keys().next_back().copied(),
            roots,
        };
        Ok(Proven {
            anchors,
            problems,
            headers,
            depth,
        })
    }
}

/// An `Anchored` log proven in a receipt: its position in the receipt, its epoch, its root.
type ProvenLog = (u64, u64, Hash32);

/// The `Anchored` logs of `recorder` that transaction `t` proves in block `h`, and the
/// transaction's hash.
fn prove_tx(
    t: &TxEvidence,
    h: &eth::Block,
    chain_id: u64,
    contract: &[u8; 20],
    recorder: &RecorderId,
) -> Result<(String, Vec<ProvenLog>), String> {
    let key = eth::index_key(t.index);
    let raw = unhex(&t.raw, "transaction")?;
    eth::verify(
        h.transactions_root,
        &key,
        &raw,
        &nodes(&t.tx_proof, "transaction proof node")?,
    )
    .map_err(|e| format!("the transaction is not proven in the block's transactionsRoot: {e}"))?;
    let receipt = unhex(&t.receipt, "receipt")?;
    eth::verify(
        h.receipts_root,
        &key,
        &receipt,
        &nodes(&t.receipt_proof, "receipt proof node")?,
    )
    .map_err(|e| format!("the receipt is not proven in the block's receiptsRoot: {e}"))?;
    let tx = eth::decode_tx(&raw)?;
    if tx.sender != *recorder {
        return Err(format!(
            "sent by {} (recovered from its signature), not by the recorder",
            hex0(&tx.sender)
        ));
    }
    if tx.chain_id != Some(chain_id) {
        return Err(match tx.chain_id {
            Some(c) => format!("signed for chain {c}, not the pinned chain {chain_id}"),
            None => "signed without a chain id (replayable on any chain)".into(),
        });
    }
    if tx.to != Some(*contract) {
        return Err("not sent to the contract".into());
    }
    let (ok, logs) = eth::decode_receipt(&receipt)?;
    if !ok {
        return Err("the transaction failed".into());
    }
    let topic0 = unhex(ANCHORED_TOPIC, "Anchored topic")?;
    let mut rec_topic = [0u8; 32];
    rec_topic[12..].copy_from_slice(recorder);
    let mut found = Vec::new();
    for (pos, (addr, topics, data)) in (0u64..).zip(&logs) {
        let [t0, t1, t2] = topics.as_slice() else {
            continue;
        };
        if addr != contract || t0.as_slice() != topic0.as_slice() || *t1 != rec_topic {
            continue;
        }
        let (high, low) = t2.split_at(24);
        if high.iter().any(|b| *b != 0) || data.len() != 64 {
            continue;
        }
        let mut e = [0u8; 8];
        e.copy_from_slice(low);
        let Some(root) = data.get(..32).and_then(Hash32::from_slice) else {
            continue;
        };
        found.push((pos, u64::from_be_bytes(e), root));
    }
    if found.is_empty() {
        return Err("its receipt holds no Anchored log of the recorder".into());
    }
    Ok((hex0(tx.hash.as_slice()), found))
}

/// An anchors file as read: a proof archive (version 3), or a file of bare answers (version
/// 2, written before proofs were kept), which counts only when the user says so.
#[derive(Debug, Clone)]
pub enum Loaded {
    /// Version 3: every root is re-proven from the file.
    Archive(Box<Archive>),
    /// Version 2: the roots as the file says, unproven.
    Unproven(Anchors),
}

impl Loaded {
    /// Reads `path`, by its `version`.
    pub fn read(path: &std::path::Path) -> Result<Loaded, crate::VerifyError> {
        use crate::VerifyError;
        let text = std::fs::read_to_string(path).map_err(|source| VerifyError::AnchorsRead {
            path: path.to_owned(),
            source,
        })?;
        let version = serde_json::from_str::<serde_json::Value>(&text)
            .map_err(|source| VerifyError::AnchorsParse {
                path: path.to_owned(),
                source,
            })?
            .get("version")
            .and_then(serde_json::Value::as_u64);
        if version == Some(ARCHIVE_VERSION) {
            return Archive::parse(&text)
                .map(|a| Loaded::Archive(Box::new(a)))
                .map_err(|source| VerifyError::AnchorsParse {
                    path: path.to_owned(),
                    source,
                });
        }
        Anchors::load(path).map(Loaded::Unproven)
    }

    /// The recorder the file is for (`0x` hex, as written).
    pub fn recorder(&self) -> &str {
        match self {
            Loaded::Archive(a) => &a.recorder,
            Loaded::Unproven(a) => &a.recorder,
        }
    }

    /// The chain the file is for.
    pub fn chain_id(&self) -> u64 {
        match self {
            Loaded::Archive(a) => a.chain_id,
            Loaded::Unproven(a) => a.chain_id,
        }
    }

    /// The contract the file is for.
    pub fn contract(&self) -> &str {
        match self {
            Loaded::Archive(a) => &a.contract,
            Loaded::Unproven(a) => &a.contract,
        }
    }

    /// The block the file was read at.
    pub fn block(&self) -> u64 {
        match self {
            Loaded::Archive(a) => a.block,
            Loaded::Unproven(a) => a.block,
        }
    }
}

impl Archive {
    /// What the verdict says of the chain (`"chain"` in `--json`): the rule, each provider,
    /// the verification block, the header hash of every block relied upon, the depth of
    /// each anchoring block.
    pub fn chain_json(
        &self,
        headers: &BTreeMap<u64, String>,
        depth: &[Depth],
        source: &str,
    ) -> serde_json::Value {
        serde_json::json!({
            "source": source,
            "rule": self.rule,
            "block": self.block,
            "block_hash": self.block_hash,
            "finalized": self.finalized,
            "providers": self.providers,
            "headers": headers.iter().map(|(n, h)| (n.to_string(), serde_json::json!(h))).collect::<serde_json::Map<_, _>>(),
            "depth": depth,
        })
    }
}
