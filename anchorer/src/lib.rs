//! The anchorer: posts each sealed epoch's root to the `AfrAnchor` contract, exactly once and
//! in order, off the record path, and says how final each anchor is.
//!
//! Exactly-once rests on the contract, not on local bookkeeping: the contract accepts epoch
//! `e` only as the recorder's head plus one, and never accepts an epoch twice. A pass
//! ([`anchor_pass`]) therefore reads the chain first, at one pinned block, decides what to do
//! with a pure plan ([`reconcile`]), then carries it out:
//!
//! ```text
//!  store: marker "verified up to E at block B"      chain, every read at block P (EIP-1898)
//!         headers, receipts of epochs > E     ──►   head(recorder); rootOf(e) for E < e ≤ head
//!                                                   (batched); receipts of unconfirmed txs
//!                        └──────── reconcile::plan ───────┘
//!   Anchored (state: included / confirmed / finalized; block corrected if the tx moved)
//!   Recover (anchored, receipt lost)   NotVisibleYet (lagging reads: wait)   Post   FORK
//!                        │
//!   driver: re-derive headers to post from records; contract code; fees (EIP-1559, cap on
//!   max_fee_per_gas, OP-stack L1 data fee capped); send; replace a stuck transaction at the
//!   same nonce (+12.5 % per step, within the cap); store receipts; advance the marker
//! ```
//!
//! A pass with nothing to do reads the chain id, the nonces, the pinned block, the marker's
//! block and `head`: a constant number of calls whatever the log's age. `docs/anchoring.md`
//! states the finality rules, the per-chain defaults and the fee policy.
//!
//! A fork is written to the store as a fork alarm ([`ForkAlarm`]); while it is set, a pass
//! posts nothing and returns [`AnchorError::ForkAlarmSet`]. The receipts, the marker and the
//! alarm are the anchorer's types ([`receipt`]), kept in the recorder's store as opaque
//! values ([`AnchorStore`]).
//!
//! A crash at any point (before signing, after sending, before the receipt) leaves either the
//! transaction on chain (the next pass finds the root and confirms or recovers the receipt)
//! or not (the next pass posts it again): no duplicate, no gap. A stored receipt whose
//! transaction left the chain is marked pending, never deleted, and the epoch re-posted.
//!
//! Nothing is anchored on the word of a stored header alone: before sending, every epoch about
//! to be posted is re-derived from the stored records (RFC 6962 root of their leaf hashes, the
//! chain head, `first_seq` and `prev_epoch_root` continuing the previous header). A header
//! that disagrees with its records is store corruption or tampering, and the pass stops with
//! [`AnchorError::HeaderMismatch`] before anything is sent.
//!
//! The library prints nothing: what a pass does as it goes is reported through an [`Event`]
//! callback, and what it did in the returned [`Pass`].
//!
//! [`deploy_canonical`] puts the contract at its one well-known address
//! ([`afr_core::deployment::ANCHOR_ADDRESS`]) through the standard CREATE2 deployer, and is a
//! no-op where it is already there; [`deploy`] makes a fresh copy with a plain CREATE.

use std::time::Duration;

use afr_core::{EpochHeader, Hash32, RecorderId, deployment, sequencer::Sequencer};
use afr_recorder::Store;
use alloy::{
    network::{EthereumWallet, TransactionBuilder},
    primitives::{B256, Bytes},
    providers::{Provider, ProviderBuilder},
    rpc::types::TransactionRequest,
};

pub use alloy::{primitives::Address, signers::local::PrivateKeySigner};

mod contract;
mod driver;
pub mod fees;
mod keystore;
pub mod receipt;
pub mod reconcile;
mod rpc;
mod store;
pub use contract::{ContractRevert, GAS_PRICE_ORACLE, IAfrAnchor};
pub use driver::{PENDING_WAIT, anchor_pass};
pub use keystore::{KEYSTORE_SCRYPT_LOG_N, signer_from_keystore, write_keystore};
pub use receipt::{AnchorMarker, AnchorReceipt, ForkAlarm, ReceiptState};
pub use rpc::RpcError;
pub(crate) use rpc::{retry, rpc_err};
pub use store::{AnchorStore, META_ANCHOR_MARKER, META_ARCHIVED_ANCHOR, META_FORK_ALARM};

