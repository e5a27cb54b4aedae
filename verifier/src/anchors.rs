//! Anchored epoch roots, proven by the recorder's own transactions.
//!
//! A root counts as anchored only when a *successful transaction sent by the recorder* to the
//! contract emitted `Anchored(recorder, epoch, root, backPointer)` for it. Storage reads alone
//! never suffice: anyone can deploy a contract whose storage holds roots the recorder never
//! sent (init code that writes the `_roots` slots, then returns the genuine runtime code), and
//! the runtime-code comparison says nothing about who wrote the storage. Events cannot be
//! planted that way: a log emitted in a transaction is bound to its sender, which is checked
//! against the recorder, and the genuine contract emits `Anchored` with `msg.sender` only after
//! its on-chain rules accepted the root.
//!
//! How the roots are read (all read-only JSON-RPC, batched, pinned to one block):
//!
//! ```text
//!  eth_chainId                        == the pinned chain id
//!  eth_getCode(contract, B)           == the artifact's runtime code
//!  eth_getLogs(contract, [Anchored, recorder], from..B)     candidate (epoch, root, tx, index)
//!  eth_getTransactionReceipt(tx)      status 1, from == recorder, to == contract, same block,
//!                                     and the very log (index, topics, data) inside it
//! ```
//!
//! What is written to an anchors file for air-gapped use keeps, for each root, the chain id,
//! contract, transaction, block and log index, so it can be re-checked later with any node.

use std::{collections::BTreeMap, time::Duration};

use afr_core::{Hash32, RecorderId, redact_urls_in};
use serde::{Deserialize, Serialize};

use crate::error::{Malformed, RedactedUrl, VerifyError};

type Result<T, E = VerifyError> = std::result::Result<T, E>;

/// Topic 0 of the `Anchored` event, as core defines it with the contract.
pub use afr_core::deployment::ANCHORED_TOPIC;

/// Most anchored roots read for one recorder (one log each).
pub const MAX_EPOCHS: usize = 10_000_000;
/// Most `eth_getLogs` calls one fetch makes while halving refused ranges.
pub const MAX_LOG_CALLS: usize = 4096;
/// Most reasons for ignored logs kept for the report.
const MAX_IGNORED: usize = 1000;

/// Whether an RPC error is a provider refusing a range for its size (so a smaller range may
/// pass), rather than a failure that halving cannot fix: an answer over [`MAX_RESPONSE`], or an
/// error (JSON-RPC or transport) whose text says so.
fn is_size_refusal(e: &VerifyError) -> bool {
    let msg = match e {
        VerifyError::Response { .. } => return true,
        VerifyError::RpcFailed { error, .. } => error,
        VerifyError::Transport { detail, .. } => detail,
        _ => return false,
    };
    let m = msg.to_ascii_lowercase();
    [
        "range",
        "limit",
        "too many",
        "exceed",
        "too large",
        "bytes",
        "10000",
        "results",
    ]
    .iter()
    .any(|k| m.contains(k))
}
/// Largest JSON-RPC response body read, in bytes: whoever answers does not choose our memory.
pub const MAX_RESPONSE: u64 = 64 << 20;
/// Version of the anchors file written by `afr-verify anchors`.
pub const ANCHORS_FILE_VERSION: u64 = 2;

/// The runtime code of the AfrAnchor artifact, `0x`-prefixed hex.
fn deployed_code() -> Result<String> {
    let code = afr_core::deployment::runtime_code().map_err(|_| VerifyError::Artifact)?;
    Ok(format!("0x{code}"))
}

/// Where one root was anchored: the evidence a verifier can re-check with any node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AnchorProof {
    /// The anchored epoch root (`0x` hex).
    pub root: String,
    /// The anchoring transaction, sent by the recorder to the contract.
    pub tx: String,
    /// Its block number.
    pub block: u64,
    /// Index of the `Anchored` log in that block.
    pub log_index: u64,
    /// The block's timestamp (seconds since the Unix epoch), when it was read: an upper bound
    /// on when the root existed, for the time rules of case files (`docs/spec/delegation.md`).
    /// Absent in files written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_time: Option<u64>,
}

