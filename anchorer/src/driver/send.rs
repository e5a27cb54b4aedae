//! Sending: every epoch about to be posted re-derived from its records, the contract's code
//! checked, gas estimated (a contract error comes back decoded), EIP-1559 fees capped, each
//! attempt's receipt stored as pending before it is sent, and a stuck transaction replaced at
//! the same nonce with bumped fees until one lands.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use afr_core::{EpochHeader, Hash32, epoch::back_pointer};
use alloy::{
    network::{
        EthereumWallet, NetworkTransactionBuilder, TransactionBuilder, eip2718::Encodable2718,
    },
    primitives::{B256, Bytes, FixedBytes, U256},
    rpc::types::TransactionRequest,
    sol_types::SolCall,
};
use serde_json::{Value, json};

use super::{
    Driver,
    answers::{Block, parse_block},
};
use crate::{
    AnchorError, AnchorReceipt, AnchorStore, Event, Finality, IAfrAnchor, Pass, ReceiptState,
    contract::{ContractRevert, GAS_PRICE_ORACLE, IGasPriceOracle},
    fees, recheck_header,
    reconcile::ChainView,
    rpc::malformed,
};

/// How often a pass polls for its transaction's receipt.
const POLL: Duration = Duration::from_millis(200);

impl Driver<'_> {
    /// The anchoring key's nonce at `tag`: `latest` counts its mined transactions, `pending`
    /// also the ones waiting in the node's mempool.
    pub(super) async fn nonce_at(&self, tag: &str) -> Result<U256, AnchorError> {
        self.rpc
            .call("nonce", "eth_getTransactionCount", json!([self.me, tag]))
            .await
    }

    /// The base fee of the latest block, or `fallback` where the chain has none (pre-London).
    pub(super) async fn latest_base_fee(&self, fallback: u128) -> Result<u128, AnchorError> {
        let b: Value = self
            .rpc
            .call("block", "eth_getBlockByNumber", json!(["latest", false]))
            .await?;
        Ok(parse_block(&b, "eth_getBlockByNumber(latest)")?
            .base_fee
            .unwrap_or(fallback))
    }

    /// Posts `headers` (consecutive, the first one the chain's next epoch) in batches.
    pub(super) async fn post(
        &self,
        headers: &[EpochHeader],
        before: Option<&EpochHeader>,
        pinned: &Block,
        pass: &mut Pass,
    ) -> Result<(), AnchorError> {
        // Re-derive every header about to be posted before sending any: a header the records
        // do not back is never anchored, and neither is anything after it.
        let recorder = self.store.recorder_id()?;
        let mut prev = before;
        for h in headers {
            recheck_header(self.store, &recorder, prev, h)?;
            prev = Some(h);
        }
        // The contract must be AfrAnchor, and the chain OP-stack or not, before anything is
        // signed.
        let codes: Vec<Bytes> = self
            .rpc
            .batch(
                "code",
                "eth_getCode",
                &[
                    json!([self.s.contract, {"blockHash": B256::from(pinned.at.hash)}]),
                    json!([GAS_PRICE_ORACLE, {"blockHash": B256::from(pinned.at.hash)}]),
                ],
            )
            .await?;
        if codes[0] != crate::runtime_code()? {
            return Err(AnchorError::NotAfrAnchor {
                address: self.s.contract,
            });
        }
        let op_stack = !codes[1].is_empty();
        let mut next = 0;
        let mut prev_root = before.map_or(Hash32::ZERO, |h| h.root());
        while next < headers.len() {
            let batch = &headers[next..headers.len().min(next + self.s.max_batch.max(1))];
            if !self
                .send_batch(batch, &prev_root, op_stack, pinned, pass)
                .await?
            {
                // The chain already holds these roots: done for this pass.
                return Ok(());
            }
            prev_root = batch.last().map_or(prev_root, |h| h.root());
            next += batch.len();
        }
        Ok(())
    }

    /// Sends one batch and waits for it to land, replacing it while stuck. `Ok(false)` when
    /// the contract already holds the batch's first root (an earlier run's transaction).
    async fn send_batch(
        &self,
        batch: &[EpochHeader],
        prev_root: &Hash32,
        op_stack: bool,
        pinned: &Block,
        pass: &mut Pass,
    ) -> Result<bool, AnchorError> {
        let (Some(h0), Some(hl)) = (batch.first(), batch.last()) else {
            return Ok(true);
        };
        let (first, last) = (h0.epoch, hl.epoch);
        let bp = FixedBytes(back_pointer(first, prev_root).0);
        // One epoch goes through `anchor` (no array in the calldata, no loop: about 600 gas
        // and 64 calldata bytes less than a batch of one), several through `anchorBatch`.
        let input = if let [h] = batch {
            IAfrAnchor::anchorCall {
                epoch: h.epoch,
                root: FixedBytes(h.root().0),
                prevBackPointer: bp,
            }
            .abi_encode()
        } else {
            IAfrAnchor::anchorBatchCall {
                firstEpoch: first,
                roots: batch.iter().map(|h| FixedBytes(h.root().0)).collect(),
                prevBackPointer: bp,
            }
            .abi_encode()
        };
        let input = Bytes::from(input);
        // Gas: the node's estimate, which also runs the contract's checks: its custom errors
        // come back decoded, and AlreadyAnchored with our own root is success.
        let estimate = self
            .rpc
            .call_or_revert::<_, U256>(
                "estimate gas",
                "eth_estimateGas",
                json!([{"from": self.me, "to": self.s.contract, "data": input}]),
            )
            .await?;
        let gas = match estimate {
            Ok(g) => u64::try_from(g).map_err(|_| malformed("eth_estimateGas"))?,
            Err(ContractRevert::AlreadyAnchored { epoch, root })
                if batch.iter().any(|h| h.epoch == epoch && h.root() == root) =>
            {
                self.on(Event::AlreadyAnchored { epoch });
                let view = ChainView {
                    at: pinned.at,
                    confirmed_upto: 0,
                    finalized_upto: None,
                    head: None,
                    roots: BTreeMap::new(),
                    inclusions: BTreeMap::new(),
                };
                let got = self.recover(&[epoch], None, &view).await?;
                pass.recovered.extend(got);
                pass.already += 1;
                return Ok(false);
            }
            Err(revert) => {
                return Err(AnchorError::Contract {
                    first,
                    last,
                    revert,
                });
            }
        };
        let gas_limit = gas.saturating_add(gas / 4);
        let nonce =
            u64::try_from(self.nonce_at("pending").await?).map_err(|_| malformed("nonce"))?;
        let tip: u128 = match self
            .rpc
            .call::<_, U256>("priority fee", "eth_maxPriorityFeePerGas", ())
            .await
        {
            Ok(t) => t.try_into().unwrap_or(u128::MAX),
            Err(_) => 1_000_000_000,
        };
        let base = match pinned.base_fee {
            Some(b) => b,
            None => self
                .rpc
                .call::<_, U256>("gas price", "eth_gasPrice", ())
                .await?
                .try_into()
                .unwrap_or(u128::MAX),
        };
        let cap = self.s.max_gas_price_wei;
        let mut fee = fees::initial(base, tip, cap).map_err(|o| AnchorError::GasCap {
            price: o.price,
            cap: o.cap,
        })?;
        let wallet = EthereumWallet::from(self.signer.clone());
        let start = Instant::now();
        let mut attempts: Vec<[u8; 32]> = Vec::new();
        let mut l1_estimate = 0;
        let mut last_sent = Instant::now();
        'send: loop {
            let tx = TransactionRequest::default()
                .with_from(self.me)
                .with_to(self.s.contract)
                .with_input(input.clone())
                .with_chain_id(self.chain_id)
                .with_nonce(nonce)
                .with_gas_limit(gas_limit)
                .with_max_fee_per_gas(fee.max_fee_per_gas)
                .with_max_priority_fee_per_gas(fee.max_priority_fee_per_gas);
            let env = tx
                .build(&wallet)
                .await
                .map_err(|e| AnchorError::Config(format!("cannot sign: {e}")))?;
            let raw = Bytes::from(env.encoded_2718());
            let hash = env.tx_hash().0;
            if op_stack {
                // The oracle quotes the L1 data fee of these bytes (signed: an upper bound).
                let q: Bytes = self
                    .rpc
                    .call(
                        "L1 fee",
                        "eth_call",
                        json!([
                            {"to": GAS_PRICE_ORACLE, "data": Bytes::from(
                                IGasPriceOracle::getL1FeeCall { data: raw.clone() }.abi_encode())},
                            "latest"
                        ]),
                    )
                    .await?;
                let fee_l1 = IGasPriceOracle::getL1FeeCall::abi_decode_returns(&q)
                    .map_err(|_| malformed("getL1Fee"))?;
                l1_estimate = fee_l1.try_into().unwrap_or(u128::MAX);
                // A replacement over the L1 cap is not sent; the earlier one still may land.
                if l1_estimate > self.o.max_l1_fee_wei && attempts.is_empty() {
                    return Err(AnchorError::L1FeeCap {
                        fee: l1_estimate,
                        cap: self.o.max_l1_fee_wei,
                    });
                }
            }
            if !op_stack || l1_estimate <= self.o.max_l1_fee_wei {
                // Every attempt is recorded before it is sent: a crash after sending leaves a
                // pending receipt the next pass resolves by hash.
                for h in batch {
                    self.store.put_anchor(&AnchorReceipt {
                        epoch: h.epoch,
                        chain_id: self.chain_id,
                        contract: self.s.contract.0.0,
                        tx: hash,
                        block: 0,
                        block_hash: [0; 32],
                        gas_used: 0,
                        effective_gas_price: 0,
                        state: ReceiptState::Pending,
                        l1_fee: 0,
                        replaced: attempts.clone(),
                    })?;
                }
                match self
                    .rpc
                    .call::<_, B256>("send", "eth_sendRawTransaction", json!([raw]))
                    .await
                {
                    Ok(_) => {
                        attempts.push(hash);
                        if attempts.len() > 1 {
                            pass.replacements += 1;
                        }
                        self.on(Event::Sent {
                            first,
                            last,
                            tx: B256::from(hash),
                            nonce,
                            fees: fee,
                            attempt: attempts.len() as u32,
                        });
                    }
                    // A replacement the node refuses (underpriced, under the base fee): the
                    // earlier attempts are still the candidates.
                    Err(e) if !attempts.is_empty() => {
                        self.on(Event::Retry {
                            what: "replacement",
                            attempt: attempts.len() as u32 + 1,
                            error: e.to_string(),
                        });
                    }
                    Err(e) => return Err(e),
                }
                last_sent = Instant::now();
            }
            // Wait for any attempt to land; replace after `replace_after`.
            let mut polls = 0u32;
            loop {
                tokio::time::sleep(POLL).await;
                polls += 1;
                let found = self.inclusions(&attempts).await?;
                if let Some(r) = attempts
                    .iter()
                    .find_map(|t| found.get(t).cloned().flatten())
                {
                    if !r.success {
                        return Err(AnchorError::Reverted {
                            tx: B256::from(r.tx),
                        });
                    }
                    let latest: U256 = self.rpc.call("block number", "eth_blockNumber", ()).await?;
                    let latest = u64::try_from(latest).unwrap_or(u64::MAX);
                    let state = match self.finality {
                        Finality::Depth(n) if latest + 1 >= r.block + n.max(1) => {
                            ReceiptState::Confirmed
                        }
                        _ => ReceiptState::Included,
                    };
                    let replaced: Vec<[u8; 32]> =
                        attempts.iter().filter(|t| **t != r.tx).copied().collect();
                    let receipt = self.receipt(
                        first,
                        &r,
                        state,
                        if op_stack { l1_estimate } else { 0 },
                        &replaced,
                    );
                    for h in batch {
                        self.store.put_anchor(&AnchorReceipt {
                            epoch: h.epoch,
                            ..receipt.clone()
                        })?;
                        pass.posted.push(h.epoch);
                    }
                    pass.transactions += 1;
                    let cost = receipt.cost_wei();
                    pass.cost_wei += cost;
                    self.on(Event::Landed {
                        first,
                        last,
                        tx: B256::from(r.tx),
                        block: r.block,
                        cost_wei: cost,
                    });
                    return Ok(true);
                }
                if polls.is_multiple_of(5) && !attempts.is_empty() {
                    let params: Vec<Value> =
                        attempts.iter().map(|t| json!([B256::from(*t)])).collect();
                    let known: Vec<Value> = self
                        .rpc
                        .batch("transaction", "eth_getTransactionByHash", &params)
                        .await?;
                    if known.iter().all(Value::is_null) {
                        // The node knows none of the attempts any more. If the nonce is still
                        // ours to use, it evicted them (anvil drops a transaction whose max
                        // fee falls under the base fee): send again, bumped. Otherwise (it
                        // restarted and lost blocks, or the nonce went to another
                        // transaction) the next pass reconciles.
                        if self.nonce_at("latest").await? != U256::from(nonce) {
                            return Err(AnchorError::Dropped {
                                tx: B256::from(attempts.last().copied().unwrap_or_default()),
                                nonce,
                            });
                        }
                        let base_now = self.latest_base_fee(base).await?;
                        if let Some(f) = fees::bump(fee, base_now, cap) {
                            fee = f;
                            continue 'send;
                        }
                    }
                }
                if start.elapsed() > self.o.give_up_after {
                    return Err(AnchorError::Stuck {
                        tx: B256::from(attempts.last().copied().unwrap_or_default()),
                        nonce,
                        max_fee: fee.max_fee_per_gas,
                        cap,
                        waited_s: start.elapsed().as_secs(),
                    });
                }
                if last_sent.elapsed() >= self.o.replace_after {
                    let base_now = self.latest_base_fee(base).await?;
                    match fees::bump(fee, base_now, cap) {
                        Some(f) => {
                            fee = f;
                            continue 'send;
                        }
                        // At the cap: keep waiting for what is out there.
                        None => last_sent = Instant::now(),
                    }
                }
            }
        }
    }
}