/// Errors of the anchorer. Never contain key material; every URL in them is redacted.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    /// The base fee is over the cap on `max_fee_per_gas`: nothing is sent.
    #[error("base fee {price} wei per gas is over the cap of {cap} wei per gas; not sending")]
    GasCap {
        /// The base fee, wei per gas.
        price: u128,
        /// The cap.
        cap: u128,
    },
    /// The OP-stack L1 data fee of the transaction is over its cap: nothing is sent.
    #[error("L1 data fee {fee} wei is over the cap of {cap} wei; not sending")]
    L1FeeCap {
        /// The fee the GasPriceOracle quoted, wei.
        fee: u128,
        /// The cap.
        cap: u128,
    },
    /// The anchoring transaction was mined but reverted.
    #[error("anchoring transaction {tx} reverted")]
    Reverted {
        /// The transaction.
        tx: B256,
    },
    /// The contract refuses the transaction (its custom error, decoded), found before sending.
    #[error("the contract refuses epochs {first}..={last}: {revert}")]
    Contract {
        /// First epoch of the refused transaction.
        first: u64,
        /// Last epoch.
        last: u64,
        /// The contract's error.
        revert: ContractRevert,
    },
    /// A transaction stays unmined at the cap: it cannot be bumped by 12.5 % any more.
    #[error(
        "anchoring transaction {tx} (nonce {nonce}) is still pending after {waited_s} s at a max \
         fee of {max_fee} wei per gas, and the cap of {cap} wei per gas allows no further bump; \
         raise --max-gas-price-gwei or wait"
    )]
    Stuck {
        /// The last attempt.
        tx: B256,
        /// Its nonce.
        nonce: u64,
        /// Its max fee per gas.
        max_fee: u128,
        /// The cap.
        cap: u128,
        /// Seconds waited.
        waited_s: u64,
    },
    /// The node no longer knows the pass's transaction (it restarted or evicted it) and has
    /// not mined it: nothing is lost, the next pass reconciles and posts again.
    #[error(
        "anchoring transaction {tx} (nonce {nonce}) was dropped by the node before it was \
         mined; the next pass posts again"
    )]
    Dropped {
        /// The last attempt.
        tx: B256,
        /// Its nonce.
        nonce: u64,
    },
    /// Transactions of the anchoring key an earlier run left in the mempool stay pending.
    #[error(
        "{} transaction(s) from the anchoring key {from} are still pending after {waited_s} s \
         (nonces {latest}..{pending}); not sending until they are mined or dropped",
        pending.saturating_sub(*latest)
    )]
    PendingTransactions {
        /// The anchoring key's address.
        from: Address,
        /// Nonce counting mined transactions.
        latest: u64,
        /// Nonce counting pending ones too.
        pending: u64,
        /// Seconds waited.
        waited_s: u64,
    },
    /// The store's receipts were made on another chain or contract than the one given.
    #[error(
        "this log was anchored on chain {stored_chain} at contract {stored_contract}, not on \
         chain {chain} at {contract}; refusing to switch (the receipts are kept; pass \
         --switch-chain to archive them and anchor the whole log anew there)"
    )]
    Switch {
        /// Chain of the stored receipts.
        stored_chain: u64,
        /// Contract of the stored receipts.
        stored_contract: Address,
        /// Chain of the endpoint.
        chain: u64,
        /// Contract given.
        contract: Address,
    },
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
    /// A JSON-RPC failure: a call that failed (after its retries), an answer that does not
    /// parse, or a deployment that left no contract. Every URL in it is redacted.
    #[error("rpc: {0}")]
    Rpc(#[from] RpcError),
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
    /// A record a sealed epoch covers does not continue the chain (a broken link, another
    /// recorder's record): the store is corrupt or was tampered with.
    #[error("epoch {epoch}: {source}; not anchoring anything (store corruption or tampering)")]
    Sequence {
        /// The epoch.
        epoch: u64,
        /// What the core's sequencer found on replaying the stored records.
        source: afr_core::sequencer::SequenceError,
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

/// Anchoring settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// JSON-RPC endpoint.
    pub rpc_url: String,
    /// Contract address.
    pub contract: Address,
    /// Most epochs per `anchorBatch` transaction.
    pub max_batch: usize,
    /// Cap on `max_fee_per_gas` (wei): no transaction is signed above it, and nothing is sent
    /// while the base fee is over it.
    pub max_gas_price_wei: u128,
    /// Confirmations an anchor needs to count as confirmed; 0 takes the chain's default
    /// ([`default_confirmations`]).
    pub confirmations: u64,
}

/// What counts as final enough for an anchor to cover its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finality {
    /// This many confirmations (the including block counts as one).
    Depth(u64),
    /// At or below the chain's `finalized` block (on an OP-stack chain: its batch is in a
    /// finalized L1 block).
    Finalized,
}

