//! The anchorer: posts each sealed epoch's root to the `AfrAnchor` contract, exactly once and
//! in order, off the record path.
//!
//! Exactly-once rests on the contract, not on local bookkeeping: the contract accepts epoch
//! `e` only as the recorder's head plus one, and never accepts an epoch twice. So every run
//! starts by asking the chain where the recorder's head is, reconciles the local receipts with
//! it, and only then posts what is missing:
//!
//! ```text
//!  local sealed epochs 0 ..= L        chain head H (rootOf, head: plain eth_call)
//!  ├─ e ≤ H: rootOf(e) == local root?  yes → anchored (no local receipt: recover it from the
//!  │                                          Anchored event and store it)
//!  │                                   no  → FORK ALARM: another history was anchored
//!  └─ H < e ≤ L: pending → anchorBatch(H+1, roots[H+1..], backPointer(root(H)))
//! ```
//!
//! A fork is also written to the store as a fork alarm ([`afr_recorder::ForkAlarm`]); while it
//! is set, [`anchor_pending`] posts nothing and returns [`AnchorError::ForkAlarmSet`].
//!
//! A crash at any point (before signing, after sending, before the receipt) leaves either the
//! transaction on chain (the next run finds the head advanced and records it) or not (the next
//! run posts it again): no duplicate, no gap. A stored receipt whose block is no longer on the
//! canonical chain, with the root gone from the contract, is dropped and the epoch re-posted.
//!
//! Nothing is anchored on the word of a stored header alone: before sending, every epoch about
//! to be posted is re-derived from the stored records (RFC 6962 root of their leaf hashes, the
//! chain head, `first_seq` and `prev_epoch_root` continuing the previous header). A header
//! that disagrees with its records is store corruption or tampering, and the pass stops with
//! [`AnchorError::HeaderMismatch`] before anything is sent.
//!
//! [`deploy_canonical`] puts the contract at its one well-known address
//! ([`afr_core::deployment::ANCHOR_ADDRESS`]) through the standard CREATE2 deployer, and is a
//! no-op where it is already there; [`deploy`] makes a fresh copy with a plain CREATE.

use std::time::Duration;

use afr_core::{
    EpochHeader, Hash32, RecorderId, deployment, epoch::back_pointer, hash::leaf_hash,
    merkle::CompactRange,
};
use afr_recorder::{AnchorReceipt, ForkAlarm, Store};
use alloy::{
    network::{EthereumWallet, TransactionBuilder},
    primitives::{B256, Bytes, FixedBytes},
    providers::{Provider, ProviderBuilder},
    rpc::types::{Filter, TransactionRequest},
    sol,
    sol_types::SolEvent,
};

pub use alloy::{primitives::Address, signers::local::PrivateKeySigner};

mod keystore;
pub use keystore::{signer_from_keystore, write_keystore};

sol! {
    /// The anchor contract's interface (selectors checked against the artifact by a test).
    #[sol(rpc)]
    interface IAfrAnchor {
        function anchor(uint64 epoch, bytes32 root, bytes32 prevBackPointer) external;
        function anchorBatch(uint64 firstEpoch, bytes32[] calldata roots, bytes32 prevBackPointer) external;
        function rootOf(address recorder, uint64 epoch) external view returns (bytes32);
        function head(address recorder) external view returns (bool any, uint64 epoch);
        event Anchored(address indexed recorder, uint64 indexed epoch, bytes32 root, bytes32 backPointer);
    }
}

/// The contract artifact `forge build` produced (CI checks it is current).
pub const ARTIFACT: &str = include_str!("../artifacts/AfrAnchor.json");

