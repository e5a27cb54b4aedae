//! Anchored epoch roots: read from the chain by plain `eth_call`, or from a file fetched once.
//!
//! Two read-only calls on the anchor contract, ABI-encoded by hand (their selectors come
//! from the checked-in contract artifact, which CI keeps equal to `forge build`):
//! `rootOf(address,uint64) returns (bytes32)` and `head(address) returns (bool,uint64)`.

use std::{collections::BTreeMap, time::Duration};

use afr_core::{Hash32, RecorderId};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

const ARTIFACT: &str = include_str!("../../anchorer/artifacts/AfrAnchor.json");

fn selector(signature: &str) -> Result<[u8; 4]> {
    let v: serde_json::Value = serde_json::from_str(ARTIFACT).context("contract artifact")?;
    let hex_sel = v["methodIdentifiers"][signature]
        .as_str()
        .with_context(|| format!("no {signature} in the artifact"))?;
    let mut out = [0u8; 4];
    hex::decode_to_slice(hex_sel, &mut out).context("selector")?;
    Ok(out)
}

/// Most roots `afr-verify anchors` fetches in one file (one `rootOf` call each).
pub const MAX_EPOCHS: u64 = 10_000_000;

/// The runtime code of the AfrAnchor artifact, `0x`-prefixed hex.
fn deployed_code() -> Result<String> {
    let v: serde_json::Value = serde_json::from_str(ARTIFACT).context("contract artifact")?;
    let code = v["deployedBytecode"]["object"]
        .as_str()
        .context("no deployedBytecode in the artifact")?;
    Ok(format!("0x{}", code.trim_start_matches("0x")))
}

/// The roots anchored for one recorder, and where they came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Anchors {
    /// EVM chain id.
    pub chain_id: u64,
    /// Anchor contract.
    pub contract: String,
    /// Recorder address.
    pub recorder: String,
    /// Block the roots were read at (`latest` resolved to a number).
    pub block: u64,
    /// Highest anchored epoch, if any.
    pub head: Option<u64>,
    /// Anchored roots by epoch (`0x` hex).
    pub roots: BTreeMap<u64, String>,
}

impl Anchors {
    /// Reads a file written by `afr-verify anchors`.
    pub fn load(path: &std::path::Path) -> Result<Anchors> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not an anchors file", path.display()))
    }

    /// The anchored root of `epoch`, if one is.
    pub fn root(&self, epoch: u64) -> Option<Hash32> {
        self.roots.get(&epoch).and_then(|r| Hash32::from_hex(r))
    }
}

/// A JSON-RPC client for the two views.
#[derive(Debug)]
pub struct Rpc {
    url: String,
    agent: ureq::Agent,
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

    fn call(&self, method: &str, params: serde_json::Value) -> Result<serde_json::Value> {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
                .to_string();
        let mut resp = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .send(&body)
            .with_context(|| format!("rpc {method} to {}", afr_core::redact_url(&self.url)))?;
        let text = resp.body_mut().read_to_string().context("rpc response")?;
        let v: serde_json::Value =
            serde_json::from_str(&text).context("rpc response is not json")?;
        if let Some(e) = v.get("error") {
            bail!("rpc {method} failed: {e}");
        }
        Ok(v["result"].clone())
    }