impl Finality {
    /// The marker's encoding: the depth, or 0 for `finalized`.
    pub fn code(self) -> u64 {
        match self {
            Finality::Depth(n) => n.max(1),
            Finality::Finalized => 0,
        }
    }

    /// From [`Finality::code`].
    pub fn from_code(c: u64) -> Finality {
        match c {
            0 => Finality::Finalized,
            n => Finality::Depth(n),
        }
    }
}

impl std::fmt::Display for Finality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finality::Depth(1) => f.write_str("1 confirmation"),
            Finality::Depth(n) => write!(f, "{n} confirmations"),
            Finality::Finalized => f.write_str("the finalized block"),
        }
    }
}

/// Confirmations asked for by default on a chain: 1 on local development chains (anvil,
/// hardhat), 12 on Ethereum and its testnets, 10 on OP-stack L2s (20 s of L2 blocks; ask for
/// `finalized` to wait for L1 finality), 40 on Arbitrum (about 10 s), 64 on Polygon PoS, and
/// 12 on any other chain.
pub fn default_confirmations(chain_id: u64) -> u64 {
    match chain_id {
        31337 | 1337 => 1,
        1 | 11155111 | 17000 | 560048 => 12,
        10 | 8453 | 11155420 | 84532 | 7777777 | 34443 => 10,
        42161 | 421614 => 40,
        137 | 80002 => 64,
        _ => 12,
    }
}

/// Options of a pass beyond [`Settings`] (defaults: see each field).
#[derive(Debug, Clone)]
pub struct Options {
    /// Wait for the chain's `finalized` block instead of a confirmation depth (default no).
    pub finalized: bool,
    /// Cap on the OP-stack L1 data fee of one transaction, wei (default: none).
    pub max_l1_fee_wei: u128,
    /// Archive the receipts of another chain or contract and anchor anew (default no:
    /// [`AnchorError::Switch`]).
    pub allow_switch: bool,
    /// How long a sent transaction may stay unmined before it is replaced with higher fees
    /// (default 30 s).
    pub replace_after: Duration,
    /// How long a pass waits for a transaction in all (default [`PENDING_WAIT`]).
    pub give_up_after: Duration,
    /// Most calls in one JSON-RPC batch (default 500).
    pub max_rpc_batch: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            finalized: false,
            max_l1_fee_wei: u128::MAX,
            allow_switch: false,
            replace_after: Duration::from_secs(30),
            give_up_after: PENDING_WAIT,
            max_rpc_batch: 500,
        }
    }
}

/// Something a pass did or saw, reported as it happens (the CLI prints these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An RPC call failed and is retried (the error has its URLs redacted).
    Retry {
        /// What was asked.
        what: &'static str,
        /// Attempt that failed (1-based).
        attempt: u32,
        /// The error.
        error: String,
    },
    /// The chain no longer holds what the marker said was verified (a reorg deeper than the
    /// confirmation depth, or a reset chain): verification starts again from epoch 0.
    MarkerReset {
        /// The marker's epoch.
        epoch: u64,
        /// The marker's block.
        block: u64,
    },
    /// Receipts of another chain or contract were archived ([`Options::allow_switch`]).
    Switched {
        /// How many.
        archived: u64,
    },
    /// A receipt was recovered from the contract's `Anchored` event.
    Recovered {
        /// Epoch.
        epoch: u64,
    },
    /// An epoch is anchored on chain but its receipt could not be recovered (yet).
    RecoverFailed {
        /// Epoch.
        epoch: u64,
        /// Why.
        reason: String,
    },
    /// A stored receipt's transaction left the chain: the epoch is re-posted.
    Reorged {
        /// Epoch.
        epoch: u64,
    },
    /// A transaction is now in another block than stored: the receipt was corrected.
    Moved {
        /// Epoch.
        epoch: u64,
        /// Stored block.
        from: u64,
        /// Block now.
        to: u64,
    },
    /// An epoch with a receipt is not visible at the pinned block yet.
    NotVisibleYet {
        /// Epoch.
        epoch: u64,
        /// Why.
        wait: reconcile::Wait,
    },
    /// A transaction was signed and sent (attempt 1, or a replacement at the same nonce).
    Sent {
        /// First epoch.
        first: u64,
        /// Last epoch.
        last: u64,
        /// Transaction hash.
        tx: B256,
        /// Nonce.
        nonce: u64,
        /// Fee fields.
        fees: fees::Fees,
        /// Attempt (1-based).
        attempt: u32,
    },
    /// A transaction landed.
    Landed {
        /// First epoch.
        first: u64,
        /// Last epoch.
        last: u64,
        /// Transaction hash.
        tx: B256,
        /// Block.
        block: u64,
        /// What it cost (execution + L1 data), wei.
        cost_wei: u128,
    },
    /// The contract already holds the local root of this epoch (a transaction of an earlier
    /// run landed): success, nothing sent.
    AlreadyAnchored {
        /// Epoch.
        epoch: u64,
    },
}

