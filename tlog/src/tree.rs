//! The recorder's log of epochs: an RFC 6962 tree whose leaf `e` is the root of epoch `e`.
//!
//! ```text
//! leaf(e)        = SHA-256(0x00 ‖ epoch_root(e))          (epoch_root: docs/spec/format.md)
//! checkpoint(n)  = origin, n, MTH(leaf(0) .. leaf(n - 1)) (after epoch n - 1 is sealed)
//! ```
//!
//! The leaves are the very 32-byte roots the chain anchors, so a checkpoint and the anchors
//! commit to one history: epoch `e` is under checkpoint `n > e` by an inclusion proof of
//! `epoch_root(e)`, and that root is what the contract holds for `e`.

use afr_core::{Hash32, hash::leaf_hash, merkle};

/// The leaf hash of an epoch root.
pub fn leaf(epoch_root: &Hash32) -> Hash32 {
    leaf_hash(&epoch_root.0)
}

/// Leaf hashes of epoch roots, in epoch order.
pub fn leaves(epoch_roots: &[Hash32]) -> Vec<Hash32> {
    epoch_roots.iter().map(leaf).collect()
}

/// The tree's root over the first `leaves.len()` epochs.
pub fn root(leaves: &[Hash32]) -> Hash32 {
    merkle::root(leaves)
}

/// The audit path of epoch `epoch` in the tree of the first `size` epochs.
pub fn inclusion_proof(leaves: &[Hash32], epoch: u64, size: u64) -> Option<Vec<Hash32>> {
    let size = usize::try_from(size).ok()?;
    let tree = leaves.get(..size)?;
    merkle::inclusion_proof(tree, usize::try_from(epoch).ok()?)
}

/// The consistency proof from the tree of `old` epochs to the tree of `new` epochs.
pub fn consistency_proof(leaves: &[Hash32], old: u64, new: u64) -> Option<Vec<Hash32>> {
    let new = usize::try_from(new).ok()?;
    merkle::consistency_proof(leaves.get(..new)?, usize::try_from(old).ok()?)
}