/// Errors of the anchorer. Never contain key material.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    /// The chain holds a different root for an epoch than the local log: a fork.
    #[error(
        "FORK ALARM: epoch {epoch} is anchored on chain as {onchain}, but the local log's root is {local}"
    )]
    Fork {
        /// Epoch.
        epoch: u64,
        /// Root on chain.
        onchain: Hash32,
        /// Local root.
        local: Hash32,
    },
    /// A fork alarm raised earlier is still set: nothing is posted until an operator clears it.
    #[error(
        "FORK ALARM raised earlier and not cleared: epoch {epoch} is anchored on chain as {onchain}, \
         but the local log's root is {local}; not anchoring until it is resolved"
    )]
    ForkAlarmSet {
        /// Epoch.
        epoch: u64,
        /// Root on chain.
        onchain: Hash32,
        /// Local root.
        local: Hash32,
    },
    /// The chain is ahead of the local log.
    #[error(
        "the chain holds epochs up to {chain_head} for this recorder, the local log only up to {local_head:?}"
    )]
    ChainAhead {
        /// Chain head.
        chain_head: u64,
        /// Local last sealed epoch.
        local_head: Option<u64>,
    },
    /// RPC failure (after retries).
    #[error("rpc: {0}")]
    Rpc(String),
    /// Local store failure.
    #[error(transparent)]
    Store(#[from] afr_recorder::RecordError),
    /// Bad configuration.
    #[error("{0}")]
    Config(String),
    /// A sealed header disagrees with the stored records (or with the header before it): the
    /// store is corrupt or was tampered with, and the epoch is not anchored.
    #[error(
        "epoch {epoch}: the stored header's {field} is {stored}, but the store gives {recomputed}; \
         not anchoring anything (store corruption or tampering)"
    )]
    HeaderMismatch {
        /// The epoch whose header is wrong.
        epoch: u64,
        /// The field that differs.
        field: HeaderField,
        /// The header's value.
        stored: String,
        /// The value recomputed from the records and the previous header.
        recomputed: String,
    },
    /// A record a sealed epoch covers is not in the store.
    #[error(
        "epoch {epoch}: record {seq} is missing from the store; not anchoring anything \
         (store corruption or tampering)"
    )]
    RecordMissing {
        /// The epoch.
        epoch: u64,
        /// The missing record's sequence number.
        seq: u64,
    },
    /// The chain has no code at the CREATE2 deployer's address.
    #[error(
        "the CREATE2 deployer {deployer} is not on this chain (chain id {chain_id}); it can be put \
         on any chain with its pre-signed deployment transaction: fund {signer} with 0.01 ether \
         and broadcast the transaction published at {howto} (anvil has it from genesis); or \
         deploy a non-canonical copy with a plain CREATE (afr deploy --no-canonical)",
        signer = deployment::CREATE2_DEPLOYER_SIGNER,
        howto = deployment::CREATE2_DEPLOYER_HOWTO
    )]
    DeployerMissing {
        /// The deployer's address.
        deployer: Address,
        /// The chain.
        chain_id: u64,
    },
    /// The canonical address holds code that is not the artifact's runtime code.
    #[error("{address} holds code that is not the AfrAnchor artifact's runtime code")]
    NotAfrAnchor {
        /// The address.
        address: Address,
    },
    /// The encrypted keystore cannot be written or opened (never says more about the secret).
    #[error("keystore {path}: {message}")]
    Keystore {
        /// The keystore file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A field of [`EpochHeader`] that the anchorer re-derives before posting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderField {
    /// `epoch`: header `i` of the store must be epoch `i`.
    Epoch,
    /// `recorder`: the store's recorder id.
    Recorder,
    /// `first_seq`: one past the previous epoch's last record (0 for epoch 0).
    FirstSeq,
    /// `merkle_root`: RFC 6962 root of the leaf hashes of the epoch's records.
    MerkleRoot,
    /// `chain_head`: leaf hash of the epoch's last record.
    ChainHead,
    /// `prev_epoch_root`: root of the previous epoch's header (zero for epoch 0).
    PrevEpochRoot,
}

impl std::fmt::Display for HeaderField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HeaderField::Epoch => "epoch",
            HeaderField::Recorder => "recorder",
            HeaderField::FirstSeq => "first_seq",
            HeaderField::MerkleRoot => "merkle_root",
            HeaderField::ChainHead => "chain_head",
            HeaderField::PrevEpochRoot => "prev_epoch_root",
        })
    }
}