/// What one anchoring pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Epochs known anchored on chain with the local root: those behind the marker, and those
    /// this pass read back or recovered.
    pub already: u64,
    /// Epochs posted by this pass.
    pub posted: Vec<u64>,
    /// Transactions that landed.
    pub transactions: u64,
    /// Replacement transactions sent (fee bumps at the same nonce).
    pub replacements: u64,
    /// Epochs whose stored receipt's transaction left the chain (re-posted).
    pub reorged: Vec<u64>,
    /// Epochs found anchored on chain without a local receipt (a crash after sending), whose
    /// receipt was recovered from the contract's `Anchored` event.
    pub recovered: Vec<u64>,
    /// Epochs whose transaction moved to another block (stored block corrected).
    pub moved: Vec<u64>,
    /// Epochs with a receipt not visible at the pinned block yet.
    pub waiting: Vec<u64>,
    /// The marker after the pass: every epoch up to it is anchored and confirmed.
    pub verified_upto: Option<u64>,
    /// The block every read of the pass was pinned to.
    pub pinned_block: u64,
    /// The finality the pass applied.
    pub finality: Option<Finality>,
    /// Wei spent by the transactions that landed (execution + L1 data).
    pub cost_wei: u128,
}

/// One anchoring pass with default [`Options`], no event callback, and `s.confirmations`
/// (at least 1). For measurements and tests on development chains; `afr anchor` uses
/// [`anchor_pass`].
pub async fn anchor_pending(
    store: &Store,
    signer: PrivateKeySigner,
    s: &Settings,
) -> Result<Pass, AnchorError> {
    let s = Settings {
        confirmations: s.confirmations.max(1),
        ..s.clone()
    };
    anchor_pass(store, signer, &s, &Options::default(), &|_| {}).await
}

