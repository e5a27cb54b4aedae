//! Anchors read from one or several JSON-RPC providers, believed only through proofs.
//!
//! One provider (the first that the others agree with) is asked for the candidate `Anchored`
//! logs, and for each block holding one: the header, every receipt, every raw transaction and
//! the contract's account proof. The tries are rebuilt here and compared with the header's
//! roots ([`crate::eth`]); what holds becomes an [`Archive`], which is then checked exactly as
//! an archive file is ([`Archive::check`]), so the online and offline answers come from one
//! path. Every other provider is asked, independently: the chain id, the hash of the
//! verification block and of every anchoring block, and the set of candidate logs. The rule
//! ([`Agree`]) says how many must agree with the answer taken; when it is not met the archive
//! says so and its roots do not count.
//!
//! ```text
//!  for each provider p:  eth_chainId == pinned;  eth_blockNumber  → B = min over providers
//!  primary:  eth_getLogs(contract, [Anchored, recorder])                → candidate blocks
//!            batch 1, every block b: eth_getBlockByNumber(b) · eth_getProof(contract, [], b)
//!            batch 2: eth_getRawTransactionByBlockNumberAndIndex(b, i) for every b, i
//!            batch 3: eth_getBlockReceipts(b) for every b
//!            (Hardhat: eth_getBlockByNumber(b, true), eth_getTransactionReceipt(h) instead)
//!  others:   eth_getBlockByNumber(B and each b).hash, eth_getLogs     → agree or not
//! ```

use std::collections::{BTreeMap, BTreeSet};

use afr_core::RecorderId;

use crate::{
    anchors::{Candidate, Fetched, Rpc, quantity},
    archive::{ARCHIVE_VERSION, Archive, BlockEvidence, Proven, ProviderReport, TxEvidence},
    error::{Malformed, RedactedUrl, VerifyError},
    eth::{self, hex0},
};

type Result<T, E = VerifyError> = std::result::Result<T, E>;

/// How many providers must agree with the answer taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Agree {
    /// Every provider given.
    #[default]
    All,
    /// At least this many (the one answering included).
    AtLeast(usize),
}

impl std::str::FromStr for Agree {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Agree, String> {
        match s {
            "all" => Ok(Agree::All),
            k => match k.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(Agree::AtLeast(k)),
                _ => Err(format!(
                    "{k:?} is neither \"all\" nor a number of providers of at least 1"
                )),
            },
        }
    }
}

impl Agree {
    /// How many of `n` providers must agree.
    pub fn needed(self, n: usize) -> usize {
        match self {
            Agree::All => n,
            Agree::AtLeast(k) => k,
        }
    }

    /// `all` or `K of N`.
    pub fn describe(self, n: usize) -> String {
        match self {
            Agree::All => "all".into(),
            Agree::AtLeast(k) => format!("{k} of {n}"),
        }
    }
}

/// What one provider says of the chain: enough to compare two of them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    /// Hash of the verification block.
    head: String,
    /// Hash of each anchoring block.
    blocks: BTreeMap<u64, String>,
    /// The candidate logs: (epoch, transaction, block).
    logs: BTreeSet<(u64, String, u64)>,
}

/// Evidence gathered through one provider.
struct Collected {
    blocks: BTreeMap<u64, BlockEvidence>,
    txs: Vec<TxEvidence>,
    /// The hash of each block in `blocks`, computed from its header.
    hashes: BTreeMap<u64, String>,
}

fn endpoint(rpc: &Rpc) -> String {
    RedactedUrl::new(rpc.url()).to_string()
}

fn hash_of(v: &serde_json::Value) -> Option<String> {
    v["hash"].as_str().map(str::to_ascii_lowercase)
}