/// The roots anchored by one recorder, each proven by its transaction, and where they came
/// from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Anchors {
    /// [`ANCHORS_FILE_VERSION`].
    pub version: u64,
    /// EVM chain id.
    pub chain_id: u64,
    /// Anchor contract, lower-case `0x` hex.
    pub contract: String,
    /// Recorder address, lower-case `0x` hex.
    pub recorder: String,
    /// Block the roots were read at (`latest` resolved to a number).
    pub block: u64,
    /// Highest epoch with a proven anchor, if any.
    pub head: Option<u64>,
    /// Proven anchors by epoch.
    pub roots: BTreeMap<u64, AnchorProof>,
}

impl Anchors {
    /// Reads a file written by `afr-verify anchors`.
    pub fn load(path: &std::path::Path) -> Result<Anchors> {
        let text = std::fs::read_to_string(path).map_err(|source| VerifyError::AnchorsRead {
            path: path.to_owned(),
            source,
        })?;
        let mut a: Anchors =
            serde_json::from_str(&text).map_err(|source| VerifyError::AnchorsParse {
                path: path.to_owned(),
                source,
            })?;
        // The head is what the roots say, whatever the file's `head` field claims.
        a.head = a.roots.keys().next_back().copied();
        if a.version != ANCHORS_FILE_VERSION {
            return Err(VerifyError::AnchorsVersion {
                path: path.to_owned(),
                version: a.version,
            });
        }
        Ok(a)
    }

    /// Anchors of `roots` (epochs 0, 1, ...) taken as proven without a chain, for tests and
    /// measurements: placeholder transactions `0x…01`, `0x…02`, ... in block `block`.
    pub fn assumed(
        chain_id: u64,
        contract: &str,
        recorder: &RecorderId,
        roots: &[Hash32],
        block: u64,
    ) -> Anchors {
        Anchors {
            version: ANCHORS_FILE_VERSION,
            chain_id,
            contract: contract.to_ascii_lowercase(),
            recorder: format!("0x{}", hex::encode(recorder)),
            block,
            head: roots.len().checked_sub(1).map(|h| h as u64),
            roots: (0u64..)
                .zip(roots)
                .map(|(e, r)| {
                    let proof = AnchorProof {
                        root: format!("0x{r}"),
                        tx: format!("0x{:064x}", e + 1),
                        block,
                        log_index: e,
                        block_time: None,
                    };
                    (e, proof)
                })
                .collect(),
        }
    }

    /// The anchored root of `epoch`, if one is proven.
    pub fn root(&self, epoch: u64) -> Option<Hash32> {
        self.roots
            .get(&epoch)
            .and_then(|p| Hash32::from_hex(&p.root))
    }
}

/// The roots read from a chain, the evidence they rest on, and what was seen but not counted.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The proven anchors (none when the providers did not agree as the rule requires).
    pub anchors: Anchors,
    /// Why each ignored `Anchored` log was ignored (a planted or failed anchoring, a proof
    /// that does not hold).
    pub ignored: Vec<String>,
    /// The headers and proofs the anchors rest on (what `afr-verify anchors` writes).
    pub archive: crate::archive::Archive,
    /// The header hash of every block relied upon, by number.
    pub headers: BTreeMap<u64, String>,
    /// Confirmations of each anchoring block relied upon.
    pub depth: Vec<crate::archive::Depth>,
    /// Why the providers' agreement rule was not met, if it was not.
    pub unmet: Option<String>,
}

/// A JSON-RPC client for the reads above.
#[derive(Debug)]
pub struct Rpc {
    url: String,
    agent: ureq::Agent,
}

pub(crate) fn quantity(v: &serde_json::Value, what: &'static str) -> Result<u64, Malformed> {
    let digits = v
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .ok_or(Malformed::NotAQuantity { what, source: None })?;
    u64::from_str_radix(digits, 16).map_err(|e| Malformed::NotAQuantity {
        what,
        source: Some(e),
    })
}