/// Re-derives header `h` from the store before it is anchored, through the core's sequencer:
/// `Sequencer::after(prev)` (the header before it, `None` for epoch 0), a replay of the stored
/// records `first_seq .. first_seq + count` (each must continue the chain), and a seal. Its
/// epoch number, first sequence number, Merkle root, chain head and `prev_epoch_root` must be
/// the ones that seal gives. Reads `count` records.
pub fn recheck_header(
    store: &Store,
    recorder: &RecorderId,
    prev: Option<&EpochHeader>,
    h: &EpochHeader,
) -> Result<(), AnchorError> {
    // The contract accepts only head + 1, so the epoch number cannot overflow in practice.
    let epoch = prev.map_or(0, |p| p.epoch.saturating_add(1));
    // Errors name the epoch by its place in the log, not by what a tampered header claims.
    let mismatch = |field, stored: String, recomputed: String| AnchorError::HeaderMismatch {
        epoch,
        field,
        stored,
        recomputed,
    };
    let hex_id = |r: &RecorderId| format!("0x{}", hex::encode(r));
    if h.recorder != *recorder {
        return Err(mismatch(
            HeaderField::Recorder,
            hex_id(&h.recorder),
            hex_id(recorder),
        ));
    }
    let mut chain = Sequencer::after(*recorder, prev.cloned())
        .map_err(|source| AnchorError::Sequence { epoch, source })?;
    if h.epoch != chain.open().number() {
        return Err(mismatch(
            HeaderField::Epoch,
            h.epoch.to_string(),
            chain.open().number().to_string(),
        ));
    }
    if h.first_seq != chain.next_seq() {
        return Err(mismatch(
            HeaderField::FirstSeq,
            h.first_seq.to_string(),
            chain.next_seq().to_string(),
        ));
    }
    for seq in h.first_seq..h.end_seq() {
        let bytes = store
            .record_bytes(seq)?
            .ok_or(AnchorError::RecordMissing { epoch, seq })?;
        chain
            .replay(seq, &bytes)
            .map_err(|source| AnchorError::Sequence { epoch, source })?;
    }
    let Some(sealed) = chain.seal(h.sealed_at_us) else {
        return Err(mismatch(
            HeaderField::MerkleRoot,
            format!("0x{}", h.merkle_root),
            "no records to seal".into(),
        ));
    };
    let r = sealed.header();
    for (field, stored, recomputed) in [
        (HeaderField::MerkleRoot, h.merkle_root, r.merkle_root),
        (HeaderField::ChainHead, h.chain_head, r.chain_head),
        (
            HeaderField::PrevEpochRoot,
            h.prev_epoch_root,
            r.prev_epoch_root,
        ),
    ] {
        if stored != recomputed {
            return Err(mismatch(
                field,
                format!("0x{stored}"),
                format!("0x{recomputed}"),
            ));
        }
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

/// Signs a 32-byte digest (an EIP-712 signing hash) with `signer`: `r ‖ s ‖ v`, `v` = 27 or 28.
pub fn sign_digest(signer: &PrivateKeySigner, digest: [u8; 32]) -> Result<[u8; 65], AnchorError> {
    use alloy::signers::SignerSync;
    let sig = signer
        .sign_hash_sync(&B256::from(digest))
        .map_err(|e| AnchorError::Config(format!("cannot sign: {e}")))?;
    Ok(sig.as_bytes())
}

/// A signer from 32 secret bytes.
pub fn signer_from_bytes(k: &[u8; 32]) -> Result<PrivateKeySigner, AnchorError> {
    PrivateKeySigner::from_bytes(&B256::from(*k)).map_err(|_| {
        AnchorError::Config("the anchoring key is not a valid secp256k1 secret".into())
    })
}

/// Bytecode of core's artifact ([`afr_core::deployment::ARTIFACT`]), as bytes.
fn artifact_code(
    code: Result<&'static str, deployment::ArtifactError>,
) -> Result<Bytes, AnchorError> {
    let hex = code.map_err(|e| AnchorError::Config(e.to_string()))?;
    hex.parse()
        .map_err(|_| AnchorError::Config("the artifact's bytecode is not hex".into()))
}

/// The artifact's creation bytecode: the CREATE2 init code (the contract has no constructor
/// arguments; [`afr_core::deployment::creation_code`]).
pub fn init_code() -> Result<Bytes, AnchorError> {
    artifact_code(deployment::creation_code())
}

/// The artifact's runtime code: what the chain holds at a genuine `AfrAnchor`
/// ([`afr_core::deployment::runtime_code`]).
pub fn runtime_code() -> Result<Bytes, AnchorError> {
    artifact_code(deployment::runtime_code())
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
            retry("code", &|_| {}, || async {
                provider
                    .get_code_at(a)
                    .await
                    .map_err(|e| rpc_err("code", "eth_getCode", rpc_url, &e))
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
        let chain_id = retry("chain id", &|_| {}, || async {
            provider
                .get_chain_id()
                .await
                .map_err(|e| rpc_err("chain id", "eth_chainId", rpc_url, &e))
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
            return Err(rpc_err("deploy", "eth_sendTransaction", rpc_url, &e));
        }
    };
    let receipt = sent
        .with_timeout(Some(Duration::from_secs(120)))
        .get_receipt()
        .await
        .map_err(|e| rpc_err("deploy", "eth_getTransactionReceipt", rpc_url, &e))?;
    if !deployed(&code_at(address).await?)? {
        return Err(AnchorError::Rpc(RpcError::NoCode {
            tx: receipt.transaction_hash,
            address,
            reverted: !receipt.status(),
        }));
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
        .map_err(|e| rpc_err("deploy", "eth_sendTransaction", rpc_url, &e))?
        .get_receipt()
        .await
        .map_err(|e| rpc_err("deploy", "eth_getTransactionReceipt", rpc_url, &e))?;
    receipt
        .contract_address
        .ok_or(AnchorError::Rpc(RpcError::NoContractAddress {
            tx: receipt.transaction_hash,
        }))
}

/// The signed bytes of a mined transaction (EIP-2718 envelope), by `eth_getRawTransactionByHash`:
/// what an OP-stack chain charges the L1 data fee on.
pub async fn raw_transaction(rpc_url: &str, tx: [u8; 32]) -> Result<Vec<u8>, AnchorError> {
    let provider = ProviderBuilder::new().connect_http(parse_rpc_url(rpc_url)?);
    let raw: Bytes = retry("raw transaction", &|_| {}, || async {
        provider
            .raw_request("eth_getRawTransactionByHash".into(), (B256::from(tx),))
            .await
            .map_err(|e| {
                rpc_err(
                    "raw transaction",
                    "eth_getRawTransactionByHash",
                    rpc_url,
                    &e,
                )
            })
    })
    .await?;
    Ok(raw.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