fn rpc<E: std::fmt::Display>(e: E) -> AnchorError {
    AnchorError::Rpc(e.to_string())
}

/// Anchoring settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// JSON-RPC endpoint.
    pub rpc_url: String,
    /// Contract address.
    pub contract: Address,
    /// Most epochs per `anchorBatch` transaction.
    pub max_batch: usize,
    /// Refuse to send when the network's gas price exceeds this (wei).
    pub max_gas_price_wei: u128,
    /// Confirmations to wait for.
    pub confirmations: u64,
}

/// What one anchoring pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Epochs found already anchored with the local root (reconciled).
    pub already: u64,
    /// Epochs posted by this pass.
    pub posted: Vec<u64>,
    /// Transactions sent.
    pub transactions: u64,
    /// Receipts dropped because their block left the canonical chain.
    pub reorged: Vec<u64>,
    /// Epochs found anchored on chain without a local receipt (a crash after sending), whose
    /// receipt was recovered from the contract's `Anchored` event.
    pub recovered: Vec<u64>,
}

/// The `Anchored` event of (`recorder`, `epoch`), if the node still has it.
async fn anchored_log<P: Provider>(
    provider: &P,
    contract: Address,
    recorder: Address,
    epoch: u64,
) -> Result<Option<alloy::rpc::types::Log>, AnchorError> {
    let filter = Filter::new()
        .address(contract)
        .event_signature(IAfrAnchor::Anchored::SIGNATURE_HASH)
        .topic1(recorder.into_word())
        .topic2(B256::from(alloy::primitives::U256::from(epoch)))
        .from_block(0);
    let logs = retry("logs", || async {
        provider.get_logs(&filter).await.map_err(rpc)
    })
    .await?;
    Ok(logs.into_iter().next())
}

fn sealed_headers(store: &Store) -> Result<Vec<EpochHeader>, AnchorError> {
    let mut out = Vec::new();
    for kv in store.epochs_from(0)? {
        let (e, b) = kv?;
        // Header i must be epoch i: every index below relies on it.
        if e != out.len() as u64 {
            return Err(afr_recorder::RecordError::Corrupt(format!(
                "epoch header {} missing (next stored header is epoch {e})",
                out.len()
            ))
            .into());
        }
        out.push(
            EpochHeader::decode(&b)
                .map_err(|err| afr_recorder::RecordError::Corrupt(format!("epoch {e}: {err}")))?,
        );
    }
    Ok(out)
}

/// Re-derives header `h` from the store before it is anchored: its epoch number and first
/// sequence number continue `prev` (the header before it, `None` for epoch 0), its
/// `prev_epoch_root` is `prev`'s root, and its Merkle root and chain head are those of the
/// stored records `first_seq .. first_seq + count`. Reads `count` records.
pub fn recheck_header(
    store: &Store,
    recorder: &RecorderId,
    prev: Option<&EpochHeader>,
    h: &EpochHeader,
) -> Result<(), AnchorError> {
    let (epoch, first_seq, prev_root) = match prev {
        // The contract accepts only head + 1, so `epoch` cannot overflow in practice; a
        // saturated value still differs from any stored one but u64::MAX.
        Some(p) => (p.epoch.saturating_add(1), p.end_seq(), p.root()),
        None => (0, 0, Hash32::ZERO),
    };
    // Errors name the epoch by its place in the log, not by what a tampered header claims.
    let mismatch = |field, stored: String, recomputed: String| AnchorError::HeaderMismatch {
        epoch,
        field,
        stored,
        recomputed,
    };
    if h.epoch != epoch {
        return Err(mismatch(
            HeaderField::Epoch,
            h.epoch.to_string(),
            epoch.to_string(),
        ));
    }
    if h.recorder != *recorder {
        return Err(mismatch(
            HeaderField::Recorder,
            format!("0x{}", hex::encode(h.recorder)),
            format!("0x{}", hex::encode(recorder)),
        ));
    }
    if h.first_seq != first_seq {
        return Err(mismatch(
            HeaderField::FirstSeq,
            h.first_seq.to_string(),
            first_seq.to_string(),
        ));
    }
    let mut tree = CompactRange::new();
    let mut head = Hash32::ZERO;
    for seq in h.first_seq..h.end_seq() {
        let bytes = store
            .record_bytes(seq)?
            .ok_or(AnchorError::RecordMissing { epoch, seq })?;
        head = leaf_hash(&bytes);
        tree.push(head);
    }
    let root = tree.root();
    if h.merkle_root != root {
        return Err(mismatch(
            HeaderField::MerkleRoot,
            format!("0x{}", h.merkle_root),
            format!("0x{root}"),
        ));
    }
    if h.chain_head != head {
        return Err(mismatch(
            HeaderField::ChainHead,
            format!("0x{}", h.chain_head),
            format!("0x{head}"),
        ));
    }
    if h.prev_epoch_root != prev_root {
        return Err(mismatch(
            HeaderField::PrevEpochRoot,
            format!("0x{}", h.prev_epoch_root),
            format!("0x{prev_root}"),
        ));
    }
    Ok(())
}

