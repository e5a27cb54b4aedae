//! The alloy driver of a pass: gathers what [`crate::reconcile::plan`] needs, every contract
//! read pinned to one block by hash (EIP-1898), then carries the plan out: receipts
//! corrected or recovered, the marker advanced, missing epochs posted with capped EIP-1559
//! fees and replaced at the same nonce while stuck.
//!
//! Reading and reconciling are here; [`send`] posts and replaces transactions, and [`answers`]
//! parses what the node returns.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use afr_core::{EpochHeader, Hash32};
use afr_recorder::{Entry, Store};
use alloy::{
    primitives::{Address, B256, Bytes, U256},
    rpc::client::RpcClient,
    sol_types::{SolCall, SolEvent},
};
use serde_json::{Value, json};

use crate::{
    AnchorError, AnchorMarker, AnchorReceipt, AnchorStore, Event, Finality, ForkAlarm, IAfrAnchor,
    Options, Pass, PrivateKeySigner, ReceiptState, Settings, default_confirmations,
    reconcile::{self, BlockRef, ChainView, Inclusion, Local, LocalReceipt, Step},
    rpc::{Rpc, RpcError, malformed, rpc_err},
};

mod answers;
mod send;

use answers::{TxReceipt, hex32, parse_block, parse_receipt, quantity, sat64};

/// How long a pass waits for transactions an earlier run left in the mempool.
pub const PENDING_WAIT: Duration = Duration::from_secs(120);

struct Driver<'a> {
    rpc: Rpc<'a>,
    store: &'a Store,
    s: &'a Settings,
    o: &'a Options,
    signer: PrivateKeySigner,
    me: Address,
    chain_id: u64,
    finality: Finality,
}

/// One anchoring pass: reconcile with the chain at one pinned block, then post every sealed,
/// unanchored epoch in order, in batches. Returns what it did; `on` hears about it as it
/// happens. A fork is an error, never papered over.
pub async fn anchor_pass(
    store: &Store,
    signer: PrivateKeySigner,
    s: &Settings,
    o: &Options,
    on: &dyn Fn(&Event),
) -> Result<Pass, AnchorError> {
    if let Some(a) = store.fork_alarm()? {
        return Err(AnchorError::ForkAlarmSet {
            epoch: a.epoch,
            onchain: Hash32(a.onchain),
            local: Hash32(a.local),
        });
    }
    let me = signer.address();
    let recorder = store.recorder_id()?;
    if me.as_slice() != recorder {
        return Err(AnchorError::Config(format!(
            "the anchoring key's address {me} is not this recorder's id 0x{}",
            hex::encode(recorder)
        )));
    }
    let url = crate::parse_rpc_url(&s.rpc_url)?;
    let rpc = Rpc {
        p: RpcClient::new_http(url),
        url: &s.rpc_url,
        on,
        max_batch: o.max_rpc_batch,
    };
    let chain_id: u64 = rpc
        .call::<_, U256>("chain id", "eth_chainId", ())
        .await?
        .try_into()
        .map_err(|_| malformed("eth_chainId"))?;
    let finality = if o.finalized {
        Finality::Finalized
    } else if s.confirmations == 0 {
        Finality::Depth(default_confirmations(chain_id))
    } else {
        Finality::Depth(s.confirmations)
    };
    let d = Driver {
        rpc,
        store,
        s,
        o,
        signer,
        me,
        chain_id,
        finality,
    };
    d.check_binding().await?;
    d.wait_for_own_pending().await?;
    d.run().await
}