/// The block every provider is read at: `block` if given, else the lowest latest block of
/// those that answer (so that each can describe it).
pub fn resolve_block(rpcs: &[&Rpc], block: Option<u64>) -> Result<u64> {
    if let Some(b) = block {
        return Ok(b);
    }
    let mut low: Option<u64> = None;
    let mut first_err = None;
    for r in rpcs {
        match r.latest_block() {
            Ok(b) => low = Some(low.map_or(b, |l| l.min(b))),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match (low, first_err) {
        (Some(b), _) => Ok(b),
        (None, Some(e)) => Err(e),
        (None, None) => Err(Malformed::MissingResult.into()),
    }
}

/// The hashes a provider gives for `numbers`.
fn hashes(rpc: &Rpc, numbers: &[u64]) -> Result<BTreeMap<u64, String>> {
    let calls: Vec<(&str, serde_json::Value)> = numbers
        .iter()
        .map(|b| {
            (
                "eth_getBlockByNumber",
                serde_json::json!([format!("0x{b:x}"), false]),
            )
        })
        .collect();
    let answers = rpc.call_batch(&calls)?;
    Ok(numbers
        .iter()
        .zip(answers)
        .map(|(b, a)| (*b, hash_of(&a).unwrap_or_else(|| "none".into())))
        .collect())
}

/// One provider's candidate logs and the logs it ignored, or why it did not answer.
type LogSet = std::result::Result<(Vec<Candidate>, Vec<String>), String>;

/// The candidate logs as providers are compared on them: (epoch, transaction, block).
fn log_keys(cands: &[Candidate]) -> BTreeSet<(u64, String, u64)> {
    cands
        .iter()
        .map(|c| (c.epoch, c.tx.clone(), c.block))
        .collect()
}

/// Why a provider's answer is missing, its URLs redacted.
fn no_answer(e: &VerifyError) -> String {
    format!(
        "did not answer: {}",
        afr_core::redact_urls_in(&e.to_string())
    )
}

/// An archive of nothing proven yet: the pins, the block and the rule.
fn empty_archive(
    chain_id: u64,
    contract: &str,
    recorder: &RecorderId,
    block: u64,
    rule: String,
) -> Archive {
    Archive {
        version: ARCHIVE_VERSION,
        chain_id,
        contract: contract.to_ascii_lowercase(),
        recorder: hex0(recorder),
        block,
        block_hash: "none".into(),
        finalized: None,
        rule,
        providers: Vec::new(),
        roots: BTreeMap::new(),
        blocks: BTreeMap::new(),
        txs: Vec::new(),
    }
}

/// Whether a provider refused a method it does not serve (so another way may work), rather than
/// failing to answer at all.
fn unsupported(e: &VerifyError) -> bool {
    matches!(e, VerifyError::RpcFailed { .. })
}

/// Splits `answers` into consecutive runs of the lengths `counts`.
fn split_runs<T>(mut answers: Vec<T>, counts: &[usize]) -> Vec<Vec<T>> {
    let mut out = Vec::with_capacity(counts.len());
    for n in counts {
        let rest = answers.split_off((*n).min(answers.len()));
        out.push(std::mem::replace(&mut answers, rest));
    }
    out
}

/// The number of transactions a header answer lists.
fn tx_count(block: &serde_json::Value) -> usize {
    block
        .get("transactions")
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len)
}

/// The EIP-2718 bytes of every transaction of each block `(at, header answer)`, in order, in
/// one batch: `eth_getRawTransactionByBlockNumberAndIndex`, or, from a provider that does not
/// serve it (Hardhat), each transaction of `eth_getBlockByNumber(at, true)` re-encoded. Which
/// is right is not decided here: the trie of them must give the header's `transactionsRoot`.
/// Per block, the inner error: transactions that cannot be had (its anchors do not count).
fn blocks_raws(
    rpc: &Rpc,
    blocks: &[(String, &serde_json::Value)],
) -> Result<Vec<std::result::Result<Vec<Vec<u8>>, String>>> {
    let counts: Vec<usize> = blocks.iter().map(|(_, b)| tx_count(b)).collect();
    let calls: Vec<(&str, serde_json::Value)> = blocks
        .iter()
        .zip(&counts)
        .flat_map(|((at, _), n)| {
            (0..*n).map(move |i| {
                (
                    "eth_getRawTransactionByBlockNumberAndIndex",
                    serde_json::json!([at, format!("0x{i:x}")]),
                )
            })
        })
        .collect();
    match rpc.call_batch(&calls) {
        Ok(answers) => Ok(split_runs(answers, &counts)
            .into_iter()
            .map(|run| {
                run.iter()
                    .map(|r| eth::unhex(r.as_str().unwrap_or_default(), "raw transaction"))
                    .collect()
            })
            .collect()),
        Err(e) if unsupported(&e) => {
            let calls: Vec<(&str, serde_json::Value)> = blocks
                .iter()
                .map(|(at, _)| ("eth_getBlockByNumber", serde_json::json!([at, true])))
                .collect();
            let full = rpc.call_batch(&calls)?;
            Ok(full
                .iter()
                .zip(&counts)
                .map(|(f, n)| {
                    let txs = f
                        .get("transactions")
                        .and_then(serde_json::Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    if txs.len() != *n {
                        return Err(format!(
                            "the provider gave {} transactions for a block of {n}",
                            txs.len()
                        ));
                    }
                    txs.iter().map(eth::raw_tx_from_json).collect()
                })
                .collect())
        }
        Err(e) => Err(e),
    }
}

/// Every receipt of each block `(at, header answer)` as JSON, in order, in one batch:
/// `eth_getBlockReceipts`, or one `eth_getTransactionReceipt` per transaction hash the header
/// answer lists, from a provider that does not serve it (Hardhat).
fn blocks_receipts(
    rpc: &Rpc,
    blocks: &[(String, &serde_json::Value)],
) -> Result<Vec<Vec<serde_json::Value>>> {
    let calls: Vec<(&str, serde_json::Value)> = blocks
        .iter()
        .map(|(at, _)| ("eth_getBlockReceipts", serde_json::json!([at])))
        .collect();
    match rpc.call_batch(&calls) {
        Ok(answers) => Ok(answers
            .iter()
            .map(|v| v.as_array().cloned().unwrap_or_default())
            .collect()),
        Err(e) if unsupported(&e) => {
            let counts: Vec<usize> = blocks.iter().map(|(_, b)| tx_count(b)).collect();
            let calls: Vec<(&str, serde_json::Value)> = blocks
                .iter()
                .flat_map(|(_, b)| {
                    b.get("transactions")
                        .and_then(serde_json::Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|h| ("eth_getTransactionReceipt", serde_json::json!([h])))
                })
                .collect();
            Ok(split_runs(rpc.call_batch(&calls)?, &counts))
        }
        Err(e) => Err(e),
    }
}

/// A block whose header hashes as the provider says, and what was read with it.
struct Proved<'a> {
    number: u64,
    /// The anchoring transactions the candidate logs name in it.
    wanted: &'a BTreeSet<String>,
    rlp: Vec<u8>,
    header: eth::Block,
    /// The provider's header answer.
    json: &'a serde_json::Value,
    /// Its `eth_getProof` answer for the contract.
    account: &'a serde_json::Value,
}

/// Everything one provider can prove about `cands`, block by block.
fn collect(
    rpc: &Rpc,
    contract: &str,
    cands: &[Candidate],
    ignored: &mut Vec<String>,
) -> Result<Collected> {
    let contract_l = contract.to_ascii_lowercase();
    let mut by_block: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for c in cands {
        by_block.entry(c.block).or_default().insert(c.tx.clone());
    }
    // Three batches for all the blocks: headers and account proofs; then, for the headers that
    // hash as given, every transaction; then every receipt.
    let calls: Vec<(&str, serde_json::Value)> = by_block
        .keys()
        .flat_map(|b| {
            let at = format!("0x{b:x}");
            [
                ("eth_getBlockByNumber", serde_json::json!([at, false])),
                ("eth_getProof", serde_json::json!([contract_l, [], at])),
            ]
        })
        .collect();
    let first = rpc.call_batch(&calls)?;
    let mut good: Vec<Proved<'_>> = Vec::new();
    for ((b, wanted), pair) in by_block.iter().zip(first.chunks(2)) {
        let [json, account] = pair else {
            return Err(Malformed::MissingResult.into());
        };
        match eth::header_from_json(json) {
            Ok((_, header)) if header.number != *b => ignored.push(format!(
                "the Anchored logs of block {b} not counted: the provider answered with block {}",
                header.number
            )),
            Ok((rlp, header)) => good.push(Proved {
                number: *b,
                wanted,
                rlp,
                header,
                json,
                account,
            }),
            Err(why) => {
                ignored.push(format!("the Anchored logs of block {b} not counted: {why}"));
            }
        }
    }
    let at: Vec<(String, &serde_json::Value)> = good
        .iter()
        .map(|g| (format!("0x{:x}", g.number), g.json))
        .collect();
    let all_raws = blocks_raws(rpc, &at)?;
    let all_receipts = blocks_receipts(rpc, &at)?;
    let mut blocks = BTreeMap::new();
    let mut hashes = BTreeMap::new();
    let mut txs = Vec::new();
    for ((g, raws), receipts_json) in good.into_iter().zip(all_raws).zip(all_receipts) {
        let Proved {
            number,
            wanted,
            rlp,
            header,
            account: account_json,
            ..
        } = g;
        let b = &number;
        let raws = match raws {
            Ok(r) => r,
            Err(why) => {
                ignored.push(format!("the Anchored logs of block {b} not counted: {why}"));
                continue;
            }
        };
        let receipts: Vec<Vec<u8>> = match receipts_json
            .iter()
            .map(eth::receipt_bytes)
            .collect::<std::result::Result<_, _>>()
        {
            Ok(r) => r,
            Err(why) => {
                ignored.push(format!(
                    "the Anchored logs of block {b} not counted: a receipt: {why}"
                ));
                continue;
            }
        };
        if receipts.len() != raws.len() {
            ignored.push(format!(
                "the Anchored logs of block {b} not counted: the provider gave {} receipts for {} transactions",
                receipts.len(),
                raws.len()
            ));
            continue;
        }
        // The anchoring transactions, found by the hash of their bytes (not by what the
        // provider says their index is).
        let tx_hashes: Vec<String> = raws
            .iter()
            .map(|r| hex0(eth::keccak(r).as_slice()))
            .collect();
        let targets: Vec<u64> = (0u64..)
            .zip(&tx_hashes)
            .filter(|(_, h)| wanted.contains(*h))
            .map(|(i, _)| i)
            .collect();
        for tx in wanted {
            if !tx_hashes.contains(tx) {
                ignored.push(format!(
                    "the Anchored log in transaction {tx} not counted: block {b} holds no transaction with that hash"
                ));
            }
        }
        let (tx_root, tx_proofs) = eth::ordered_trie(&raws, &targets);
        if tx_root != header.transactions_root {
            ignored.push(format!(
                "the Anchored logs of block {b} not counted: its transactions do not give the header's transactionsRoot (the provider altered or left out a transaction)"
            ));
            continue;
        }
        let (rc_root, rc_proofs) = eth::ordered_trie(&receipts, &targets);
        if rc_root != header.receipts_root {
            ignored.push(format!(
                "the Anchored logs of block {b} not counted: its receipts do not give the header's receiptsRoot (the provider altered, invented or left out a receipt)"
            ));
            continue;
        }
        let account = match eth::account_rlp(account_json) {
            Ok(a) => a,
            Err(why) => {
                ignored.push(format!("the Anchored logs of block {b} not counted: {why}"));
                continue;
            }
        };
        let account_proof: Vec<String> = account_json["accountProof"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|n| n.as_str().unwrap_or_default().to_ascii_lowercase())
                    .collect()
            })
            .unwrap_or_default();
        hashes.insert(*b, hex0(header.hash.as_slice()));
        blocks.insert(
            *b,
            BlockEvidence {
                header: hex0(&rlp),
                account: hex0(&account),
                account_proof,
            },
        );
        for i in targets {
            let idx = i as usize;
            let first_log_index = receipts_json
                .get(idx)
                .and_then(|r| r["logs"].as_array())
                .and_then(|l| l.first())
                .and_then(|l| quantity(&l["logIndex"], "logIndex").ok())
                .unwrap_or(0);
            let hexes = |p: &Vec<Vec<u8>>| p.iter().map(|n| hex0(n)).collect::<Vec<_>>();
            let (Some(raw), Some(receipt)) = (raws.get(idx), receipts.get(idx)) else {
                continue;
            };
            txs.push(TxEvidence {
                block: *b,
                index: i,
                raw: hex0(raw),
                tx_proof: tx_proofs.get(&i).map(hexes).unwrap_or_default(),
                receipt: hex0(receipt),
                receipt_proof: rc_proofs.get(&i).map(hexes).unwrap_or_default(),
                first_log_index,
            });
        }
    }
    Ok(Collected {
        blocks,
        txs,
        hashes,
    })
}