/// Parses a 0x-prefixed 32-byte hex secret into a signer.
pub fn signer_from_hex(s: &str) -> Result<PrivateKeySigner, AnchorError> {
    let mut k = [0u8; 32];
    hex::decode_to_slice(s.trim().trim_start_matches("0x"), &mut k)
        .map_err(|_| AnchorError::Config("the anchoring key must be 32 bytes of hex".into()))?;
    signer_from_bytes(&k)
}

/// A signer from 32 secret bytes.
pub fn signer_from_bytes(k: &[u8; 32]) -> Result<PrivateKeySigner, AnchorError> {
    PrivateKeySigner::from_bytes(&B256::from(*k)).map_err(|_| {
        AnchorError::Config("the anchoring key is not a valid secp256k1 secret".into())
    })
}

/// Runs `f` with retries and exponential backoff on RPC errors (5 attempts, 200 ms doubling).
async fn retry<T, F, Fut>(what: &str, mut f: F) -> Result<T, AnchorError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, AnchorError>>,
{
    let mut delay = Duration::from_millis(200);
    let mut last = None;
    for attempt in 1..=5 {
        match f().await {
            Ok(v) => return Ok(v),
            Err(AnchorError::Rpc(e)) => {
                eprintln!("anchorer: {what}: attempt {attempt} failed: {e}; retrying in {delay:?}");
                last = Some(e);
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(other) => return Err(other),
        }
    }
    Err(AnchorError::Rpc(format!(
        "{what}: {}",
        last.unwrap_or_default()
    )))
}

/// A JSON field of the artifact, as bytes (`bytecode` or `deployedBytecode`).
fn artifact_code(field: &str) -> Result<Bytes, AnchorError> {
    let v: serde_json::Value =
        serde_json::from_str(ARTIFACT).map_err(|e| AnchorError::Config(e.to_string()))?;
    v[field]["object"]
        .as_str()
        .ok_or_else(|| AnchorError::Config(format!("artifact has no {field}")))?
        .parse()
        .map_err(|_| AnchorError::Config(format!("artifact {field} is not hex")))
}

/// The artifact's creation bytecode: the CREATE2 init code (the contract has no constructor
/// arguments).
pub fn init_code() -> Result<Bytes, AnchorError> {
    artifact_code("bytecode")
}

/// The artifact's runtime code: what the chain holds at a genuine `AfrAnchor`.
pub fn runtime_code() -> Result<Bytes, AnchorError> {
    artifact_code("deployedBytecode")
}

/// The CREATE2 deployer ([`afr_core::deployment::CREATE2_DEPLOYER`]).
pub fn create2_deployer() -> Result<Address, AnchorError> {
    deployment::CREATE2_DEPLOYER
        .parse()
        .map_err(|_| AnchorError::Config("CREATE2_DEPLOYER is not an address".into()))
}

/// The canonical address ([`afr_core::deployment::ANCHOR_ADDRESS`]).
pub fn canonical_address() -> Result<Address, AnchorError> {
    deployment::ANCHOR_ADDRESS
        .parse()
        .map_err(|_| AnchorError::Config("ANCHOR_ADDRESS is not an address".into()))
}

/// Where the artifact lands through the deployer: `keccak256(0xff ‖ deployer ‖ SALT ‖
/// keccak256(init_code))[12..]`. Equal to [`canonical_address`] (a test checks it).
pub fn create2_address() -> Result<Address, AnchorError> {
    Ok(create2_deployer()?.create2_from_code(deployment::SALT, init_code()?))
}

/// What [`deploy_canonical`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployed {
    /// The contract's address (always the canonical one).
    pub address: Address,
    /// The deployment transaction, or `None` when the contract was already there.
    pub tx: Option<B256>,
}