impl Driver<'_> {
    fn on(&self, e: Event) {
        (self.rpc.on)(&e);
    }

    /// The chain and contract the store's receipts were made on must be these, unless the
    /// options allow a switch (then the old receipts are archived, not deleted).
    async fn check_binding(&self) -> Result<(), AnchorError> {
        let bound = match self.store.anchor_marker()? {
            Some(m) => Some((m.chain_id, m.contract)),
            None => self.store.last_anchor()?.map(|r| (r.chain_id, r.contract)),
        };
        let Some((chain, contract)) = bound else {
            return Ok(());
        };
        if chain == self.chain_id && contract == self.s.contract.0.0 {
            return Ok(());
        }
        if !self.o.allow_switch {
            return Err(AnchorError::Switch {
                stored_chain: chain,
                stored_contract: Address::from(contract),
                chain: self.chain_id,
                contract: self.s.contract,
            });
        }
        let archived = self.store.archive_anchors()?;
        self.on(Event::Switched { archived });
        Ok(())
    }

    /// Waits until no transaction from the anchoring key is pending. A run killed after
    /// sending leaves its transaction in the mempool; reading the contract before it is mined
    /// would send the same epochs again. The nonce is the node's: `latest` counts mined
    /// transactions, `pending` also the waiting ones.
    async fn wait_for_own_pending(&self) -> Result<(), AnchorError> {
        let start = Instant::now();
        loop {
            let n: Vec<U256> = self
                .rpc
                .batch(
                    "nonces",
                    "eth_getTransactionCount",
                    &[json!([self.me, "latest"]), json!([self.me, "pending"])],
                )
                .await?;
            let [latest, pending] = [n[0], n[1]].map(|x| u64::try_from(x).unwrap_or(u64::MAX));
            if pending <= latest {
                return Ok(());
            }
            if start.elapsed() > self.o.give_up_after {
                return Err(AnchorError::PendingTransactions {
                    from: self.me,
                    latest,
                    pending,
                    waited_s: start.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// `eth_call` of `data` on the contract at `at` (by hash, canonical required).
    fn call_at(&self, to: Address, data: Vec<u8>, at: &BlockRef) -> Value {
        json!([
            {"to": to, "data": Bytes::from(data)},
            {"blockHash": B256::from(at.hash), "requireCanonical": true}
        ])
    }

    async fn run(&self) -> Result<Pass, AnchorError> {
        let mut pass = Pass {
            finality: Some(self.finality),
            ..Pass::default()
        };
        // 1. The pinned block (and the finalized one when the policy needs it).
        let mut tags = vec![json!(["latest", false])];
        if self.finality == Finality::Finalized {
            tags.push(json!(["finalized", false]));
        }
        let blocks: Vec<Value> = self
            .rpc
            .batch("block", "eth_getBlockByNumber", &tags)
            .await?;
        let pinned = parse_block(&blocks[0], "eth_getBlockByNumber(latest)")?;
        let finalized_upto = match blocks.get(1) {
            Some(b) => Some(parse_block(b, "eth_getBlockByNumber(finalized)")?.at.number),
            None => None,
        };
        let at = pinned.at;
        pass.pinned_block = at.number;
        let confirmed_upto = match self.finality {
            Finality::Depth(n) => (at.number + 1).saturating_sub(n.max(1)),
            Finality::Finalized => finalized_upto.unwrap_or(0),
        };

        // 2. head(me) at the pinned block, and the marker's block (still canonical?).
        let marker = self
            .store
            .anchor_marker()?
            // A marker made under another finality rule says nothing about this one: the
            // epochs behind it are verified again, once.
            .filter(|m| {
                m.chain_id == self.chain_id
                    && m.contract == self.s.contract.0.0
                    && m.finality == self.finality.code()
            });
        let mut reads = vec![(
            "eth_call",
            self.call_at(
                self.s.contract,
                IAfrAnchor::headCall { recorder: self.me }.abi_encode(),
                &at,
            ),
        )];
        if let Some(m) = marker.as_ref().filter(|m| m.epoch.is_some()) {
            reads.push((
                "eth_getBlockByNumber",
                json!([format!("{:#x}", m.block), false]),
            ));
        }
        let answers = self.mixed(&reads).await?;
        let head_raw: Bytes =
            serde_json::from_value(answers[0].clone()).map_err(|_| malformed("head"))?;
        if head_raw.is_empty() {
            // No code at the address (or code that returns nothing): not AfrAnchor.
            return Err(AnchorError::NotAfrAnchor {
                address: self.s.contract,
            });
        }
        let head =
            IAfrAnchor::headCall::abi_decode_returns(&head_raw).map_err(|_| malformed("head"))?;
        let chain_head = head.any.then_some(head.epoch);
        let mut verified = marker.as_ref().and_then(|m| m.epoch);
        if let (Some(m), Some(e)) = (marker.as_ref(), verified) {
            let still = answers
                .get(1)
                .and_then(|b| parse_block(b, "marker block").ok())
                .is_some_and(|b| b.at.hash == m.block_hash);
            if !still || chain_head.is_none_or(|h| h < e) || at.number < m.block {
                self.on(Event::MarkerReset {
                    epoch: e,
                    block: m.block,
                });
                self.store.clear_anchor_marker()?;
                verified = None;
            }
        }
        let first = verified.map_or(0, |e| e + 1);

        // 3. Local state after the marker: headers (and the one before, for posting) and
        //    receipts on this chain and contract.
        let (prev_header, headers) = self.headers_from(first)?;
        let local_head = match headers.last() {
            Some(h) => Some(h.epoch),
            None => verified,
        };
        let mut receipts = BTreeMap::new();
        for r in self.store.anchors_from(first)? {
            let r = r?;
            if r.chain_id == self.chain_id && r.contract == self.s.contract.0.0 {
                receipts.insert(r.epoch, r);
            }
        }
        let local: Vec<Local> = headers
            .iter()
            .map(|h| Local {
                epoch: h.epoch,
                root: h.root(),
                receipt: receipts.get(&h.epoch).map(|r| LocalReceipt {
                    tx: r.tx,
                    block: r.block,
                    block_hash: r.block_hash,
                    state: r.state,
                }),
            })
            .collect();

        // 4. Roots of the epochs after the marker up to the chain head, in batches at the
        //    pinned block; receipts of transactions not yet confirmed or not shown by a root.
        let upto = chain_head
            .map_or(0, |h| h + 1)
            .min(local_head.map_or(0, |l| l + 1));
        let asks: Vec<Value> = (first..upto)
            .map(|e| {
                self.call_at(
                    self.s.contract,
                    IAfrAnchor::rootOfCall {
                        recorder: self.me,
                        epoch: e,
                    }
                    .abi_encode(),
                    &at,
                )
            })
            .collect();
        let raw_roots: Vec<Bytes> = self.rpc.batch("rootOf", "eth_call", &asks).await?;
        let mut roots = BTreeMap::new();
        for (e, raw) in (first..upto).zip(raw_roots) {
            let r = IAfrAnchor::rootOfCall::abi_decode_returns(&raw).map_err(|_| {
                AnchorError::Rpc(RpcError::Malformed {
                    call: "rootOf",
                    epoch: Some(e),
                    tx: None,
                })
            })?;
            roots.insert(e, Hash32(r.0));
        }
        // Every receipt after the marker is checked by hash once: its block may have changed
        // (a reorg that re-included the transaction elsewhere) since it was stored.
        let look: Vec<[u8; 32]> = local
            .iter()
            .filter_map(|l| l.receipt.map(|r| r.tx))
            .collect();
        let inclusions = self.inclusions(&look).await?;
        let view = ChainView {
            at,
            confirmed_upto,
            finalized_upto,
            head: chain_head,
            roots,
            inclusions: inclusions
                .iter()
                .map(|(tx, r)| {
                    (
                        *tx,
                        match r {
                            None => Inclusion::Missing,
                            Some(r) => Inclusion::Included {
                                block: r.block,
                                block_hash: r.block_hash,
                                success: r.success,
                                anchored: r.anchored.clone(),
                            },
                        },
                    )
                })
                .collect(),
        };

        // 5. The plan.
        let plan = match reconcile::plan(&local, &view, local_head) {
            Ok(p) => p,
            Err(reconcile::Halt::ChainAhead {
                chain_head,
                local_head,
            }) => {
                return Err(AnchorError::ChainAhead {
                    chain_head,
                    local_head,
                });
            }
            Err(reconcile::Halt::Fork {
                epoch,
                onchain,
                local,
            }) => return Err(self.fork(epoch, onchain, local).await?),
        };

        // 6. Carry it out: receipts first, then the marker, then posts.
        pass.already = verified.map_or(0, |e| e + 1);
        let mut recover = Vec::new();
        for step in &plan.steps {
            match step {
                Step::Anchored {
                    epoch,
                    state,
                    moved,
                } => {
                    pass.already += 1;
                    let Some(r) = receipts.get(epoch) else {
                        continue;
                    };
                    let mut new = r.clone();
                    new.state = *state;
                    if let Some(m) = moved {
                        self.on(Event::Moved {
                            epoch: *epoch,
                            from: r.block,
                            to: m.number,
                        });
                        pass.moved.push(*epoch);
                        new.block = m.number;
                        new.block_hash = m.hash;
                    }
                    if let Some(Some(t)) = inclusions.get(&r.tx) {
                        new.gas_used = t.gas_used;
                        new.effective_gas_price = sat64(t.effective_gas_price);
                        if let Some(l1) = t.l1_fee {
                            new.l1_fee = sat64(l1);
                        }
                    }
                    if new != *r {
                        self.store.put_anchor(&new)?;
                    }
                }
                Step::Recover { epoch } => {
                    pass.already += 1;
                    recover.push(*epoch);
                }
                Step::NotVisibleYet { epoch, wait } => {
                    pass.waiting.push(*epoch);
                    self.on(Event::NotVisibleYet {
                        epoch: *epoch,
                        wait: *wait,
                    });
                }
                Step::Post {
                    epoch,
                    reorged: true,
                } => {
                    pass.reorged.push(*epoch);
                    self.on(Event::Reorged { epoch: *epoch });
                    if let Some(r) = receipts.get(epoch) {
                        self.store.put_anchor(&AnchorReceipt {
                            state: ReceiptState::Pending,
                            ..r.clone()
                        })?;
                    }
                }
                Step::Post { .. } => {}
            }
        }
        pass.recovered = self.recover(&recover, Some(&at), &view).await?;
        let verified = plan.verified_upto.or(verified);
        if plan.verified_upto.is_some()
            || marker
                .as_ref()
                .is_none_or(|m| m.finality != self.finality.code())
        {
            self.store.put_anchor_marker(&AnchorMarker {
                epoch: verified,
                block: at.number,
                block_hash: at.hash,
                chain_id: self.chain_id,
                contract: self.s.contract.0.0,
                finality: self.finality.code(),
            })?;
        }
        pass.verified_upto = verified;

        let posts: Vec<u64> = plan.posts().collect();
        if let Some(&p0) = posts.first() {
            // The plan posts only local epochs after the marker, so this fits; if not, the
            // head it was planned from was out of range.
            let skip = usize::try_from(p0 - first).map_err(|_| {
                AnchorError::Rpc(RpcError::Malformed {
                    call: "head",
                    epoch: Some(p0),
                    tx: None,
                })
            })?;
            let to_post = &headers[skip..];
            let before = match skip.checked_sub(1) {
                Some(i) => headers.get(i),
                None => prev_header.as_ref(),
            };
            self.post(to_post, before, &pinned, &mut pass).await?;
        }
        Ok(pass)
    }

    /// Several different calls in one batch, answers as JSON.
    async fn mixed(&self, reads: &[(&'static str, Value)]) -> Result<Vec<Value>, AnchorError> {
        // One batch, methods mixed: the batch helper takes one method, so each call names its
        // own through a tiny wrapper request.
        let mut out = Vec::with_capacity(reads.len());
        const WHAT: &str = "pinned reads";
        let url = self.rpc.url;
        let answers = crate::retry(WHAT, self.rpc.on, || async {
            let mut b = self.rpc.p.new_batch();
            let mut waiters = Vec::with_capacity(reads.len());
            for (m, p) in reads {
                waiters.push((
                    *m,
                    b.add_call::<Value, Value>(*m, p)
                        .map_err(|e| rpc_err(WHAT, m, url, &e))?,
                ));
            }
            b.send()
                .await
                .map_err(|e| rpc_err(WHAT, "batch", url, &e))?;
            let mut got = Vec::with_capacity(waiters.len());
            for (m, w) in waiters {
                got.push(w.await.map_err(|e| rpc_err(WHAT, m, url, &e))?);
            }
            Ok(got)
        })
        .await?;
        out.extend(answers);
        Ok(out)
    }

    /// Sealed headers from `first` on (consecutive), and the header before `first`.
    fn headers_from(
        &self,
        first: u64,
    ) -> Result<(Option<EpochHeader>, Vec<EpochHeader>), AnchorError> {
        let start = first.saturating_sub(1);
        let mut prev = None;
        let mut out = Vec::new();
        for (want, kv) in (start..).zip(self.store.epochs_from(start)?) {
            let (e, b) = kv?;
            // Header i must be epoch i: every index below relies on it.
            if e != want {
                return Err(Entry::Header(e).instead_of(Entry::Header(want)).into());
            }
            let h = EpochHeader::decode(&b).map_err(|err| Entry::Header(e).malformed(err))?;
            if e < first {
                prev = Some(h);
            } else {
                out.push(h);
            }
        }
        if first > 0 && prev.is_none() {
            return Err(Entry::Header(start).missing().into());
        }
        Ok((prev, out))
    }

    /// Receipts of `txs` by hash (`None`: the node has none).
    async fn inclusions(
        &self,
        txs: &[[u8; 32]],
    ) -> Result<BTreeMap<[u8; 32], Option<TxReceipt>>, AnchorError> {
        let mut uniq: Vec<[u8; 32]> = txs.to_vec();
        uniq.sort_unstable();
        uniq.dedup();
        let params: Vec<Value> = uniq.iter().map(|t| json!([B256::from(*t)])).collect();
        let answers: Vec<Value> = self
            .rpc
            .batch("receipts", "eth_getTransactionReceipt", &params)
            .await?;
        let mut out = BTreeMap::new();
        for (tx, v) in uniq.into_iter().zip(answers) {
            let r = if v.is_null() {
                None
            } else {
                Some(
                    parse_receipt(&v, self.s.contract, self.me).ok_or(AnchorError::Rpc(
                        RpcError::Malformed {
                            call: "eth_getTransactionReceipt",
                            epoch: None,
                            tx: Some(B256::from(tx)),
                        },
                    ))?,
                )
            };
            out.insert(tx, r);
        }
        Ok(out)
    }

    /// Recovers the receipts of `epochs` (anchored on chain, none stored) from their
    /// `Anchored` events, in one log query. Best effort: a node that limits log queries (many
    /// hosted RPCs refuse a range from block 0) must not stop the anchoring of later epochs;
    /// what cannot be recovered is reported and stays uncovered in `afr status`.
    async fn recover(
        &self,
        epochs: &[u64],
        upto: Option<&BlockRef>,
        view: &ChainView,
    ) -> Result<Vec<u64>, AnchorError> {
        if epochs.is_empty() {
            return Ok(Vec::new());
        }
        let topic2: Vec<B256> = epochs.iter().map(|e| B256::from(U256::from(*e))).collect();
        let filter = json!([{
            "address": self.s.contract,
            "topics": [IAfrAnchor::Anchored::SIGNATURE_HASH, self.me.into_word(), topic2],
            "fromBlock": "0x0",
            "toBlock": upto.map_or("latest".to_owned(), |b| format!("{:#x}", b.number)),
        }]);
        let logs: Vec<Value> = match self.rpc.call("logs", "eth_getLogs", filter).await {
            Ok(l) => l,
            Err(e) => {
                for &epoch in epochs {
                    self.on(Event::RecoverFailed {
                        epoch,
                        reason: e.to_string(),
                    });
                }
                return Ok(Vec::new());
            }
        };
        let mut by_epoch = BTreeMap::new();
        for l in &logs {
            let (Some(e), Some(tx)) = (
                l["topics"].get(2).and_then(hex32),
                hex32(&l["transactionHash"]),
            ) else {
                continue;
            };
            if let Ok(e) = u64::try_from(U256::from_be_bytes(e)) {
                by_epoch.entry(e).or_insert(tx);
            }
        }
        let txs: Vec<[u8; 32]> = by_epoch.values().copied().collect();
        let found = self.inclusions(&txs).await?;
        let mut out = Vec::new();
        for &epoch in epochs {
            let Some(Some(r)) = by_epoch
                .get(&epoch)
                .map(|t| found.get(t).cloned().flatten())
            else {
                self.on(Event::RecoverFailed {
                    epoch,
                    reason: "the node has no Anchored event or receipt for it".into(),
                });
                continue;
            };
            self.store
                .put_anchor(&self.receipt(epoch, &r, view.state_of(r.block), 0, &[]))?;
            self.on(Event::Recovered { epoch });
            out.push(epoch);
        }
        Ok(out)
    }

    fn receipt(
        &self,
        epoch: u64,
        r: &TxReceipt,
        state: ReceiptState,
        l1_estimate: u128,
        replaced: &[[u8; 32]],
    ) -> AnchorReceipt {
        AnchorReceipt {
            epoch,
            chain_id: self.chain_id,
            contract: self.s.contract.0.0,
            tx: r.tx,
            block: r.block,
            block_hash: r.block_hash,
            gas_used: r.gas_used,
            effective_gas_price: sat64(r.effective_gas_price),
            state,
            l1_fee: sat64(r.l1_fee.unwrap_or(l1_estimate)),
            replaced: replaced.to_vec(),
        }
    }

    /// Raises and returns the fork alarm, with the transaction that anchored the other root
    /// when its event can be found (best effort).
    async fn fork(
        &self,
        epoch: u64,
        onchain: Hash32,
        local: Hash32,
    ) -> Result<AnchorError, AnchorError> {
        let filter = json!([{
            "address": self.s.contract,
            "topics": [
                IAfrAnchor::Anchored::SIGNATURE_HASH,
                self.me.into_word(),
                B256::from(U256::from(epoch)),
            ],
            "fromBlock": "0x0",
        }]);
        let log: Option<Value> = self
            .rpc
            .call::<_, Vec<Value>>("logs", "eth_getLogs", filter)
            .await
            .ok()
            .and_then(|l| l.into_iter().next());
        self.store.put_fork_alarm(&ForkAlarm {
            epoch,
            local: local.0,
            onchain: onchain.0,
            chain_id: self.chain_id,
            contract: self.s.contract.0.0,
            tx: log.as_ref().and_then(|l| hex32(&l["transactionHash"])),
            block: log
                .as_ref()
                .and_then(|l| quantity(&l["blockNumber"]))
                .and_then(|b| u64::try_from(b).ok()),
            seen_at_us: afr_recorder::now_us(),
        })?;
        Ok(AnchorError::Fork {
            epoch,
            onchain,
            local,
        })
    }
}