/// The proof archive of what `recorder` anchored on `contract`, read through `rpcs` under
/// `rule`, at `block`, from block `from`; `epochs` as [`Rpc::fetch`] takes it. Each provider
/// must serve `chain_id`. The second value: why the rule was not met (the archive's roots
/// must then not count), and the logs ignored.
#[expect(
    clippy::indexing_slicing,
    reason = "indices of rpcs and reports (as long as each other) taken from enumerate"
)]
pub fn prove(
    rpcs: &[&Rpc],
    rule: Agree,
    chain_id: u64,
    contract: &str,
    recorder: &RecorderId,
    (from, block): (u64, u64),
    epochs: Option<&BTreeSet<u64>>,
) -> Result<(Archive, Option<String>, Vec<String>)> {
    let n = rpcs.len();
    let needed = rule.needed(n);
    if needed > n {
        return Err(crate::error::UsageError::Providers {
            what: "--agree".into(),
            why: format!(
                "{needed} providers must agree, but {n} were given (give more with --rpc)"
            ),
        }
        .into());
    }
    // Each provider's chain id; one that serves another chain cannot agree.
    let mut reports: Vec<ProviderReport> = rpcs
        .iter()
        .map(|r| ProviderReport {
            endpoint: endpoint(r),
            agreed: false,
            detail: None,
        })
        .collect();
    let mut live = Vec::new();
    for (i, r) in rpcs.iter().enumerate() {
        match r.chain_id() {
            Ok(c) if c == chain_id => live.push(i),
            Ok(served) => {
                if n == 1 {
                    return Err(VerifyError::ChainMismatch {
                        served,
                        pinned: chain_id,
                    });
                }
                reports[i].detail =
                    Some(format!("serves chain {served}, not the pinned {chain_id}"));
            }
            Err(e) => {
                if n == 1 {
                    return Err(e);
                }
                reports[i].detail = Some(no_answer(&e));
            }
        }
    }
    // Each live provider's candidate logs, read once whichever provider's answer is taken.
    let mut log_sets: BTreeMap<usize, LogSet> = BTreeMap::new();
    for &q in &live {
        match rpcs[q].candidates(contract, recorder, (from, block), epochs) {
            Ok(x) => {
                log_sets.insert(q, Ok(x));
            }
            Err(e) if n == 1 => return Err(e),
            Err(e) => {
                log_sets.insert(q, Err(no_answer(&e)));
            }
        }
    }
    let mut best: Option<(usize, Archive, Vec<String>)> = None;
    let mut views: BTreeMap<usize, std::result::Result<View, String>> = BTreeMap::new();
    for &p in &live {
        let Some(Ok((cands, ignored))) = log_sets.get(&p) else {
            if let Some(Err(why)) = log_sets.get(&p) {
                reports[p].detail = Some(why.clone());
            }
            continue;
        };
        let mut ignored = ignored.clone();
        let collected = match collect(rpcs[p], contract, cands, &mut ignored) {
            Ok(c) => c,
            Err(e) if n == 1 => return Err(e),
            Err(e) => {
                reports[p].detail = Some(no_answer(&e));
                continue;
            }
        };
        let mut numbers: Vec<u64> = collected.blocks.keys().copied().collect();
        numbers.push(block);
        numbers.sort_unstable();
        numbers.dedup();
        // Each provider's view of the same blocks and logs.
        let view_of = |q: usize| -> std::result::Result<View, String> {
            let logs = match log_sets.get(&q) {
                Some(Ok((c, _))) => log_keys(c),
                Some(Err(why)) => return Err(why.clone()),
                None => return Err("not read".into()),
            };
            let mut hs = hashes(rpcs[q], &numbers).map_err(|e| no_answer(&e))?;
            let head = hs.get(&block).cloned().unwrap_or_else(|| "none".into());
            hs.retain(|b, _| collected.blocks.contains_key(b));
            Ok(View {
                head,
                blocks: hs,
                logs,
            })
        };
        views.clear();
        for &q in &live {
            views.insert(q, view_of(q));
        }
        let Some(Ok(mine)) = views.get(&p).cloned() else {
            continue;
        };
        // The primary's own hashes must be those of the headers it proved.
        let proved_ok = mine.blocks == collected.hashes;
        let agreeing: Vec<usize> = live
            .iter()
            .copied()
            .filter(|q| proved_ok && views.get(q).is_some_and(|v| v.as_ref() == Ok(&mine)))
            .collect();
        let archive = Archive {
            block_hash: mine.head.clone(),
            blocks: collected.blocks,
            txs: collected.txs,
            ..empty_archive(chain_id, contract, recorder, block, rule.describe(n))
        };
        let met = agreeing.len() >= needed;
        if best
            .as_ref()
            .is_none_or(|(count, ..)| agreeing.len() > *count)
        {
            for (q, r) in reports.iter_mut().enumerate() {
                if !live.contains(&q) {
                    continue;
                }
                r.agreed = agreeing.contains(&q);
                r.detail = match views.get(&q) {
                    Some(Err(e)) => Some(e.clone()),
                    Some(Ok(v)) if !r.agreed => Some(disagreement(&mine, v)),
                    _ => None,
                };
            }
            best = Some((agreeing.len(), archive, ignored));
        }
        if met {
            break;
        }
    }
    let Some((count, mut archive, ignored)) = best else {
        let why = reports
            .iter()
            .map(|r| {
                format!(
                    "{}: {}",
                    r.endpoint,
                    r.detail.as_deref().unwrap_or("no answer")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Ok((
            Archive {
                providers: reports,
                ..empty_archive(chain_id, contract, recorder, block, rule.describe(n))
            },
            Some(format!("no provider could be read: {why}")),
            Vec::new(),
        ));
    };
    // Finality: the lowest `finalized` block of the agreeing providers, when each says.
    let mut fin: Option<u64> = None;
    let mut all_said = true;
    for (q, r) in rpcs.iter().enumerate() {
        if !reports[q].agreed {
            continue;
        }
        match r
            .call(
                "eth_getBlockByNumber",
                serde_json::json!(["finalized", false]),
            )
            .ok()
            .and_then(|v| quantity(&v["number"], "number").ok())
        {
            Some(f) => fin = Some(fin.map_or(f, |x| x.min(f))),
            None => all_said = false,
        }
    }
    archive.finalized = fin.filter(|_| all_said);
    archive.providers = reports;
    let unmet = (count < needed).then(|| {
        let dissent: Vec<String> = archive
            .providers
            .iter()
            .filter(|r| !r.agreed)
            .map(|r| {
                format!(
                    "{} ({})",
                    r.endpoint,
                    r.detail.as_deref().unwrap_or("disagrees")
                )
            })
            .collect();
        format!(
            "the providers do not agree as the rule ({}) requires: {count} of {n} agree; {}",
            archive.rule,
            dissent.join("; ")
        )
    });
    Ok((archive, unmet, ignored))
}

/// What `other` says differently from `mine`, in one line.
fn disagreement(mine: &View, other: &View) -> String {
    let mut out = Vec::new();
    if mine.head != other.head {
        out.push(format!(
            "verification block hash {} (the answer taken: {})",
            afr_core::text::escape(&other.head),
            mine.head
        ));
    }
    for (b, h) in &mine.blocks {
        let theirs = other.blocks.get(b).map_or("none", String::as_str);
        if theirs != h {
            out.push(format!(
                "block {b} hash {} (the answer taken: {h})",
                afr_core::text::escape(theirs)
            ));
        }
    }
    if mine.logs != other.logs {
        out.push(format!(
            "{} Anchored logs (the answer taken: {})",
            other.logs.len(),
            mine.logs.len()
        ));
    }
    if out.is_empty() {
        "disagrees".into()
    } else {
        format!("disagrees: {}", out.join(", "))
    }
}

/// [`prove`], then the archive checked as a file is ([`Archive::check`]): the anchors, the
/// evidence and what was not counted. When the rule is not met no root counts.
#[expect(
    clippy::too_many_arguments,
    reason = "the pins, the range and the rule, as prove takes them"
)]
pub fn fetch(
    rpcs: &[&Rpc],
    rule: Agree,
    chain_id: u64,
    contract: &str,
    recorder: &RecorderId,
    range: (u64, u64),
    epochs: Option<&BTreeSet<u64>>,
    min_confirmations: u64,
) -> Result<Fetched> {
    let (mut archive, unmet, mut ignored) =
        prove(rpcs, rule, chain_id, contract, recorder, range, epochs)?;
    let Proven {
        mut anchors,
        mut problems,
        headers,
        depth,
    } = archive
        .check(chain_id, contract, recorder, min_confirmations)
        .map_err(|why| VerifyError::Evidence { why })?;
    ignored.append(&mut problems);
    archive.roots = anchors.roots.clone();
    if unmet.is_some() {
        anchors.roots.clear();
        anchors.head = None;
    }
    Ok(Fetched {
        anchors,
        ignored,
        archive,
        headers,
        depth,
        unmet,
    })
}

/// The block to read at through `rpcs` pinned to `chain_id`: with one endpoint, its chain id
/// is checked first (an error if it serves another chain) and `block` defaults to its latest;
/// with several, [`resolve_block`] (each one's chain id is judged by [`prove`]).
pub fn pinned_block(rpcs: &[&Rpc], chain_id: u64, block: Option<u64>) -> Result<u64> {
    match rpcs {
        [one] => one.block_on(chain_id, block),
        [] => Err(crate::error::UsageError::Providers {
            what: "--rpc".into(),
            why: "no endpoint given".into(),
        }
        .into()),
        many => resolve_block(many, block),
    }
}