    /// Sends many calls as JSON-RPC batches of at most 256; results in request order.
    fn call_batch(&self, calls: &[(&str, serde_json::Value)]) -> Result<Vec<serde_json::Value>> {
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
            let mut resp = self
                .agent
                .post(&self.url)
                .header("content-type", "application/json")
                .send(&serde_json::Value::Array(body).to_string())
                .with_context(|| {
                    format!(
                        "rpc batch of {} calls to {}",
                        chunk.len(),
                        afr_core::redact_url(&self.url)
                    )
                })?;
            let text = resp.body_mut().read_to_string().context("rpc response")?;
            let v: serde_json::Value =
                serde_json::from_str(&text).context("rpc response is not json")?;
            let Some(items) = v.as_array() else {
                bail!(
                    "rpc batch answered with a single object: {}",
                    v.get("error").unwrap_or(&v)
                );
            };
            let mut results = vec![None; chunk.len()];
            for item in items {
                let id = item["id"]
                    .as_u64()
                    .and_then(|id| usize::try_from(id).ok())
                    .and_then(|id| id.checked_sub(base))
                    .filter(|i| *i < chunk.len())
                    .context("rpc batch answer with an unknown id")?;
                if let Some(e) = item.get("error") {
                    bail!("rpc {} failed: {e}", chunk[id].0);
                }
                if results[id].replace(item["result"].clone()).is_some() {
                    bail!("rpc batch answered call {} twice", base + id);
                }
            }
            for r in results {
                out.push(r.context("rpc batch answer is missing a result")?);
            }
        }
        Ok(out)
    }

    /// Whether the code deployed at `contract` (at `block`) is exactly the AfrAnchor runtime
    /// code of the artifact this verifier was built with. Roots read from other code prove
    /// nothing: any contract can return any root.
    pub fn code_is_afr_anchor(&self, contract: &str, block: u64) -> Result<bool> {
        let r = self.call(
            "eth_getCode",
            serde_json::json!([contract, format!("0x{block:x}")]),
        )?;
        let code = r.as_str().context("eth_getCode result")?;
        Ok(code.eq_ignore_ascii_case(deployed_code()?.as_str()))
    }

    /// The latest block number.
    pub fn latest_block(&self) -> Result<u64> {
        self.quantity("eth_blockNumber")
    }

    fn quantity(&self, method: &str) -> Result<u64> {
        let r = self.call(method, serde_json::json!([]))?;
        let s = r.as_str().context("quantity")?;
        u64::from_str_radix(s.trim_start_matches("0x"), 16).context("quantity")
    }

    fn eth_call(&self, contract: &str, data: &[u8], block: u64) -> Result<Vec<u8>> {
        let r = self.call(
            "eth_call",
            serde_json::json!([{"to": contract, "data": format!("0x{}", hex::encode(data))}, format!("0x{block:x}")]),
        )?;
        hex::decode(
            r.as_str()
                .context("eth_call result")?
                .trim_start_matches("0x"),
        )
        .context("eth_call result")
    }

    /// Reads the recorder's head and the anchored roots of `epochs` (every epoch up to the
    /// head if `None`), at `block` (or the latest block).
    pub fn fetch(
        &self,
        contract: &str,
        recorder: &RecorderId,
        block: Option<u64>,
        epochs: Option<&[u64]>,
    ) -> Result<Anchors> {
        let chain_id = self.quantity("eth_chainId")?;
        let block = match block {
            Some(b) => b,
            None => self.quantity("eth_blockNumber")?,
        };
        let mut addr_word = [0u8; 32];
        addr_word[12..].copy_from_slice(recorder);
        let head_data = [&selector("head(address)")?[..], &addr_word].concat();
        let out = self.eth_call(contract, &head_data, block)?;
        if out.len() != 64 {
            bail!(
                "head(address) returned {} bytes, expected 64 (is {contract} an AfrAnchor?)",
                out.len()
            );
        }
        let any = out[31] == 1;
        let mut e = [0u8; 8];
        e.copy_from_slice(&out[56..64]);
        let head = any.then(|| u64::from_be_bytes(e));
        let sel = selector("rootOf(address,uint64)")?;
        let mut roots = BTreeMap::new();
        let wanted: Vec<u64> = match (epochs, head) {
            (Some(list), Some(h)) => list.iter().copied().filter(|e| *e <= h).collect(),
            (None, Some(h)) => {
                if h >= MAX_EPOCHS {
                    bail!(
                        "the contract reports head epoch {h} for this recorder; fetching more than \
                         {MAX_EPOCHS} roots at once is refused (verify the file with --rpc instead, \
                         which reads only the file's epochs)"
                    );
                }
                (0..=h).collect()
            }
            (_, None) => Vec::new(),
        };
        let calls: Vec<(&str, serde_json::Value)> = wanted
            .iter()
            .map(|epoch| {
                let mut ep = [0u8; 32];
                ep[24..].copy_from_slice(&epoch.to_be_bytes());
                let data = [&sel[..], &addr_word, &ep].concat();
                (
                    "eth_call",
                    serde_json::json!([{"to": contract, "data": format!("0x{}", hex::encode(data))}, format!("0x{block:x}")]),
                )
            })
            .collect();
        for (epoch, r) in wanted.iter().zip(self.call_batch(&calls)?) {
            let out = hex::decode(
                r.as_str()
                    .context("eth_call result")?
                    .trim_start_matches("0x"),
            )
            .context("eth_call result")?;
            let root = Hash32::from_slice(&out).context("rootOf returned a malformed word")?;
            roots.insert(*epoch, format!("0x{root}"));
        }
        Ok(Anchors {
            chain_id,
            contract: contract.to_owned(),
            recorder: format!("0x{}", hex::encode(recorder)),
            block,
            head,
            roots,
        })
    }
}