/// Parses an RPC URL; the error names only its scheme, host and port (hosted endpoints carry
/// API keys in the path).
fn parse_rpc_url<U: std::str::FromStr>(rpc_url: &str) -> Result<U, AnchorError> {
    rpc_url
        .parse()
        .map_err(|_| AnchorError::Config(format!("bad rpc url {}", afr_core::redact_url(rpc_url))))
}

/// A provider for `rpc_url` that signs with `signer`.
fn wallet_provider(
    rpc_url: &str,
    signer: PrivateKeySigner,
) -> Result<impl Provider + Clone, AnchorError> {
    Ok(ProviderBuilder::new()
        .wallet(EthereumWallet::from(signer))
        .connect_http(parse_rpc_url(rpc_url)?))
}

/// Deploys `AfrAnchor` at its canonical address through the CREATE2 deployer, with calldata
/// `SALT ‖ init_code`. Idempotent: where the canonical address already holds the artifact's
/// runtime code, returns it and sends nothing. Fails with [`AnchorError::DeployerMissing`] on
/// a chain without the deployer, and with [`AnchorError::NotAfrAnchor`] if other code sits at
/// the address.
pub async fn deploy_canonical(
    rpc_url: &str,
    signer: PrivateKeySigner,
) -> Result<Deployed, AnchorError> {
    let provider = wallet_provider(rpc_url, signer)?;
    let address = canonical_address()?;
    let computed = create2_address()?;
    if computed != address {
        return Err(AnchorError::Config(format!(
            "the artifact lands at {computed} through the deployer, not at the canonical \
             {address}: afr_core::deployment::ANCHOR_ADDRESS is out of date"
        )));
    }
    let runtime = runtime_code()?;
    let code_at = |a: Address| {
        let provider = &provider;
        async move {
            retry("code", || async {
                provider.get_code_at(a).await.map_err(rpc)
            })
            .await
        }
    };
    let deployed = |code: &Bytes| -> Result<bool, AnchorError> {
        match code {
            c if c.is_empty() => Ok(false),
            c if *c == runtime => Ok(true),
            _ => Err(AnchorError::NotAfrAnchor { address }),
        }
    };
    if deployed(&code_at(address).await?)? {
        return Ok(Deployed { address, tx: None });
    }
    let deployer = create2_deployer()?;
    if code_at(deployer).await?.is_empty() {
        let chain_id = retry("chain id", || async {
            provider.get_chain_id().await.map_err(rpc)
        })
        .await?;
        return Err(AnchorError::DeployerMissing { deployer, chain_id });
    }
    let mut input = deployment::SALT.to_vec();
    input.extend_from_slice(&init_code()?);
    let tx = TransactionRequest::default()
        .with_to(deployer)
        .with_input(Bytes::from(input));
    let sent = match provider.send_transaction(tx).await {
        Ok(p) => p,
        Err(e) => {
            // Gas estimation reverts if someone deployed it in the meantime: then it is there.
            if deployed(&code_at(address).await?)? {
                return Ok(Deployed { address, tx: None });
            }
            return Err(rpc(e));
        }
    };
    let receipt = sent
        .with_timeout(Some(Duration::from_secs(120)))
        .get_receipt()
        .await
        .map_err(rpc)?;
    if !deployed(&code_at(address).await?)? {
        return Err(AnchorError::Rpc(format!(
            "deployment transaction {} ({}) left no code at {address}",
            receipt.transaction_hash,
            if receipt.status() {
                "mined"
            } else {
                "reverted"
            }
        )));
    }
    Ok(Deployed {
        address,
        tx: receipt.status().then_some(receipt.transaction_hash),
    })
}