fn lower(v: &serde_json::Value) -> String {
    v.as_str().unwrap_or_default().to_ascii_lowercase()
}

/// A 32-byte topic holding `a` (left-padded).
pub(crate) fn addr_topic(a: &RecorderId) -> String {
    format!("0x{}{}", "0".repeat(24), hex::encode(a))
}

/// One candidate `Anchored` log.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) epoch: u64,
    pub(crate) tx: String,
    pub(crate) block: u64,
}

impl Rpc {
    /// A client for `url`, with a 30 s timeout per call.
    pub fn new(url: &str) -> Rpc {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Rpc {
            url: url.to_owned(),
            agent,
        }
    }

    /// The endpoint at `url` once it says it serves the pinned `chain_id`, and the block to
    /// read at: `block` if given, else its latest.
    pub fn pinned(url: &str, chain_id: u64, block: Option<u64>) -> Result<(Rpc, u64), VerifyError> {
        let rpc = Rpc::new(url);
        let block = rpc.block_on(chain_id, block)?;
        Ok((rpc, block))
    }

    /// The block to read at once this endpoint says it serves `chain_id`: `block` if given,
    /// else its latest.
    pub(crate) fn block_on(&self, chain_id: u64, block: Option<u64>) -> Result<u64> {
        let served = self.chain_id()?;
        if served != chain_id {
            return Err(VerifyError::ChainMismatch {
                served,
                pinned: chain_id,
            });
        }
        match block {
            Some(b) => Ok(b),
            None => self.latest_block(),
        }
    }

