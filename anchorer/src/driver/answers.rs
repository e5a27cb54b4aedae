//! The JSON-RPC answers a pass reads, parsed into what it needs: block headers and transaction
//! receipts (with the `Anchored` events of this recorder in them). Anything else in an answer
//! is ignored; a field the pass needs that is missing or out of range is a malformed answer.

use afr_core::Hash32;
use alloy::{
    primitives::{Address, U256},
    sol_types::SolEvent,
};
use serde_json::Value;

use crate::{AnchorError, IAfrAnchor, reconcile::BlockRef, rpc::malformed};

pub(super) fn hex32(v: &Value) -> Option<[u8; 32]> {
    let s = v.as_str()?.strip_prefix("0x")?;
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

pub(super) fn quantity(v: &Value) -> Option<u128> {
    u128::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}

/// A block header as the pass needs it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    pub(super) at: BlockRef,
    pub(super) base_fee: Option<u128>,
}

pub(super) fn parse_block(v: &Value, what: &'static str) -> Result<Block, AnchorError> {
    let number = quantity(&v["number"]).ok_or_else(|| malformed(what))?;
    Ok(Block {
        at: BlockRef {
            number: u64::try_from(number).map_err(|_| malformed(what))?,
            hash: hex32(&v["hash"]).ok_or_else(|| malformed(what))?,
        },
        base_fee: quantity(&v["baseFeePerGas"]),
    })
}

/// A transaction receipt as the pass needs it.
#[derive(Debug, Clone)]
pub(super) struct TxReceipt {
    pub(super) tx: [u8; 32],
    pub(super) block: u64,
    pub(super) block_hash: [u8; 32],
    pub(super) success: bool,
    pub(super) gas_used: u64,
    pub(super) effective_gas_price: u128,
    /// OP-stack receipts carry the L1 data fee charged.
    pub(super) l1_fee: Option<u128>,
    /// `(epoch, root)` of the `Anchored` events of `recorder` from `contract`.
    pub(super) anchored: Vec<(u64, Hash32)>,
}

pub(super) fn parse_receipt(v: &Value, contract: Address, recorder: Address) -> Option<TxReceipt> {
    let mut anchored = Vec::new();
    for log in v["logs"].as_array()? {
        let addr: Address = log["address"].as_str()?.parse().ok()?;
        let topics = log["topics"].as_array()?;
        if addr != contract
            || topics.len() != 3
            || hex32(&topics[0])? != IAfrAnchor::Anchored::SIGNATURE_HASH.0
            || hex32(&topics[1])? != recorder.into_word().0
        {
            continue;
        }
        let e = hex32(&topics[2])?;
        let epoch = u64::try_from(U256::from_be_bytes(e)).ok()?;
        let data = log["data"].as_str()?.strip_prefix("0x")?;
        let mut root = [0u8; 32];
        hex::decode_to_slice(data.get(..64)?, &mut root).ok()?;
        anchored.push((epoch, Hash32(root)));
    }
    Some(TxReceipt {
        tx: hex32(&v["transactionHash"])?,
        block: u64::try_from(quantity(&v["blockNumber"])?).ok()?,
        block_hash: hex32(&v["blockHash"])?,
        success: quantity(&v["status"])? == 1,
        gas_used: u64::try_from(quantity(&v["gasUsed"])?).ok()?,
        effective_gas_price: quantity(&v["effectiveGasPrice"]).unwrap_or(0),
        l1_fee: quantity(&v["l1Fee"]),
        anchored,
    })
}

pub(super) fn sat64(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}