/// Deploys a fresh, non-canonical copy of the contract with a plain CREATE; returns its
/// address. For chains without the CREATE2 deployer, and for measurements and tests that need
/// a contract of their own (every call makes a new one).
pub async fn deploy(rpc_url: &str, signer: PrivateKeySigner) -> Result<Address, AnchorError> {
    let provider = wallet_provider(rpc_url, signer)?;
    let tx = TransactionRequest::default().with_deploy_code(init_code()?);
    let receipt = provider
        .send_transaction(tx)
        .await
        .map_err(rpc)?
        .get_receipt()
        .await
        .map_err(rpc)?;
    receipt
        .contract_address
        .ok_or_else(|| AnchorError::Rpc("deployment receipt has no contract address".into()))
}

/// The signed bytes of a mined transaction (EIP-2718 envelope), by `eth_getRawTransactionByHash`:
/// what an OP-stack chain charges the L1 data fee on.
pub async fn raw_transaction(rpc_url: &str, tx: [u8; 32]) -> Result<Vec<u8>, AnchorError> {
    let provider = ProviderBuilder::new().connect_http(parse_rpc_url(rpc_url)?);
    let raw: Bytes = retry("raw transaction", || async {
        provider
            .raw_request("eth_getRawTransactionByHash".into(), (B256::from(tx),))
            .await
            .map_err(rpc)
    })
    .await?;
    Ok(raw.to_vec())
}

/// How long a pass waits for transactions an earlier run left in the mempool.
pub const PENDING_WAIT: Duration = Duration::from_secs(120);