    fn post(&self, body: String, call: String) -> Result<serde_json::Value> {
        let mut resp = match self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .send(&body)
        {
            Ok(r) => r,
            Err(e) => {
                return Err(VerifyError::Transport {
                    call,
                    url: RedactedUrl::new(&self.url),
                    detail: redact_urls_in(&e.to_string()),
                });
            }
        };
        let text = match resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE)
            .read_to_string()
        {
            Ok(t) => t,
            Err(e) => {
                return Err(VerifyError::Response {
                    call,
                    detail: redact_urls_in(&e.to_string()),
                });
            }
        };
        serde_json::from_str(&text).map_err(|source| Malformed::NotJson { call, source }.into())
    }

    pub(crate) fn call(
        &self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value> {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
                .to_string();
        let v = self.post(body, format!("rpc {method}"))?;
        if let Some(e) = v.get("error") {
            return Err(VerifyError::RpcFailed {
                method: method.to_owned(),
                error: redact_urls_in(&e.to_string()),
            });
        }
        Ok(v.get("result").cloned().unwrap_or_default())
    }

    /// Sends many calls as JSON-RPC batches of at most 256; results in request order.
    pub(crate) fn call_batch(
        &self,
        calls: &[(&str, serde_json::Value)],
    ) -> Result<Vec<serde_json::Value>> {
        let mut out = Vec::with_capacity(calls.len());
        for chunk in calls.chunks(256) {
            let base = out.len();
            let body: Vec<serde_json::Value> = chunk
                .iter()
                .enumerate()
                .map(|(i, (m, p))| {
                    serde_json::json!({"jsonrpc": "2.0", "id": base + i, "method": m, "params": p})
                })
                .collect();
            let v = self.post(
                serde_json::Value::Array(body).to_string(),
                format!("rpc batch of {} calls", chunk.len()),
            )?;
            let Some(items) = v.as_array() else {
                let answer = redact_urls_in(&v.get("error").unwrap_or(&v).to_string());
                return Err(Malformed::NotABatch { answer }.into());
            };
            let mut results = vec![None; chunk.len()];
            for item in items {
                // The call this answers, and its place in `results` (as long as `chunk`).
                let (id, (method, _), slot) = item["id"]
                    .as_u64()
                    .and_then(|id| usize::try_from(id).ok())
                    .and_then(|id| id.checked_sub(base))
                    .and_then(|i| Some((i, chunk.get(i)?, results.get_mut(i)?)))
                    .ok_or(Malformed::UnknownId)?;
                if let Some(e) = item.get("error") {
                    return Err(VerifyError::RpcFailed {
                        method: (*method).to_owned(),
                        error: redact_urls_in(&e.to_string()),
                    });
                }
                if slot.replace(item["result"].clone()).is_some() {
                    return Err(Malformed::AnsweredTwice { id: base + id }.into());
                }
            }
            for r in results {
                out.push(r.ok_or(Malformed::MissingResult)?);
            }
        }
        Ok(out)
    }

    /// Whether the code deployed at `contract` (at `block`) is exactly the AfrAnchor runtime
    /// code of the artifact this verifier was built with. Logs from other code prove nothing.
    pub fn code_is_afr_anchor(&self, contract: &str, block: u64) -> Result<bool> {
        let r = self.call(
            "eth_getCode",
            serde_json::json!([contract, format!("0x{block:x}")]),
        )?;
        let code = r.as_str().ok_or(Malformed::WrongType {
            what: "eth_getCode result",
            expected: "string",
        })?;
        Ok(code.eq_ignore_ascii_case(deployed_code()?.as_str()))
    }

    /// The chain id the endpoint serves.
    pub fn chain_id(&self) -> Result<u64> {
        Ok(quantity(
            &self.call("eth_chainId", serde_json::json!([]))?,
            "eth_chainId",
        )?)
    }

    /// The latest block number.
    pub fn latest_block(&self) -> Result<u64> {
        Ok(quantity(
            &self.call("eth_blockNumber", serde_json::json!([]))?,
            "eth_blockNumber",
        )?)
    }

    /// `eth_getLogs` over `from..=to`, parsed as it comes; only logs of epochs `keep` accepts
    /// are kept, so what the endpoint sends does not decide what stays in memory. The range
    /// is halved when the endpoint refuses it for its size (too many results, range too wide,
    /// response too large), as hosted providers do, at most [`MAX_LOG_CALLS`] calls in all;
    /// any other error fails at once.
    #[expect(
        clippy::too_many_arguments,
        reason = "one recursive walk; a struct would only rename them"
    )]
    fn logs(
        &self,
        filter: &serde_json::Value,
        (from, to): (u64, u64),
        (contract, recorder, block): (&str, &RecorderId, u64),
        keep: &dyn Fn(u64) -> bool,
        calls: &mut usize,
        out: &mut Vec<Candidate>,
        ignored: &mut Vec<String>,
    ) -> Result<()> {
        *calls += 1;
        if *calls > MAX_LOG_CALLS {
            return Err(VerifyError::TooManyLogCalls);
        }
        let mut f = filter.clone();
        if let Some(range) = f.as_object_mut() {
            range.insert("fromBlock".into(), format!("0x{from:x}").into());
            range.insert("toBlock".into(), format!("0x{to:x}").into());
        }
        match self.call("eth_getLogs", serde_json::json!([f])) {
            Ok(v) => {
                let items = v.as_array().ok_or(Malformed::WrongType {
                    what: "eth_getLogs result",
                    expected: "list",
                })?;
                for log in items {
                    match parse_log(log, contract, recorder, block) {
                        Ok(c) if keep(c.epoch) => {
                            if out.len() >= MAX_EPOCHS {
                                return Err(VerifyError::TooManyAnchors);
                            }
                            out.push(c);
                        }
                        Ok(_) => {}
                        Err(why) => {
                            if ignored.len() < MAX_IGNORED {
                                ignored.push(format!("ignored a log the endpoint returned: {why}"));
                            }
                        }
                    }
                }
                Ok(())
            }
            Err(e) if to > from && is_size_refusal(&e) => {
                let mid = from + (to - from) / 2;
                let ctx = (contract, recorder, block);
                self.logs(filter, (from, mid), ctx, keep, calls, out, ignored)?;
                self.logs(filter, (mid + 1, to), ctx, keep, calls, out, ignored)
            }
            Err(e) => Err(e),
        }
    }

    /// The candidate `Anchored` logs of `recorder` on `contract` from block `from` to block
    /// `block` (nothing about them is believed yet), and why other logs were ignored. `epochs`
    /// as [`Rpc::fetch`] takes it.
    pub(crate) fn candidates(
        &self,
        contract: &str,
        recorder: &RecorderId,
        (from, block): (u64, u64),
        epochs: Option<&std::collections::BTreeSet<u64>>,
    ) -> Result<(Vec<Candidate>, Vec<String>)> {
        let contract = contract.to_ascii_lowercase();
        let filter = serde_json::json!({
            "address": contract,
            "topics": [ANCHORED_TOPIC, addr_topic(recorder)],
        });
        let keep = |e: u64| epochs.is_none_or(|set| set.contains(&e));
        let mut ignored = Vec::new();
        let mut candidates = Vec::new();
        let mut calls = 0;
        if from <= block {
            self.logs(
                &filter,
                (from, block),
                (&contract, recorder, block),
                &keep,
                &mut calls,
                &mut candidates,
                &mut ignored,
            )?;
        }
        Ok((candidates, ignored))
    }

    /// The endpoint as given (never printed: see [`RedactedUrl`]).
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Reads the roots `recorder` anchored on `contract` from block `from` to block `block`
    /// through this one endpoint, keeping only those proven against block headers
    /// ([`crate::providers`]): a successful transaction the recorder signed for the pinned
    /// chain, sent to the contract, whose receipt holds the log, in a block whose header hashes
    /// as the endpoint says and where the contract's code is AfrAnchor's.
    ///
    /// `epochs` limits what is read to those epochs (a file's own, plus the one after its last,
    /// which is enough to tell a stale export: anchored epochs are contiguous, so if any later
    /// epoch is anchored, that one is); `None` reads every epoch (`afr-verify anchors`).
    pub fn fetch(
        &self,
        chain_id: u64,
        contract: &str,
        recorder: &RecorderId,
        (from, block): (u64, u64),
        epochs: Option<&std::collections::BTreeSet<u64>>,
    ) -> Result<Fetched> {
        crate::providers::fetch(
            &[self],
            crate::providers::Agree::All,
            chain_id,
            contract,
            recorder,
            (from, block),
            epochs,
            0,
        )
    }
}

fn parse_log(
    log: &serde_json::Value,
    contract: &str,
    recorder: &RecorderId,
    block: u64,
) -> Result<Candidate, String> {
    if log["removed"].as_bool() == Some(true) {
        return Err("removed by a reorg".into());
    }
    if lower(&log["address"]) != contract {
        return Err(format!("emitted by {}, not the contract", log["address"]));
    }
    let topics: Vec<String> = log["topics"]
        .as_array()
        .ok_or("no topics")?
        .iter()
        .map(lower)
        .collect();
    let [event, of, epoch] = topics.as_slice() else {
        return Err("not an Anchored log of this recorder".into());
    };
    if event != ANCHORED_TOPIC || *of != addr_topic(recorder) {
        return Err("not an Anchored log of this recorder".into());
    }
    let word = hex::decode(epoch.trim_start_matches("0x")).map_err(|_| "bad epoch topic")?;
    // A uint64 in a 32-byte word: 24 zero bytes, then the 8 bytes of the number.
    let not_uint64 = "epoch topic is not a uint64";
    let (high, low) = word.split_at_checked(24).ok_or(not_uint64)?;
    let e: [u8; 8] = low.try_into().map_err(|_| not_uint64)?;
    if high.iter().any(|b| *b != 0) {
        return Err(not_uint64.into());
    }
    let data = lower(&log["data"]);
    let bytes = hex::decode(data.trim_start_matches("0x")).map_err(|_| "bad data")?;
    if bytes.len() != 64 {
        return Err("data is not (root, backPointer)".into());
    }
    let at = quantity(&log["blockNumber"], "blockNumber").map_err(|e| e.to_string())?;
    if at > block {
        return Err(format!("from block {at}, after the pinned block {block}"));
    }
    let tx = lower(&log["transactionHash"]);
    if !tx
        .strip_prefix("0x")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err("bad transaction hash".into());
    }
    Ok(Candidate {
        epoch: u64::from_be_bytes(e),
        tx,
        block: at,
    })
}