/// Waits until no transaction from `me` is pending. A run killed after sending leaves its
/// transaction in the mempool; reading the contract before it is mined would send the same
/// epochs again (and the node's gas estimate, taken on the pending state, reverts). The nonce
/// is the node's: `latest` counts mined transactions, `pending` also the waiting ones.
async fn wait_for_own_pending<P: Provider>(provider: &P, me: Address) -> Result<(), AnchorError> {
    let start = std::time::Instant::now();
    loop {
        let latest = retry("nonce", || async {
            provider
                .get_transaction_count(me)
                .latest()
                .await
                .map_err(rpc)
        })
        .await?;
        let pending = retry("pending nonce", || async {
            provider
                .get_transaction_count(me)
                .pending()
                .await
                .map_err(rpc)
        })
        .await?;
        if pending <= latest {
            return Ok(());
        }
        if start.elapsed() > PENDING_WAIT {
            return Err(AnchorError::Rpc(format!(
                "{} transaction(s) from the anchoring key {me} are still pending after {} s \
                 (nonces {latest}..{pending}); not sending until they are mined or dropped",
                pending - latest,
                PENDING_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One anchoring pass: reconcile with the chain, then post every sealed, unanchored epoch in
/// order, in batches. Returns what it did; a fork is an error, never papered over.
pub async fn anchor_pending(
    store: &Store,
    signer: PrivateKeySigner,
    s: &Settings,
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
    let provider = wallet_provider(&s.rpc_url, signer)?;
    let contract = IAfrAnchor::new(s.contract, &provider);
    let chain_id = retry("chain id", || async {
        provider.get_chain_id().await.map_err(rpc)
    })
    .await?;
    wait_for_own_pending(&provider, me).await?;
    let headers = sealed_headers(store)?;
    let local_head = headers.last().map(|h| h.epoch);
    let mut pass = Pass::default();

    // Reorg check: a stored receipt whose root vanished from the contract is dropped.
    for h in &headers {
        if store.anchor(h.epoch)?.is_some() {
            let onchain = retry("rootOf", || async {
                contract.rootOf(me, h.epoch).call().await.map_err(rpc)
            })
            .await?;
            if onchain == FixedBytes::ZERO {
                store.delete_anchor(h.epoch)?;
                pass.reorged.push(h.epoch);
            }
        }
    }

    let head = retry("head", || async {
        contract.head(me).call().await.map_err(rpc)
    })
    .await?;
    let chain_head = head.any.then_some(head.epoch);
    if let Some(ch) = chain_head {
        if local_head.is_none_or(|l| ch > l) {
            return Err(AnchorError::ChainAhead {
                chain_head: ch,
                local_head,
            });
        }
        let Some(anchored) = headers.get(..=ch as usize) else {
            return Err(AnchorError::ChainAhead {
                chain_head: ch,
                local_head,
            });
        };
        for h in anchored {
            let onchain = retry("rootOf", || async {
                contract.rootOf(me, h.epoch).call().await.map_err(rpc)
            })
            .await?;
            let local = h.root();
            if onchain.0 != local.0 {
                // Best effort: find the transaction that anchored the other root.
                let log = anchored_log(&provider, s.contract, me, h.epoch)
                    .await
                    .ok()
                    .flatten();
                store.put_fork_alarm(&ForkAlarm {
                    epoch: h.epoch,
                    local: local.0,
                    onchain: onchain.0,
                    chain_id,
                    contract: s.contract.0.0,
                    tx: log.as_ref().and_then(|l| l.transaction_hash).map(|t| t.0),
                    block: log.as_ref().and_then(|l| l.block_number),
                    seen_at_us: afr_recorder::now_us(),
                })?;
                return Err(AnchorError::Fork {
                    epoch: h.epoch,
                    onchain: Hash32(onchain.0),
                    local,
                });
            }
            pass.already += 1;
            if store.anchor(h.epoch)?.is_none() {
                // Sent and mined, but the receipt never reached the store (a crash in
                // between): recover it from the event, so the epoch counts as anchored.
                // Best effort: a node that limits log queries (many hosted RPCs refuse a
                // range from block 0) must not stop anchoring of the epochs after this one.
                let log = match anchored_log(&provider, s.contract, me, h.epoch).await {
                    Ok(Some(log)) => log,
                    Ok(None) => {
                        eprintln!(
                            "anchorer: epoch {} is anchored on chain but the node has no \
                             Anchored event for it; its receipt cannot be recovered",
                            h.epoch
                        );
                        continue;
                    }
                    Err(e) => {
                        eprintln!(
                            "anchorer: epoch {} is anchored on chain; recovering its receipt \
                             failed ({e}); it stays pending in `afr status` until a pass recovers it",
                            h.epoch
                        );
                        continue;
                    }
                };
                let Some(tx) = log.transaction_hash else {
                    continue;
                };
                let receipt = retry("receipt", || async {
                    provider.get_transaction_receipt(tx).await.map_err(rpc)
                })
                .await?
                .ok_or_else(|| AnchorError::Rpc(format!("no receipt for transaction {tx}")))?;
                store.put_anchor(&AnchorReceipt {
                    epoch: h.epoch,
                    chain_id,
                    contract: s.contract.0.0,
                    tx: tx.0,
                    block: receipt.block_number.unwrap_or_default(),
                    block_hash: receipt.block_hash.map(|b| b.0).unwrap_or_default(),
                    gas_used: receipt.gas_used,
                    effective_gas_price: u64::try_from(receipt.effective_gas_price)
                        .unwrap_or(u64::MAX),
                })?;
                pass.recovered.push(h.epoch);
            }
        }
    }
    let first = chain_head.map_or(0, |c| c + 1) as usize;
    // Re-derive every header about to be posted before sending any: a header the records do
    // not back is never anchored, and neither is anything after it.
    for (i, h) in headers.iter().enumerate().skip(first) {
        let prev = i.checked_sub(1).and_then(|p| headers.get(p));
        recheck_header(store, &recorder, prev, h)?;
    }
    let mut next = first;
    while next < headers.len() {
        let batch = &headers[next..headers.len().min(next + s.max_batch.max(1))];
        let gas_price = retry("gas price", || async {
            provider.get_gas_price().await.map_err(rpc)
        })
        .await?;
        if gas_price > s.max_gas_price_wei {
            return Err(AnchorError::Rpc(format!(
                "gas price {gas_price} wei is over the cap of {} wei; not sending",
                s.max_gas_price_wei
            )));
        }
        let prev_root = if next == 0 {
            Hash32::ZERO
        } else {
            headers[next - 1].root()
        };
        let bp = back_pointer(batch[0].epoch, &prev_root);
        // One epoch goes through `anchor` (no array in the calldata, no loop: about 600 gas
        // and 64 calldata bytes less than a batch of one), several through `anchorBatch`.
        let pending = if let [h] = batch {
            contract
                .anchor(h.epoch, FixedBytes(h.root().0), FixedBytes(bp.0))
                .send()
                .await
        } else {
            let roots: Vec<FixedBytes<32>> = batch.iter().map(|h| FixedBytes(h.root().0)).collect();
            contract
                .anchorBatch(batch[0].epoch, roots, FixedBytes(bp.0))
                .send()
                .await
        }
        .map_err(rpc)?;
        pass.transactions += 1;
        let receipt = pending
            .with_required_confirmations(s.confirmations.max(1))
            .with_timeout(Some(Duration::from_secs(120)))
            .get_receipt()
            .await
            .map_err(rpc)?;
        if !receipt.status() {
            return Err(AnchorError::Rpc(format!(
                "anchoring transaction {} reverted",
                receipt.transaction_hash
            )));
        }
        for h in batch {
            store.put_anchor(&AnchorReceipt {
                epoch: h.epoch,
                chain_id,
                contract: s.contract.0.0,
                tx: receipt.transaction_hash.0,
                block: receipt.block_number.unwrap_or_default(),
                block_hash: receipt.block_hash.map(|b| b.0).unwrap_or_default(),
                gas_used: receipt.gas_used,
                effective_gas_price: u64::try_from(receipt.effective_gas_price).unwrap_or(u64::MAX),
            })?;
            pass.posted.push(h.epoch);
        }
        next += batch.len();
    }
    Ok(pass)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::sol_types::SolCall;

    /// The CREATE2 formula spelled out over the checked-in artifact gives the published
    /// canonical address: a change of the contract that is not carried into
    /// `afr_core::deployment::ANCHOR_ADDRESS` fails here.
    #[test]
    fn artifact_lands_at_the_canonical_address() {
        use alloy::primitives::keccak256;
        let init = init_code().unwrap();
        let deployer = create2_deployer().unwrap();
        let mut pre = vec![0xff];
        pre.extend_from_slice(deployer.as_slice());
        pre.extend_from_slice(&deployment::SALT);
        pre.extend_from_slice(keccak256(&init).as_slice());
        let by_hand = Address::from_slice(&keccak256(&pre)[12..]);
        assert_eq!(by_hand, canonical_address().unwrap());
        assert_eq!(create2_address().unwrap(), by_hand);
        // The constants are written in their canonical forms.
        assert_eq!(by_hand.to_checksum(None), deployment::ANCHOR_ADDRESS);
        assert_eq!(format!("{deployer:#x}"), deployment::CREATE2_DEPLOYER);
        // The init code carries the runtime code verbatim (no immutables to patch in).
        let runtime = runtime_code().unwrap();
        assert!(init.windows(runtime.len()).any(|w| w == &runtime[..]));
    }

    #[test]
    fn interface_selectors_match_the_artifact() {
        let v: serde_json::Value = serde_json::from_str(ARTIFACT).unwrap();
        let ids = &v["methodIdentifiers"];
        for (sig, sel) in [
            (
                "anchor(uint64,bytes32,bytes32)",
                IAfrAnchor::anchorCall::SELECTOR,
            ),
            (
                "anchorBatch(uint64,bytes32[],bytes32)",
                IAfrAnchor::anchorBatchCall::SELECTOR,
            ),
            ("rootOf(address,uint64)", IAfrAnchor::rootOfCall::SELECTOR),
            ("head(address)", IAfrAnchor::headCall::SELECTOR),
        ] {
            assert_eq!(ids[sig].as_str().unwrap(), hex::encode(sel), "{sig}");
        }
    }
}
